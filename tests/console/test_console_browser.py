"""The console in a real headless Chromium against the real platform (``ragu serve`` as a subprocess).

An admin signs in, uploads a PDF, creates a collection readable by ``hr``, embeds it and watches the job
finish, builds an agent for ``hr`` over that collection; a user in ``hr`` gets a cited answer; a user outside
``hr`` never sees the agent. Then the paths around it: a failed embedding retried after fixing the chunk
config, groups changed, a document removed from a collection and deleted; an agent edited into a new version
and its collection removed; a chat asked, renamed and deleted with the keyboard alone; every screen at phone
width; problem details shown in plain words. The platform is shared by the module: the first test meets its
empty lists, the others name what they create uniquely and check only what they made.

Screenshots of each screen go to ``test-artifacts/console/`` and the two README screenshots to
``docs/screenshots/`` (on request). Any console error or uncaught exception in the page fails the test; the
few tests that provoke a refusal allow exactly that one logged HTTP error.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.console.harness import (
    ARTIFACTS,
    CHROMIUM,
    REPO,
    Api,
    Console,
    free_port,
    nav,
    openai_standin,
    running_platform,
)
from tests.support.documents import pdf
from tests.support.llm_standins import OpenAIStandin, Script

# The README's screenshots are refreshed only on request (RAGU_UPDATE_SCREENSHOTS=1), so a test run leaves the
# tree clean; every run still saves its screenshots as artefacts.
README_SHOTS = REPO / "docs" / "screenshots" if os.environ.get("RAGU_UPDATE_SCREENSHOTS") else ARTIFACTS
PHONE = {"width": 390, "height": 844}

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's Chromium is not installed (apt-get install -y chromium)"
)

HANDBOOK = [
    "Vacation policy\nEvery employee gets thirty vacation days per calendar year. Unused vacation days "
    "carry over until the end of March of the following year.",
    "Sick leave\nReport sick leave to your manager before ten in the morning. A doctor's note is needed "
    "from the fourth day of absence.",
]

# About 550 tokens in one section: one 1000-token chunk is too long for all-MiniLM-L6-v2, 200-token ones fit.
LEAVE_POLICY = "# Parental leave\n\n" + " ".join(
    f"Rule {n}: parents may take up to {n + 2} weeks of leave in block {n}, announced to their manager in writing."
    for n in range(1, 25)
)


@pytest.fixture(scope="module")
def llm() -> Iterator[OpenAIStandin]:
    with openai_standin() as standin:
        yield standin


@pytest.fixture(scope="module")
def platform(llm: OpenAIStandin) -> Iterator[str]:
    """The real platform on embedded defaults (development sign-in), with the console at ``/``; agents may also
    use the ``openai`` provider, whose one model ``standin`` is ``llm``."""
    with running_platform(free_port(), RAGU_OPENAI_BASE_URL=llm.base_url, RAGU_OPENAI_MODELS="standin") as base:
        yield base


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

    nav(page, "Documents")
    expect(page.get_by_text("No documents yet.")).to_be_visible()
    page.locator("#upload-files").set_input_files(handbook)
    expect(page.locator("ul.plain li", has_text="handbook.pdf").get_by_text("created")).to_be_visible()
    expect(page.get_by_role("cell", name="handbook.pdf", exact=True)).to_be_visible()
    page.get_by_role("button", name="Preview").click()
    expect(page.locator(".chunk", has_text="thirty vacation days").first).to_be_visible()
    page.get_by_role("button", name="Chunks", exact=True).click()
    expect(page.get_by_text(re.compile(r"^\d+ chunks? for all-MiniLM-L6-v2"))).to_be_visible()
    admin.shot("02-documents")

    nav(page, "Collections")
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
    page.evaluate("window.scrollTo(0, 0)")  # the page's top: its documents, the job and what to add
    page.screenshot(path=README_SHOTS / "admin-collection.png")

    nav(page, "Agents")
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
    # the extractive answer quotes the passage: what it quotes is highlighted there (#29 item 5)
    expect(citation.locator("mark")).to_have_text("Every employee gets thirty vacation days per calendar year.")
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

    # Access is decided when the history is read: once Hr_docs is for managers only, alice's answer is hidden.
    setup = Api(platform)
    listed = httpx.get(f"{platform}/chonkit/collections", headers=setup.headers).json()
    hr_docs = next(c for c in listed if c["name"] == "Hr_docs")
    regrouped = httpx.put(
        f"{platform}/chonkit/collections/{hr_docs['id']}/groups",
        json={"groups": ["hr-managers"]},
        headers=setup.headers,
    )
    regrouped.raise_for_status()
    time.sleep(0.6)  # kappi reads collection groups through a 0.5 s cache; the page renders the history once
    alice = Console(browser, platform)
    page = alice.page
    alice.sign_in("alice", groups="hr")
    page.get_by_role("link", name=re.compile("HR helper$")).click()
    hidden = page.locator(".msg.assistant[data-status=withheld]")
    expect(hidden).to_have_text("This answer is hidden: it quoted documents you can no longer read.")
    expect(page.get_by_text("thirty vacation days")).to_have_count(0)
    alice.shot("08-answer-withheld")
    assert alice.close() == []


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
    nav(page, "Collections")
    page.get_by_label("Name").fill("Same_name")
    page.get_by_role("button", name="Create collection").click()
    expect(page.get_by_role("heading", name="Same_name", level=1)).to_be_visible()
    nav(page, "Collections")
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


def test_a_config_refused_for_its_fields_names_them_for_400_as_for_422(platform: str, browser: Any) -> None:
    """An unknown strategy is refused by the request's schema (400 ``invalid_request``, field errors listed in
    ``errors``), a size out of range by chunking's own check (422): both read as what is wrong, and where."""
    from playwright.sync_api import expect

    Api(platform).document("field-errors.md", b"# Field errors\n\nA short document to preview.\n")
    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("field-checker", admin=True)
    nav(page, "Documents")
    page.get_by_role("button", name="Preview field-errors.md").click()
    page.get_by_role("button", name="Edit as JSON").click()  # what the form cannot say
    config = page.get_by_label("Parse and chunk config (JSON)")
    expect(config).to_have_value(re.compile('"parse"'))
    preview = page.get_by_role("button", name="Preview chunks with this config")
    saved = page.get_by_role("form", name="Parse and chunk config").locator("p.error")

    config.fill('{"chunk": {"strategy": "semantic"}}')
    preview.click()
    expect(page.locator("p.error", has_text="Invalid value 'semantic' at chunk.strategy")).to_be_visible()
    page.get_by_role("button", name="Save config").click()
    expect(saved).to_have_text("Invalid value 'semantic' at chunk.strategy")

    config.fill('{"chunk": {"strategy": "fixed", "size": -1}}')
    preview.click()
    expect(page.locator("p.error", has_text="Size must be between 1 and")).to_be_visible()
    page.get_by_role("button", name="Save config").click()
    expect(saved).to_have_text(re.compile(r"^Size must be between 1 and \d+ \(got -1\)$"))
    expect(page.get_by_text("Something went wrong")).to_have_count(0)
    errors = admin.close()
    # Chromium logs each refused request as a console error: two 400s and two 422s, nothing else.
    assert sorted(re.findall(r"status of (\d+)", " ".join(errors))) == ["400", "400", "422", "422"], errors
    assert len(errors) == 4, errors


def test_the_upload_box_offers_exactly_the_types_chonkit_accepts(platform: str, browser: Any, tmp_path: Path) -> None:
    """The file picker's ``accept`` list is chonkit's list of extensions, its hint names every document type
    and nothing else, and a CSV and a JSON file dropped in are both created."""
    from playwright.sync_api import expect

    from chonkit.document.parsing.doctype import EXTENSIONS, DocumentType

    table = tmp_path / "holidays.csv"
    table.write_text("holiday,date\nNew Year,01-01\n", encoding="utf-8")
    record = tmp_path / "holidays.json"
    record.write_text('{"holiday": "New Year", "date": "01-01"}', encoding="utf-8")
    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("uploader", admin=True)
    nav(page, "Documents")
    picker = page.locator("#upload-files")
    assert sorted((picker.get_attribute("accept") or "").split(",")) == sorted(EXTENSIONS)
    hint = page.locator(".drop p.muted").inner_text()
    named = [word for word in re.findall(r"\w+", hint.lower()) if word != "and"]
    assert sorted(named) == sorted(DocumentType), hint
    picker.set_input_files([table, record])
    for name in ("holidays.csv", "holidays.json"):
        expect(page.locator("ul.plain li", has_text=name).get_by_text("created")).to_be_visible()
    assert admin.close() == []


def test_failed_embedding_is_retried_after_fixing_the_chunk_config(platform: str, browser: Any, tmp_path: Path) -> None:
    """A realistic failure: a saved chunk size beyond the model's limit fails the document with
    ``chunks_too_long``; the admin fixes the config and retries. Then groups change, the document leaves the
    collection, and is deleted."""
    from playwright.sync_api import expect

    policy = tmp_path / "leave-policy.md"
    policy.write_text(LEAVE_POLICY, encoding="utf-8")
    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("editor", admin=True)

    nav(page, "Documents")
    page.locator("#upload-files").set_input_files(policy)
    page.get_by_role("button", name="Preview leave-policy.md").click()
    config = page.get_by_role("form", name="Parse and chunk config")
    expect(config.get_by_role("button", name="Edit as JSON")).to_be_enabled()  # loaded: it would overwrite the form
    config.get_by_label("Chunking strategy").select_option("fixed")
    size = config.get_by_label("Size", exact=True)
    size.fill("1000")
    config.get_by_label("Overlap", exact=True).fill("0")
    page.get_by_role("button", name="Preview chunks with this config").click()
    expect(page.get_by_text("1 oversized: embedding would fail")).to_be_visible()
    page.get_by_role("button", name="Save config").click()
    expect(page.get_by_text("Saved: collections use it")).to_be_visible()
    admin.shot("10-document-config")
    with page.expect_download() as download:
        page.get_by_role("button", name="Download original").click()
    assert download.value.suggested_filename == "leave-policy.md"
    assert Path(download.value.path()).read_text(encoding="utf-8") == LEAVE_POLICY

    nav(page, "Collections")
    page.get_by_label("Name").fill("Leave_docs")
    page.get_by_role("button", name="Create collection").click()
    expect(page.get_by_role("heading", name="Leave_docs", level=1)).to_be_visible()
    page.get_by_label("leave-policy.md").check()
    page.get_by_role("button", name="Embed selected documents").click()
    expect(page.locator("progress[data-job-status=failed]")).to_be_attached()
    expect(
        page.get_by_role(
            "cell", name=re.compile(r"exceed the \d+-token limit of all-MiniLM-L6-v2 .*\(chunks_too_long\)")
        )
    ).to_be_visible()
    expect(page.get_by_text("Nothing embedded yet. Add documents above.")).to_be_visible()
    admin.shot("11-job-failed")

    nav(page, "Documents")
    page.get_by_role("button", name="Preview leave-policy.md").click()
    expect(size).to_have_value("1000")  # loaded: it would overwrite what is typed first
    size.fill("200")
    config.get_by_label("Overlap", exact=True).fill("20")
    page.get_by_role("button", name="Save config").click()
    expect(page.get_by_text("Saved: collections use it")).to_be_visible()

    nav(page, "Collections")
    page.get_by_role("link", name="Leave_docs").click()
    page.get_by_role("button", name="Retry failed documents").click()
    expect(page.locator("progress[data-job-status=done]")).to_be_attached()
    expect(page.get_by_role("heading", name="Documents in this collection (1)")).to_be_visible()
    expect(page.get_by_role("button", name="Retry failed documents")).to_have_count(0)
    admin.shot("12-job-retried")

    groups = page.get_by_label("Groups (comma-separated; empty = everyone)")
    groups.fill("hr, legal, hr")
    page.get_by_role("button", name="Save groups").click()
    expect(page.get_by_text("Readable by hr, legal.")).to_be_visible()
    expect(groups).to_have_value("hr, legal")
    page.get_by_role("link", name="← All collections").click()
    expect(page.get_by_role("row", name=re.compile("Leave_docs")).get_by_role("cell", name="hr, legal")).to_be_visible()

    page.get_by_role("link", name="Leave_docs").click()
    page.get_by_role("button", name="Remove leave-policy.md").click()
    expect(page.get_by_role("heading", name=re.compile("Removal job"))).to_be_visible()
    expect(page.locator("progress[data-job-status=done]")).to_be_attached()
    expect(page.get_by_text("Nothing embedded yet. Add documents above.")).to_be_visible()

    nav(page, "Documents")
    page.get_by_role("button", name="Delete leave-policy.md").click()
    expect(page.get_by_role("button", name="Preview leave-policy.md")).to_have_count(0)
    assert [d.split("?")[0] for d in admin.dialogs] == [
        "Remove “leave-policy.md” and its vectors from Leave_docs",
        "Delete “leave-policy.md”",
    ]
    assert admin.close() == []


def test_a_job_beyond_one_page_and_one_event_shows_every_count_and_row(browser: Any) -> None:
    """150 documents: the job's first page holds 100 of them, and cancelling them all changes more items than
    one event holds, so the counts must come from the job's totals and the rows from its pages and every event.
    A platform without a worker keeps the job queued until the admin cancels it."""
    from playwright.sync_api import expect

    from chonkit.embedding.service import EVENT_ITEM_BYTES

    with running_platform(free_port(), RAGU_CHONKIT_INPROCESS_WORKER="false") as base:
        setup = Api(base)
        collection = setup.collection("Bulk_docs")
        names = [f"bulk-{n:03}.txt" for n in range(150)]
        job = setup.add(collection, setup.documents({name: f"Bulk document {name}.\n".encode() for name in names}))
        assert (len(job["items"]), job["total"]) == (100, 150)

        admin = Console(browser, base)
        page = admin.page
        admin.sign_in("bulk-admin", admin=True)
        page.goto(f"{base}/#/collections/{collection['id']}")
        rows = page.locator("section[aria-labelledby=job-title] tbody tr")
        expect(page.get_by_text("0 of 150 documents finished")).to_be_visible()
        expect(rows).to_have_count(150)
        expect(rows.last).to_contain_text("bulk-149.txt")
        page.get_by_role("button", name="Cancel job").click()
        expect(page.locator("progress[data-job-status=cancelled]")).to_be_attached()
        expect(page.get_by_text("150 of 150 documents finished")).to_be_visible()
        expect(rows.locator(".badge.cancelled")).to_have_count(150)
        expect(rows).to_have_count(150)
        admin.shot("23-job-cancelled-150")
        items = httpx.get(f"{base}/chonkit/jobs/{job['id']}?limit=1000", headers=setup.headers).json()["items"]
        assert len(json.dumps(items, separators=(",", ":"))) > EVENT_ITEM_BYTES  # so the cancel took several events
        assert admin.close() == []


def test_a_skipped_document_says_why(platform: str, browser: Any) -> None:
    """Embedding a document again with nothing changed skips it, and its row gives chonkit's reason."""
    from playwright.sync_api import expect

    from chonkit.embedding.worker import UNCHANGED

    setup = Api(platform)
    collection = setup.collection("Skip_docs")
    setup.embed(collection, [setup.document("unchanged.md", b"# Unchanged\n\nThe same words as before.\n")])
    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("skipper", admin=True)
    page.goto(f"{platform}/#/collections/{collection['id']}")
    page.get_by_role("checkbox", name="unchanged.md").check()
    page.get_by_role("button", name="Embed selected documents").click()
    expect(page.get_by_text("Job started for 1 document(s).")).to_be_visible()
    row = page.get_by_role("row", name=re.compile("^unchanged.md"))
    expect(row.locator(".badge")).to_have_text("skipped")
    expect(row.get_by_role("cell", name=UNCHANGED, exact=True)).to_be_visible()
    assert admin.close() == []


def test_admin_edits_an_agent_into_a_new_version_and_removes_its_collection(platform: str, browser: Any) -> None:
    from playwright.sync_api import expect

    Api(platform).collection("Faq_docs")
    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("agent-editor", admin=True)
    nav(page, "Agents")
    page.get_by_label("Name").fill("Policy bot")
    page.get_by_role("button", name="Create agent").click()
    expect(page.get_by_text("No collections assigned: the agent will answer without sources.")).to_be_visible()
    expect(page.get_by_role("heading", name="Versions (1)")).to_be_visible()

    page.get_by_role("combobox", name=re.compile("^Collection")).select_option(label="Faq_docs (pgvector)")
    page.get_by_role("button", name="Assign collection").click()
    expect(page.get_by_role("cell", name="Faq_docs (pgvector)")).to_be_visible()

    page.get_by_label("System prompt").fill("Answer in one short paragraph and cite your sources.")
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_text("Saved as version 2.")).to_be_visible()
    expect(page.get_by_role("heading", name="Versions (2)")).to_be_visible()
    newest = page.locator("tr[data-version='2']")
    expect(newest).to_contain_text("current")
    expect(newest).to_contain_text("agent-editor")
    newest.locator("summary").click()
    expect(newest.locator(".chunk")).to_have_text("Answer in one short paragraph and cite your sources.")
    expect(page.locator("tr[data-version='1']")).not_to_contain_text("current")

    page.get_by_label("Model").fill("no-such-model")
    page.get_by_role("button", name="Save changes").click()
    refusal = page.locator("form p.error")
    expect(refusal).to_have_text(re.compile(r"^Unknown model 'no-such-model' for LLM provider 'extractive'"))
    expect(page.get_by_role("heading", name="Versions (2)")).to_be_visible()
    page.get_by_label("Model").fill("extractive")

    page.get_by_label("Name", exact=True).fill("Policy helper")
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_text("Saved (no new version")).to_be_visible()
    expect(page.get_by_role("heading", name="Policy helper", level=1)).to_be_visible()
    admin.shot("13-agent-versions")

    page.get_by_role("button", name="Remove Faq_docs").click()
    expect(page.get_by_text("No collections assigned: the agent will answer without sources.")).to_be_visible()
    expect(page.get_by_role("cell", name="Faq_docs (pgvector)")).to_have_count(0)
    errors = admin.close()
    # Chromium logs the refused save (422) as a console error; nothing else may appear.
    assert len(errors) == 1, errors
    assert "422" in errors[0], errors


def test_an_agents_llm_is_named_once_when_its_model_shares_the_providers_name(platform: str, browser: Any) -> None:
    """The offline provider's one model is also called ``extractive``: the tables say so once, not twice; any
    other model is named with its provider after it."""
    from playwright.sync_api import expect

    setup = Api(platform)
    offline = setup.agent("Named once")
    assert offline["config"]["llm_provider"] == offline["config"]["llm_model"] == "extractive"
    setup.agent("Named with provider", llm_provider="openai", llm_model="standin")
    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("llm-reader", admin=True)
    nav(page, "Agents")
    row = page.get_by_role("row", name=re.compile("^Named once"))
    expect(row.get_by_role("cell", name="extractive", exact=True)).to_have_count(1)
    row = page.get_by_role("row", name=re.compile("^Named with provider"))
    expect(row.get_by_role("cell", name="standin (openai)", exact=True)).to_have_count(1)
    page.get_by_role("link", name="Named once").click()
    expect(page.locator("tr[data-version='1']").get_by_role("cell", name="extractive", exact=True)).to_have_count(1)
    assert admin.close() == []


def test_user_chats_renames_and_deletes_with_the_keyboard_only(platform: str, browser: Any) -> None:
    """Every step from sign-in to deleting the chat is a key press: Tab, typing, Enter, Ctrl+Enter, Escape."""
    from playwright.sync_api import expect

    Api(platform).agent("Helpdesk", description="General questions")
    user = Console(browser, platform)
    page, keyboard = user.page, user.page.keyboard
    expect(page.get_by_label("User name")).to_be_focused()
    keyboard.type("carol")
    keyboard.press("Tab")
    keyboard.type("support")
    keyboard.press("Tab")
    keyboard.press("Space")  # the Admin box, checked
    keyboard.press("Space")  # and unchecked again
    keyboard.press("Tab")
    expect(page.get_by_role("button", name="Sign in")).to_be_focused()
    keyboard.press("Enter")
    expect(page.get_by_text("No chats yet. Start one with an agent.")).to_be_visible()
    expect(page.get_by_role("link", name="Documents", exact=True)).to_have_count(0)

    start = page.locator("#agent-list li", has_text="Helpdesk").get_by_role("button", name="Start chat")
    start.focus()
    keyboard.press("Enter")
    question = page.get_by_label("Your question")
    expect(question).to_be_focused()
    expect(page.get_by_text("Ask your first question below.")).to_be_visible()
    keyboard.type("Who approves parental leave?")
    keyboard.press("Control+Enter")
    answer = page.locator(".msg.assistant[data-status=complete]")
    expect(answer.locator(".no-sources")).to_have_text(re.compile("^No sources: "))
    expect(question).to_be_focused()
    user.shot("14-chat-no-sources")

    # kappi titled the chat after its first question, and the page shows it
    expect(page.get_by_role("heading", name="Who approves parental leave? Helpdesk", level=1)).to_be_visible()
    page.get_by_role("button", name="Rename Who approves parental leave?").focus()
    keyboard.press("Enter")
    expect(page.get_by_label("New title for Who approves parental leave?")).to_be_focused()
    keyboard.type("Parental leave")  # replaces the selected old title
    keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Parental leave", level=1)).to_be_visible()
    expect(page.get_by_role("button", name="Rename Parental leave")).to_be_focused()
    keyboard.press("Enter")
    keyboard.type("Discarded title")
    keyboard.press("Escape")
    expect(page.get_by_role("link", name=re.compile("^Parental leave"))).to_be_visible()
    user.shot("15-chat-renamed")

    page.get_by_role("button", name="Delete Parental leave").focus()
    keyboard.press("Enter")
    expect(page.get_by_text("No chats yet. Start one with an agent.")).to_be_visible()
    assert user.dialogs == ["Delete the chat “Parental leave”?"]
    assert httpx.get(f"{platform}/kappi/chats", headers=_bearer(platform, "carol")).json() == []
    assert user.close() == []


def test_an_openai_standin_answer_shows_lists_and_links_its_markers_and_no_markup_runs(
    platform: str, browser: Any, llm: OpenAIStandin
) -> None:
    """The answer's "- ", "* " and "1. " lines are lists and its "[n]" markers buttons that open source n; a
    marker of no source is removed by kappi and the sentence cited from the passage it rests on; the HTML in it
    shows as text and none of it runs (no element, no alert, no request for the image, no script refused by the
    page's policy: any of these would be a console error). The stand-in streams in ragged pieces, so markers and
    list items arrive split across tokens."""
    from playwright.sync_api import expect

    setup = Api(platform)
    collection = setup.collection("Badge_docs")
    hostile = "<img src=x onerror=alert(1)> and <script>alert(2)</script>"  # a passage's words, so grounded
    setup.embed(
        collection,
        [
            setup.document("badges.md", b"# Badges\n\nVisitors wear a badge at all times.\n"),
            setup.document("reception.txt", f"Badges are returned at reception {hostile}.\n".encode()),
        ],
    )
    agent = setup.agent("Badge helper", llm_provider="openai", llm_model="standin")
    setup.assign(agent, collection)
    llm.script = Script(
        tokens=(
            "Badges, in short:\n\n- Visitors wear a badge [1]\n* Badges are returned to reception [2]\n\n",
            "1. Return it at reception [2]\n2. Wear it at all times [1]\n\n",
            "Clause [7] says visitors wear a badge at all times. ",
            f"Badges are returned at reception {hostile} [2]",
        )
    )

    user = Console(browser, platform)
    page = user.page
    user.sign_in("erin")
    page.locator("#agent-list li", has_text="Badge helper").get_by_role("button", name="Start chat").click()
    page.get_by_label("Your question").fill("What about badges?")
    page.get_by_role("button", name="Send").click()

    def check(answer: Any) -> None:
        text = answer.locator(".answer-text")
        expect(text.locator("ul > li")).to_have_text(
            ["Visitors wear a badge [1]", "Badges are returned to reception [2]"]
        )
        expect(text.locator("ol > li")).to_have_text(["Return it at reception [2]", "Wear it at all times [1]"])
        expect(text.locator("p")).to_have_text(
            [
                "Badges, in short:",
                f"Clause says visitors wear a badge at all times. [1] Badges are returned at reception {hostile} [2]",
            ]
        )
        expect(text.get_by_role("button")).to_have_text(["[1]", "[2]", "[2]", "[1]", "[1]", "[2]"])
        expect(text.locator("img, script")).to_have_count(0)
        source = answer.locator("details[data-citation='2']")
        expect(source).not_to_have_attribute("open", "")
        text.locator("ol > li").first.get_by_role("button", name=re.compile(r"^Source 2: ")).click()
        expect(source).to_have_attribute("open", "")
        expect(source.locator("summary")).to_be_focused()
        expect(source.locator("summary")).to_contain_text("[2]")

    check(page.locator(".msg.assistant[data-status=complete]"))
    user.shot("22-chat-lists-and-links")
    page.get_by_role("link", name="+ New chat").click()
    page.get_by_role("link", name=re.compile("Badge helper$")).click()  # the answer as stored
    check(page.locator(".msg.assistant[data-status=complete]"))
    assert user.dialogs == []
    assert user.close() == []


def test_a_chat_whose_agent_is_no_longer_available_is_read_but_takes_no_questions(platform: str, browser: Any) -> None:
    """kappi names no agent its user may no longer use: the chat is listed and headed as having an agent no
    longer available, its answers still read, and its question box is disabled and says why."""
    from playwright.sync_api import expect

    setup = Api(platform)
    agent = setup.agent("Retired helper")
    headers = _bearer(platform, "frank")
    chat = httpx.post(f"{platform}/kappi/chats", json={"agent_id": agent["id"]}, headers=headers).json()
    asked = httpx.post(
        f"{platform}/kappi/chats/{chat['id']}/messages", json={"content": "Who retired?"}, headers=headers, timeout=60
    )
    asked.raise_for_status()
    setup.deactivate(agent)
    listed = httpx.get(f"{platform}/kappi/chats", headers=headers).json()
    assert [(c["agent_name"], c["agent_available"]) for c in listed] == [(None, False)]

    user = Console(browser, platform)
    page = user.page
    user.sign_in("frank")
    entry = page.get_by_role("link", name=re.compile("^Who retired"))
    expect(entry.locator(".unavailable")).to_have_text("agent no longer available")
    entry.click()
    expect(page.get_by_role("heading", name="Who retired? agent no longer available", level=1)).to_be_visible()
    expect(page.locator(".msg.assistant[data-status=complete]")).to_be_visible()
    question = page.get_by_label("Your question")
    expect(question).to_be_disabled()
    expect(question).to_have_accessible_description(re.compile("^This chat's agent is no longer available"))
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    expect(page.get_by_text("Retired helper")).to_have_count(0)
    user.shot("24-chat-agent-unavailable")
    assert user.close() == []


def test_an_answer_stopped_before_it_began_reads_as_stopped(platform: str, browser: Any) -> None:
    """A question whose client left at once keeps an empty, cancelled answer: the chat says it was stopped,
    not that nothing in the documents matched. The question goes out on a raw socket closed at once."""
    from playwright.sync_api import expect

    agent = Api(platform).agent("Stopper")
    headers = _bearer(platform, "dave")
    chat = httpx.post(f"{platform}/kappi/chats", json={"agent_id": agent["id"]}, headers=headers).json()
    body = json.dumps({"content": "Is anyone there?"}).encode()
    head = (
        f"POST /kappi/chats/{chat['id']}/messages/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: {headers['Authorization']}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", urlsplit(platform).port or 80)) as raw:
        raw.sendall(head.encode() + body)
    deadline = time.monotonic() + 10
    while not (messages := httpx.get(f"{platform}/kappi/chats/{chat['id']}", headers=headers).json()["messages"]) or (
        messages[-1]["status"] == "pending"
    ):
        assert time.monotonic() < deadline, messages
        time.sleep(0.1)
    assert [(m["role"], m["status"]) for m in messages] == [("user", "complete"), ("assistant", "cancelled")]

    user = Console(browser, platform)
    page = user.page
    user.sign_in("dave")
    page.get_by_role("link", name=re.compile("Stopper$")).click()
    stopped = page.locator(".msg.assistant[data-status=cancelled]")
    expect(stopped).to_have_text("This answer was stopped before it finished.")
    expect(page.get_by_text(re.compile("^No sources: "))).to_have_count(0)
    assert user.close() == []


def test_every_screen_fits_a_phone(platform: str, browser: Any) -> None:
    """At 390 px nothing needs sideways scrolling, and the navigation still reaches every screen."""
    from playwright.sync_api import expect

    setup = Api(platform)
    collection = setup.collection("Phone_docs", groups=("a-rather-long-group-name-for-a-narrow-screen",))
    agent = setup.agent("Phone agent", description="Checks the layout on narrow screens")
    phone = Console(browser, platform, **PHONE)
    page = phone.page
    expect(page.get_by_label("User name")).to_be_visible()
    assert phone.overflow() == 0
    phone.sign_in("pocket-admin", admin=True)
    for number, link in enumerate(["Documents", "Collections", "Agents", "Chat"], start=16):
        nav(page, link)
        assert phone.overflow() == 0, link
        phone.shot(f"{number}-phone-{link.lower()}")
        if link == "Collections":  # the README's phone-width table: each value beside its column's name
            README_SHOTS.mkdir(parents=True, exist_ok=True)
            page.locator("section[aria-labelledby=all-collections]").screenshot(
                path=README_SHOTS / "phone-collections.png"
            )
    for route, heading, shot in [
        (f"#/collections/{collection['id']}", "Phone_docs", "20-phone-collection"),
        (f"#/agents/{agent['id']}", "Phone agent", "21-phone-agent"),
    ]:
        page.goto(f"{platform}/{route}")  # same page, another hash: still signed in
        expect(page.get_by_role("heading", name=heading, level=1)).to_be_visible()
        assert phone.overflow() == 0, route
        phone.shot(shot)
    assert phone.close() == []


def _bearer(platform: str, subject: str) -> dict[str, str]:
    token = httpx.post(f"{platform}/console/dev-token", json={"subject": subject}).json()["token"]
    return {"Authorization": f"Bearer {token}"}


def test_the_search_bench_offers_modes_filters_and_grouping_and_shows_each_hits_legs(
    platform: str, browser: Any
) -> None:
    """Hybrid retrieval in the bench: a keyword-only search ranks by BM25, hybrid shows both legs and the fused
    score, a tag filter keeps its document only, and grouping gives one hit per document with its count."""
    from playwright.sync_api import expect

    setup = Api(platform)
    collection = setup.collection("Bench_docs")
    expenses, handbook = setup.documents(
        {
            "expenses.md": b"# Travel\n\nTravel is reimbursed at economy rates. Submit receipts within thirty days.\n\n"
            b"# Meals\n\nMeals on a business trip are reimbursed up to a daily allowance.\n",
            "leave.md": b"# Vacation\n\nEvery employee gets thirty vacation days per year.\n\n"
            b"# Sick leave\n\nA doctor's note is needed after three days of sick leave.\n",
        }
    )
    for document, tags, label in [(expenses, ["finance"], "Policy"), (handbook, ["hr"], "Handbook")]:
        patched = httpx.patch(
            f"{platform}/chonkit/documents/{document['id']}",
            json={"tags": tags, "label": label},
            headers=setup.headers,
        )
        patched.raise_for_status()
        sections = httpx.put(  # one chunk per section: two per document
            f"{platform}/chonkit/documents/{document['id']}/config",
            json={"chunk": {"strategy": "structure"}},
            headers=setup.headers,
        )
        sections.raise_for_status()
    setup.embed(collection, [expenses, handbook])

    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("bench-admin", admin=True)
    page.goto(f"{platform}/#/collections/{collection['id']}")
    bench = page.locator("form", has=page.get_by_role("heading", name="Search test bench"))
    hits = bench.locator(".chunk")
    bench.get_by_label("Query").fill("reimbursed receipts")
    bench.get_by_label("Results").fill("10")

    bench.get_by_label("Mode").select_option("lexical")
    expect(bench.get_by_label("Meaning's share of hybrid")).to_be_disabled()
    bench.get_by_role("button", name="Search", exact=True).click()
    expect(hits).to_have_count(2)  # only the expenses document has either word
    expect(hits.first.locator(".legs")).to_have_text(re.compile(r"^keyword #1 \(BM25 \d+\.\d\d\)$"))
    expect(hits.first).to_contain_text("Submit receipts")

    bench.get_by_label("Mode").select_option("hybrid")
    expect(bench.get_by_label("Meaning's share of hybrid")).to_be_enabled()
    bench.get_by_role("button", name="Search", exact=True).click()
    expect(hits).to_have_count(4)
    expect(hits.first.locator(".legs")).to_have_text(
        re.compile(r"^dense #\d · keyword #1 \(BM25 [\d.]+\) · fused 0\.\d{3}$")
    )
    expect(hits.locator(".legs", has_text="keyword not found")).to_have_count(2)  # the leave document: dense only
    admin.shot("22-search-bench-hybrid")

    bench.get_by_label("Tags (any of").fill("hr")
    bench.get_by_role("button", name="Search", exact=True).click()
    expect(hits).to_have_count(2)
    expect(hits.locator(".small", has_text="tags hr")).to_have_count(2)

    bench.get_by_label("Tags (any of").fill("")
    bench.get_by_label("One hit per document").check()
    bench.get_by_role("button", name="Search", exact=True).click()
    expect(hits).to_have_count(2)
    expect(bench.get_by_text("2 documents from 4 chunks · hybrid")).to_be_visible()
    expect(hits.locator(".small", has_text=re.compile("^2 matching chunks"))).to_have_count(2)

    admin.shot("23-search-bench-grouped")
    assert admin.close() == []


def test_an_answer_renders_as_safe_markdown_keeps_what_it_did_not_cite_apart_and_shows_the_wait(
    platform: str, browser: Any, llm: OpenAIStandin
) -> None:
    """Bold, code and links render (links open apart, without the console as referrer); the passages the answer
    cites are its sources and the one it was only given is folded apart as "also retrieved", live and in the
    history; while the model has not written a word for a second the wait is counted ("thinking… 1.2 s"), and
    once the answer is complete no wait is shown."""
    from playwright.sync_api import expect

    setup = Api(platform)
    collection = setup.collection("Markdown_docs")
    setup.embed(
        collection,
        [
            setup.document(
                "visitors.md",
                b"# Visitors\n\nVisitors wear a badge at all times. Run `badge --show` to see it, or read the guide"
                b" at https://example.org/badges.\n",
            ),
            setup.document("returns.md", b"# Returns\n\nBadges are returned at reception.\n"),
        ],
    )
    agent = setup.agent("Markdown helper", llm_provider="openai", llm_model="standin")
    setup.assign(agent, collection)
    llm.script = Script(
        tokens=("**Visitors** wear a badge at all ", "times [1]. Run `badge --show [1]` to see it, or read ",
                "[the guide](https://example.org/badges) [1].")
    )  # fmt: skip

    user = Console(browser, platform)
    page = user.page
    user.sign_in("mona")
    page.locator("#agent-list li", has_text="Markdown helper").get_by_role("button", name="Start chat").click()
    page.get_by_label("Your question").fill("What about badges?")
    page.get_by_role("button", name="Send").click()

    def check(answer: Any) -> None:
        text = answer.locator(".answer-text")
        expect(text.locator("strong")).to_have_text("Visitors")
        expect(text.locator("code")).to_have_text("badge --show [1]")  # a marker in code stays code
        link = text.get_by_role("link", name="the guide")
        expect(link).to_have_attribute("target", "_blank")
        expect(link).to_have_attribute("rel", "noopener noreferrer")
        expect(text.get_by_role("button")).to_have_text(["[1]"])  # two sentences in a row cite it: shown once
        sources = answer.locator(".citations")
        expect(sources.locator(":scope > strong")).to_have_text("Sources (1)")
        also = sources.locator("details.also-retrieved")
        expect(also.locator(":scope > summary")).to_have_text("Also retrieved, not cited (1)")
        expect(also.locator("details.citation summary")).to_contain_text("[2]")

    answer = page.locator(".msg.assistant[data-status=complete]")
    check(answer)
    expect(answer.locator(".thinking")).to_have_count(0)  # the wait is not shown once the answer is complete
    user.shot("23-chat-markdown-and-also-retrieved")
    page.get_by_role("link", name="+ New chat").click()
    page.get_by_role("link", name=re.compile("Markdown helper$")).click()  # the answer as stored
    check(page.locator(".msg.assistant[data-status=complete]"))

    llm.script = Script(stall_after=0)  # the model thinks, and thinks
    page.get_by_label("Your question").fill("What about badges at night?")
    page.get_by_role("button", name="Send").click()
    thinking = page.locator(".msg.assistant[aria-busy=true] .thinking")
    expect(thinking).to_have_text(re.compile(r"^thinking… [1-9]\d*\.\d s$"), timeout=10_000)
    assert user.dialogs == []
    assert user.close() == []


def test_sentences_no_source_supports_are_folded_apart_from_the_answer_openai_standin(
    platform: str, browser: Any, llm: OpenAIStandin
) -> None:
    """A model sentence resting on no passage is not in the answer; the answer says how many were left out and,
    folded, why, never what they said: the server sends a reason, not the words, which may repeat the agent's
    confidential system prompt (#26). The stand-in speaks OpenAI's wire format."""
    from playwright.sync_api import expect

    setup = Api(platform)
    collection = setup.collection("Grounded_docs")
    setup.embed(collection, [setup.document("parking.md", b"# Parking\n\nVisitors park in the north lot.\n")])
    agent = setup.agent("Grounded helper", llm_provider="openai", llm_model="standin")
    setup.assign(agent, collection)
    llm.script = Script(tokens=("Visitors park in the north", " lot. Parking is free on", " Sundays for everyone."))

    user = Console(browser, platform)
    page = user.page
    user.sign_in("nora")
    page.locator("#agent-list li", has_text="Grounded helper").get_by_role("button", name="Start chat").click()
    page.get_by_label("Your question").fill("Where do visitors park?")
    page.get_by_role("button", name="Send").click()

    answer = page.locator(".msg.assistant[data-status=complete]")
    expect(answer.locator(".answer-text")).to_contain_text("Visitors park in the north lot.")
    expect(answer.locator(".answer-text")).not_to_contain_text("Sundays")
    left_out = answer.locator("details.unsupported")
    expect(left_out.locator("summary")).to_have_text("1 sentence left out")
    expect(left_out.locator("li")).to_have_text(["Resting on no source: 1"])
    expect(answer).not_to_contain_text("Sundays")
    assert user.dialogs == []
    assert user.close() == []


# Issue #29: what a new user hits in the console. Each test below failed before its fix.

# A long policy: the sentence an answer quotes sits in the middle, far from the passage's first and last words.
SECURITY = "# Visitors\n\n" + " ".join(
    [f"Visitor rule {n}: visitors at entrance {n} sign the visitor book before they enter." for n in range(1, 6)]
    + ["Visitors must wear a red badge at all times.", "Badges go back to reception before leaving."]
    + [f"Visitor rule {n}: visitors at entrance {n} are met by a guard who checks their papers." for n in range(6, 11)]
)


def test_the_add_documents_box_marks_what_the_collection_holds_clears_and_shows_recent_jobs(
    platform: str, browser: Any
) -> None:
    """#29 item 4: a document the collection holds is marked in the "Add documents" box; the boxes clear once the
    job starts; the job card lists the earlier jobs under the one it follows; a running job says which document is
    at which stage with its chunk count (chonkit's job items carry no count of chunks embedded so far)."""
    from playwright.sync_api import expect

    setup = Api(platform)
    collection = setup.collection("Add_docs")
    long_text = "# Long\n\n" + " ".join(
        f"Sentence {n} of the long document talks about shelf {n} and the boxes stored on it." for n in range(1200)
    )
    held, _ = setup.documents({"held.md": b"# Held\n\nAlready in the collection.\n", "fresh.md": long_text.encode()})
    setup.embed(collection, [held])

    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("adder", admin=True)
    page.goto(f"{platform}/#/collections/{collection['id']}")
    box = page.locator("form", has=page.get_by_role("heading", name="Add documents"))
    expect(box.locator("label", has_text="held.md")).to_contain_text("in this collection")
    expect(box.locator("label", has_text="fresh.md")).not_to_contain_text("in this collection")
    fresh_box = box.get_by_role("checkbox", name=re.compile(r"^fresh\.md"))
    fresh_box.check()
    box.get_by_role("button", name="Embed selected documents").click()
    expect(page.get_by_text("Job started for 1 document(s).")).to_be_visible()
    expect(fresh_box).not_to_be_checked()
    jobs = page.locator("section[aria-labelledby=job-title]")
    expect(jobs.get_by_text(re.compile(r"fresh\.md, embedding \d+ chunks"))).to_be_visible()
    expect(page.locator("progress[data-job-status=done]")).to_be_attached()
    expect(box.locator("label", has_text="fresh.md")).to_contain_text("in this collection")
    earlier = jobs.locator(".recent-jobs li")
    expect(earlier).to_have_count(1)
    expect(earlier.first).to_contain_text("Embedding job")
    expect(earlier.first).to_contain_text("1 of 1 finished")
    admin.shot("25-add-documents-marked")
    assert admin.close() == []


def test_a_citation_folds_its_passage_highlights_what_the_answer_quotes_and_each_marker_shows_once_openai_standin(
    platform: str, browser: Any, llm: OpenAIStandin
) -> None:
    """#29 item 5: the answer's two consecutive sentences citing [1] show one marker; source 1 opens folded to the
    sentences the answer quotes from it, highlighted, with the whole passage one click away; no fused-rank score."""
    from playwright.sync_api import expect

    setup = Api(platform)
    collection = setup.collection("Fold_docs")
    setup.embed(collection, [setup.document("security.md", SECURITY.encode())])
    agent = setup.agent("Security helper", llm_provider="openai", llm_model="standin")
    setup.assign(agent, collection)
    llm.script = Script(
        tokens=("Visitors must wear a red badge at all times [1]. ", "Badges go back to reception before leaving [1].")
    )

    user = Console(browser, platform)
    page = user.page
    user.sign_in("olga")
    page.locator("#agent-list li", has_text="Security helper").get_by_role("button", name="Start chat").click()
    page.get_by_label("Your question").fill("What must visitors do with their badges?")
    page.get_by_role("button", name="Send").click()

    def check(answer: Any) -> None:
        text = answer.locator(".answer-text")
        expect(text).to_have_text(
            "Visitors must wear a red badge at all times. Badges go back to reception before leaving [1]."
        )
        expect(text.get_by_role("button")).to_have_text(["[1]"])
        text.get_by_role("button", name=re.compile("^Source 1: ")).click()
        source = answer.locator("details[data-citation='1']")
        expect(source.locator("mark")).to_have_text(
            ["Visitors must wear a red badge at all times.", "Badges go back to reception before leaving."]
        )
        passage = source.locator(".passage")
        expect(passage).to_contain_text("Visitor rule 5:")  # the sentence before, for context
        expect(passage).to_contain_text("Visitor rule 6:")  # and after
        expect(passage).not_to_contain_text("Visitor rule 1:")  # folded away
        expect(source).not_to_contain_text("score")
        source.get_by_role("button", name="Show the whole passage").click()
        expect(passage).to_contain_text("Visitor rule 1:")
        expect(passage).to_contain_text("Visitor rule 10:")

    check(page.locator(".msg.assistant[data-status=complete]"))
    user.shot("26-citation-folded")
    page.get_by_role("link", name="+ New chat").click()
    page.get_by_role("link", name=re.compile("Security helper$")).click()  # the answer as stored
    check(page.locator(".msg.assistant[data-status=complete]"))
    assert user.close() == []


def test_a_decline_in_a_follow_up_reads_like_a_first_turn_decline_openai_standin(
    platform: str, browser: Any, llm: OpenAIStandin
) -> None:
    """#29 item 6: a follow-up the documents do not answer (passages were found and the model declined, so it
    cites none of them) shows the same plain "No sources" note as a first-turn decline: no warning that it cites
    none of its passages, and no "Also retrieved, not cited"."""
    from playwright.sync_api import expect

    setup = Api(platform)
    collection = setup.collection("Decline_docs")
    parking = b"# Parking\n\nVisitors park in the north lot. Staff park in the south garage.\n"
    setup.embed(collection, [setup.document("parking-rules.md", parking)])
    agent = setup.agent("Parking helper", llm_provider="openai", llm_model="standin")
    setup.assign(agent, collection)
    llm.script = Script(tokens=("Visitors park in the north lot [1].",))

    user = Console(browser, platform)
    page = user.page
    user.sign_in("paul")
    page.locator("#agent-list li", has_text="Parking helper").get_by_role("button", name="Start chat").click()
    page.get_by_label("Your question").fill("Where do visitors park?")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".msg.assistant[data-status=complete]")).to_have_count(1)
    llm.script = Script(tokens=("The documents do not say where visitors park bicycles.",))
    page.get_by_label("Your question").fill("Where do visitors park bicycles?")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".msg.assistant[data-status=complete]")).to_have_count(2)
    chats = httpx.get(f"{platform}/kappi/chats", headers=_bearer(platform, "paul")).json()
    stored = httpx.get(f"{platform}/kappi/chats/{chats[0]['id']}", headers=_bearer(platform, "paul")).json()
    declined = stored["messages"][-1]
    assert (declined["citations"], len(declined["also_retrieved"]) > 0) == ([], True), declined  # the case itself

    def check(answer: Any) -> None:
        expect(answer.locator(".no-sources")).to_have_text(re.compile("^No sources: "))
        expect(answer.locator("details.also-retrieved")).to_have_count(0)
        expect(answer).not_to_contain_text("cites none")

    check(page.locator(".msg.assistant[data-status=complete]").last)
    user.shot("27-follow-up-decline")
    page.get_by_role("link", name="+ New chat").click()
    page.get_by_role("link", name=re.compile("Parking helper$")).click()
    check(page.locator(".msg.assistant[data-status=complete]").last)
    assert user.close() == []


def test_the_config_form_waits_for_the_saved_config_before_it_can_be_changed_or_saved(
    platform: str, browser: Any
) -> None:
    """A strategy chosen, or Save pressed, before the saved config arrived was overwritten by it (the form's
    defaults saved over it, for Save): a CI run chose "fixed", then the late config hid its fields again. The
    controls now wait for the config; here its response is held back until the test lets it go."""
    from playwright.sync_api import Route, expect

    setup = Api(platform)
    setup.document("held-config.md", b"# Held\n\nA document whose config arrives late.\n")
    admin = Console(browser, platform, width=1366, height=860)
    page = admin.page
    admin.sign_in("waiter", admin=True)
    nav(page, "Documents")
    held: list[Route] = []

    def hold(route: Route) -> None:
        held.append(route)

    page.route("**/documents/*/config", hold)
    page.get_by_role("button", name="Preview held-config.md").click()
    form = page.get_by_role("form", name="Parse and chunk config")
    expect(form).to_be_visible()
    while not held:
        page.wait_for_timeout(20)

    for control in (
        form.get_by_label("Chunking strategy"),
        form.get_by_label("Text recognition (OCR)"),
        form.get_by_role("button", name="Save config"),
        form.get_by_role("button", name="Preview chunks with this config"),
    ):
        expect(control).to_be_disabled()
    held[0].continue_()
    page.unroute("**/documents/*/config")
    expect(form.get_by_label("Chunking strategy")).to_be_enabled()
    expect(form.get_by_role("button", name="Save config")).to_be_enabled()


def test_a_document_preview_opens_where_the_user_is_and_its_chunk_config_is_a_form(platform: str, browser: Any) -> None:
    """#29 item 7: with a long document list the preview opens at the top of the list's place (the list set aside,
    one click brings it back), not below the whole list; the chunk configuration is a form with exactly the fields
    and defaults of chonkit's chunk config structs, and the raw JSON is one click away."""
    import msgspec
    from playwright.sync_api import expect

    from chonkit.document.chunking.config import FixedChunking, ParentChildChunking, StructureChunking

    setup = Api(platform)
    setup.documents(
        {f"shelf-{n:02}.txt": f"Shelf {n} holds the boxes of year {2000 + n}.\n".encode() for n in range(20)}
    )
    document = setup.document("form-config.md", b"# Form\n\nA document whose chunking is set in a form.\n")
    admin = Console(browser, platform, width=1366, height=860)
    page = admin.page
    admin.sign_in("previewer", admin=True)
    nav(page, "Documents")
    page.get_by_role("button", name="Preview shelf-00.txt").click()
    heading = page.get_by_role("heading", name="shelf-00.txt", level=2)
    expect(heading).to_be_in_viewport()
    top = heading.evaluate("(e) => e.getBoundingClientRect().top + window.scrollY")
    assert top < 860, top  # within the page's first screen, not below every document
    page.get_by_role("button", name="← All documents").click()
    expect(page.get_by_role("button", name="Preview shelf-00.txt")).to_be_focused()

    page.get_by_role("button", name="Preview form-config.md").click()
    form = page.get_by_role("form", name="Parse and chunk config")
    strategy = form.get_by_label("Chunking strategy")
    expect(strategy).to_have_value("")  # nothing saved: the default
    shown = (
        "(form) => [...form.querySelectorAll('fieldset.chunking [name]')]"
        ".filter((e) => e.name !== 'strategy' && e.offsetParent !== null)"
        ".map((e) => [e.name, e.type === 'checkbox' ? e.checked : e.value])"
    )
    for variant in (FixedChunking, StructureChunking, ParentChildChunking):
        tag = variant.__struct_config__.tag
        strategy.select_option(str(tag))
        defaults = [
            [f.name, f.default if isinstance(f.default, bool) else str(f.default)]
            for f in msgspec.structs.fields(variant)
        ]
        assert sorted(form.evaluate(shown)) == sorted(defaults), tag
    strategy.select_option("fixed")
    form.get_by_label("Size", exact=True).fill("200")
    form.get_by_label("Overlap", exact=True).fill("20")
    form.get_by_label("Repeat headings").uncheck()
    form.get_by_role("button", name="Save config").click()
    expect(page.get_by_text("Saved: collections use it")).to_be_visible()
    saved = httpx.get(f"{platform}/chonkit/documents/{document['id']}/config", headers=setup.headers).json()
    assert saved["chunk"] == {
        "strategy": "fixed",
        "unit": "tokens",
        "size": 200,
        "overlap": 20,
        "snap_to_sentences": True,
        "repeat_headings": False,
        "snap_to_headings": True,
    }
    admin.shot("28-document-config-form")
    form.get_by_role("button", name="Edit as JSON").click()
    expect(page.get_by_label("Parse and chunk config (JSON)")).to_have_value(re.compile('"size": 200'))
    assert admin.close() == []


def test_status_colours_tell_the_truth(platform: str, browser: Any, tmp_path: Path) -> None:
    """#29 item 8: an upload that created nothing is not reported in green, and a collection whose model cannot
    be changed (no other model configured) says so in plain grey, without an empty picker and a dead button."""
    from playwright.sync_api import expect

    twice = tmp_path / "twice.txt"
    twice.write_text("The same words twice.\n", encoding="utf-8")
    collection = Api(platform).collection("Colour_docs")
    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("colourist", admin=True)
    nav(page, "Documents")
    page.locator("#upload-files").set_input_files(twice)
    message = page.locator("section[aria-labelledby=upload-title] p[role=status]")
    expect(message).to_have_text("1 created, 0 not created.")
    expect(message).to_have_class("ok")
    page.locator("#upload-files").set_input_files(twice)
    expect(message).to_have_text("0 created, 1 not created.")
    expect(message).not_to_have_class(re.compile(r"\bok\b"))

    page.goto(f"{platform}/#/collections/{collection['id']}")
    model = page.locator("form", has=page.get_by_role("heading", name="Embedding model"))
    note = model.get_by_text("No other embedding model is configured.")
    expect(note).to_be_visible()
    expect(note).not_to_have_class(re.compile(r"\bok\b"))
    expect(model.get_by_label("New model")).to_be_hidden()
    expect(model.get_by_role("button", name="Change embedding model")).to_be_hidden()
    errors = admin.close()
    assert all("409" in e for e in errors), errors  # the duplicate upload's refusal, logged by Chromium


def test_the_chat_sidebar_keeps_no_empty_chat_one_set_of_buttons_and_no_instant_wait(
    platform: str, browser: Any
) -> None:
    """#29 item 9: "Start chat" makes no chat until something is asked; Rename and Delete show on the selected
    chat only; an answer that came at once shows no "first words after 0.0 s", and no wait label stays after."""
    from playwright.sync_api import expect

    Api(platform).agent("Sidebar helper")
    user = Console(browser, platform)
    page = user.page
    user.sign_in("sidney")
    start = page.locator("#agent-list li", has_text="Sidebar helper").get_by_role("button", name="Start chat")
    start.click()
    expect(page.get_by_text("Ask your first question below.")).to_be_visible()
    nav(page, "Chat")
    expect(page.get_by_text("No chats yet. Start one with an agent.")).to_be_visible()
    assert httpx.get(f"{platform}/kappi/chats", headers=_bearer(platform, "sidney")).json() == []

    for question in ("What is on the menu today?", "Where is the canteen?"):
        nav(page, "Chat")
        start.click()
        page.get_by_label("Your question").fill(question)
        page.get_by_role("button", name="Send").click()
        answer = page.locator(".msg.assistant[data-status=complete]")
        expect(answer).to_be_visible()
        expect(answer.locator(".thinking")).to_have_count(0)
        expect(page.get_by_role("heading", name=f"{question} Sidebar helper", level=1)).to_be_visible()
    history = page.locator("ul.history")
    expect(history.get_by_role("link")).to_have_count(2)
    expect(history.get_by_role("button", name=re.compile("^Rename "))).to_have_count(1)
    expect(history.get_by_role("button", name=re.compile("^Delete "))).to_have_count(1)
    expect(history.get_by_role("button", name="Rename Where is the canteen?")).to_be_visible()
    user.shot("29-chat-sidebar")
    nav(page, "Chat")
    expect(page.locator("ul.history").get_by_role("button")).to_have_count(0)
    assert user.close() == []


def test_the_layout_shows_one_upload_control_labelled_phone_tables_and_wide_fields(platform: str, browser: Any) -> None:
    """#29 item 10: the upload zone shows its label and not the browser's own file control; a long model name fits
    the agent's model field; the search bench's query box is wider than its number boxes; at phone width each
    table cell says which column it is."""
    from playwright.sync_api import expect

    setup = Api(platform)
    collection = setup.collection("Layout_docs", groups=("hr",))
    agent = setup.agent("Layout agent")
    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("layouter", admin=True)
    nav(page, "Documents")
    expect(page.locator(".drop label", has_text="choose files to upload")).to_be_visible()
    box = page.locator("#upload-files").bounding_box()
    assert box is None or box["width"] <= 1, box

    page.goto(f"{platform}/#/agents/{agent['id']}")
    model = page.get_by_label("Model", exact=True)
    model.fill("qwen2.5-coder-0.5b-instruct-q4_k_m")
    assert model.evaluate("(e) => e.scrollWidth <= e.clientWidth"), model.evaluate(
        "(e) => [e.scrollWidth, e.clientWidth]"
    )

    page.goto(f"{platform}/#/collections/{collection['id']}")
    bench = page.locator("form", has=page.get_by_role("heading", name="Search test bench"))
    query, results = bench.get_by_label("Query").bounding_box(), bench.get_by_label("Results").bounding_box()
    assert query is not None
    assert results is not None
    assert query["width"] > 2 * results["width"], (query, results)
    assert admin.close() == []

    phone = Console(browser, platform, **PHONE)
    page = phone.page
    phone.sign_in("pocket-layouter", admin=True)
    nav(page, "Collections")
    cells = page.locator("tr", has=page.get_by_role("link", name="Layout_docs", exact=True)).locator("td")
    expect(cells).to_have_count(5)
    labels = cells.evaluate_all(
        "(cells) => cells.map((c) => [c.dataset.label, getComputedStyle(c, '::before').content !== 'none'])"
    )
    assert labels == [[name, True] for name in ["Name", "Store", "Model", "Groups", "Documents"]], labels
    assert phone.overflow() == 0
    page.goto(f"{platform}/#/agents/{agent['id']}")  # the agent's tables too
    expect(page.locator("tr[data-version='1'] td").first).to_have_attribute("data-label", "Version")
    assert phone.close() == []


def test_the_first_answer_is_a_marked_quote_and_the_models_checked_sentences_follow_openai_standin(
    platform: str, browser: Any, llm: OpenAIStandin
) -> None:
    """#31 item 2: while the model reads its prompt, the answer's first words are extractive's quote of the passages,
    marked as preliminary (its quote highlighted in its source); the model's sentences then arrive below it, each
    once grounding has checked it, and when the model's answer is complete it replaces the quote, ending with it
    unless it already says it. The stand-in
    stalls after its second sentence, so the page is seen with the quote and the model's first sentence and
    nothing more; a stall before its first token shows the quote alone."""
    from playwright.sync_api import expect

    setup = Api(platform)
    collection = setup.collection("Preliminary_docs")
    setup.embed(collection, [setup.document("security.md", SECURITY.encode())])
    agent = setup.agent("Quick helper", llm_provider="openai", llm_model="standin")
    setup.assign(agent, collection)
    sentences = ("Visitors must wear a red badge at all times [1]. ", "Badges go back to reception before leaving [1].")
    question = "What must visitors do with their badges?"

    def ask(name: str, script: Script) -> tuple[Console, Any]:
        llm.script = script
        user = Console(browser, platform)
        user.sign_in(name)
        user.page.locator("#agent-list li", has_text="Quick helper").get_by_role("button", name="Start chat").click()
        user.page.get_by_label("Your question").fill(question)
        user.page.get_by_role("button", name="Send").click()
        return user, user.page.locator(".msg.assistant").last

    # The model has written nothing yet: the quote is there, marked, and its source highlights it.
    user, answer = ask("pia", Script(tokens=sentences, stall_after=0))
    preliminary = answer.locator(".preliminary")
    expect(preliminary.locator(".preliminary-label")).to_have_text(re.compile("^Preliminary answer, quoted from"))
    expect(preliminary.locator(".preliminary-text")).to_contain_text("Visitors must wear a red badge at all times.")
    expect(answer).to_have_attribute("aria-busy", "true")
    expect(answer.locator(".answer-text")).to_have_text("")
    expect(preliminary.locator(".preliminary-label")).to_contain_text("The model is writing its own")
    assert user.close() == []

    # The model's first sentence has passed grounding (its second is held until the sentence after it shows it
    # ended): it is shown below the quote, which says the model's answer follows.
    user, answer = ask("pia", Script(tokens=(*sentences, " They are kept in the drawer."), stall_after=2))
    expect(answer.locator(".answer-text")).to_have_text("Visitors must wear a red badge at all times [1].")
    expect(answer.locator(".preliminary .preliminary-label")).to_contain_text("The model's answer follows below")
    expect(answer.locator(".preliminary .preliminary-text")).to_contain_text("Visitors must wear a red badge")
    expect(answer).to_have_attribute("aria-busy", "true")
    user.shot("31-preliminary-then-model")
    assert user.close() == []

    # Complete: the model's answer stands alone, as stored.
    user, answer = ask("pia", Script(tokens=sentences))
    expect(answer).to_have_attribute("data-status", "complete")
    expect(answer).to_have_attribute("data-preliminary", "replaced")
    expect(answer.locator(".preliminary")).to_have_count(0)
    expect(answer.locator(".answer-text")).to_have_text(
        "Visitors must wear a red badge at all times. Badges go back to reception before leaving [1]."
    )
    assert user.close() == []

    # A model answer that leaves out what the quote says ends with the quote, as a block quote under its lead.
    user, answer = ask("pia", Script(tokens=("Visitors wear a badge [1].",)))
    expect(answer).to_have_attribute("data-status", "complete")
    expect(answer.locator(".answer-text p").first).to_have_text("Visitors wear a badge [1].")
    expect(answer.locator(".answer-text")).to_contain_text("From the sources:")
    expect(answer.locator(".answer-text blockquote")).to_contain_text("Visitors must wear a red badge at all times.")
    user.shot("31-answer-then-quote")
    assert user.close() == []
