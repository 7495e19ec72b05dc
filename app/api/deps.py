"""Small dependencies shared by the routers."""

import uuid

from fastapi import HTTPException, Request, status

from app.db import SessionDep
from app.limits.submissions import check_submission, client_address


def is_json(content_type: str | None) -> bool:
    """True for `application/json` and `application/*+json`, parameters (charset) ignored."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


async def require_json(request: Request) -> None:
    """Dependency: the request body must be declared as JSON, or the answer is 415."""
    if not is_json(request.headers.get("content-type")):
        raise HTTPException(
            status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            detail="send the body as JSON, with Content-Type: application/json",
        )


async def limit_submissions(form_id: uuid.UUID, request: Request, session: SessionDep) -> None:
    """Dependency: count this submission against the abuse limits; RateLimited (429) past them.

    It runs on the request's session (FastAPI hands the route the same one), before the route
    uses it: one pooled connection serves both the count and the submission.
    """
    settings = request.app.state.settings
    peer = request.client.host if request.client else None
    client = client_address(settings, request.headers, peer)
    await check_submission(session, settings, form_id, client)
