"""The hosted form page: `/f/{form_id}`, an HTML form applicants can be sent to directly.

Rendered on the server from the form's definition, it works without JavaScript: the form POSTs
to its own URL, which answers a 303 to the thank-you page, or the form again with the errors and
what was typed. With JavaScript (`static/form.js`) it checks fields as they are left and submits
to the JSON API without reloading. Either way the data goes through `service.submit`, so the
shared validation decides what is valid. The page shows a form's name and fields, never its
integrations. CSRF: see `app.web.csrf`.
"""

import uuid
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from sqlalchemy.ext.asyncio import AsyncSession

from app import __version__
from app.api.responses import APPLICANT, DB, errors, html_errors
from app.db import ReadSessionDep, SessionDep
from app.forms.service import FormNotFound, get_form, stored_fields
from app.limits.submissions import RateLimited, check_submission, client_address
from app.models import Form
from app.submissions import service
from app.submissions.service import FormClosed
from app.submissions.validation import InvalidSubmission, Problem
from app.web.csrf import COOKIE, FIELD, SECURE_COOKIE, FormTokens, idempotency_key, is_nonce, new_nonce, signing_key
from app.web.formdata import parse_body, raw_values, submission_data
from app.web.widgets import widgets

_HERE = Path(__file__).parent
#: Where the page's CSS and JavaScript are served (not /static: other parts of the app may want it).
ASSETS_PATH = "/f/assets"

# Autoescaped: every name, label and value a form or an applicant supplies is escaped.
TEMPLATES = Jinja2Templates(
    env=Environment(
        loader=FileSystemLoader(_HERE / "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
)

#: Headers of every page: scripts and styles only from this origin, nothing inline, no caching
#: (the form carries a token).
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

# In the schema, so that /docs shows the link to send applicants; every page is HTML, except the
# 413 (the body-limit middleware) and 503 (the database error handler), which are JSON as elsewhere.
router = APIRouter(tags=[APPLICANT])

_HTML = {"description": "The page.", "content": {"text/html": {"schema": {"type": "string"}}}}
_FORM_NOT_FOUND = {404: "The \"Form not found\" page: no form has this id (or it is not a UUID)."}
# The path and query are read from the request, not declared as parameters: FastAPI would then
# document a JSON 422 that these pages never answer (any text is accepted, and an unknown id is a
# 404 page). They are declared here instead.
_FORM_ID = {"name": "form_id", "in": "path", "required": True, "schema": {"type": "string", "format": "uuid"},
            "description": "The form's id."}
_REF = {"name": "ref", "in": "query", "required": False, "schema": {"type": "string"},
        "description": "The submission's id, shown to the applicant as their reference."}
_POST_BODY = {
    "required": True,
    "content": {
        "application/x-www-form-urlencoded": {
            "schema": {
                "type": "object",
                "properties": {FIELD: {"type": "string", "description": "The token the page put in its hidden field."}},
                "required": [FIELD],
                "additionalProperties": {"type": "string"},
            },
            "example": {FIELD: "1764581400.Zm9vYmFy", "name": "Ada Lovelace", "email": "ada@example.com"},
        }
    },
}


def install(app: FastAPI) -> None:
    """Serve the form pages and their assets on `app`, with the CSRF key from its settings."""
    app.state.form_tokens = FormTokens(signing_key(app.state.settings))
    app.include_router(router)
    app.mount(ASSETS_PATH, StaticFiles(directory=_HERE / "static"), name="form-assets")


# --- routes --------------------------------------------------------------------------------------


@router.get(
    "/f/{form_id}",
    response_class=HTMLResponse,
    summary="The hosted form page",
    description="For applicants, in a browser: the link to send them. An accessible HTML form rendered from "
    "the form's fields, working without JavaScript and checking fields inline with it. Sets the CSRF cookie "
    "the page's POST needs. A closed form shows a message instead of its fields. Changes nothing.",
    responses={200: _HTML} | html_errors(404, notes=_FORM_NOT_FOUND) | errors(DB, html_route=True),
    openapi_extra={"parameters": [_FORM_ID]},
)
async def form_page(request: Request, session: ReadSessionDep) -> Response:
    """The form, empty; a closed form's message; a 404 page for an unknown form."""
    form = await _find(session, request.path_params["form_id"])
    if form is None:
        return not_found(request)
    if form.status != "active":
        return closed(request, form, status.HTTP_200_OK)
    return render_form(request, form, {}, [])


@router.post(
    "/f/{form_id}",
    response_class=HTMLResponse,
    summary="Send the hosted form (no JavaScript)",
    description="What the page's form POSTs when JavaScript is off (with it, the page uses the JSON route "
    "`POST /api/forms/{form_id}/submissions`). Form-encoded fields plus the page's `csrf-token`, with the "
    "page's cookie. Checked by the same rules as the JSON route; a valid one is saved with its operations, "
    "like a JSON submission, and answered with a 303 to the thank-you page. Sending the same page twice "
    "saves it once.",
    status_code=status.HTTP_303_SEE_OTHER,
    responses={
        303: {"description": "Saved: see the thank-you page (`Location`)."},
    }
    | html_errors(
        400,
        403,
        404,
        409,
        415,
        422,
        429,
        notes=_FORM_NOT_FOUND
        | {
            400: "The POST has more fields than any form can have.",
            403: "The page expired, or the CSRF cookie or token is missing or wrong: open the form again.",
            409: "The form is closed: its closed message.",
            415: "The body is not `application/x-www-form-urlencoded`.",
            422: "The form again, with the values typed and an error message tied to each bad field.",
            429: "Too many submissions from this client or for this form; wait for `Retry-After` seconds.",
        },
    )
    | errors(413, DB, html_route=True),
    openapi_extra={"parameters": [_FORM_ID], "requestBody": _POST_BODY},
)
async def submit_page(request: Request, session: SessionDep) -> Response:
    """The plain (no JavaScript) submission: 303 to the thank-you page, or the form with its errors."""
    form_id = request.path_params["form_id"]
    form_uuid = _uuid(form_id)
    if form_uuid is None:
        return not_found(request)
    if (refused := await _rate_limited(request, session, form_uuid)) is not None:
        return refused
    read = await _read_post(request, form_uuid)
    if isinstance(read, Response):
        return read  # refused before the database is touched
    pairs, token = read
    form = await _find(session, form_id)
    if form is None:
        return not_found(request)
    raw = raw_values(pairs, skip={FIELD})
    data = submission_data(stored_fields(form), raw)
    try:
        received = await service.submit(session, form_uuid, data, idempotency_key=idempotency_key(token))
    except FormClosed:
        return closed(request, form, status.HTTP_409_CONFLICT)
    except InvalidSubmission as invalid:
        return render_form(request, form, raw, invalid.problems, status.HTTP_422_UNPROCESSABLE_CONTENT)
    await session.commit()
    thanks = f"{_root(request)}/f/{form.id}/thanks?ref={received.submission.id}"
    return RedirectResponse(thanks, status.HTTP_303_SEE_OTHER, headers={"Cache-Control": "no-store"})


@router.get(
    "/f/{form_id}/thanks",
    response_class=HTMLResponse,
    summary="The hosted form's thank-you page",
    description="Where the page sends an applicant after a submission: says it was received, with its "
    "reference when `ref` is the submission's id. Changes nothing.",
    responses={200: _HTML} | html_errors(404, notes=_FORM_NOT_FOUND) | errors(DB, html_route=True),
    openapi_extra={"parameters": [_FORM_ID, _REF]},
)
async def thanks_page(request: Request, session: ReadSessionDep) -> Response:
    """The thank-you page, with the submission's reference when `ref` is one."""
    form = await _find(session, request.path_params["form_id"])
    ref = request.query_params.get("ref")
    if form is None:
        return not_found(request)
    return page(request, "thanks.html", {"form": form, "reference": _uuid(ref or "")})


async def _rate_limited(request: Request, session: AsyncSession, form_id: uuid.UUID) -> Response | None:
    """The 429 page when this POST is past an abuse limit (app.limits), else None.

    Counted on the request's `session` before anything else uses it (see check_submission)."""
    settings = request.app.state.settings
    client = client_address(settings, request.headers, request.client.host if request.client else None)
    try:
        await check_submission(session, settings, form_id, client)
    except RateLimited as limited:
        text = (
            "Too many forms have been sent just now, so nothing was saved. "
            f"Please try again in {limited.retry_after} seconds."
        )
        response = message(request, 429, "Please wait a moment", text, link=f"{_root(request)}/f/{form_id}")
        response.headers["Retry-After"] = str(limited.retry_after)
        return response
    return None


async def _read_post(request: Request, form_id: uuid.UUID) -> tuple[list[tuple[str, str]], str] | Response:
    """The POST's key=value pairs and its CSRF token, or the page refusing it (415, 400, 403)."""
    if not _is_form_encoded(request.headers.get("content-type")):
        return message(request, 415, "Unsupported form", "Send this form from its page.")
    try:
        pairs = parse_body(await request.body())
    except ValueError:
        return message(request, 400, "Too many fields", "Send this form from its page.")
    token = next((value for key, value in reversed(pairs) if key == FIELD), None)
    if not request.app.state.form_tokens.verify(form_id, request.cookies.get(cookie_name(request)), token):
        return expired(request, form_id)
    return pairs, token


# --- answers -------------------------------------------------------------------------------------


def page(request: Request, template: str, context: dict[str, Any], status_code: int = 200) -> HTMLResponse:
    """A page rendered with the context every template may use."""
    common = {"assets": _root(request) + ASSETS_PATH, "version": __version__}
    return TEMPLATES.TemplateResponse(request, template, common | context, status_code=status_code, headers=PAGE_HEADERS)


def render_form(request: Request, form: Form, values: dict, problems: list[Problem], status_code: int = 200) -> Response:
    """The form, filled with `values` and marked with `problems`, with a fresh CSRF token."""
    nonce = request.cookies.get(cookie_name(request))
    nonce = nonce if is_nonce(nonce) else new_nonce()  # keep it: other open tabs hold tokens for it
    token = request.app.state.form_tokens.issue(form.id, nonce)
    fields = widgets(stored_fields(form), values, problems)
    known = {field.name for field in fields}
    root = _root(request)
    context = {
        "form": form,
        "fields": fields,
        "summary": [(f"#field-{p.field}" if p.field in known else None, p.message) for p in problems],
        "token_field": FIELD,
        "token": token,
        "idempotency_key": idempotency_key(token),
        "action": f"{root}/f/{form.id}",
        "api": f"{root}/api/forms/{form.id}/submissions",
        "thanks": f"{root}/f/{form.id}/thanks",
    }
    response = page(request, "form.html", context, status_code)
    _set_cookie(request, response, nonce)
    return response


def closed(request: Request, form: Form, status_code: int) -> HTMLResponse:
    """The message a closed form shows instead of its fields."""
    return page(request, "closed.html", {"form": form}, status_code)


def not_found(request: Request) -> HTMLResponse:
    """The 404 page for a form that does not exist."""
    return message(request, 404, "Form not found", "There is no form at this address. Check the link you were sent.")


def expired(request: Request, form_id: uuid.UUID) -> HTMLResponse:
    """The 403 page for a POST whose CSRF token or cookie is missing, wrong or too old."""
    text = (
        "This page has expired, or your browser did not send its cookie, so nothing was saved. "
        "Open the form again and send it from there. Sending it without JavaScript needs cookies."
    )
    return message(request, 403, "Please send the form again", text, link=f"{_root(request)}/f/{form_id}")


def message(request: Request, status_code: int, title: str, text: str, link: str | None = None) -> HTMLResponse:
    """A page that only says something."""
    return page(request, "message.html", {"title": title, "text": text, "link": link}, status_code)


# --- helpers -------------------------------------------------------------------------------------


def cookie_name(request: Request) -> str:
    """The CSRF cookie's name: `__Host-` prefixed over HTTPS, where browsers enforce what it means."""
    return SECURE_COOKIE if _over_https(request) else COOKIE


def _over_https(request: Request) -> bool:
    """Whether the applicant's browser talks HTTPS: to us, or to the proxy we were told to trust
    (TRUSTED_PROXY_HEADER set), which says so in X-Forwarded-Proto."""
    if request.url.scheme == "https":
        return True
    trusts_a_proxy = request.app.state.settings.trusted_proxy_header is not None
    return trusts_a_proxy and request.headers.get("x-forwarded-proto", "").strip().lower() == "https"


def _set_cookie(request: Request, response: Response, nonce: str) -> None:
    secure = _over_https(request)
    response.set_cookie(
        cookie_name(request), nonce, max_age=request.app.state.form_tokens.max_age,
        path="/", secure=secure, httponly=True, samesite="lax",
    )


async def _find(session, form_id: str) -> Form | None:
    parsed = _uuid(form_id)
    if parsed is None:
        return None
    try:
        return await get_form(session, parsed)
    except FormNotFound:
        return None


def _uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def _root(request: Request) -> str:
    # Under a path prefix (uvicorn --root-path), links and redirects keep it.
    return request.scope.get("root_path", "").rstrip("/")


def _is_form_encoded(content_type: str | None) -> bool:
    return (content_type or "").split(";", 1)[0].strip().lower() == "application/x-www-form-urlencoded"
