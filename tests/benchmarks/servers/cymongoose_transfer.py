"""Ours, raw handler, for the HTTP/2 transfer phase (h2_transfer.py): one large body each way.

GET /file serves --file with serve_file() (sendfile(2) over HTTP/1.1, DATA frames over
HTTP/2), GET /memory answers the same bytes from memory with reply(), and a POST to any other
path is answered with the length of the body it carried.
"""

import argparse

from cymongoose._mongoose import MG_EV_HTTP_MSG, Manager, handles


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--file", required=True)
    args = parser.parse_args()
    with open(args.file, "rb") as f:
        body = f.read()

    @handles(MG_EV_HTTP_MSG)
    def handler(conn, ev, msg):
        if msg.uri == "/file":
            conn.serve_file(msg, args.file)
        elif msg.uri == "/memory":
            conn.reply(200, body)
        else:
            conn.reply(200, str(len(msg.body_bytes)).encode())

    manager = Manager(handler)
    manager.listen(f"http://127.0.0.1:{args.port}", max_body_size=len(body) + 1024)
    manager.run()


if __name__ == "__main__":
    main()
