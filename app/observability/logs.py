"""Logs as one JSON object per line, each carrying the request id of the request it happened in.

Log sites pass structured fields with `extra=` (operation_id, type, attempt, outcome,
duration_ms...); the formatter writes them beside the message. What a log line must never hold —
credentials, submission field values, provider error texts that may echo them — is kept out at
the log sites; the formatter cannot tell a value from a secret.
"""

import json
import logging
import sys
import traceback
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import IO, Any

#: The id of the request being served, for every line logged while serving it.
request_id: ContextVar[str | None] = ContextVar("intake_request_id", default=None)

#: LogRecord attributes that are the record's own, not fields a log site added.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "color_message", "taskName",
}
#: Loggers that log each request's URL at INFO: a webhook URL may carry a token.
URL_LOGGERS = ("httpx", "httpcore")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, request id, the site's fields."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if (current := request_id.get()) is not None:
            line["request_id"] = current
        line.update({k: v for k, v in vars(record).items() if k not in _RECORD_ATTRIBUTES and not k.startswith("_")})
        if record.exc_info and record.exc_info[0] is not None:
            line["exc_type"] = record.exc_info[0].__name__
            line["exc"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        return json.dumps(line, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """A line for people at a terminal: the message, then the fields as key=value."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        """The standard line with the request id and the site's fields appended."""
        fields = {k: v for k, v in vars(record).items() if k not in _RECORD_ATTRIBUTES and not k.startswith("_")}
        if (current := request_id.get()) is not None:
            fields = {"request_id": current} | fields
        extra = " ".join(f"{k}={v}" for k, v in fields.items())
        return super().format(record) + (f" {extra}" if extra else "")


def configure_logging(fmt: str = "json", level: str | int = "INFO", stream: IO[str] | None = None) -> logging.Handler:
    """Send every logger's records to `stream` (stderr) as JSON (or text) lines; the handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in URL_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    return handler
