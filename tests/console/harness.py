"""What the console's browser tests share: the real platform as a subprocess, and a recorded browser tab."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.hardening.live_stack import seed_postgres
from tests.support.llm_standins import OpenAIStandin

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "console"
TIMEOUT_MS = 60_000
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def running_platform(port: int, **settings: str) -> Iterator[str]:
    """``ragu serve`` on embedded defaults plus ``settings`` (``RAGU_*`` values), with the console at ``/``.

    Its data folder is made outside pytest's 0700 temporary tree: run as root, embedded PostgreSQL serves
    as its own system user, which initdb fails to set up below a folder that user cannot enter.
    """
    workdir = Path(tempfile.mkdtemp(prefix="ragu-console-"))
    workdir.chmod(0o755)
    seed_postgres(workdir / "data" / "postgres")  # a copy of a migrated cluster: no initdb at each start
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGU_") and k != "DATABASE_URL"}
    # No embedded LLM unless a test asks: what the tests expect must not depend on whether one is installed.
    env.update(RAGU_DATA_DIR=str(workdir / "data"), RAGU_PORT=str(port), RAGU_LOCAL_LLM_MODEL="none")
    env.update(settings)
    log = (workdir / "serve.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "ragu.cli", "serve"], env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, (workdir / "serve.log").read_text()
            try:
                if httpx.get(f"{base}/kappi/ready", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "ragu serve did not come up"
            time.sleep(0.25)
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def openai_standin() -> Iterator[OpenAIStandin]:
    """An OpenAI-compatible stand-in (see :mod:`tests.support.llm_standins`) serving from an event loop of its
    own thread, since Playwright's sync API holds this one; set its ``script`` to choose what it answers."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="openai-standin", daemon=True)
    thread.start()
    standin = OpenAIStandin()
    asyncio.run_coroutine_threadsafe(standin.__aenter__(), loop).result(timeout=10)
    try:
        yield standin
    finally:
        asyncio.run_coroutine_threadsafe(standin.__aexit__(None, None, None), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def nav(page: Any, link: str) -> None:
    """Follow a link of the main navigation and wait for its screen (each screen's title is its link's text)."""
    from playwright.sync_api import expect

    page.get_by_role("navigation", name="Main").get_by_role("link", name=link, exact=True).click()
    expect(page.get_by_role("heading", name=link, level=1)).to_be_visible()


class Console:
    """One browser tab on the console, recording every console error, uncaught exception and dialog.

    Dialogs (the confirmations before deleting) are accepted, and their messages kept in ``dialogs``.
    """

    def __init__(self, browser: Any, base: str, *, width: int = 1280, height: int = 900) -> None:
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.context.set_default_timeout(TIMEOUT_MS)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("dialog", self._accept)
        self.page.goto(base)

    def _accept(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.accept()

    def sign_in(self, subject: str, *, groups: str = "", admin: bool = False) -> None:
        page = self.page
        page.get_by_label("User name").fill(subject)
        page.get_by_label("Groups (comma-separated)").fill(groups)
        page.get_by_label("Admin").set_checked(admin)
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("button", name="Sign out").wait_for()

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=ARTIFACTS / f"{name}.png", full_page=True)

    def overflow(self) -> int:
        """How many CSS pixels the page is wider than the viewport (0: nothing needs sideways scrolling)."""
        width: int = self.page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        return width

    def stored(self) -> list[Any]:
        """Everything the page keeps beyond its own memory: local and session storage, and cookies."""
        stored: list[Any] = self.page.evaluate(
            "() => [Object.assign({}, localStorage), Object.assign({}, sessionStorage), document.cookie]"
        )
        return stored

    def close(self) -> list[str]:
        self.context.close()
        return self.errors


class Api:
    """Setup through the public APIs (what a script would do), so a browser test drives only what it checks."""

    def __init__(self, base: str, *, subject: str = "setup-admin") -> None:
        token = httpx.post(f"{base}/console/dev-token", json={"subject": subject, "admin": True}).json()["token"]
        self.base = base
        self.headers = {"Authorization": f"Bearer {token}"}

    def collection(self, name: str, *, groups: tuple[str, ...] = ()) -> dict[str, Any]:
        return self._post("/chonkit/collections", {"name": name, "groups": list(groups)})

    def agent(self, name: str, *, groups: tuple[str, ...] = (), description: str = "", **config: str) -> dict[str, Any]:
        """An agent; ``config`` sets its LLM (``llm_provider``, ``llm_model``), the offline one by default."""
        spec = {"name": name, "groups": list(groups), "description": description, **config}
        return self._post("/kappi/admin/agents", spec)

    def document(self, name: str, content: bytes) -> dict[str, Any]:
        response = httpx.post(
            f"{self.base}/chonkit/documents", files=[("files", (name, content))], headers=self.headers, timeout=60
        )
        response.raise_for_status()
        created: dict[str, Any] = response.json()["results"][0]["document"]
        return created

    def documents(self, files: dict[str, bytes]) -> list[dict[str, Any]]:
        """Upload ``files`` (name: content) in one request."""
        parts = [("files", f) for f in files.items()]
        response = httpx.post(f"{self.base}/chonkit/documents", files=parts, headers=self.headers, timeout=120)
        response.raise_for_status()
        return [r["document"] for r in response.json()["results"]]

    def add(self, collection: dict[str, Any], documents: list[dict[str, Any]]) -> dict[str, Any]:
        """Start the job that adds ``documents`` to ``collection``; the job as created."""
        body = {"document_ids": [d["id"] for d in documents]}
        job: dict[str, Any] = self._post(f"/chonkit/collections/{collection['id']}/documents", body)["job"]
        return job

    def embed(self, collection: dict[str, Any], documents: list[dict[str, Any]]) -> None:
        """Add ``documents`` to ``collection`` and wait for the job to finish."""
        job = self.add(collection, documents)
        deadline = time.monotonic() + 120
        while (status := self._get(f"/chonkit/jobs/{job['id']}")["status"]) in ("queued", "running"):
            assert time.monotonic() < deadline, f"embedding job {job['id']} still {status}"
            time.sleep(0.2)
        assert status == "done", self._get(f"/chonkit/jobs/{job['id']}")

    def assign(self, agent: dict[str, Any], collection: dict[str, Any]) -> None:
        add = {"vector_provider": collection["vector_provider"], "name": collection["name"], "instruction": ""}
        response = httpx.put(
            f"{self.base}/kappi/admin/agents/{agent['id']}/collections",
            json={"add": [add]},
            headers=self.headers,
            timeout=30,
        )
        response.raise_for_status()
        assert all(r["ok"] for r in response.json()["results"]), response.json()

    def deactivate(self, agent: dict[str, Any]) -> None:
        self._post(f"/kappi/admin/agents/{agent['id']}/deactivate", {})

    def _get(self, path: str) -> dict[str, Any]:
        response = httpx.get(f"{self.base}{path}", headers=self.headers, timeout=30)
        response.raise_for_status()
        found: dict[str, Any] = response.json()
        return found

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = httpx.post(f"{self.base}{path}", json=body, headers=self.headers, timeout=30)
        response.raise_for_status()
        created: dict[str, Any] = response.json()
        return created
