"""A Sentry ingestion endpoint on 127.0.0.1: accepts envelopes, records their items decoded."""

import gzip
import json
import zlib
from typing import Any

from starlette.responses import JSONResponse, Response

from tests.fakes.server import FakeServer, Recorded


class FakeSentry(FakeServer):
    """`dsn` points the SDK here; `events()` are the error events received, `raw()` every byte as text."""

    name = "sentry"

    @property
    def dsn(self) -> str:
        """A DSN for project 1 on this server."""
        return f"http://public@127.0.0.1:{self.port}/1"

    def raw(self) -> str:
        """Every envelope received, decompressed, as one text."""
        return "\n".join(_decoded(request) for request in self.requests)

    def events(self) -> list[dict[str, Any]]:
        """The event items of every envelope (errors and messages), parsed."""
        found = []
        for request in self.requests:
            lines = _decoded(request).split("\n")
            for header, payload in zip(lines[1::2], lines[2::2]):
                if json.loads(header).get("type") == "event":
                    found.append(json.loads(payload))
        return found

    async def answer(self, request: Recorded) -> Response:
        if request.method != "POST" or not request.path.endswith("/envelope/"):
            return JSONResponse({"detail": "not found"}, status_code=404)
        return JSONResponse({"id": "0" * 32})


def _decoded(request: Recorded) -> str:
    encoding = request.headers.get("content-encoding", "")
    body = request.body
    if encoding == "gzip":
        body = gzip.decompress(body)
    elif encoding == "deflate":
        body = zlib.decompress(body)
    return body.decode("utf-8", errors="replace")
