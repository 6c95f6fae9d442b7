"""Many concurrent WebSocket clients in their own process (`python -m support.ws_crowd`):
each connects, sends a few messages and checks every echo; prints one JSON line."""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time

from websockets.asyncio.client import connect


async def one(url: str, index: int, messages: int, opened: asyncio.Event,
              ready: list[int], total: int) -> int:
    async with connect(url, open_timeout=20, ping_interval=None) as ws:
        ready.append(index)
        if len(ready) == total:
            opened.set()
        await asyncio.wait_for(opened.wait(), 60)  # all open at once, then all talk
        ok = 0
        for i in range(messages):
            text = f"{index}:{i}"
            await ws.send(text)
            if await asyncio.wait_for(ws.recv(), 20) == text:
                ok += 1
        return ok


async def crowd(url: str, count: int, messages: int) -> dict[str, object]:
    opened = asyncio.Event()
    ready: list[int] = []
    start = time.monotonic()
    tasks = []
    for i in range(count):
        tasks.append(asyncio.create_task(one(url, i, messages, opened, ready, count)))
        if i % 50 == 49:
            await asyncio.sleep(0.01)  # a burst the listen backlog can hold
    results = await asyncio.gather(*tasks, return_exceptions=True)
    errors = [repr(r) for r in results if isinstance(r, BaseException)]
    return {"echoed": sum(r for r in results if isinstance(r, int)), "errors": errors[:5],
            "error_count": len(errors), "seconds": time.monotonic() - start}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=5)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(json.dumps(asyncio.run(crowd(args.url, args.count, args.messages))), flush=True)


if __name__ == "__main__":
    main()
