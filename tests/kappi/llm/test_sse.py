"""The SSE parser against the standard's edge cases, fed in every possible split of the byte stream."""

from __future__ import annotations

from kappi.llm.sse import SseEvent, SseParser

STREAM = (
    "\ufeff: keep-alive\r\n\r\n"
    'data: {"text": "caf\u00e9 \u2028 line separator"}\n\n'
    "event: content-delta\r\n"
    "id: 7\r"
    "data:first\r\n"
    "data: second\n"
    "retry: 1000\n"
    "unknown: field\n"
    "\n"
    "data\n\n"
    "event: ignored-without-data\n\n"
    "data: [DONE]\n\n"
    "data: unterminated"
).encode()

EXPECTED = [
    SseEvent(data='{"text": "caf\u00e9 \u2028 line separator"}'),
    SseEvent(event="content-delta", data="first\nsecond", id="7"),
    SseEvent(data="", id="7"),
    SseEvent(data="[DONE]", id="7"),
]


def test_whole_stream() -> None:
    assert SseParser().feed(STREAM) == EXPECTED


def test_every_two_way_split_gives_the_same_events() -> None:
    """Chunks can end mid-line, mid-character, between CR and LF, inside the byte-order mark."""
    for cut in range(len(STREAM) + 1):
        parser = SseParser()
        assert parser.feed(STREAM[:cut]) + parser.feed(STREAM[cut:]) == EXPECTED, cut


def test_byte_at_a_time() -> None:
    parser = SseParser()
    events = [event for i in range(len(STREAM)) for event in parser.feed(STREAM[i : i + 1])]
    assert events == EXPECTED


def test_lines_split_only_on_cr_and_lf_not_on_unicode_line_breaks() -> None:
    data = 'data: {"t": "a\x0cb\x1cc\u0085d"}\n\n'
    assert SseParser().feed(data.encode()) == [SseEvent(data='{"t": "a\x0cb\x1cc\u0085d"}')]
