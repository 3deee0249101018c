"""The embedded LLM: llama.cpp's own server (through ``xllamacpp``) in a child process beside ``ragu serve``.

Started like the embedded PostgreSQL: when a local model is available, ``ragu serve`` runs it on a free port of
127.0.0.1 and kappi talks to it as the ``local`` provider through the same OpenAI-compatible client it uses for
Ollama and vLLM. A process of its own, not a thread: llama.cpp's compute threads never compete with the services'
event loops for the interpreter, a crash in native code leaves the services answering (``extractive`` takes over,
and answers say so), and stopping it frees its memory. The child dies with its parent even on SIGKILL
(``PR_SET_PDEATHSIG``, and it watches its parent's pid).

llama.cpp does the batching (``slots`` answers decode together) and queues what exceeds the slots; kappi bounds
that queue (:class:`~kappi.llm.openai_compatible.OpenAICompatibleProvider` ``max_concurrent``), so a burst gets a
clear ``503 llm_busy`` instead of an ever-longer wait. Closing an answer's HTTP stream makes llama.cpp cancel its
generation and free the slot.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import importlib.util
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from common.config import Settings
from common.errors import InvalidInput
from kappi.llm.local_models import AUTO, DISABLED, ChecksumMismatch, LocalModel, find_local_model, installed_models

if TYPE_CHECKING:
    import xllamacpp

logger = logging.getLogger(__name__)

READY = "ready"
"""The line the child prints on stdout once the model is loaded and the server listens."""
_PR_SET_PDEATHSIG = 1
STOP_GRACE_SECONDS = 10.0
LOG_VERBOSITY = 2
"""llama.cpp's warnings and errors only: at its default (info) it logs every request, and its log would grow
with the traffic."""
PROMPT_CACHE_MIB = 256
"""RAM llama.cpp may keep for prompts it has seen (its default, 8 GiB, is more than a small machine has)."""


def _cores() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_threads() -> int:
    """Generation's threads: one less than the cores this process may use, at least one. llama.cpp's threads meet
    at a barrier after every step, so one that loses its core (to the services, or an embedding job) stalls the
    others: with as many threads as cores on a busy machine generation collapsed (measured, docs/local-llm.md)."""
    return max(1, _cores() - 1)


def default_batch_threads() -> int:
    """Prompt reading's threads: every core this process may use. A prompt is read in batches of many tokens, so
    each step between two barriers is long and a thread that loses its core for a moment costs little of it, while
    the first token waits on the whole prompt (measured, ``bench/llama_threads_bench.py``)."""
    return _cores()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class LocalLlmServer:
    """One llama.cpp server process serving ``model``; implements kappi's :class:`~kappi.llm.registry.LocalLlm`.

    Args:
        threads: llama.cpp's CPU threads while it generates; 0: :func:`default_threads`.
        batch_threads: its CPU threads while it reads a prompt; 0: :func:`default_batch_threads`.
        slots: answers decoded at once.
        queue: answers that may wait for a slot (kappi refuses more with ``llm_busy``).
        context: tokens per slot (prompt and answer).
        log_path: where the server's own log goes.
        key_path: where its API key is kept (owner-only), for an administrator's look at llama.cpp's own
            endpoints (``/slots``, ``/metrics``).
    """

    def __init__(
        self,
        model: LocalModel,
        *,
        threads: int,
        batch_threads: int = 0,
        slots: int,
        queue: int,
        context: int,
        log_path: Path,
        key_path: Path,
    ) -> None:
        self.local_model = model
        self.threads = threads or default_threads()
        self.batch_threads = batch_threads or default_batch_threads()
        self.slots = max(1, slots)
        self.queue = max(0, queue)
        self.context = context
        self.log_path = log_path
        self.key_path = key_path
        self.port = _free_port()
        self.api_key = secrets.token_urlsafe(32)
        """Asked of every request but ``/health``: no other local process, nor a web page the user visits, can use
        the model (llama.cpp would otherwise answer any origin). Handed to the child on its stdin, not in argv."""
        self._process: subprocess.Popen[str] | None = None
        self._ready = threading.Event()
        self._stopping = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def server_url(self) -> str:
        """The server's root, where llama.cpp's own endpoints are (``/health``, ``/slots``, ``/metrics``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def model(self) -> str:
        return self.local_model.name

    @property
    def capacity(self) -> int:
        return self.slots + self.queue

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def status(self) -> str:
        if self._process is None or self._process.poll() is not None:
            return "stopped"
        return "ready" if self._ready.is_set() else "starting"

    def command(self) -> list[str]:
        """The child's command line (its API key goes to its stdin, never here)."""
        return [
            sys.executable, "-m", "ragu.local_llm",
            "--model", str(self.local_model.path), "--alias", self.model, "--port", str(self.port),
            "--threads", str(self.threads), "--batch-threads", str(self.batch_threads),
            "--slots", str(self.slots), "--context", str(self.context),
        ]  # fmt: skip

    def start(self) -> None:
        """Start the child and return at once; it loads the model meanwhile (``status()`` says ``starting``)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.key_path.parent.mkdir(parents=True, exist_ok=True)
        self.key_path.unlink(missing_ok=True)
        fd = os.open(self.key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as key_file:
            key_file.write(self.api_key + "\n")
        with self.log_path.open("a") as log:  # the child keeps its own descriptor
            self._process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                self.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True
            )
        assert self._process.stdin is not None
        with self._process.stdin as stdin:
            stdin.write(self.api_key + "\n")
        logger.info(
            "local LLM %s starting on %s (pid %d, %d threads, %d reading prompts, %d slots, queue %d; log %s)",
            self.model, self.server_url, self._process.pid, self.threads, self.batch_threads, self.slots, self.queue,
            self.log_path,
        )  # fmt: skip
        threading.Thread(target=self._watch, args=(self._process,), name="local-llm-watch", daemon=True).start()

    def _watch(self, process: subprocess.Popen[str]) -> None:
        """Mark it ready when it says so; report when it exits on its own."""
        stdout: IO[str] | None = process.stdout
        if stdout is not None:
            with stdout:
                for line in stdout:
                    if line.strip() == READY:
                        self._ready.set()
                        logger.info("local LLM %s ready on %s", self.model, self.server_url)
        code = process.wait()
        if not self._stopping:
            logger.error(
                "local LLM %s exited (status %s); answers fall back to extractive; its log: %s",
                self.model, code, self.log_path,
            )  # fmt: skip

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after :data:`STOP_GRACE_SECONDS`."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        self._stopping = True
        process.terminate()
        try:
            process.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        logger.info("local LLM %s stopped", self.model)


def local_llm_for(settings: Settings) -> tuple[LocalLlmServer | None, str | None]:
    """The server for the configured model (not started), or ``None`` and why not when one was asked for.

    A model whose checksum is wrong is refused here, with an error in the log: its agents' answers then come
    from ``extractive`` and say so.

    Raises:
        InvalidInput: ``unknown_local_llm_model`` (a typo in the setting) and ``local_llm_not_gguf``.
    """
    asked = settings.local_llm.model.strip().lower() not in {AUTO, *DISABLED}
    if importlib.util.find_spec("xllamacpp") is None:
        if asked:
            why = "xllamacpp is not installed (pip install -e '.[local-llm]')"
            logger.error("local LLM %s not started: %s", settings.local_llm.model, why)
            return None, why
        return None, None
    try:
        model = find_local_model(settings.local_llm.model, settings.local_llm.sha256, settings.server.data_path)
    except ChecksumMismatch as exc:
        logger.error("%s; answers use extractive instead", exc.detail)
        return None, exc.detail
    except InvalidInput as exc:
        if exc.code != "local_llm_not_installed":
            raise
        logger.error("%s; answers use extractive instead", exc.detail)
        return None, exc.detail
    if model is None:
        if others := installed_models():
            logger.info("no recommended local LLM installed; to serve %s, name it in RAGU_LOCAL_LLM_MODEL", others)
        return None, None
    server = LocalLlmServer(
        model,
        threads=settings.local_llm.threads,
        batch_threads=settings.local_llm.batch_threads,
        slots=settings.local_llm.slots,
        queue=settings.local_llm.queue,
        context=settings.local_llm.context,
        log_path=settings.server.data_path / "logs" / "local-llm.log",
        key_path=settings.server.data_path / "local-llm.key",
    )
    return server, None


# --- the child process -------------------------------------------------------------------------------------------


def _die_with_parent(parent: int) -> None:
    """Linux kills us when the parent goes, even by SIGKILL; elsewhere :func:`_serve` polls the parent pid."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)


def server_params(args: argparse.Namespace) -> xllamacpp.CommonParams:
    """llama.cpp's server parameters from the child's arguments (its API key is read from stdin apart)."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_parallel = args.slots
    params.n_ctx = args.context * args.slots
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.batch_threads
    params.cache_ram_mib = PROMPT_CACHE_MIB
    params.endpoint_slots = True
    params.endpoint_metrics = True
    params.ui = False
    params.verbosity = LOG_VERBOSITY
    return params


def _serve(args: argparse.Namespace) -> int:
    parent = os.getppid()
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a Ctrl-C while the model loads ends us too (see below)
    import xllamacpp

    params = server_params(args)
    params.api_keys = [sys.stdin.readline().strip()]
    server = xllamacpp.Server(params)  # loads the model, then serves from llama.cpp's own threads
    # Handlers only now: while the model loads, a SIGTERM takes its default action and ends us at once (there
    # is nothing to clean up yet); a Python handler set before the load waited out the parent's grace period.
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    print(READY, flush=True)
    while not stop.wait(1.0):
        if os.getppid() != parent:
            break
    del server  # stops the HTTP server and the main loop
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragu.local_llm", description="Serve one GGUF with llama.cpp.")
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--batch-threads", type=int, required=True)
    parser.add_argument("--slots", type=int, required=True)
    parser.add_argument("--context", type=int, required=True)
    return _serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
