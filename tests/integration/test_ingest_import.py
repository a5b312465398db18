"""Importing into a real Postgres: idempotent, incremental, resumable, concurrent, private."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder
from ghostmem.cli import sample_exports
from ghostmem.ingest import ImportReport
from support.conversations import write_corpus
from support.transcripts import cc, jsonl

FIXTURES = sample_exports()


def counts(gm: GhostMem) -> tuple[int, int]:
    with gm.connection() as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM ghostmem.conversations WHERE owner = %s),"
            " (SELECT count(*) FROM ghostmem.messages WHERE owner = %s)",
            (gm.owner, gm.owner),
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def conversation(gm: GhostMem, conv_id: str) -> dict[str, Any]:
    with gm.connection() as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        row = cur.execute(
            "SELECT * FROM ghostmem.conversations WHERE owner = %s AND conv_id = %s", (gm.owner, conv_id)
        ).fetchone()
    assert row is not None, conv_id
    return row


def test_fixtures_import_with_predicted_values_and_twice_adds_nothing(gm: GhostMem, tmp_path: Path) -> None:
    first = gm.import_paths([FIXTURES])
    assert first.ok and not first.problems
    assert first.conversations_new == 11 and first.files_read == 10
    spotter = conversation(gm, "55604662-cf2a-4331-851a-ec234028f8ca")
    assert spotter["title"] == "mix phx.server doesnt seem to start" and spotter["msg_count"] == 2
    assert spotter["project"] == "/home/marco/projects/spotter" and spotter["platform"] == "claude_code"
    tree = conversation(gm, "d5dc5307-6807-41a0-8b04-4acee626eeb7")
    assert (tree["title"], tree["msg_count"]) == ("Assist user with summary", 6)
    assert conversation(gm, "1db4c66e-b369-4e3a-96a9-6c16f8301ee8")["title"] == "Bash Command for OpenAI API"
    before = counts(gm)
    again = gm.import_paths([FIXTURES])
    assert (again.conversations_new, again.messages_new, again.files_read) == (0, 0, 0)
    assert again.files_unchanged == 10 and counts(gm) == before
    # a copy elsewhere (new paths, so every file is read) still adds and changes nothing — not even a row lock
    shutil.copytree(FIXTURES, tmp_path / "copy")
    versions = "SELECT array_agg(xmin::text || ':' || xmax::text ORDER BY id) FROM ghostmem.messages WHERE owner = %s"
    with gm.connection() as conn:
        untouched = conn.execute(versions, (gm.owner,)).fetchone()
    third = gm.import_paths([tmp_path / "copy"])
    with gm.connection() as conn:
        assert conn.execute(versions, (gm.owner,)).fetchone() == untouched
    assert third.files_read == 10 and (
        third.conversations_new,
        third.conversations_updated,
        third.messages_new,
    ) == (0, 0, 0)
    assert counts(gm) == before


def test_appended_lines_are_read_from_the_last_complete_line(
    gm: GhostMem, pg_dsn: str, tmp_path: Path
) -> None:
    lines = [cc("user" if i % 2 == 0 else "assistant", f"u{i}", f"u{i - 1}" if i else None,
                f"message number {i}" if i % 2 == 0 else [{"type": "text", "text": f"answer {i}"}],
                ts=f"2026-01-01T10:{i:02d}:00.000Z") for i in range(8)]  # fmt: skip
    for line in lines[1::2]:
        line["message"]["id"] = f"msg_{line['uuid']}"
    path = tmp_path / "proj" / "s1.jsonl"
    partial = json.dumps(lines[6]).encode()
    jsonl(path, lines[:6], tail=partial[:20])
    first = gm.import_paths([path])
    assert first.messages_new == 6
    with path.open("ab") as fh:
        fh.write(partial[20:] + b"\n" + json.dumps(lines[7]).encode() + b"\n")  # the partial line completes
    second = gm.import_paths([path])
    assert (second.conversations_updated, second.messages_new, second.files_read) == (1, 2, 1)
    assert conversation(gm, "s1")["msg_count"] == 8
    # the same file read in one go gives the same thread
    with GhostMem(dsn=pg_dsn, owner=gm.owner + "-whole", embedder=HashEmbedder()) as whole:
        whole.import_paths([path])
        assert counts(whole) == counts(gm)
        with whole.connection() as a, gm.connection() as b:
            query = "SELECT native_id FROM ghostmem.messages WHERE owner = %s ORDER BY seq"
            assert [r[0] for r in a.execute(query, (whole.owner,))] == [
                r[0] for r in b.execute(query, (gm.owner,))
            ]


def test_malformed_corpus_imports_every_good_line(gm: GhostMem, tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    good = [
        {"conv_id": f"c{i}", "messages": [{"id": "1", "role": "user", "text": f"question {i}"}]}
        for i in range(5)
    ]
    body = [json.dumps(g).encode() for g in good]
    body.insert(2, b'{"conv_id": "broken", ')
    body.insert(4, b"\xff\xfe not json at all")
    path.write_bytes(b"\n".join(body) + b"\n")
    (tmp_path / "empty.jsonl").write_bytes(b"")
    report = gm.import_paths([path, tmp_path / "empty.jsonl"])
    assert report.ok and report.conversations_new == 5
    assert [str(p) for p in report.problems] == [
        f"{tmp_path / 'empty.jsonl'}: not a conversation file of any known format",
        f"{path.resolve()}:3: malformed JSON (Expecting property name enclosed in double quotes)",
        f"{path.resolve()}:5: malformed JSON (Expecting value)",
    ]
    assert "corpus.jsonl:3: malformed JSON" in report.render()


def test_ignore_marker_forget_and_library_tier(gm: GhostMem, tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    convs = [
        {"conv_id": "keep", "messages": [{"id": "1", "role": "user", "text": "ordinary talk about caching"}]},
        {
            "conv_id": "private",
            "messages": [{"id": "1", "role": "user", "text": "diary ghostmem:ignore entry"}],
        },
    ]
    path.write_text("".join(json.dumps(c) + "\n" for c in convs))
    report = gm.import_paths([path])
    assert report.counts("generic").ignored == 1 and report.conversations_new == 1
    assert gm.forget("keep") == ["keep"]
    assert counts(gm) == (0, 0)
    shutil.copy(path, tmp_path / "again.jsonl")  # read again elsewhere: still nothing comes back
    again = gm.import_paths([tmp_path / "again.jsonl"])
    assert again.files_read == 1 and again.counts("generic").forgotten == 1 and counts(gm) == (0, 0)
    library = gm.import_paths([FIXTURES / "claude_ai"], tier="library")
    assert library.conversations_new == 1
    with gm.connection() as conn:
        tiers = conn.execute("SELECT DISTINCT tier FROM ghostmem.conversations WHERE owner = %s", (gm.owner,))
        assert [r[0] for r in tiers] == ["library"]


def test_no_embed_then_embed_uses_the_cache(gm: GhostMem, tmp_path: Path) -> None:
    same = "the deploy failed because the migration lock timed out"
    convs = [{"conv_id": f"e{i}", "messages": [{"id": "1", "role": "user", "text": same},
                                               {"id": "2", "role": "assistant", "text": f"reply {i} with words"},
                                               {"id": "3", "role": "tool", "text": "x" * 5000}]} for i in range(3)]  # fmt: skip
    (tmp_path / "e.jsonl").write_text("".join(json.dumps(c) + "\n" for c in convs))
    report = gm.import_paths([tmp_path / "e.jsonl"], embed=False)
    assert report.messages_embedded == 0
    with gm.connection() as conn:
        assert conn.execute(
            "SELECT count(*) FROM ghostmem.messages WHERE owner = %s AND embedding IS NOT NULL", (gm.owner,)
        ).fetchone() == (0,)
        assert conn.execute(  # lexical search works before any vector exists
            "SELECT count(*) FROM ghostmem.messages WHERE owner = %s AND tsv @@ plainto_tsquery('english', 'migration lock')",
            (gm.owner,),
        ).fetchone() == (3,)
    assert gm.embed_pending().embedded == 6  # user + assistant, never the tool dump
    with gm.connection() as conn:
        cached = conn.execute(
            "SELECT count(*) FROM ghostmem.embedding_cache WHERE model = 'hash' AND content_hash = ANY(%s)",
            ([hashlib.sha256(same.encode()).digest()],),
        ).fetchone()
        assert cached == (1,)  # three messages, one text, one vector computed
    assert gm.embed_pending().embedded == 0
    assert gm.forget("e0") == ["e0"]
    with gm.connection() as conn:
        assert conn.execute(  # its vectors are gone from the cache too
            "SELECT count(*) FROM ghostmem.embedding_cache WHERE content_hash = ANY(%s)",
            ([hashlib.sha256(same.encode()).digest(), hashlib.sha256(b"reply 0 with words").digest()],),
        ).fetchone() == (0,)


def test_two_imports_at_once_neither_corrupt_nor_duplicate(pg_dsn: str, owner: str, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(FIXTURES, corpus)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as g:
                g.import_paths([corpus], embed=False)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with (
        GhostMem(dsn=pg_dsn, owner=owner + "-alone", embedder=HashEmbedder()) as alone,
        GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as both,
    ):
        alone.import_paths([corpus], embed=False)
        assert counts(both) == counts(alone)


@pytest.mark.slow
def test_killed_import_resumes_to_the_same_counts(pg_dsn: str, owner: str, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write_corpus(corpus, files=10, convs_per_file=60)
    env = {**os.environ, "GHOSTMEM_DSN": pg_dsn, "GHOSTMEM_OWNER": owner, "GHOSTMEM_EMBED_MODEL": "hash"}
    cmd = [
        sys.executable,
        "-m",
        "ghostmem.cli",
        "import",
        "--no-embed",
        "--no-progress",
        "--json",
        str(corpus),
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    kill_at = random.Random().randint(30, 300)  # a random moment: after this many conversations committed
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as gm:
        while counts(gm)[0] < kill_at and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        partial = counts(gm)
        assert 0 < partial[0] < 600, partial
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        resumed = counts(gm)
    with GhostMem(dsn=pg_dsn, owner=owner + "-whole", embedder=HashEmbedder()) as whole:
        whole.import_paths([corpus], embed=False)
        assert resumed == counts(whole) == (600, 3600)


def test_langchain_postgres_table(gm: GhostMem, pg_dsn: str) -> None:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    from langchain_postgres import PostgresChatMessageHistory

    table = "chat_history_" + gm.owner.replace("-", "_")
    session = "3f2c1a4e-1b2c-4d5e-8f90-123456789abc"
    with psycopg.connect(pg_dsn) as conn:
        PostgresChatMessageHistory.create_tables(conn, table)
        history = PostgresChatMessageHistory(table, session, sync_connection=conn)
        history.add_messages([SystemMessage("be terse"), HumanMessage("why is the replica lagging?"),
                              AIMessage("A long-running query holds back replay.")])  # fmt: skip
        first = gm.import_langchain_table(pg_dsn, table)
        assert (first.conversations_new, first.messages_new) == (1, 3)
        history.add_messages([HumanMessage("how do I find it?")])
        second = gm.import_langchain_table(pg_dsn, table)
        assert (second.conversations_updated, second.messages_new) == (1, 1)
    row = conversation(gm, session)
    assert (row["platform"], row["title"], row["msg_count"]) == (
        "langchain",
        "why is the replica lagging?",
        3,
    )
    missing = gm.import_langchain_table(pg_dsn, "no_such_table")
    assert not missing.ok and "no_such_table" in missing.problems[0].reason


def test_planted_secrets_never_reach_the_database(gm: GhostMem, tmp_path: Path) -> None:
    secrets = [
        "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0fGh3iJk6lMn9o",
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "hunter2Secret!",
    ]
    texts = [
        f"my key is {secrets[0]} please rotate",
        f"export AWS_ACCESS_KEY_ID={secrets[1]}",
        f"git clone https://{secrets[2]}@github.com/org/repo",
        f"SLACK_BOT_TOKEN={secrets[3]}",
        f"connect to postgres://admin:{secrets[4]}@db.internal:5432/app",
    ]
    convs = [
        {"conv_id": f"s{i}", "title": t, "messages": [{"id": "1", "role": "user", "text": t}]}
        for i, t in enumerate(texts)
    ]
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(c) + "\n" for c in convs))
    gm.import_paths([tmp_path / "s.jsonl"])
    with gm.connection() as conn:
        dump = "\n".join(
            r[0]
            for table in ("conversations", "messages", "title_hints")
            for r in conn.execute(
                psycopg.sql.SQL("SELECT row_to_json(t)::text FROM ghostmem.{} t WHERE owner = %s").format(
                    psycopg.sql.Identifier(table)
                ),
                (gm.owner,),
            )
        )
    assert dump.count("[REDACTED:") >= len(secrets)
    for secret in secrets:
        assert secret not in dump


def test_watch_polls_cheaply(gm: GhostMem, tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "claude_code", tmp_path / "cc")
    reports: list[ImportReport] = []
    gm.watch([tmp_path / "cc"], tier="personal", embed=False, interval=0, on_report=reports.append, rounds=3)
    assert len(reports) == 1 and reports[0].conversations_new == 5  # later rounds had nothing to say
    quiet = gm.import_paths([tmp_path / "cc"], embed=False)
    assert (quiet.files_read, quiet.files_unchanged) == (0, 5)


def test_a_folder_holding_nothing_ghostmem_reads_is_one_clear_problem(gm: GhostMem, tmp_path: Path) -> None:
    """A folder given that holds no export or transcript (empty, or only other files, .json ones too) is not an
    empty table of zeros and status 0: the import says it found nothing there, which files it looks for and where
    they are described; a watch of it says so once, not every round, and imports what lands in it later."""
    empty, other = tmp_path / "empty", tmp_path / "other"
    empty.mkdir()
    (other / "sub").mkdir(parents=True)
    (other / "notes.txt").write_text("hello")
    (other / "sub" / "package.json").write_text('{"name": "x"}')
    for folder in (empty, other):
        report = gm.import_paths([folder])
        assert not report.ok and [str(p) for p in report.problems] == [
            f"{folder}: no conversations found: no .jsonl, .json, .zip, .vscdb file here (or in its folders, hidden"
            " ones left out) is an export or transcript ghostmem reads (docs/formats.md lists them)"
        ]
        assert report.render().splitlines() == ["nothing could be read:", f"  {report.problems[0]}"]
    reports: list[ImportReport] = []
    gm.watch([empty], tier="personal", embed=False, interval=0, on_report=reports.append, rounds=3)
    assert len(reports) == 1 and not reports[0].ok
    shutil.copytree(FIXTURES / "claude_code", empty / "cc")
    gm.watch([empty], tier="personal", embed=False, interval=0, on_report=reports.append, rounds=2)
    assert len(reports) == 2 and reports[1].conversations_new == 5 and reports[1].ok


def test_summaries_title_sessions_in_other_files_in_either_order(gm: GhostMem, tmp_path: Path) -> None:
    project = tmp_path / "projects" / "-repo"
    jsonl(project / "a-session.jsonl", [
        cc("user", "u1", None, "first prompt of a", sessionId="a-session"),
        cc("assistant", "a1", "u1", [{"type": "text", "text": "done"}], sessionId="a-session"),
    ])  # fmt: skip
    # the summary of a-session sits in a file read after it; the summary of z-session in one read before it
    jsonl(
        project / "b-summaries.jsonl",
        [{"type": "summary", "summary": "Fix the flaky login test", "leafUuid": "a1"}],
    )
    jsonl(
        project / "0-summaries.jsonl",
        [{"type": "summary", "summary": "Speed up CI caching", "leafUuid": "z2"}],
    )
    jsonl(project / "z-session.jsonl", [
        cc("user", "z1", None, "first prompt of z", sessionId="z-session"),
        cc("user", "z2", "z1", "second prompt of z", sessionId="z-session"),
    ])  # fmt: skip
    report = gm.import_paths([tmp_path / "projects"])
    assert report.ok and report.conversations_new == 2
    assert conversation(gm, "a-session")["title"] == "Fix the flaky login test"
    assert conversation(gm, "z-session")["title"] == "Speed up CI caching"
    # a later custom title still wins over a summary; a later prompt never replaces it
    with (project / "z-session.jsonl").open("a") as fh:
        fh.write(
            json.dumps({"type": "custom-title", "customTitle": "CI cache work", "sessionId": "z-session"})
            + "\n"
        )
        fh.write(json.dumps(cc("user", "z3", "z2", "third prompt", sessionId="z-session")) + "\n")
    gm.import_paths([tmp_path / "projects"])
    assert conversation(gm, "z-session")["title"] == "CI cache work"


def test_forgetting_a_session_keeps_its_subagents_out_too(gm: GhostMem, tmp_path: Path) -> None:
    project = tmp_path / "-workspace"
    project.mkdir()
    shutil.copy(
        FIXTURES / "claude_code" / "projects" / "-workspace" / "c45af7b1-cb7c-4e51-93db-8cbb250a877a.jsonl",
        project,
    )
    gm.import_paths([project])
    assert gm.forget("c45af7b1-cb7c-4e51-93db-8cbb250a877a") == ["c45af7b1-cb7c-4e51-93db-8cbb250a877a"]
    shutil.copy(FIXTURES / "claude_code" / "projects" / "-workspace" / "agent-af1ff21.jsonl", project)
    report = gm.import_paths([project])
    assert report.counts("claude_code").forgotten == 1 and counts(gm) == (0, 0)


def test_gemini_project_hash_resolved_from_known_projects(gm: GhostMem, tmp_path: Path) -> None:
    import hashlib

    root = "/home/me/src/weather-app"
    digest = hashlib.sha256(root.encode()).hexdigest()
    chats = tmp_path / "gemini" / digest / "chats"
    chats.mkdir(parents=True)
    doc = {"sessionId": "gem-1", "projectHash": digest, "startTime": "2026-01-01T10:00:00Z",
           "lastUpdated": "2026-01-01T10:05:00Z", "messages": [{"id": "1", "type": "user", "content": "add a forecast"}]}  # fmt: skip
    (chats / "session-2026-01-01T10-00-gem1.json").write_text(json.dumps(doc))
    gm.import_paths([tmp_path / "gemini"])
    assert conversation(gm, "gem-1")["project"] == digest  # nothing known yet
    jsonl(tmp_path / "cc" / "s1.jsonl", [cc("user", "u1", None, "fix the build", cwd=root)])
    gm.import_paths([tmp_path / "cc"])
    row = conversation(gm, "gem-1")
    assert (row["project"], row["meta"]["project_hash"]) == (root, digest)


def test_no_default_location_is_one_clear_problem(
    gm: GhostMem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.delenv("APPDATA", raising=False)
    report = gm.import_paths(None)
    assert not report.ok and "no conversations found" in report.problems[0].reason
    # Claude Code installed, never used: its folder exists and holds nothing (it said nothing: an empty table)
    (tmp_path / ".claude" / "projects" / "-home-me-app").mkdir(parents=True)
    report = gm.import_paths(None)
    assert not report.ok and [str(p) for p in report.problems] == [
        "(default locations): no conversations found in ~/.claude/projects (the usual places that exist here;"
        " give paths to import, or set CLAUDE_CONFIG_DIR or CODEX_HOME where Claude Code or Codex keep theirs)"
    ]
    assert report.render().splitlines() == ["nothing could be read:", f"  {report.problems[0]}"]  # no table
    claude = tmp_path / "elsewhere"
    shutil.copytree(FIXTURES / "claude_code", claude)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    found = gm.import_paths(None)
    assert found.ok and found.conversations_new == 5


def test_an_updated_export_updates_in_place(gm: GhostMem, tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    convs = json.loads((FIXTURES / "chatgpt" / "chatgpt-tree.json").read_text())
    path.write_text(json.dumps(convs))
    gm.import_paths([path])
    before = conversation(gm, "d5dc5307-6807-41a0-8b04-4acee626eeb7")
    conv = convs[0]
    leaf = conv["current_node"]
    conv["mapping"][leaf]["children"] = ["new-node"]
    conv["mapping"]["new-node"] = {"id": "new-node", "parent": leaf, "children": [], "message": {
        "id": "new-node", "author": {"role": "user"}, "create_time": conv["update_time"] + 60,
        "content": {"content_type": "text", "parts": ["one more question"]}, "metadata": {}, "recipient": "all"}}  # fmt: skip
    conv["current_node"], conv["title"], conv["update_time"] = (
        "new-node",
        "Renamed in ChatGPT",
        conv["update_time"] + 60,
    )
    path.write_text(json.dumps(convs, separators=(",", ":")))  # the next export: minified, one more message
    report = gm.import_paths([path])
    assert (report.conversations_new, report.conversations_updated, report.messages_new) == (0, 1, 1)
    after = conversation(gm, "d5dc5307-6807-41a0-8b04-4acee626eeb7")
    assert (after["title"], after["msg_count"]) == ("Renamed in ChatGPT", before["msg_count"] + 1)
    assert after["ended_at"] > before["ended_at"]


def test_a_resumed_session_does_not_repeat_the_replayed_lines(gm: GhostMem, tmp_path: Path) -> None:
    project = tmp_path / "-repo"
    first = [cc("user", "u1", None, "start the refactor", sessionId="s-old"),
             cc("assistant", "a1", "u1", [{"type": "text", "text": "started"}], sessionId="s-old")]  # fmt: skip
    replay = [{**line, "sessionId": "s-new"} for line in first]
    # the resumed file sorts first by name but was written later: it is read second
    jsonl(project / "0-new.jsonl", [*replay, cc("user", "u2", "a1", "now finish it", sessionId="s-new")])
    jsonl(project / "z-old.jsonl", first)
    os.utime(project / "z-old.jsonl", (1_700_000_000, 1_700_000_000))
    report = gm.import_paths([project])
    assert report.conversations_new == 2
    with gm.connection() as conn:
        rows = conn.execute(
            "SELECT conv_id, array_agg(native_id ORDER BY seq) FROM ghostmem.messages WHERE owner = %s GROUP BY 1",
            (gm.owner,),
        ).fetchall()
    assert dict(rows) == {"s-old": ["u1", "a1"], "s-new": ["u2"]}


def owner_rows(dsn: str, query: str, owner: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(query, (owner,)).fetchall()


def enrichment(dsn: str, owner: str) -> dict[str, tuple[Any, ...]]:
    """Per conversation: what enrichment gives it (intensity, vector, cluster, topic) and what the import does."""
    rows = owner_rows(
        dsn,
        "SELECT conv_id, intensity, embedding::real[], cluster, topic, title, msg_count"
        " FROM ghostmem.conversations WHERE owner = %s",
        owner,
    )
    return {r[0]: tuple(r[1:]) for r in rows}


@pytest.mark.slow
def test_a_killed_import_is_enriched_by_the_next_run(pg_dsn: str, owner: str, tmp_path: Path) -> None:
    """An import killed while storing leaves new conversations unenriched and grown ones stale; the next plain
    ``ghostmem import`` finishes them all (no ``ghostmem enrich`` by hand), duplicating nothing."""
    corpus = tmp_path / "corpus"
    write_corpus(corpus, files=3, convs_per_file=50)
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as gm:
        assert gm.import_paths([corpus]).conversations_enriched == 150
    # the 150 went on by 2 messages each; 150 more are new
    write_corpus(corpus, files=6, convs_per_file=50, grown=2)
    env = {**os.environ, "GHOSTMEM_DSN": pg_dsn, "GHOSTMEM_OWNER": owner, "GHOSTMEM_EMBED_MODEL": "hash"}
    cmd = [sys.executable, "-m", "ghostmem.cli", "import", "--no-progress", "--json", str(corpus)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kill_at = 900 + random.Random().randint(50, 1000)  # a random moment: this many messages stored (of 2,400)
    deadline = time.monotonic() + 120
    with psycopg.connect(pg_dsn, autocommit=True) as conn:

        def stored() -> int:
            row = conn.execute("SELECT count(*) FROM ghostmem.messages WHERE owner = %s", (owner,)).fetchone()
            return int(row[0]) if row else 0

        while stored() < kill_at and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert 900 < stored() < 2400
    left = enrichment(pg_dsn, owner)
    assert any(intensity is None for intensity, *_ in left.values())  # the kill left work undone

    again = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    assert json.loads(again.stdout)["conversations_enriched"] >= 150
    done = enrichment(pg_dsn, owner)
    with GhostMem(dsn=pg_dsn, owner=owner + "-whole", embedder=HashEmbedder()) as whole:
        whole.import_paths([corpus])
        assert counts(whole) == (300, 2400)
    oracle = enrichment(pg_dsn, owner + "-whole")
    assert done.keys() == oracle.keys() and len(done) == 300
    for conv_id, (intensity, vector, cluster, topic, title, msg_count) in done.items():
        assert None not in (intensity, vector, cluster, topic, title), conv_id
        assert msg_count == 8  # nothing duplicated, nothing lost
        want = oracle[conv_id]
        assert intensity == pytest.approx(want[0], abs=1e-6)  # of the whole conversation, not the stale half
        assert vector == pytest.approx(want[1], abs=1e-5)
        assert title == want[4]
    messages = owner_rows(
        pg_dsn,
        "SELECT count(*), count(DISTINCT (conv_id, native_id)), count(embedding) FROM ghostmem.messages"
        " WHERE owner = %s",
        owner,
    )
    assert messages == [(2400, 2400, 2400)]
