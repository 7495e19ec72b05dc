"""A webhook receiver for trying Intake: prints each delivery and checks its signature.

    python3 docs/webhook_receiver.py 9000 whsec_...

Standard library only. It verifies the Standard Webhooks signature (HMAC-SHA256 of
"{webhook-id}.{webhook-timestamp}.{body}", keyed with the base64 part of the whsec_ secret) and
the timestamp (within 5 minutes), answers 204 when both hold and 400 otherwise.
"""

import base64
import hashlib
import hmac
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

TOLERANCE = 300  # seconds


def signature_valid(secret: str, headers, body: bytes) -> bool:
    """True if one of the `v1,` signatures matches and the timestamp is recent."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    msg_id, timestamp = headers.get("webhook-id", ""), headers.get("webhook-timestamp", "0")
    expected = base64.b64encode(hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest())
    given = [s.split(",", 1)[1].encode() for s in headers.get("webhook-signature", "").split() if s.startswith("v1,")]
    fresh = timestamp.isdigit() and abs(time.time() - int(timestamp)) <= TOLERANCE
    return fresh and any(hmac.compare_digest(expected, s) for s in given)


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        for name in ("webhook-id", "webhook-timestamp", "webhook-signature", "content-type", "user-agent"):
            print(f"{name}: {self.headers.get(name)}")
        print(body.decode())
        valid = signature_valid(SECRET, self.headers, body)
        print("signature valid" if valid else "SIGNATURE INVALID", flush=True)
        self.send_response(204 if valid else 400)
        self.end_headers()

    def log_message(self, *args):  # the lines above say enough
        pass


if __name__ == "__main__":
    port, SECRET = int(sys.argv[1]), sys.argv[2]
    print(f"listening on http://127.0.0.1:{port}/", flush=True)
    HTTPServer(("127.0.0.1", port), Receiver).serve_forever()
