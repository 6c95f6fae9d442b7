"""WebSocket broadcast chat: every message a client sends goes to every connected client.

    python examples/ws_chat.py --port 8000

Open http://127.0.0.1:8000/ in a few browser tabs, or connect any WebSocket client to
ws://127.0.0.1:8000/ws. Ctrl-C (or SIGTERM) stops the server.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cymongoose import (
    MG_EV_CLOSE,
    MG_EV_HTTP_MSG,
    MG_EV_WS_MSG,
    MG_EV_WS_OPEN,
    WEBSOCKET_OP_TEXT,
    Connection,
    HttpMessage,
    Manager,
    WsMessage,
)

PAGE = b"""<!doctype html>
<meta charset="utf-8"><title>cymongoose chat</title>
<pre id="log"></pre>
<input id="msg" autofocus placeholder="say something, press Enter">
<script>
const ws = new WebSocket(`ws://${location.host}/ws`);
const log = document.getElementById("log");
ws.onmessage = (e) => { log.textContent += e.data + "\\n"; };
document.getElementById("msg").onkeydown = (e) => {
  if (e.key === "Enter" && e.target.value) { ws.send(e.target.value); e.target.value = ""; }
};
</script>
"""


class Chat:
    def __init__(self) -> None:
        self.members: dict[int, Connection] = {}  # connection id -> connection
        self.next_name = 1

    def broadcast(self, text: str) -> None:
        for member in self.members.values():
            member.ws_send(text, WEBSOCKET_OP_TEXT)

    def handler(self, conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            msg: HttpMessage = data
            if msg.header("Upgrade", "").lower() == "websocket":
                conn.ws_upgrade(msg)
            elif msg.uri == "/":
                conn.reply(200, PAGE, {"Content-Type": "text/html; charset=utf-8"})
            else:
                conn.reply(404, "not found\n")
        elif ev == MG_EV_WS_OPEN:
            conn.userdata = f"guest{self.next_name}"
            self.next_name += 1
            self.members[conn.id] = conn
            self.broadcast(f"* {conn.userdata} joined ({len(self.members)} online)")
        elif ev == MG_EV_WS_MSG:
            ws: WsMessage = data
            # The view is only valid during this call: .text copies what we need.
            self.broadcast(f"{conn.userdata}: {ws.text}")
        elif ev == MG_EV_CLOSE and conn.id in self.members:
            del self.members[conn.id]
            self.broadcast(f"* {conn.userdata} left")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)

    chat = Chat()
    mgr = Manager(chat.handler)
    listener = mgr.listen(f"http://{args.host}:{args.port}")
    print(f"chat listening on http://{args.host}:{listener.local_addr[1]}/", flush=True)
    mgr.run()  # until Ctrl-C or SIGTERM; closes the manager
    return 0


if __name__ == "__main__":
    sys.exit(main())
