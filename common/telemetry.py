"""Metrics and traces: the Prometheus series operators watch, and OpenTelemetry spans of one question and of one
embedding job.

Metrics are in-process counters, read by each service's ``/metrics``; recording one costs well under a
microsecond. Spans cost nothing until tracing is configured (``RAGU_OTEL_EXPORTER``, or a test's own provider):
:func:`span` then hands out a shared null context. No label or span attribute holds a collection's name, which
non-members must never learn: routes are templates, collections are counted, not named.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Literal

from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Span, StatusCode, Tracer, TracerProvider
from opentelemetry.util.types import AttributeValue
from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

from common.errors import AppError, InvalidInput

Exporter = Literal["none", "otlp", "console"]

QUEUE_STAGES = ("queued", "parsing", "chunking", "embedding", "writing")

# A ``_created`` twin of every series would double the page; no dashboard reads it.
disable_created_metrics()  # type: ignore[no-untyped-call]

EMBEDDING_QUEUE = Gauge(
    "ragu_embedding_queue_items",
    "Job items waiting (queued) or in flight, by stage; read from the database at each scrape of chonkit.",
    ["stage"],
)
EMBEDDING_ITEMS = Counter(
    "ragu_embedding_items",
    "Job items this process's embedding workers finished, by outcome (done, skipped, failed, cancelled, retried).",
    ["outcome"],
)
EMBEDDING_STAGE_SECONDS = Histogram(
    "ragu_embedding_stage_seconds",
    "Time one document spent in each stage of an embedding job (parse, chunk, embed, write).",
    ["stage"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
RETRIEVAL_SECONDS = Histogram(
    "ragu_retrieval_seconds",
    "A question's query embedding (embed) and vector search over its collections (search).",
    ["step"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
LLM_FIRST_TOKEN_SECONDS = Histogram(
    "ragu_llm_time_to_first_token_seconds",
    "From the LLM call to the first piece of the answer, by LLM provider.",
    ["provider"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
)
LLM_SECONDS = Histogram(
    "ragu_llm_duration_seconds",
    "A whole LLM answer, by provider and outcome (complete, error, cancelled).",
    ["provider", "outcome"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
LLM_TOKENS = Counter(
    "ragu_llm_tokens",
    "Model tokens the LLM reported, by provider and kind (input, output).",
    ["provider", "kind"],
)

_EMBED_SECONDS = RETRIEVAL_SECONDS.labels("embed")
_SEARCH_SECONDS = RETRIEVAL_SECONDS.labels("search")
_series: dict[tuple[int | str, ...], Histogram] = {}
_OUTCOMES = {"done": "done", "skipped": "skipped", "failed": "failed", "cancelled": "cancelled", "queued": "retried"}

_NO_SPAN: AbstractContextManager[Span] = contextlib.nullcontext(INVALID_SPAN)
_provider: TracerProvider | None = None
_tracer: Tracer | None = None


def use_tracer_provider(provider: TracerProvider | None) -> None:
    """Record spans with ``provider`` from now on; ``None`` turns tracing off again (tests)."""
    global _provider, _tracer  # noqa: PLW0603 - one process, one tracer; read on every span
    _provider = provider
    _tracer = None if provider is None else provider.get_tracer("ragu")


def tracer_provider() -> TracerProvider | None:
    """The provider spans go to, or ``None`` while tracing is off."""
    return _provider


def configure_tracing(exporter: Exporter) -> None:
    """Export spans with ``exporter`` (``otlp`` reads the standard ``OTEL_EXPORTER_OTLP_*`` variables). The
    first call in a process wins: both services of ``ragu serve`` share one provider."""
    if exporter == "none" or _provider is not None:
        return
    try:
        import opentelemetry.instrumentation.asgi  # noqa: F401 - Litestar's plugin needs it; say so at start
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
    except ImportError as exc:
        raise InvalidInput(
            "RAGU_OTEL_EXPORTER needs the tracing packages: pip install 'ragu[otel]'", code="invalid_setting"
        ) from exc
    span_exporter: SpanExporter
    if exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        span_exporter = OTLPSpanExporter()
    else:
        span_exporter = ConsoleSpanExporter()
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "ragu"}))  # OTEL_SERVICE_NAME, when set, wins
    provider = SdkTracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(span_exporter))
    trace.set_tracer_provider(provider)  # libraries that trace on their own report to the same place
    use_tracer_provider(provider)


def span(name: str, attributes: Mapping[str, AttributeValue] | None = None) -> AbstractContextManager[Span]:
    """A span around a block, the current span inside it; a shared null context while tracing is off.
    Never hold one across an async generator's ``yield``: its context would leak into the consumer."""
    if _tracer is None:
        return _NO_SPAN
    return _tracer.start_as_current_span(name, attributes=attributes)


def observe_retrieval(embed_seconds: float, search_seconds: float) -> None:
    _EMBED_SECONDS.observe(embed_seconds)
    _SEARCH_SECONDS.observe(search_seconds)


def set_embedding_queue(counts: Mapping[str, int]) -> None:
    """The queue as the database has it now: every stage is set, so a drained stage reads 0."""
    for stage in QUEUE_STAGES:
        EMBEDDING_QUEUE.labels(stage).set(counts.get(stage, 0))


def embedding_item_finished(stage: str) -> None:
    """A job item left the worker in ``stage`` (``queued``: handed back after an outage, counted as retried)."""
    outcome = _OUTCOMES.get(stage)
    if outcome is not None:
        EMBEDDING_ITEMS.labels(outcome).inc()


def embedding_stage_done(stage: str, started: float) -> None:
    """One embedding stage that began at ``started`` (``time.perf_counter()``) just ended: its histogram, and a
    child span of the current job item with the stage's real start and end."""
    seconds = time.perf_counter() - started
    EMBEDDING_STAGE_SECONDS.labels(stage).observe(seconds)
    if _tracer is not None:
        ended = time.time_ns()
        _tracer.start_span(f"chonkit.{stage}", start_time=ended - int(seconds * 1e9)).end(end_time=ended)


class LlmCall:
    """One LLM answer: its span, time to first token, tokens and duration.

    A plain context manager whose span never becomes the current one, so the answer pipeline (an async
    generator) may hold it across its ``yield``s.
    """

    __slots__ = ("_first_token", "_model", "_provider", "_span", "_started")

    def __init__(self, provider: str, model: str) -> None:
        self._provider = provider
        self._model = model
        self._span: Span = INVALID_SPAN
        self._started = self._first_token = 0.0

    def __enter__(self) -> LlmCall:
        self._started = time.perf_counter()
        if _tracer is not None:
            attributes = {"gen_ai.system": self._provider, "gen_ai.request.model": self._model}
            self._span = _tracer.start_span("kappi.llm", attributes=attributes)
        return self

    def token(self) -> None:
        if not self._first_token:
            self._first_token = time.perf_counter()
            _labelled(LLM_FIRST_TOKEN_SECONDS, self._provider).observe(self._first_token - self._started)
            if self._span.is_recording():
                self._span.add_event("first_token")
                ttft_ms = round((self._first_token - self._started) * 1000, 3)
                self._span.set_attribute("ragu.time_to_first_token_ms", ttft_ms)

    def usage(self, input_tokens: int | None, output_tokens: int | None) -> None:
        for kind, tokens in (("input", input_tokens), ("output", output_tokens)):
            if tokens:
                LLM_TOKENS.labels(self._provider, kind).inc(tokens)
                self._span.set_attribute(f"gen_ai.usage.{kind}_tokens", tokens)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        outcome = "complete" if exc is None else "error" if isinstance(exc, Exception) else "cancelled"
        _labelled(LLM_SECONDS, self._provider, outcome).observe(time.perf_counter() - self._started)
        if outcome == "error":
            code = exc.code if isinstance(exc, AppError) else "internal_error"
            self._span.set_attribute("ragu.error_code", code)
            self._span.set_status(StatusCode.ERROR, code)
        self._span.set_attribute("ragu.outcome", outcome)
        self._span.end()


def _labelled(histogram: Histogram, *labels: str) -> Histogram:
    """``histogram.labels(*labels)``, remembered: a question's path observes a few of them (1.3 µs a lookup)."""
    key: tuple[int | str, ...] = (id(histogram), *labels)
    series = _series.get(key)
    if series is None:
        series = _series[key] = histogram.labels(*labels)
    return series
