"""Bearer-token checks: ADMIN_TOKEN for the admin API, CRON_SECRET for the queue routes.

Both use one mechanism: the token is compared in constant time, and any failure answers the same
401, whether the header was missing, malformed or wrong, so that a caller learns nothing.
"""

import hmac
import logging
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr

logger = logging.getLogger(__name__)

_admin_bearer = HTTPBearer(scheme_name="AdminToken", auto_error=False, description="The ADMIN_TOKEN setting: admin routes and /api/queue/status.")
_cron_bearer = HTTPBearer(scheme_name="CronSecret", auto_error=False, description="The CRON_SECRET setting: /api/queue/process and /api/queue/cleanup.")

Credentials = HTTPAuthorizationCredentials | None


def unauthorized() -> HTTPException:
    """The one 401 every failed check answers: no hint of what was wrong."""
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED,
        detail="not authenticated",
        headers={"WWW-Authenticate": "Bearer"},
    )


def token_matches(credentials: Credentials, expected: SecretStr) -> bool:
    """True if the bearer token equals `expected`, compared in constant time."""
    given = credentials.credentials.encode() if credentials else b""
    return hmac.compare_digest(given, expected.get_secret_value().encode())


def check_bearer(credentials: Credentials, expected: SecretStr | None, *, setting: str, open_if_unset: bool) -> None:
    """Raise the 401 unless the token matches `expected`; an unset token opens or closes the door."""
    if expected is None or not expected.get_secret_value():
        if open_if_unset:
            logger.warning("%s is not set: allowing the request without a token (development only)", setting)
            return
        logger.warning("%s is not set: refusing every request to routes that need it", setting)
        raise unauthorized()
    if not token_matches(credentials, expected):
        raise unauthorized()


async def require_admin(request: Request, credentials: Annotated[Credentials, Depends(_admin_bearer)]) -> None:
    """Dependency: `Authorization: Bearer $ADMIN_TOKEN`; without ADMIN_TOKEN every request is refused."""
    settings = request.app.state.settings
    check_bearer(credentials, settings.admin_token, setting="ADMIN_TOKEN", open_if_unset=False)


async def require_cron(request: Request, credentials: Annotated[Credentials, Depends(_cron_bearer)]) -> None:
    """Dependency: `Authorization: Bearer $CRON_SECRET`; without CRON_SECRET only development lets it in."""
    settings = request.app.state.settings
    # Production refuses to start without CRON_SECRET (Settings), so "unset" means development here;
    # the environment is checked anyway so that this stays true if that rule ever changes.
    open_if_unset = settings.environment == "development"
    check_bearer(credentials, settings.cron_secret, setting="CRON_SECRET", open_if_unset=open_if_unset)


async def admin_token(request: Request, credentials: Annotated[Credentials, Depends(_admin_bearer)]) -> str:
    """Dependency: `require_admin`, then the checked token, for the audit log to fingerprint."""
    await require_admin(request, credentials)
    assert credentials is not None  # require_admin refuses a request without one
    return credentials.credentials


AdminDep = Annotated[None, Depends(require_admin)]
AdminTokenDep = Annotated[str, Depends(admin_token)]
CronDep = Annotated[None, Depends(require_cron)]
