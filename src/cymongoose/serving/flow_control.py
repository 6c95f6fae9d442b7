"""How much of a streamed response may wait for a slow client: the app's side waits once this
much is queued towards the client (the high mark), until the client has read it below the low
mark. Memory per client that stops reading is about the high mark plus one piece of the app's.

The ASGI server uses uvicorn's marks (asyncio's transport defaults, 64 and 16 KiB): its wait is
a coroutine switch on the loop's own thread, cheap enough to take often, and with 1 MiB marks
500 clients that stopped reading a stream held 560 MB (uvicorn: 53 MB). A WSGI app's thread
waits through a hand-over between threads, so the WSGI server keeps 1 MiB and 256 KiB (each of
its slow readers holds an app thread anyway, docs/wsgi.md)."""

SEND_HIGH = 1 << 20  # WSGI
SEND_LOW = 256 << 10
ASGI_SEND_HIGH = 64 << 10
ASGI_SEND_LOW = 16 << 10
