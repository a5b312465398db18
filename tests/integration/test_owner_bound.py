"""Owners are at most STORED_OWNER_BYTES long (ghostmem.limits), checked where they come in, before anything is
written: every entry point is tried with an owner a hostile or careless caller would give (3,000 random bytes, which
fitted no key and failed at the first write with PostgreSQL's "index row size ... exceeds btree version 4 maximum
2704", reported as a lost connection; multi-byte characters; one byte over). An owner at the limit, beside ids at
theirs, fits every key (the budget the limit was chosen for)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder
from ghostmem.binding import Binding
from ghostmem.cli import main
from ghostmem.errors import GhostMemError, InvalidArgument
from ghostmem.limits import STORED_ID_BYTES, STORED_OWNER_BYTES, STORED_PROJECT_BYTES
from ghostmem.mcp import Callers, add_token
from ghostmem.records import MessageRecord
from ghostmem.store import embed_messages
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.store.base import InvalidNamespaceError, PutOp
from support.embedders import Renamed

from langchain_ghostmem import GhostMemCaptureMiddleware, GhostMemStore

RANDOM = random.Random(22)


def random_text(size: int) -> str:
    """``size`` bytes of random CJK characters (3 bytes each; incompressible, so a key holds every byte) padded
    with ASCII letters."""
    cjk = "".join(chr(RANDOM.randint(0x4E00, 0x9FFF)) for _ in range(size // 3))
    return cjk + "".join(RANDOM.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(size % 3))


TOO_LONG = {
    "3,000 random bytes": random_text(3_000),
    "one byte over, multi-byte": random_text(STORED_OWNER_BYTES + 1),
    "one byte over, ASCII": "o" * (STORED_OWNER_BYTES + 1),
}
SENTENCE = f"bytes, longer than the {STORED_OWNER_BYTES:,} bytes ghostmem keeps of an owner"


def messages(*texts: str) -> list[MessageRecord]:
    now = datetime.now(UTC)
    return [MessageRecord(native_id=f"m{n}", role="user", text=t, ts=now) for n, t in enumerate(texts)]


@pytest.fixture
def written(pg_dsn: str) -> Iterator[Callable[[], int]]:
    """How many rows of every table with an owner column belong to an owner longer than the limit."""

    def count() -> int:
        with psycopg.connect(pg_dsn) as conn:
            tables = conn.execute(
                "SELECT format('%I.%I', table_schema, table_name) FROM information_schema.columns"
                " JOIN information_schema.tables USING (table_schema, table_name)"
                " WHERE column_name = 'owner' AND table_type = 'BASE TABLE'"
                " AND table_schema IN ('ghostmem', 'agent')"
            ).fetchall()
            assert len(tables) > 10
            return sum(
                conn.execute(
                    f"SELECT count(*) FROM {t} WHERE octet_length(owner) > %s", (STORED_OWNER_BYTES,)
                ).fetchone()[0]  # type: ignore[index]
                for (t,) in tables
            )

    yield count


@pytest.mark.parametrize("hostile", list(TOO_LONG.values()), ids=list(TOO_LONG))
def test_an_owner_longer_than_ghostmem_keeps_is_refused_at_every_entry_point(
    gm: GhostMem,
    pg_dsn: str,
    hostile: str,
    written: Callable[[], int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    size = len(hostile.encode())
    said = f"is {size:,} {SENTENCE}"
    # the client, by argument and by environment
    with pytest.raises(InvalidArgument, match=said):
        GhostMem(dsn=pg_dsn, owner=hostile, embedder=HashEmbedder())
    with monkeypatch.context() as env:
        env.setenv("GHOSTMEM_OWNER", hostile)
        with pytest.raises(InvalidArgument, match=said):
            GhostMem(dsn=pg_dsn, embedder=HashEmbedder())
    # the command line: one sentence on stderr, nothing imported
    export = tmp_path / "g.jsonl"
    export.write_text('{"conv_id": "c1", "messages": [{"role": "user", "text": "refused"}]}\n')
    capsys.readouterr()
    assert main(["import", "--dsn", pg_dsn, "--owner", hostile, "--no-embed", str(export)]) != 0
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and "index row size" not in err
    # live capture naming another owner
    for write in (gm.capture_append, gm.capture_replace):
        with pytest.raises(InvalidArgument, match=said):
            write("c1", messages("how do I restart postgres"), platform="langchain", owner=hostile)
    with pytest.raises(InvalidArgument, match=said):
        gm.capture_sync("c1", messages("x"), ["a"], platform="langchain", owner=hostile)
    # a call's user_id (the tools, the capture middleware and MCP all take the owner from a call's context)
    binding = Binding(gm)
    with pytest.raises(InvalidArgument, match=said):
        binding.context_for({"user_id": hostile})
    capture = GhostMemCaptureMiddleware(gm)
    config: RunnableConfig = {"configurable": {"thread_id": "t1", "user_id": hostile}}
    with pytest.raises(InvalidArgument, match=said):
        RunnableLambda(lambda _: capture.capture([HumanMessage("hi", id="h1")])).invoke(None, config)
    # the LangGraph store: its owner, a namespace's first label, an owner rule's answer; a batch whose later put
    # names such an owner writes none of its puts
    with pytest.raises(InvalidArgument, match=said):
        GhostMemStore(gm, owner=hostile)
    by_label = GhostMemStore(gm)
    with pytest.raises(InvalidNamespaceError, match=said):
        by_label.put((hostile, "notes"), "k", {"text": "refused"})
    with pytest.raises(InvalidNamespaceError, match=said):
        by_label.search((hostile,), query="refused")
    with pytest.raises(InvalidNamespaceError, match=said):
        by_label.batch(
            [
                PutOp(("fine", "notes"), "k", {"text": "first"}),
                PutOp((hostile, "notes"), "k", {"text": "second"}),
            ]
        )
    assert by_label.get(("fine", "notes"), "k") is None
    with pytest.raises(InvalidNamespaceError, match=said):
        GhostMemStore(gm, owner=lambda ns: ns[1]).put(("app", hostile), "k", {"text": "refused"})
    # the MCP tokens file: no token is made for such an owner, and a file naming one is refused with file:line
    tokens = tmp_path / "tokens"
    with pytest.raises(InvalidArgument, match=said):
        add_token(tokens, hostile)
    assert not tokens.exists()
    tokens.write_text(f"alice sha256:{'a' * 64}\n{hostile} sha256:{'b' * 64}\n")
    with pytest.raises(GhostMemError, match=rf"{tokens}:2: the owner .*{said}"):
        Callers(path=tokens)
    assert written() == 0


def test_an_owner_at_the_limit_beside_ids_at_theirs_fits_every_key(pg_dsn: str) -> None:
    """256 random bytes of owner, a conversation id and message ids of 1,000 random bytes: every table written by
    capture, search, ghost memories and the LangGraph store takes them (what the limit's budget says)."""
    owner = random_text(STORED_OWNER_BYTES)
    assert len(owner.encode()) == STORED_OWNER_BYTES
    conv_id = random_text(STORED_ID_BYTES)
    thread = [
        MessageRecord(native_id=random_text(STORED_ID_BYTES), role=role, text=text, ts=datetime.now(UTC))
        for role, text in (("user", "how do I restart the postgres server"), ("assistant", "pg_ctl restart"))
    ]
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as gm:
        assert (
            gm.capture_append(
                conv_id, thread, platform="langchain", project=random_text(STORED_PROJECT_BYTES)
            ).messages_new
            == 2
        )
        found = gm.search_personal_memory(query="restart postgres").data
        assert [hit.conv_id for hit in found.rows] == [conv_id]
        assert gm.remember(content="Restart postgres with pg_ctl.", scope="global").data.created
        assert gm.search_ghost_memories(query="restart postgres").data.rows
        assert gm.enrich() == 1
        store = GhostMemStore(gm)
        store.put((owner, "notes"), random_text(STORED_ID_BYTES), {"text": "restart postgres with pg_ctl"})
        assert [i.value for i in store.search((owner,), query="restart")] == [
            {"text": "restart postgres with pg_ctl"}
        ]
        assert gm.forget(conv_id) == [conv_id]


def test_a_key_too_large_for_the_database_is_no_lost_connection(gm: GhostMem) -> None:
    """Every value in a key is bounded where it comes in. Should one still overflow an index entry (here an embedder
    named by 2,700 random bytes, which keys the embedding cache, handed straight to the core write path, past the
    check where a store is configured), it is refused as a value to shorten, not reported as a lost connection to
    be run again; nothing of the call's transaction is written, and the store goes on serving."""
    gm.capture_append("c1", messages("hello there"), platform="langchain")

    def embedded() -> int:
        with gm.connection() as conn:
            found = conn.execute(
                "SELECT count(embedding) FROM ghostmem.messages WHERE owner = %s", (gm.owner,)
            ).fetchone()
        return int(found[0])  # type: ignore[index]

    assert embedded() == 1
    with (
        pytest.raises(InvalidArgument, match=r"cannot hold a value this large \(index row size \d"),
        gm.connection() as conn,
    ):
        rows = conn.execute(
            "UPDATE ghostmem.messages SET embedding = NULL WHERE owner = %s RETURNING id, text", (gm.owner,)
        ).fetchall()
        embed_messages(conn, gm.owner, Renamed(random_text(2_700)), rows)
    assert embedded() == 1
    assert [row.conv_id for row in gm.search_personal_memory("hello there", mode="vector").data.rows] == [
        "c1"
    ]
