"""A webhook receiver: accepts any POST on any path, records headers and body, answers 200."""

from starlette.responses import JSONResponse, Response

from tests.fakes.server import FakeServer, Recorded


class WebhookReceiver(FakeServer):
    """Records every delivery; script 500/400/410/429+Retry-After/slow answers with fail, delay, drip."""

    name = "webhook receiver"

    def url_for(self, path: str = "/hooks/intake") -> str:
        """A webhook URL on this receiver (use distinct paths to tell entries apart)."""
        return self.url + path

    def deliveries(self, path: str | None = None) -> list[Recorded]:
        """The POSTs received, optionally only those to `path`."""
        return [r for r in self.requests if r.method == "POST" and (path is None or r.path == path)]

    async def answer(self, request: Recorded) -> Response:
        if request.method != "POST":
            return JSONResponse({"detail": "Method Not Allowed"}, status_code=405)
        return JSONResponse({"received": True})
