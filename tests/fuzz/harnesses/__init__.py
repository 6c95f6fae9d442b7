"""One module per fuzz target. Each has `one_input(data: bytes) -> None`, which raises
AssertionError (or lets a sanitizer abort) when the input shows a defect, and `SEEDS`, the
inputs a run starts from besides the kept corpus."""

NAMES = (
    "http_request",
    "chunked_body",
    "stream_request",
    "websocket",
    "mqtt",
    "forms",
    "response_headers",
    "proxy_headers",
    "http2_frames",
)
