"""A provider that verifies every call's signature with the Standard Webhooks
reference library (`standardwebhooks` from PyPI), an implementation independent
of jadpo's: 200 when a signature matches its secret, 401 when none does.

    python3 tests/providers/standardwebhooks_provider.py SECRET PORT_FILE LOG_FILE

It listens on 127.0.0.1 (a free port, written to PORT_FILE once it listens) and
appends one line per call to LOG_FILE: `ok WEBHOOK_ID` or `refused REASON`.
"""

import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

SECRET, PORT_FILE, LOG_FILE = sys.argv[1], sys.argv[2], sys.argv[3]
WEBHOOK = Webhook(SECRET)
LOCK = threading.Lock()


def log(line):
    with LOCK, open(LOG_FILE, "a", encoding="utf-8") as f:
        f.write(line + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            WEBHOOK.verify(body, headers)
            status, line = 200, "ok " + headers.get("webhook-id", "")
        except WebhookVerificationError as e:
            status, line = 401, "refused " + str(e)
        log(line)
        answer = b"{}"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w", encoding="utf-8") as f:
    f.write(str(server.server_address[1]))
os.replace(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
