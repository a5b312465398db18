"""The client's maintenance and capture methods: the jobs behind the CLI, on explicit connections and owners."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from ghostmem import AsyncGhostMem, GhostMem, HashEmbedder
from ghostmem.records import MessageRecord
from support.conversations import conversation, ids


def _write(path: Path, convs: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in convs), encoding="utf-8")
    return path


def test_async_client_imports_embeds_enriches_and_forgets(pg_dsn: str, owner: str, tmp_path: Path) -> None:
    path = _write(
        tmp_path / "a.jsonl",
        [
            conversation(
                "vac", "Vacuum", 1, ["autovacuum never finishes on the orders table", "raise its cost limit"]
            ),
            conversation("cat", "Cats", 2, ["which food do cats like", "cats love fish"]),
        ],
    )

    async def work() -> tuple[int, int, int, list[str], list[str]]:
        async with AsyncGhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as agm:
            report = await agm.import_paths([path], embed=False)
            embedded = await agm.embed_pending()
            enriched = await agm.enrich()
            found = await agm.search_personal_memory(query="cats fish", mode="vector")
            removed = await agm.forget("cat")
            return report.conversations_new, embedded.embedded, enriched, ids(found), removed

    new, embedded, enriched, found, removed = asyncio.run(work())
    assert (new, embedded, enriched) == (2, 4, 2)
    assert found[0] == "cat"
    assert removed == ["cat"]
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as gm:
        assert ids(gm.list_recent_conversations(days=30)) == ["vac"]


def test_forget_reaches_only_its_own_owner(gm: GhostMem, pg_dsn: str, tmp_path: Path) -> None:
    path = _write(tmp_path / "b.jsonl", [conversation("shared-id", "Mine", 1, ["my own words", "noted"])])
    gm.import_paths([path])
    with GhostMem(dsn=pg_dsn, owner=gm.owner + "-other", embedder=HashEmbedder()) as other:
        other.import_paths([path])
        assert gm.forget("shared-id") == ["shared-id"]
        # the other owner's conversation of the same id is still there, and still importable for it
        assert ids(other.list_recent_conversations(days=30)) == ["shared-id"]
        assert other.forget("no-such-conversation", force=True) == []  # kept out, nothing to delete
    assert gm.list_recent_conversations(days=30).data.rows == []


def _msg(role: str, text: str) -> MessageRecord:
    return MessageRecord(native_id="", role=role, text=text)  # type: ignore[arg-type]


def test_capture_api_appends_replaces_removes_and_deletes(gm: GhostMem) -> None:
    gm.capture_append(
        "live-1", [_msg("user", "the build cache is stale after a rebase")], platform="langchain"
    )
    gm.capture_append("live-1", [_msg("assistant", "clear it with a clean build")], platform="langchain")
    assert [m.text for m in gm.capture_messages("live-1")] == [
        "the build cache is stale after a rebase",
        "clear it with a clean build",
    ]
    assert ids(gm.search_personal_memory(query="stale build cache")) == ["live-1"]
    assert gm.capture_ids("langchain") == ["live-1"] and gm.capture_ids("llamaindex") == []

    last = gm.capture_remove("live-1", -1, platform="langchain")
    assert last is not None and last.text == "clear it with a clean build"
    assert gm.capture_remove("live-1", 5, platform="langchain") is None
    gm.capture_replace(
        "live-1", [_msg("user", "a new first message"), _msg("assistant", "ok")], platform="langchain"
    )
    assert [m.text for m in gm.capture_messages("live-1")] == ["a new first message", "ok"]
    assert gm.list_recent_conversations(days=1).data.rows[0].msg_count == 2

    held = gm.capture_delete("live-1")
    assert [m.text for m in held] == ["a new first message", "ok"]
    assert gm.capture_messages("live-1") == [] and gm.capture_delete("live-1") == []
    assert gm.list_recent_conversations(days=1).data.rows == []


@pytest.mark.slow
def test_server_stopped_mid_import_is_one_sentence_and_a_rerun_finishes(
    embedded_home: Path, tmp_path: Path
) -> None:
    from ghostmem.db import EmbeddedServer

    total = 1200
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for part in range(3):
        _write(
            corpus / f"part{part}.jsonl",
            [
                conversation(
                    f"c{part}-{i}", f"talk {i}", 1, [f"question {part} {i} about caching", "an answer"]
                )
                for i in range(total // 3)
            ],
        )
    server = EmbeddedServer(embedded_home)
    dsn = server.start().dsn()
    assert dsn is not None
    argv = [
        sys.executable,
        "-m",
        "ghostmem.cli",
        "import",
        "--dsn",
        dsn,
        "--owner",
        "o",
        "--json",
        str(corpus),
    ]
    env = {**os.environ, "GHOSTMEM_EMBED_MODEL": "hash", "GHOSTMEM_HOME": str(embedded_home)}
    importing = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def stored() -> int:
        with psycopg.connect(dsn) as conn:
            exists = conn.execute("SELECT to_regclass('ghostmem.conversations') IS NOT NULL").fetchone()
            row = (
                conn.execute("SELECT count(*) FROM ghostmem.conversations").fetchone() if exists[0] else (0,)
            )
        return int(row[0]) if row else 0

    deadline = time.monotonic() + 120
    while stored() < 50 and time.monotonic() < deadline and importing.poll() is None:
        time.sleep(0.05)
    server.stop()  # a fast shutdown, as a restart does: every session is terminated
    out, err = importing.communicate(timeout=120)
    assert importing.returncode == 2, err
    failed = json.loads(out)  # with --json the error is one JSON object on stdout
    assert failed["type"] == "DatabaseUnavailable" and failed["exit_code"] == 2, out
    assert (
        failed["error"].startswith("lost the connection to Postgres (") and "run it again" in failed["error"]
    )
    assert "Traceback" not in err

    server.start()
    kept = stored()
    assert 50 <= kept < total  # what was committed stays; the rest comes with the rerun
    rerun = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert stored() == total
