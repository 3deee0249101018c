"""The extractive fallback presents as findings only sentences that answer: whole, prose, holding the question's
key terms — or says plainly that nothing does (issue #17 item 5, from a new user's session on real manuals)."""

from __future__ import annotations

from kappi.llm import Passage
from kappi.llm.extractive import FOUND, NOTHING_MATCHES, extract_answer, key_terms

GLOB_QUESTION = "What is the default weight of a glob pattern, and what is the maximum?"
# Debian's libtasn1-doc (libtasn1.pdf, sections 2.4 and 4), as chunked: what the user who could not read the MIME
# specification was answered with.
ASN1_LIMITS = (
    "Some functions require an errorDescription argument of type char *, pointing to a pre-allocated buffer of "
    "at least ASN1_MAX_ERROR_DESCRIPTION_SIZE bytes size. ASN1_MAX_NAME_SIZE is the maximum number of "
    "characters allowed for an ASN.1 identifier."
)
ASN1_DER = (
    "Creates the DER encoding of the provided length value. The der buffer must have enough room for the output. "
    "The maximum length this function will encode is ASN1_MAX_LENGTH_SIZE."
)
# Debian's shared-mime-info (shared-mime-info-spec.html, "Recommended checking order" and the glob element)
MIME_GLOBS = (
    "Glob weights\n\n"
    "There is also an optional weight attribute which is used when resolving conflicts with other glob matches. "
    "The default weight value is 50, and the maximum is 100."
)


def passage(citation: int, text: str, score: float = 0.5) -> Passage:
    return Passage(
        collection="Manuals",
        instruction=None,
        document_id=f"doc-{citation}",
        document_name="manual",
        page_start=None,
        page_end=None,
        text=text,
        score=score,
        citation=citation,
    )


def test_asn1_size_limits_do_not_answer_the_glob_weight_question_and_nothing_is_presented_as_found() -> None:
    """Regression: this answered "Here is what I found in your documents:" and two ASN.1 sentences, which
    share only "maximum" with the question."""
    pieces = extract_answer(GLOB_QUESTION, [passage(1, ASN1_LIMITS, 0.17), passage(2, ASN1_DER, 0.12)])
    assert pieces == [NOTHING_MATCHES]
    assert not any(piece.startswith(FOUND) for piece in pieces)


def test_the_sentence_that_answers_is_quoted_whole_and_the_off_topic_passages_are_not_padded_in() -> None:
    passages = [passage(1, ASN1_LIMITS, 0.5), passage(2, MIME_GLOBS, 0.4), passage(3, ASN1_DER, 0.3)]
    assert extract_answer(GLOB_QUESTION, passages) == [
        FOUND,
        "\n- Glob weights: The default weight value is 50, and the maximum is 100. [2]",
    ]  # the heading holds key terms ("glob", "weight"): it says what the quote is about


def test_a_chunk_cut_mid_sentence_is_not_quoted_from_its_broken_opening() -> None:
    """Regression: an answer quoted "tells you which versions of glibc you need", the tail of a sentence a chunk
    boundary had cut."""
    cut = "tells you which versions of glibc you need. The glibc version a binary needs is listed by objdump -T."
    assert extract_answer("Which glibc version does a binary need?", [passage(1, cut)]) == [
        FOUND,
        "\n- The glibc version a binary needs is listed by objdump -T. [1]",
    ]
    only_the_fragment_matches = "tells you which versions of glibc you need. Static binaries avoid this."
    assert extract_answer("Which versions of glibc?", [passage(1, only_the_fragment_matches)]) == [NOTHING_MATCHES]


def test_prose_that_answers_is_preferred_to_a_heading_and_to_code_with_the_same_words() -> None:
    heading_first = passage(1, "Connection pool size\n\nThe pool size defaults to 10 connections per worker.")
    code = passage(2, "pool_size = int(env.get('POOL_SIZE', 10)); connect(pool_size=pool_size)", score=0.9)
    assert extract_answer("What is the connection pool size?", [code, heading_first]) == [
        FOUND,
        "\n- Connection pool size: The pool size defaults to 10 connections per worker. [1]",
    ]


def test_key_terms_leave_out_words_that_say_little_about_the_subject() -> None:
    assert key_terms("How do I use the VPN and what do I need to get?") == ["vpn"]
    assert key_terms(GLOB_QUESTION) == ["default", "weight", "glob", "pattern", "maximum"]
    assert key_terms("use it") == ["use"]  # nothing else left: the weak word is all the question has


# PostgreSQL 15's manual (Debian's postgresql-doc-15, runtime-config-*.html) as chonkit parses and chunks it: a
# setting's name heads its section, and its default is stated sentences after the one that repeats the question.
BGWRITER = (
    "bgwriter_delay (integer)\n\n"
    "Specifies the delay between activity rounds for the background writer. In each round the writer issues "
    "writes for some number of dirty buffers (controllable by the following parameters). It then sleeps for the "
    "length of bgwriter_delay, and repeats. If this value is specified without units, it is taken as "
    "milliseconds. The default is 200 milliseconds (200ms)."
)
CONNECTIONS = (
    "max_connections (integer)\n\n"
    "Determines the maximum number of concurrent connections to the database server. The default is typically "
    "100 connections, but might be less if your kernel settings will not support it (as determined during initdb)."
    "\n\nsuperuser_reserved_connections (integer)\n\n"
    "Determines the number of connection \u201cslots\u201d that are reserved for connections by PostgreSQL "
    "superusers. At most max_connections connections can ever be active simultaneously.\n\n"
    "The default value is three connections. The value must be less than max_connections."
)
MEMORY = (
    "maintenance_work_mem (integer)\n\n"
    "Specifies the maximum amount of memory to be used by maintenance operations, such as VACUUM. "
    "It defaults to 64 megabytes (64MB). It's safe to set this value significantly larger than work_mem."
)


def test_a_settings_default_is_quoted_with_the_sentence_that_names_it_under_its_heading() -> None:
    """Regression (bench/answer_bench.py, #17): the answer quoted "Specifies the delay between activity rounds
    for the background writer." and stopped, one sentence short of the default it was asked for."""
    question = "What is the default delay between activity rounds of the background writer?"
    assert extract_answer(question, [passage(1, BGWRITER)]) == [
        FOUND,
        "\n- bgwriter_delay (integer): Specifies the delay between activity rounds for the background writer. … "
        "The default is 200 milliseconds (200ms). [1]",
    ]


def test_the_section_a_named_setting_heads_answers_not_one_that_mentions_it() -> None:
    """Regression: "What is the default value of max_connections?" was answered "The default value is three
    connections." — superuser_reserved_connections' default, whose section mentions max_connections."""
    pieces = extract_answer("What is the default value of max_connections in PostgreSQL?", [passage(1, CONNECTIONS)])
    assert pieces == [
        FOUND,
        "\n- max_connections (integer): The default is typically 100 connections, but might be less if your kernel "
        "settings will not support it (as determined during initdb). [1]",
    ]


def test_a_setting_no_passage_names_is_not_answered_with_another_settings_default() -> None:
    """Regression: asked for checkpoint_timeout's default, which no passage holds, it answered "The default
    value is three connections." ("default" and "value" are two of the question's three key terms)."""
    passages = [passage(1, CONNECTIONS), passage(2, BGWRITER), passage(3, MEMORY)]
    assert extract_answer("What is the default value of checkpoint_timeout in PostgreSQL?", passages) == [
        NOTHING_MATCHES
    ]
    # maintenance_work_mem's section mentions work_mem, but is about another setting: its default is not work_mem's
    assert extract_answer("What is the default value of work_mem?", [passage(3, MEMORY)]) == [NOTHING_MATCHES]
    assert extract_answer("What is the default value of maintenance_work_mem?", [passage(3, MEMORY)]) == [
        FOUND,
        "\n- maintenance_work_mem (integer): It defaults to 64 megabytes (64MB). It's safe to set this value "
        "significantly larger than work_mem. [3]",
    ]  # the second sentence holds "value", the one term the first lacks


KEEPALIVES = (
    "tcp_keepalives_idle (integer)\n\n"
    "Specifies the amount of time with no network activity after which the operating system should send a TCP "
    "keepalive message to the client. A value of 0 (the default) selects the operating system's default. This "
    "parameter is supported only on systems that support TCP_KEEPIDLE or an equivalent socket option, and on "
    "Windows; on other systems, it must be zero.\n\n"
    "Note\n\n"
    "On Windows, setting a value of 0 will set this parameter to 2 hours, since Windows does not provide a way to "
    "read the system default value.\n\n"
    "tcp_keepalives_interval (integer)\n\n"
    "Specifies the amount of time after which a TCP keepalive message that has not been acknowledged by the client "
    "should be retransmitted."
)


def test_a_note_under_a_setting_belongs_to_that_settings_section() -> None:
    """Regression (bench/answer_bench.py, #17): the "Note" heading opened a section of its own, which does not name
    tcp_keepalives_idle, so the note that answers was passed over for a sentence that merely says "Windows"."""
    question = "On Windows, what does setting tcp_keepalives_idle to 0 set it to?"
    assert extract_answer(question, [passage(1, KEEPALIVES)]) == [
        FOUND,
        "\n- tcp_keepalives_idle (integer): On Windows, setting a value of 0 will set this parameter to 2 hours, "
        "since Windows does not provide a way to read the system default value. [1]",
    ]


SECRETS = (
    "secrets — Generate secure random numbers for managing secrets\n\n"
    "New in version 3.6.\n\n"
    "Source code: Lib/secrets.py\n\n"
    "The secrets module is used for generating cryptographically strong random numbers suitable for managing "
    "data such as passwords, account authentication, security tokens, and related secrets.\n\n"
    "Copyright\n\n"
    "This page is licensed under the Python Software Foundation License Version 2."
)


def test_new_in_version_answers_when_something_was_added() -> None:
    """Regression (bench/answer_bench.py, #17): asked in which version the secrets module was added, it quoted the
    licence's "Version 2": "New in version 3.6." shares only "version" with the question."""
    question = "In which Python version was the secrets module added?"
    pieces = extract_answer(question, [passage(1, SECRETS)])
    assert pieces[0] == FOUND
    assert "New in version 3.6." in pieces[1]
    assert "License" not in pieces[1]
