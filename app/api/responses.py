"""The error answers every route declares in the OpenAPI schema: one body model, one description per status.

Every error Intake answers is `{"detail": ...}` (DESIGN.md): a sentence for most statuses, one
entry per bad field for a 422. The routers declare which of these statuses each route can
answer with `errors(401, 404, ...)`, so the schema, `/docs` and the schemathesis test all read
them from here.
"""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: The audiences of the API, as tags: who calls a route (see `OPENAPI_TAGS` in app.main).
APPLICANT, CRON, ADMIN, OPERATOR = "applicant", "cron", "admin", "operator"


class ErrorOut(BaseModel):
    """Every error except a 422: one sentence saying what was wrong."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"detail": "form 0b7f2c1e-5d0a-4c33-9a59-1f0f5b8c2d11 not found"}]})

    detail: str = Field(description="What went wrong, in one sentence.")


class Problem(BaseModel):
    """One bad input: where it is and what is wrong with it."""

    model_config = ConfigDict(extra="allow")

    loc: list[str | int] = Field(description='Where the problem is, e.g. ["body", "data", "email"].')
    msg: str = Field(description="What is wrong with it.")
    type: str = Field(description="A machine-readable kind of problem, e.g. `missing`, `value_error`.")


class ValidationErrorOut(BaseModel):
    """A 422: one entry per bad field (or, for a bad cursor, one sentence)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"detail": [{"loc": ["body", "data", "email"], "msg": "not a valid email address", "type": "value_error"}]}
            ]
        }
    )

    detail: list[Problem] | str


#: What each error status means wherever it is declared; a route can say more with `notes`.
DESCRIPTIONS: dict[int, str] = {
    400: "The body could not be read: not valid JSON, or not UTF-8.",
    401: "Missing or wrong bearer token. The answer is the same whatever was wrong, so it reveals nothing.",
    403: "Refused.",
    404: "No such resource.",
    409: "The resource is not in a state that allows this.",
    413: "The request body is larger than MAX_BODY_BYTES; it was not read.",
    415: "The body was not sent as JSON: send `Content-Type: application/json`.",
    422: "Invalid input: one entry per bad field or parameter.",
    429: "Too many requests from this client or for this form; wait for `Retry-After` seconds.",
    503: "The database is unreachable right now: nothing was saved, or (the detail says so) the connection broke while "
    "saving and it is not known. Retry after `Retry-After` seconds.",
}

EXAMPLES: dict[int, Any] = {
    400: {"detail": "There was an error parsing the body"},
    401: {"detail": "not authenticated"},
    403: {"detail": "refused"},
    404: {"detail": "form 0b7f2c1e-5d0a-4c33-9a59-1f0f5b8c2d11 not found"},
    409: {"detail": "form 0b7f2c1e-5d0a-4c33-9a59-1f0f5b8c2d11 is closed and takes no new submissions"},
    413: {"detail": "request body is larger than the limit of 1048576 bytes"},
    415: {"detail": "send the body as JSON, with Content-Type: application/json"},
    422: {"detail": [{"loc": ["body", "data", "email"], "msg": "not a valid email address", "type": "value_error"}]},
    429: {"detail": "too many submissions from this address; try again in 30 seconds"},
    503: {"detail": "the database is unavailable right now; nothing was saved, please try again shortly"},
}

_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before trying again.", "schema": {"type": "integer"}}}
_WWW_AUTHENTICATE = {"WWW-Authenticate": {"description": "`Bearer`.", "schema": {"type": "string"}}}
_HEADERS = {401: _WWW_AUTHENTICATE, 429: _RETRY_AFTER, 503: _RETRY_AFTER}


def errors(*codes: int, notes: dict[int, str] | None = None, html_route: bool = False) -> dict[int | str, dict[str, Any]]:
    """`responses=` entries for these error statuses: the shared model, description and example.

    On an HTML route (`html_route`), FastAPI would file the model under text/html, so the JSON
    body is declared by reference instead (the JSON routes put the models in the components).
    """
    notes = notes or {}
    declared: dict[int | str, dict[str, Any]] = {}
    for code in codes:
        model = ValidationErrorOut if code == 422 else ErrorOut
        content: dict[str, Any] = {"example": EXAMPLES[code]}
        if html_route:
            content["schema"] = {"$ref": f"#/components/schemas/{model.__name__}"}
        entry: dict[str, Any] = {
            "description": notes.get(code, DESCRIPTIONS[code]),
            "content": {"application/json": content},
        }
        if not html_route:
            entry["model"] = model
        if code in _HEADERS:
            entry["headers"] = _HEADERS[code]
        declared[code] = entry
    return declared


def html_errors(*codes: int, notes: dict[int, str] | None = None) -> dict[int | str, dict[str, Any]]:
    """`responses=` entries for the hosted form page's errors: HTML pages a person reads."""
    notes = notes or {}
    declared: dict[int | str, dict[str, Any]] = {}
    for code in codes:
        entry: dict[str, Any] = {
            "description": notes.get(code, DESCRIPTIONS[code]),
            "content": {"text/html": {"schema": {"type": "string"}}},
        }
        if code in _HEADERS:
            entry["headers"] = _HEADERS[code]
        declared[code] = entry
    return declared


#: What every route that reads or writes the database may answer when it cannot reach it.
DB = 503
#: What a route with a JSON body answers when the body is unreadable, too large, not JSON, or invalid.
JSON_BODY = (400, 413, 415, 422)
