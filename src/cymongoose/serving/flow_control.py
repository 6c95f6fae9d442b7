"""How much of a streamed response may wait for a slow client: the app's side waits once this
much is queued towards the client (SEND_HIGH), until the client has read it below SEND_LOW.
Both servers use the same marks, so a slow client costs the same memory under either."""

SEND_HIGH = 1 << 20
SEND_LOW = 256 << 10
