"""socketify (uWebSockets bindings), the plain App with a prebuilt body."""

import argparse

from socketify import App

CONTENDER = {
    "name": "socketify",
    "label": "socketify",
    "kind": "hello",
    "env": "socketify",
    "requires": ["socketify"],
    "command": ["{python}", "{file}", "--port", "{port}"],
    "notes": "App().get with res.end() of prebuilt bytes, one process",
}

BODY = b'{"message":"Hello, World!"}'


def hello(res, req):
    res.write_header("Content-Type", "application/json")
    res.end(BODY)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = App()
    app.get("/", hello)
    app.listen(args.port, lambda config: None)
    app.run()


if __name__ == "__main__":
    main()
