#!/usr/bin/env python3
"""A stand-in for `jadpoc lsp`, to try an editor's setup without the real server.

It must be run as `jadpoc lsp`. It answers `initialize`, publishes one diagnostic for
each opened document, answers every other request with null, and appends each method
it receives to the file named by STAND_IN_LOG, so a test can see what the editor sent.
"""
import json
import os
import sys


def main():
    log = open(os.environ.get("STAND_IN_LOG", os.devnull), "a")
    log.write("argv " + " ".join(sys.argv[1:]) + "\n")
    log.flush()
    if sys.argv[1:] != ["lsp"]:
        sys.exit(2)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer

    def send(message):
        body = json.dumps(message).encode()
        stdout.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        stdout.flush()

    while True:
        length = None
        while True:
            line = stdin.readline()
            if not line:
                return
            line = line.strip()
            if not line:
                break
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        message = json.loads(stdin.read(length))
        method = message.get("method")
        log.write(f"{method}\n")
        log.flush()
        if method == "initialize":
            result = {"capabilities": {"textDocumentSync": 1}, "serverInfo": {"name": "stand-in"}}
            send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        elif method == "textDocument/didOpen":
            uri = message["params"]["textDocument"]["uri"]
            diagnostic = {
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 2}},
                "severity": 2,
                "code": "stand-in",
                "message": "from the stand-in server",
            }
            send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",
                  "params": {"uri": uri, "diagnostics": [diagnostic]}})
        elif method == "exit":
            return
        elif "id" in message:
            send({"jsonrpc": "2.0", "id": message["id"], "result": None})


if __name__ == "__main__":
    main()
