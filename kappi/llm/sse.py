"""An incremental Server-Sent Events parser over raw bytes, as the WHATWG HTML standard defines the format.

Lines are split on CR, LF or CRLF in *bytes*, before decoding: those bytes never occur inside a multi-byte
UTF-8 character, and splitting decoded text with ``str.splitlines`` (what ``httpx.Response.aiter_lines``
does) would also break lines at U+2028 or form feeds, which JSON may carry unescaped inside a token.
Network chunks can end anywhere (mid-line, between CR and LF, mid-character); the parser keeps the tail.
"""

from __future__ import annotations

import re

import msgspec

_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


class SseEvent(msgspec.Struct, frozen=True, kw_only=True):
    event: str = "message"
    data: str
    id: str | None = None


class SseParser:
    """Feed it byte chunks; it returns each event once its terminating blank line has arrived."""

    def __init__(self) -> None:
        self._tail = b""
        self._started = False
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        buffer = self._tail + chunk
        if not self._started and len(buffer) >= len(_BOM):
            self._started = True
            buffer = buffer.removeprefix(_BOM)
        events: list[SseEvent] = []
        start = 0
        for match in _LINE_END.finditer(buffer):
            if match.end() == len(buffer) and match.group() == b"\r":
                break  # maybe the first half of a CRLF split across chunks: wait for the next one
            self._line(buffer[start : match.start()].decode("utf-8", errors="replace"), events)
            start = match.end()
        self._tail = buffer[start:]
        return events

    def _line(self, line: str, events: list[SseEvent]) -> None:
        if not line:
            if self._data:
                events.append(SseEvent(event=self._event or "message", data="\n".join(self._data), id=self._id))
            self._event, self._data = "", []
            return
        if line.startswith(":"):
            return  # a comment: servers send these as keep-alives
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
