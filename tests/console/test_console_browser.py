"""The console in a real headless Chromium against the real platform (``ragu serve`` as a subprocess).

An admin signs in, uploads a PDF, creates a collection readable by ``hr``, embeds it and watches the job
finish, builds an agent for ``hr`` over that collection; a user in ``hr`` gets a cited answer; a user outside
``hr`` never sees the agent. Screenshots of each screen go to ``test-artifacts/console/`` and the two README
screenshots to ``docs/screenshots/``. Any console error or uncaught exception in the page fails the test.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.documents import pdf

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "console"
# The README's screenshots are refreshed only on request (RAGU_UPDATE_SCREENSHOTS=1), so a test run leaves the
# tree clean; every run still saves its screenshots as artefacts.
README_SHOTS = REPO / "docs" / "screenshots" if os.environ.get("RAGU_UPDATE_SCREENSHOTS") else ARTIFACTS
TIMEOUT_MS = 60_000

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's Chromium is not installed (apt-get install -y chromium)"
)

HANDBOOK = [
    "Vacation policy\nEvery employee gets thirty vacation days per calendar year. Unused vacation days "
    "carry over until the end of March of the following year.",
    "Sick leave\nReport sick leave to your manager before ten in the morning. A doctor's note is needed "
    "from the fourth day of absence.",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def platform() -> Iterator[str]:
    """The real platform on embedded defaults, with the console at ``/``.

    Its data folder is made outside pytest's 0700 temporary tree: run as root, embedded PostgreSQL serves
    as its own system user, which initdb fails to set up below a folder that user cannot enter.
    """
    workdir = Path(tempfile.mkdtemp(prefix="ragu-console-"))
    workdir.chmod(0o755)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGU_") and k != "DATABASE_URL"}
    env.update(RAGU_DATA_DIR=str(workdir / "data"), RAGU_PORT=str(port))
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


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            yield chromium
        finally:
            chromium.close()


class Console:
    """One browser tab on the console, recording every console error and uncaught exception."""

    def __init__(self, browser: object, base: str, *, width: int = 1280, height: int = 900) -> None:
        from playwright.sync_api import Browser

        assert isinstance(browser, Browser)
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.context.set_default_timeout(TIMEOUT_MS)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.goto(base)

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

    def close(self) -> list[str]:
        self.context.close()
        return self.errors


def test_admin_builds_an_agent_and_only_its_group_gets_cited_answers(
    platform: str, browser: object, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    handbook = tmp_path / "handbook.pdf"
    handbook.write_bytes(pdf(HANDBOOK))

    admin = Console(browser, platform)
    page = admin.page
    expect(page.get_by_text("Development only.")).to_be_visible()
    admin.shot("01-sign-in")
    admin.sign_in("admin", admin=True)

    page.get_by_role("link", name="Documents", exact=True).click()
    expect(page.get_by_text("No documents yet.")).to_be_visible()
    page.locator("#upload-files").set_input_files(handbook)
    expect(page.locator("ul.plain li", has_text="handbook.pdf").get_by_text("created")).to_be_visible()
    expect(page.get_by_role("cell", name="handbook.pdf")).to_be_visible()
    page.get_by_role("button", name="Preview").click()
    expect(page.locator(".chunk", has_text="thirty vacation days").first).to_be_visible()
    page.get_by_role("button", name="Chunks").click()
    expect(page.get_by_text("chunks for all-MiniLM-L6-v2")).to_be_visible()
    admin.shot("02-documents")

    page.get_by_role("link", name="Collections", exact=True).click()
    page.get_by_label("Name").fill("Hr_docs")
    page.get_by_label("Groups that may read it").fill("hr")
    page.get_by_role("button", name="Create collection").click()
    expect(page.get_by_role("heading", name="Hr_docs", level=1)).to_be_visible()
    page.get_by_label("handbook.pdf").check()
    page.get_by_role("button", name="Embed selected documents").click()
    expect(page.locator("progress[data-job-status=done]")).to_be_attached()
    expect(page.get_by_text("1 of 1 documents finished")).to_be_visible()
    expect(page.get_by_role("heading", name="Documents in this collection (1)")).to_be_visible()
    page.get_by_label("Query").fill("how many vacation days")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.locator(".chunk", has_text="thirty vacation days").first).to_be_visible()
    admin.shot("03-collection")
    README_SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=README_SHOTS / "admin-collection.png")

    page.get_by_role("link", name="Agents", exact=True).click()
    expect(page.get_by_text("No agents yet.")).to_be_visible()
    page.get_by_label("Name").fill("HR helper")
    page.get_by_label("Groups that may use it").fill("hr")
    page.get_by_label("Description").fill("Answers questions about HR policies")
    page.get_by_role("button", name="Create agent").click()
    expect(page.get_by_role("heading", name="HR helper")).to_be_visible()
    page.get_by_label("Instruction").fill("HR policies: vacation and sick leave")
    page.get_by_role("button", name="Assign collection").click()
    expect(page.get_by_role("cell", name="Hr_docs (pgvector)")).to_be_visible()
    page.get_by_label("Groups (comma-separated)").fill("sales")
    page.get_by_role("button", name="Check access").click()
    expect(page.get_by_text("The agent is hidden from this user")).to_be_visible()
    page.get_by_label("Groups (comma-separated)").fill("hr")
    page.get_by_role("button", name="Check access").click()
    expect(page.get_by_text("The agent is visible to this user.")).to_be_visible()
    expect(page.get_by_role("cell", name="yes")).to_be_visible()
    admin.shot("04-agent")
    assert admin.close() == []

    alice = Console(browser, platform)
    page = alice.page
    alice.sign_in("alice", groups="hr")
    expect(page.get_by_role("link", name="Collections", exact=True)).to_have_count(0)
    page.locator("#agent-list li", has_text="HR helper").get_by_role("button", name="Start chat").click()
    page.get_by_label("Your question").fill("How many vacation days do I get?")
    page.get_by_role("button", name="Send").click()
    answer = page.locator(".msg.assistant[data-status=complete]")
    expect(answer).to_be_visible()
    expect(answer.locator(".no-sources")).to_have_count(0)
    citation = answer.locator("details.citation").first
    citation.locator("summary").click()
    expect(citation.locator(".chunk")).to_contain_text("thirty vacation days")
    expect(citation.locator("summary")).to_contain_text("handbook.pdf")
    alice.shot("05-chat")
    page.screenshot(path=README_SHOTS / "user-chat.png")
    page.set_viewport_size({"width": 390, "height": 844})
    expect(answer).to_be_visible()
    alice.shot("06-chat-phone")
    page.reload()  # the token lived only in memory: a reload signs out
    expect(page.get_by_label("User name")).to_be_visible()
    assert page.evaluate("() => [localStorage.length, sessionStorage.length, document.cookie]") == [0, 0, ""]
    assert alice.close() == []

    bob = Console(browser, platform)
    page = bob.page
    bob.sign_in("bob", groups="sales")
    expect(page.get_by_text("No agents are available to you yet.")).to_be_visible()
    expect(page.get_by_text("HR helper")).to_have_count(0)
    bob.shot("07-outsider")
    assert bob.close() == []


def test_host_index_moved_to_api_and_the_services_still_answer(platform: str) -> None:
    assert set(httpx.get(f"{platform}/api").json()["services"]) == {"chonkit", "kappi"}
    assert httpx.get(f"{platform}/chonkit/health").json()["service"] == "chonkit"
    assert httpx.get(f"{platform}/kappi/health").json()["service"] == "kappi"
    assert httpx.get(f"{platform}/").headers["content-type"].startswith("text/html")


def test_problem_details_are_shown_in_plain_words(platform: str, browser: object) -> None:
    from playwright.sync_api import expect

    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("admin2", admin=True)
    page.get_by_role("link", name="Collections", exact=True).click()
    page.get_by_label("Name").fill("Same_name")
    page.get_by_role("button", name="Create collection").click()
    expect(page.get_by_role("heading", name="Same_name", level=1)).to_be_visible()
    page.get_by_role("link", name="Collections", exact=True).click()
    page.get_by_label("Name").fill("Same_name")
    page.get_by_role("button", name="Create collection").click()
    message = page.locator("form p.error")
    expect(message).to_be_visible()
    text = message.inner_text()
    assert "Same_name" in text or "exists" in text.lower()
    assert "{" not in text
    admin.shot("08-error")
    errors = admin.close()
    # Chromium logs every non-2xx fetch as a console error; the expected 409 is the only one allowed.
    assert all("409" in e for e in errors), errors
