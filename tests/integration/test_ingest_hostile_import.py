"""Hostile files in a real import: one bad file or line never stops the others, and is not met again next run."""

from __future__ import annotations

import json
import os
import random
import secrets
from pathlib import Path

import psycopg
import pytest
from ghostmem import GhostMem
from ghostmem.errors import InvalidArgument
from ghostmem.limits import STORED_ID_BYTES
from ghostmem.records import MessageRecord
from psycopg import sql
from support.conversations import stored
from support.transcripts import cc, jsonl

DEEP = 100_000


def test_hostile_files_are_reported_once_and_every_other_file_imports(gm: GhostMem, tmp_path: Path) -> None:
    folder = tmp_path / "projects"
    first = jsonl(folder / "a" / "s1.jsonl", [cc("user", "u1", None, "first session", sessionId="s1")])
    with first.open("ab") as fh:  # a line nested 100,000 deep, then one of the wrong shape, then a good one
        fh.write(
            b'{"type": "user", "uuid": "x", "sessionId": "s1", "message": '
            + b"[" * DEEP
            + b"]" * DEEP
            + b"}\n"
        )
        fh.write(
            json.dumps({**cc("assistant", "a1", "u1", "x", sessionId="s1"), "message": 5}).encode() + b"\n"
        )
        fh.write(json.dumps(cc("user", "u2", "u1", "after the bad lines", sessionId="s1")).encode() + b"\n")
    jsonl(folder / "b" / "s2.jsonl", [cc("user", "v1", None, "second session", sessionId="s2")])
    if hasattr(os, "mkfifo"):
        os.mkfifo(folder / "b" / "pipe.jsonl")
    (folder / "b" / "broken.json").write_bytes(
        b'[{"conv_id": "ok", "messages": [{"role": "user", "text": "fine"}]}, {"conv_id": "deep", "messages": '
        + b"[" * DEEP
        + b"]" * DEEP
        + b"}]"
    )
    report = gm.import_paths([folder], embed=False)
    assert report.ok
    assert stored(gm) == {"s1": 2, "s2": 1, "ok": 1}
    lines = sorted(f"{Path(p.path).name}:{p.line}: {p.reason.split(' (')[0]}" for p in report.problems)
    expected = [
        "broken.json:1: conversation #1: nested more than 100 levels deep; skipped",
        "s1.jsonl:2: nested more than 100 levels deep; skipped",
        "s1.jsonl:3: unexpected shape",
    ]
    if hasattr(os, "mkfifo"):
        expected.insert(1, "pipe.jsonl:0: a FIFO, not a regular file; skipped")
    assert lines == expected
    again = gm.import_paths([folder], embed=False)  # the files' state was saved: nothing fails a second time
    assert [p.reason for p in again.problems] == (
        ["a FIFO, not a regular file; skipped"] if hasattr(os, "mkfifo") else []
    )
    assert again.files_unchanged == 3 and again.files_read == 0


def test_text_postgres_cannot_hold_is_cleaned_and_empty_conversations_are_not_stored(
    gm: GhostMem, tmp_path: Path
) -> None:
    conv = {"conv_id": "odd", "title": "nul\x00 and \ud800 lone", "project": "p\x00",
            "meta": {"nan": float("nan"), "k\x00": ["\udfff"]},
            "messages": [{"role": "user", "text": "a\x00b \ud83d", "speaker": "x\x00", "meta": {"inf": float("inf")}}]}  # fmt: skip
    empty = {"conv_id": "empty", "messages": []}
    path = tmp_path / "odd.jsonl"
    path.write_text(json.dumps(conv) + "\n" + json.dumps(empty) + "\n")  # json writes NaN and lone surrogates
    report = gm.import_paths([path], embed=False)
    assert report.ok and not report.problems
    assert stored(gm) == {"odd": 1}
    with gm.connection() as conn:
        row = conn.execute(
            "SELECT c.title, c.project, c.meta, m.text, m.speaker, m.meta FROM ghostmem.conversations c"
            " JOIN ghostmem.messages m USING (owner, tier, conv_id) WHERE c.owner = %s",
            (gm.owner,),
        ).fetchone()
    assert row is not None
    title, project, meta, text, speaker, msg_meta = row
    assert (title, project, text, speaker) == ("nul and \ufffd lone", "p", "ab \ufffd", "x")
    assert meta["nan"] is None and meta["k"] == ["\ufffd"] and msg_meta == {"inf": None}


def test_a_deeply_nested_langchain_row_is_one_problem(gm: GhostMem, pg_dsn: str) -> None:
    table = "hostile_history_" + gm.owner.replace("-", "_")
    session = "3f2c1a4e-1b2c-4d5e-8f90-0000000000aa"
    good = [{"type": "human", "data": {"content": "first"}}, {"type": "ai", "data": {"content": "second"}}]
    deep = '{"type": "human", "data": {"content": ' + "[" * 3000 + "]" * 3000 + "}}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {} (id serial PRIMARY KEY, session_id uuid NOT NULL, message jsonb NOT NULL,"
                    " created_at timestamptz NOT NULL DEFAULT now())").format(sql.Identifier(table))
        )  # fmt: skip
        for message in (json.dumps(good[0]), deep, json.dumps(good[1])):
            conn.execute(
                sql.SQL("INSERT INTO {} (session_id, message) VALUES (%s, %s::jsonb)").format(
                    sql.Identifier(table)
                ),
                (session, message),
            )
    report = gm.import_langchain_table(pg_dsn, table, embed=False)
    assert [p.reason for p in report.problems] == ["row 2: nested more than 100 levels deep; skipped"]
    assert stored(gm) == {session: 2}


def test_ids_too_long_for_the_database_are_one_problem_each(gm: GhostMem, tmp_path: Path) -> None:
    huge = secrets.token_urlsafe(20_000)  # incompressible: no btree index entry holds it
    convs = [
        {"conv_id": huge, "messages": [{"role": "user", "text": "refused"}]},
        {"conv_id": "fine", "messages": [{"role": "user", "text": "kept"}]},
    ]
    (tmp_path / "g.jsonl").write_text("".join(json.dumps(c) + "\n" for c in convs))
    jsonl(tmp_path / "p" / "s1.jsonl", [{"type": "summary", "summary": "a title", "leafUuid": huge},
                                        cc("user", "u1", None, "session kept")])  # fmt: skip
    report = gm.import_paths([tmp_path], embed=False)
    assert stored(gm) == {"fine": 1, "s1": 1}
    reasons = sorted(p.reason.split(":")[0] for p in report.problems)
    assert reasons == [
        f"a summary names its message by an id of {len(huge):,} bytes, longer than the 1,000 bytes ghostmem keeps of"
        " an id; skipped",
        f"conversation {huge[:80]}",
    ]


def test_ids_longer_than_ghostmem_keeps_are_refused_in_one_sentence_everywhere(
    gm: GhostMem, tmp_path: Path
) -> None:
    """A conversation id (or a message's) of more than STORED_ID_BYTES is refused before anything is written, as a
    problem naming it and the limit (an id of 2,660 bytes fitted some indexes and failed another with PostgreSQL's
    'index row size ... exceeds btree version 4 maximum 2704'); ids at the limit, multi-byte ones too, are stored and
    read back by get_conversation; live capture refuses an over-long id with the same sentence."""
    at_limit = "é" * (STORED_ID_BYTES // 2)  # 1,000 bytes, 500 characters
    over = {
        "byte over": "x" * (STORED_ID_BYTES + 1),
        "2,660 random": secrets.token_urlsafe(2_000)[:2_660],  # fitted 106's indexes, not 107's window index
        "multi-byte": "é" * (STORED_ID_BYTES // 2 + 1),
    }
    convs = [
        {"conv_id": at_limit, "messages": [{"id": "m" * STORED_ID_BYTES, "role": "user", "text": "kept"}]}
    ]
    convs += [{"conv_id": v, "messages": [{"role": "user", "text": "refused"}]} for v in over.values()]
    convs.append(
        {"conv_id": "short", "messages": [{"id": "m" * 1_001, "role": "user", "text": "refused too"}]}
    )
    (tmp_path / "g.jsonl").write_text("".join(json.dumps(c) + "\n" for c in convs))
    report = gm.import_paths([tmp_path], embed=False)
    assert stored(gm) == {at_limit: 1}
    assert len(report.problems) == 4, report.render()
    for problem, size in zip(
        report.problems, [STORED_ID_BYTES + 1, 2_660, STORED_ID_BYTES + 2, 1_001], strict=True
    ):
        assert f"is {size:,} bytes, longer than the 1,000 bytes ghostmem keeps of an id" in problem.reason
        assert "index row size" not in problem.reason
    assert "the message id 'mmm" in report.problems[-1].reason
    assert [m.text for m in gm.get_conversation(at_limit).data.messages] == ["kept"]
    with pytest.raises(InvalidArgument, match=r"the conversation id 'xxx.*is 1,001 bytes, longer than"):
        gm.capture_append(
            over["byte over"], [MessageRecord(native_id="", role="user", text="live")], platform="langchain"
        )
    assert stored(gm) == {at_limit: 1}


def test_a_huge_claude_code_file_is_stored_whole_from_its_chunks(
    gm: GhostMem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ghostmem.ingest import claude_code

    monkeypatch.setattr(claude_code, "CHUNK_BYTES", 400)
    lines = [cc("user", "u0", None, "line 0")] + [
        cc("user", f"u{i}", f"u{i - 1}", f"line {i}") for i in range(1, 12)
    ]
    jsonl(
        tmp_path / "p" / "s1.jsonl",
        [*lines, {"type": "custom-title", "customTitle": "Named", "sessionId": "s1"}],
    )
    gm.import_paths([tmp_path], embed=False)
    gm.import_paths([tmp_path], embed=False)  # read again: nothing doubles
    with gm.connection() as conn:
        texts = [r[0] for r in conn.execute(
            "SELECT text FROM ghostmem.messages WHERE owner = %s ORDER BY seq", (gm.owner,))]  # fmt: skip
    assert texts == [f"line {i}" for i in range(12)]
    assert stored(gm) == {"s1": 12}
    with gm.connection() as conn:
        row = conn.execute(
            "SELECT title FROM ghostmem.conversations WHERE owner = %s", (gm.owner,)
        ).fetchone()
    assert row is not None and row[0] == "Named"


def test_words_too_long_for_the_owners_index_lose_no_conversation(gm: GhostMem, tmp_path: Path) -> None:
    """The lexical index keys every lexeme by its owner (17 bytes more): a word of 2,030 to 2,046 bytes (a signed
    URL, a hex dump) and a text of ~50,000 distinct CJK pairs each made that index refuse the whole conversation.
    Both are stored and found by their other words, and a query holding such a word is answered, not refused."""
    rng = random.Random(7)
    word = "ж" * 1020  # 2,040 bytes, within a query's 2,000 characters
    url = "https://bucket.example.com/" + secrets.token_hex(1010)
    cjk = " ".join(
        "".join(chr(0x4E00 + rng.randrange(3000)) for _ in range(20)) for _ in range(3000)
    )  # 57,000 pairs in 3,000 runs; its keyed lexemes pass 1 MB
    convs = [
        {"conv_id": "word", "messages": [{"role": "user", "text": f"zebrafinch {word} marmot"}]},
        {"conv_id": "url", "messages": [{"role": "user", "text": f"the walrus report lives at {url}"}]},
        {"conv_id": "cjk", "messages": [{"role": "user", "text": f"narwhal {cjk}"}]},
    ]
    (tmp_path / "g.jsonl").write_text("".join(json.dumps(c) + "\n" for c in convs))
    report = gm.import_paths([tmp_path], embed=False)
    assert report.problems == [] and stored(gm) == {"word": 1, "url": 1, "cjk": 1}
    found = {
        query: [r.conv_id for r in gm.search_personal_memory(query, mode="lexical").data.rows]
        for query in ("zebrafinch", "walrus", "narwhal", f"marmot {word}")
    }
    assert found == {
        "zebrafinch": ["word"],
        "walrus": ["url"],
        "narwhal": ["cjk"],
        f"marmot {word}": ["word"],
    }
