"""How much of a streamed response may wait for a slow client: the app's side waits once this
much is queued towards the client (the high mark), until the client has read it below the low
mark. Memory per client that stops reading is about the high mark plus one piece of the app's.

The ASGI server uses uvicorn's marks (asyncio's transport defaults, 64 and 16 KiB): its wait is
a coroutine switch on the loop's own thread, cheap enough to take often, and with 1 MiB marks
500 clients that stopped reading a stream held 560 MB (uvicorn: 53 MB). A WSGI response that
reaches the high mark is parked and queued again for a thread at the low one (wsgi/parking.py),
a hand-over between threads each time, so the WSGI server keeps 1 MiB and 256 KiB: a parked
response holds about 1.1 MiB (docs/wsgi.md, "Slow clients")."""

SEND_HIGH = 1 << 20  # WSGI
SEND_LOW = 256 << 10
ASGI_SEND_HIGH = 64 << 10
ASGI_SEND_LOW = 16 << 10
