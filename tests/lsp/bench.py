#!/usr/bin/env python3
"""Benchmark of `jadpoc lsp` (not a test): how long after a one-character edit the
diagnostics arrive, and how much memory the server holds, for a workspace of
ordinary size and for the 50,000-subscriber program of gen_program.py.

    cargo build --release -p jadpoc
    python3 tests/lsp/bench.py [--jadpoc target/release/jadpoc] [--edits 20]

Each edit appends a `0` to a subscriber's `attempts:` (20 becomes 200, out of range)
or removes it again, so every edit changes the diagnostics and the server publishes;
the time is from writing the edit to reading the `publishDiagnostics` for the file.
The goals (docs/lsp.md): under 20 ms for the small workspace, under 300 ms for the
large one, and a resident set under 20 times the source.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
# shared/ lies beside the repository (or beside the folder of its worktrees).
GEN = next(
    (p / "shared" / "tools" / "gen_program.py" for p in REPO.parents if (p / "shared" / "tools" / "gen_program.py").exists()),
    REPO.parent / "shared" / "tools" / "gen_program.py",
)


class Client:
    def __init__(self, cmd: list[str]):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.next_id = 0

    def send(self, msg: dict) -> None:
        body = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def read(self) -> dict:
        length = 0
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its output")
            if line in (b"\r\n", b"\n"):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return json.loads(self.proc.stdout.read(length))

    def request(self, method: str, params) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            msg = self.read()
            if msg.get("id") == self.next_id and "method" not in msg:
                return msg

    def notify(self, method: str, params) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def diagnostics_for(self, uri: str) -> list:
        while True:
            msg = self.read()
            if msg.get("method") == "textDocument/publishDiagnostics" and msg["params"]["uri"] == uri:
                return msg["params"]["diagnostics"]

    def rss_kib(self) -> tuple[int, int]:
        status = pathlib.Path(f"/proc/{self.proc.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def bench(jadpoc: str, subscribers: int, edits: int) -> None:
    text = subprocess.run(
        [sys.executable, str(GEN), "--subscribers", str(subscribers)], check=True, capture_output=True, text=True
    ).stdout
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        path = root / "program.jadpo"
        path.write_text(text)
        uri = path.as_uri()
        client = Client([jadpoc, "lsp"])
        client.request(
            "initialize",
            {"processId": os.getpid(), "capabilities": {}, "workspaceFolders": [{"uri": root.as_uri(), "name": "bench"}]},
        )
        client.notify("initialized", {})
        client.diagnostics_for(uri)
        client.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "jadpo", "version": 1, "text": text}},
        )
        # The place of the edit: after the last subscriber's `attempts: N`.
        at = text.rindex("attempts: ") + len("attempts: ")
        while text[at].isdigit():
            at += 1
        line = text.count("\n", 0, at)
        col = at - (text.rfind("\n", 0, at) + 1)
        times = []
        for i in range(edits):
            if i % 2 == 0:
                change = {"range": {"start": {"line": line, "character": col}, "end": {"line": line, "character": col}}, "text": "0"}
            else:
                change = {"range": {"start": {"line": line, "character": col}, "end": {"line": line, "character": col + 1}}, "text": ""}
            start = time.perf_counter()
            client.notify(
                "textDocument/didChange",
                {"textDocument": {"uri": uri, "version": i + 2}, "contentChanges": [change]},
            )
            diags = client.diagnostics_for(uri)
            times.append((time.perf_counter() - start) * 1000)
            assert (len(diags) > 0) == (i % 2 == 0), diags
        # What the server holds once idle, as a user looking a moment later sees it:
        # a second after a check it gives the memory it freed back to the system.
        rss, peak = client.rss_kib()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            time.sleep(0.1)
            rss = min(rss, client.rss_kib()[0])
        client.request("shutdown", None)
        client.notify("exit", None)
        client.proc.wait(timeout=30)
        size = len(text.encode())
        print(
            f"{subscribers} subscribers, {text.count(chr(10))} lines, {size / 1024:.0f} KiB: "
            f"diagnostics after an edit: median {statistics.median(times):.1f} ms, max {max(times):.1f} ms; "
            f"memory: resident {rss / 1024:.1f} MiB ({rss * 1024 / size:.1f}x the source), peak {peak / 1024:.1f} MiB "
            f"({peak * 1024 / size:.1f}x)"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jadpoc", default=str(REPO / "target" / "release" / "jadpoc"))
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--sizes", default="200,50000", help="subscriber counts, comma-separated")
    a = ap.parse_args()
    for n in a.sizes.split(","):
        bench(a.jadpoc, int(n), a.edits)


if __name__ == "__main__":
    main()
