"""The shared reader of JSON request bodies: what FastAPI would parse, checked first.

FastAPI answers a body it cannot parse with a bare 400 ("There was an error parsing the body")
for anything but a syntax error, and lets text through that PostgreSQL cannot store. This pure
ASGI middleware reads a JSON body (BodyLimitMiddleware, outside it, still stops the read at the
first byte over MAX_BODY_BYTES, so nothing larger is ever held), parses it once, and answers 422
with a message naming the problem for:

- bytes that are not UTF-8;
- nesting deeper than MAX_DEPTH (Python's parser would hit its recursion limit at ~1,000 levels);
- a NUL character (\\u0000) or an unpaired surrogate (\\ud800) in any key or string: PostgreSQL's
  text and jsonb refuse the first, UTF-8 cannot encode the second.

Syntax errors are left to FastAPI, which names their position. A body that passes is handed on
unchanged.
"""

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.deps import is_json
from app.api.middleware import BodyTooLarge, send_json
from app.submissions.validation import shown_key, unstorable

#: Deepest nesting of arrays and objects accepted; a submission needs 3 (body, data, a list).
MAX_DEPTH = 32
_BODY_METHODS = {"POST", "PUT", "PATCH"}


class BodyProblem(ValueError):
    """A JSON body that is not acceptable; `loc` is where, as in FastAPI's 422 details."""

    def __init__(self, loc: list[str | int], message: str, kind: str):
        super().__init__(message)
        self.loc = loc
        self.kind = kind


def check_json(body: bytes) -> None:
    """Raise BodyProblem if `body` is not UTF-8, nests too deeply, or holds NUL or lone surrogates."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BodyProblem(["body", error.start], f"the body is not valid UTF-8 (byte 0x{body[error.start]:02x} at offset {error.start})", "utf8_invalid") from None
    try:
        value = json.loads(text)
    except RecursionError:
        raise BodyProblem(["body"], f"the JSON is nested too deeply (more than {MAX_DEPTH} levels)", "json_too_deep") from None
    except ValueError:
        return  # a syntax error: FastAPI reports it with its position
    _check_value(value, ["body"], 0)


def _check_value(value: Any, loc: list[str | int], depth: int) -> None:
    if isinstance(value, str):
        _check_text(value, loc, "value")
    elif isinstance(value, dict | list):
        if depth >= MAX_DEPTH:
            raise BodyProblem(loc, f"the JSON is nested too deeply (more than {MAX_DEPTH} levels)", "json_too_deep")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str):
                _check_text(key, loc, "key")
            _check_value(item, [*loc, _shown(key)], depth + 1)


_UNSTORABLE = {
    "nul_character": "contains a NUL character (\\u0000), which cannot be stored",
    "lone_surrogate": "contains an unpaired surrogate (such as \\ud800), which is not text",
}


def _check_text(text: str, loc: list[str | int], what: str) -> None:
    if kind := unstorable(text):
        raise BodyProblem(loc, f"a {what} {_UNSTORABLE[kind]}", kind)


def _shown(key: str | int) -> str | int:
    """A key as it may be echoed in an answer: printable and short."""
    return key if isinstance(key, int) else shown_key(key)


class JsonBodyMiddleware:
    """Read and check JSON request bodies before the app parses them (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS or not _declares_json(scope):
            return await self.app(scope, receive, send)
        try:
            body, more = await _read(receive)
        except BodyTooLarge as too_large:
            return await send_json(send, 413, {"detail": too_large.detail}, {"Connection": "close"})
        if more is not None:
            return await self.app(scope, _replay(body, more, receive), send)  # the client went away
        try:
            check_json(body)
        except BodyProblem as problem:
            detail = [{"loc": problem.loc, "msg": str(problem), "type": problem.kind}]
            return await send_json(send, 422, {"detail": detail})
        await self.app(scope, _replay(body, None, receive), send)


def _declares_json(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return is_json(value.decode("latin-1"))
    return False


async def _read(receive: Receive) -> tuple[bytes, Message | None]:
    """The whole body, or what came before a message that is not body (a disconnect) and it."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), message
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), None


def _replay(body: bytes, last: Message | None, receive: Receive) -> Receive:
    """A receive that gives `body` in one message, then `last` (if any), then defers to `receive`."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
    if last is not None:
        pending = [last]

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
