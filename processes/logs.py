"""The processes' log format, set once by each composition root that logs (unless a host set one).

Two formats (``STRATUS_LOG_FORMAT``): ``text``, a line of time, logger, level and message, and
``json``, one JSON object a line (the systemd units' default), for a log shipper to parse. Both
carry the ids of the work a line is about, from the command context installed at the time
(``stratus.context``) or given as ``extra`` by the line's caller: the request id, the conversation's
correlation id (the API request that started it, carried by every event it led to) and the
causation id (the event being reacted to). A boot is then followed from the API through the
scheduler to the host with ``grep <request id>``: the API's lines carry it as their request id,
the workers' as their correlation id.
"""

from __future__ import annotations

import logging
import os
import traceback
from datetime import UTC, datetime

import orjson

from stratus.context import peek

TEXT_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s%(stratus_ids)s"
IDS = ("request_id", "correlation_id", "causation_id")


class ContextIds(logging.Filter):
    """Stamps each record with the ids of the command context installed when it was logged (a
    caller's ``extra={"request_id": ...}`` wins), and ``stratus_ids``, their text form."""

    def filter(self, record: logging.LogRecord) -> bool:
        ctx = peek()
        for name in IDS:
            if getattr(record, name, None) is None:
                setattr(record, name, getattr(ctx, name, "") if ctx is not None else "")
        ids = [f"{name}={getattr(record, name)}" for name in IDS if getattr(record, name)]
        record.stratus_ids = f" [{' '.join(ids)}]" if ids else ""
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC, ISO 8601), level, logger, message, the process id, the
    ids (empty ones left out) and, for an exception, its traceback."""

    def format(self, record: logging.LogRecord) -> str:
        ContextIds().filter(record)  # a handler installed without the filter (gunicorn's) gets them too
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process or os.getpid(),
        }
        for name in IDS:
            value = getattr(record, name, "")
            if value:
                line[name] = value
        if record.exc_info:
            line["exception"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        return orjson.dumps(line, default=str).decode()


def handler(log_format: str = "text") -> logging.Handler:
    """A standard-error handler in ``log_format``, stamping the ids."""
    out = logging.StreamHandler()
    out.addFilter(ContextIds())
    out.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    return out


def configure(log_format: str = "text") -> None:
    """Log INFO and above to standard error in ``log_format`` ("text" or "json"), unless logging is
    set up."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(handler(log_format))
        root.setLevel(logging.INFO)
