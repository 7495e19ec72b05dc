"""Small dependencies shared by the routers."""

from fastapi import HTTPException, Request, status


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
