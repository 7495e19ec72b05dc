"""Domain errors and database outages, translated to JSON `{"detail": ...}` answers in one place."""

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.admin.service import NotDead
from app.db import CONNECTION_ERRORS, CommitOutcomeUnknown, is_connection_error
from app.forms.service import FormInvalid, FormNotFound, InvalidCursor
from app.limits.submissions import RateLimited
from app.queue.repository import InvalidTransition, OperationNotFound
from app.submissions.service import FormClosed, InvalidStatusChange, SubmissionNotFound
from app.submissions.validation import InvalidSubmission

logger = logging.getLogger("intake.api")

#: Domain errors whose message is the whole answer, and their status codes.
STATUS_OF: dict[type[Exception], int] = {
    FormNotFound: 404,
    SubmissionNotFound: 404,
    FormClosed: 409,
    InvalidStatusChange: 409,
    InvalidCursor: 422,
    OperationNotFound: 404,
    NotDead: 404,
    InvalidTransition: 409,
}

#: Seconds a client is told to wait before trying again while the database is unreachable.
RETRY_AFTER_SECONDS = 5
UNAVAILABLE = "the database is unavailable right now; nothing was saved, please try again shortly"
#: When the connection broke during COMMIT, "nothing was saved" may be false: say so.
OUTCOME_UNKNOWN = (
    "the connection to the database was lost while saving, so it is not known whether this was saved; "
    "please try again shortly (a submission sent again with the same Idempotency-Key is saved only once)"
)


async def _domain_error(request: Request, error: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(error)}, status_code=STATUS_OF[type(error)])


async def _invalid_submission(request: Request, error: InvalidSubmission) -> JSONResponse:
    detail = [
        {"loc": ["body", "data", p.field], "msg": p.message, "type": "value_error"} for p in error.problems
    ]
    return JSONResponse({"detail": detail}, status_code=422)


async def _invalid_form(request: Request, error: FormInvalid) -> JSONResponse:
    detail = [{"loc": list(loc), "msg": message, "type": "value_error"} for loc, message in error.problems]
    return JSONResponse({"detail": detail}, status_code=422)


async def _rate_limited(request: Request, error: RateLimited) -> JSONResponse:
    headers = {"Retry-After": str(error.retry_after)}
    return JSONResponse({"detail": str(error), "limit": error.limit}, status_code=429, headers=headers)


async def _database_error(request: Request, error: Exception) -> JSONResponse:
    if not is_connection_error(error):
        raise error  # a bug, not an outage: the request-id middleware logs it and answers 500
    request_id = getattr(request.state, "request_id", None)
    logger.warning("database unavailable: %s [request_id=%s]", type(error).__name__, request_id)
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    return JSONResponse({"detail": UNAVAILABLE}, status_code=503, headers=headers)


async def _commit_outcome_unknown(request: Request, error: CommitOutcomeUnknown) -> JSONResponse:
    request_id = getattr(request.state, "request_id", None)
    logger.warning("database connection lost during commit: %s [request_id=%s]", type(error.__cause__).__name__, request_id)
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    return JSONResponse({"detail": OUTCOME_UNKNOWN}, status_code=503, headers=headers)


def install(app: FastAPI) -> None:
    """Register every handler on `app`."""
    for error_type in STATUS_OF:
        app.add_exception_handler(error_type, _domain_error)
    app.add_exception_handler(InvalidSubmission, _invalid_submission)
    app.add_exception_handler(FormInvalid, _invalid_form)
    app.add_exception_handler(RateLimited, _rate_limited)
    for error_type in CONNECTION_ERRORS:
        app.add_exception_handler(error_type, _database_error)
    app.add_exception_handler(CommitOutcomeUnknown, _commit_outcome_unknown)

