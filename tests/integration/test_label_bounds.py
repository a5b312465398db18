"""Every value in a key or index is bounded where it comes in (ghostmem.limits), so none fails only when written
with PostgreSQL's "index row size ... exceeds btree version 4 maximum 2704":

* a conversation's project (message_counts' key, the (owner, tier, project, ts) indexes) and the import state's key
  of a file (its path) are labels: beyond STORED_PROJECT_BYTES / STORED_PATH_BYTES they are kept shortened
  (ghostmem.records.shortened), so a capture or an import loses nothing for them;
* a LangGraph store item's namespace and key are its identity: beyond STORED_NAMESPACE_BYTES /
  STORED_NAMESPACE_LABELS / STORED_ITEM_KEY_BYTES they are refused in one sentence, before anything is written;
* an embedder's name keys the embedding cache and says which model made a vector: beyond
  STORED_EMBEDDER_NAME_BYTES it is refused in one sentence where the embedder is configured (the client, the
  environment, the command line, every adapter's ``embedder=``, a re-embedding), before anything is written.

Each is tried the way a hostile or careless caller would: 3,000 random bytes (incompressible, so a key holds every
byte), one byte over in multi-byte characters and in ASCII, and exactly at the bound beside an owner at its own.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import AsyncGhostMem, GhostMem, HashEmbedder
from ghostmem.args import MAX_DAYS
from ghostmem.binding import Binding
from ghostmem.cli import main
from ghostmem.errors import InvalidArgument
from ghostmem.items import ItemWrite, write_items
from ghostmem.limits import (
    STORED_EMBEDDER_NAME_BYTES,
    STORED_ITEM_KEY_BYTES,
    STORED_NAMESPACE_BYTES,
    STORED_NAMESPACE_LABELS,
    STORED_OWNER_BYTES,
    STORED_PATH_BYTES,
    STORED_PROJECT_BYTES,
    STORED_SPEAKER_BYTES,
)
from ghostmem.records import MessageRecord, shortened
from langgraph.store.base import InvalidNamespaceError, PutOp
from support.conversations import conversation, import_generic
from support.databases import fresh_database
from support.embedders import Renamed
from support.transcripts import cc, jsonl

from langchain_ghostmem import GhostMemRetriever, GhostMemStore
from llama_index_ghostmem import GhostMemChatStore

RANDOM = random.Random(23)
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def random_text(size: int) -> str:
    """``size`` bytes of random CJK characters (3 bytes each) padded with random ASCII letters."""
    cjk = "".join(chr(RANDOM.randint(0x4E00, 0x9FFF)) for _ in range(size // 3))
    return cjk + "".join(RANDOM.choice(LETTERS) for _ in range(size % 3))


def random_letters(size: int) -> str:
    return "".join(RANDOM.choice(LETTERS) for _ in range(size))


def nbytes(text: str) -> int:
    return len(text.encode())


def messages(*texts: str) -> list[MessageRecord]:
    now = datetime.now(UTC)
    return [MessageRecord(native_id=f"m{n}", role="user", text=t, ts=now) for n, t in enumerate(texts)]


TOO_LONG = {
    "3,000 random bytes": random_text(3_000),
    "one byte over, multi-byte": random_text(STORED_PROJECT_BYTES + 1),
    "one byte over, ASCII": "/home/me/" + "p" * (STORED_PROJECT_BYTES - 9) + "/z",
}


def test_shortened_keeps_the_start_and_the_end_and_tells_texts_apart() -> None:
    assert shortened("abc", 3) == "abc"
    for limit in (STORED_PROJECT_BYTES, 999, 998, 100):
        for text in (random_text(3_000), "é" * 800, "a" + "€" * 1_000):
            cut = shortened(text, limit)
            assert nbytes(cut) <= limit and nbytes(cut) >= limit - 6  # cut at character boundaries, no more
            assert text.startswith(cut.split("…")[0]) and text.endswith(cut.split("…")[-1])
            assert shortened(text, limit) == cut
    start, end = random_letters(600), random_letters(600)
    assert shortened(start + "x" + end, 1_000) != shortened(start + "y" + end, 1_000)


def stored_projects(pg_dsn: str, owner: str) -> dict[str, set[str]]:
    """Every project the owner's rows hold, per table that keeps one."""
    with psycopg.connect(pg_dsn) as conn:
        return {
            table: {
                r[0] for r in conn.execute(f"SELECT DISTINCT project FROM {table} WHERE owner = %s", (owner,))
            }
            for table in (
                "ghostmem.conversations",
                "ghostmem.messages",
                "ghostmem.message_counts",
                "ghostmem.message_vectors",
                "ghostmem.message_bits",
            )
        }


@pytest.mark.parametrize("project", list(TOO_LONG.values()), ids=list(TOO_LONG))
def test_a_long_project_is_kept_shortened_by_capture_and_found_by_its_start_and_end(
    gm: GhostMem, pg_dsn: str, project: str
) -> None:
    kept = shortened(project, STORED_PROJECT_BYTES)
    assert nbytes(kept) <= STORED_PROJECT_BYTES < nbytes(project)
    result = gm.capture_append("c1", messages("how do I restart postgres", "with pg_ctl restart"), platform="langchain",
                               project=project)  # fmt: skip
    assert result.messages_new == 2
    found = stored_projects(pg_dsn, gm.owner)
    assert found == {table: {kept} for table in found}
    # a filter finds it by its start (a root) or its end (a folder)
    for part in (project[:30], project[-30:]):
        hits = gm.search_personal_memory(query="restart postgres", project=part).data.rows
        assert [h.conv_id for h in hits] == ["c1"]
        assert [r.conv_id for r in gm.list_project_conversations(project=part).data.rows] == ["c1"]


def test_an_import_keeps_long_projects_and_deep_paths_and_resumes(
    gm: GhostMem, pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Claude Code session in a folder whose path is about 3,000 random bytes, with a working directory as long
    (its project), and a generic export whose lines name projects of 3,000 bytes and ones that differ only in the
    middle: everything is imported, nothing is reported, and the next run finds every file unchanged."""
    deep = tmp_path.joinpath(*(random_letters(240) for _ in range(12)))
    assert nbytes(str(deep)) > 2_800
    cwd = "/" + "/".join(random_letters(200) for _ in range(15))
    jsonl(deep / "projects" / "-repo" / "s1.jsonl", [
        cc("user", "u1", None, "how do I restart postgres", sessionId="s1", cwd=cwd),
        cc("assistant", "a1", "u1", [{"type": "text", "text": "pg_ctl restart"}], sessionId="s1", cwd=cwd),
    ])  # fmt: skip
    start, end = random_letters(700), random_letters(700)
    lines: list[dict[str, Any]] = [
        {"conv_id": "g1", "project": random_text(3_000), "messages": [{"role": "user", "text": "first"}]},
        {"conv_id": "g2", "project": start + "x" + end, "messages": [{"role": "user", "text": "second"}]},
        {"conv_id": "g3", "project": start + "y" + end, "messages": [{"role": "user", "text": "third"}]},
    ]
    jsonl(deep / "export.jsonl", lines)
    capsys.readouterr()
    assert main(["--json", "import", "--dsn", pg_dsn, "--owner", gm.owner, "--no-embed", str(deep)]) == 0
    out = capsys.readouterr()
    assert "index row size" not in out.out + out.err and "Traceback" not in out.err
    report = json.loads(out.out)
    assert report["problems"] == [] and report["conversations_new"] == 4
    with psycopg.connect(pg_dsn) as conn:
        projects = dict(
            conn.execute("SELECT conv_id, project FROM ghostmem.conversations WHERE owner = %s", (gm.owner,))
        )
        paths = [
            r[0] for r in conn.execute("SELECT path FROM ghostmem.import_state WHERE owner = %s", (gm.owner,))
        ]
    assert projects == {
        "s1": shortened(cwd, STORED_PROJECT_BYTES),
        **{line["conv_id"]: shortened(line["project"], STORED_PROJECT_BYTES) for line in lines},
    }
    assert projects["g2"] != projects["g3"]
    assert len(paths) == 2 and all(nbytes(p) <= STORED_PATH_BYTES for p in paths)
    assert len({p[-60:] for p in paths}) == 2  # the files' own names end their shortened paths
    quiet = gm.import_paths([deep], embed=False)
    assert (quiet.files_read, quiet.files_unchanged, quiet.problems) == (0, 2, [])
    # the file grew: read on from where the last run stopped
    with (deep / "projects" / "-repo" / "s1.jsonl").open("a") as fh:
        fh.write(json.dumps(cc("user", "u2", "a1", "and on windows?", sessionId="s1", cwd=cwd)) + "\n")
    grown = gm.import_paths([deep], embed=False)
    assert (grown.files_read, grown.files_unchanged, grown.problems) == (1, 1, [])
    assert grown.conversations_updated == 1


def namespace_at_the_limit(owner: str) -> tuple[str, ...]:
    """The owner and 31 more labels of random multi-byte text: 32 labels, 1,000 bytes joined by dots."""
    room = STORED_NAMESPACE_BYTES - nbytes(owner) - (STORED_NAMESPACE_LABELS - 1)
    sizes = [room // (STORED_NAMESPACE_LABELS - 1)] * (STORED_NAMESPACE_LABELS - 1)
    sizes[0] += room - sum(sizes)
    namespace = (owner, *(random_text(size) for size in sizes))
    assert nbytes(".".join(namespace)) == STORED_NAMESPACE_BYTES and len(namespace) == STORED_NAMESPACE_LABELS
    return namespace


def test_a_store_item_at_every_bound_fits_its_key(pg_dsn: str) -> None:
    """An owner of 256 random bytes naming a namespace of 32 labels and 1,000 random bytes, and a key of 1,000
    random bytes: put, get, search, list and delete (the budget the bounds were chosen for)."""
    owner = random_text(STORED_OWNER_BYTES)
    namespace = namespace_at_the_limit(owner)
    key = random_text(STORED_ITEM_KEY_BYTES)
    assert nbytes(key) == STORED_ITEM_KEY_BYTES
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as gm:
        store = GhostMemStore(gm)
        store.put(namespace, key, {"text": "restart postgres with pg_ctl"})
        item = store.get(namespace, key)
        assert item is not None and item.value == {"text": "restart postgres with pg_ctl"}
        assert [(i.namespace, i.key) for i in store.search((owner,), query="restart postgres")] == [
            (namespace, key)
        ]
        assert store.list_namespaces(prefix=(owner,)) == [namespace]
        store.delete(namespace, key)
        assert store.get(namespace, key) is None


OVER = {
    "namespace of 3,000 random bytes": (
        ("owner", random_text(3_000)),
        "k",
        InvalidNamespaceError,
        "namespace",
    ),
    "namespace one byte over, multi-byte": (
        ("owner", random_text(STORED_NAMESPACE_BYTES - 5)),
        "k",
        InvalidNamespaceError,
        "namespace",
    ),
    "namespace one byte over, ASCII": (
        ("owner", "n" * (STORED_NAMESPACE_BYTES - 5)),
        "k",
        InvalidNamespaceError,
        "namespace",
    ),
    "one label too many": (
        ("owner", *("l" for _ in range(STORED_NAMESPACE_LABELS))),
        "k",
        InvalidNamespaceError,
        "labels",
    ),
    "key of 3,000 random bytes": (("owner", "notes"), random_text(3_000), InvalidArgument, "key"),
    "key one byte over, multi-byte": (
        ("owner", "notes"),
        random_text(STORED_ITEM_KEY_BYTES + 1),
        InvalidArgument,
        "key",
    ),
    "key one byte over, ASCII": (
        ("owner", "notes"),
        "k" * (STORED_ITEM_KEY_BYTES + 1),
        InvalidArgument,
        "key",
    ),
}


@pytest.mark.parametrize(("namespace", "key", "error", "what"), list(OVER.values()), ids=list(OVER))
def test_a_store_item_beyond_a_bound_is_refused_before_anything_is_written(
    gm: GhostMem, pg_dsn: str, namespace: tuple[str, ...], key: str, error: type[Exception], what: str
) -> None:
    store = GhostMemStore(gm, owner=gm.owner)
    sentence = (
        "more than the"
        if what == "labels"
        else f"bytes, longer than the 1,000 bytes ghostmem keeps of a {what}"
    )
    with pytest.raises(error, match=sentence):
        store.put(namespace, key, {"text": "refused"})
    # a batch whose later put is refused writes none of its puts, even those before a read
    with pytest.raises(error, match=sentence):
        store.batch(
            [
                PutOp(("owner", "fine"), "k1", {"text": "first"}),
                PutOp(("owner", "fine"), "k2", {"text": "second"}),
                PutOp(namespace, key, {"text": "refused"}),
            ]
        )
    # the core write path refuses it too, whoever calls it
    with gm.connection() as conn, pytest.raises(InvalidArgument, match=sentence):
        write_items(
            conn,
            gm.owner,
            [ItemWrite(("owner", "fine"), "k3", {"t": "x"}), ItemWrite(namespace, key, {})],
            gm.embedder,
        )
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute(
            "SELECT count(*) FROM ghostmem.store_items WHERE owner = %s", (gm.owner,)
        ).fetchone() == (0,)


@pytest.mark.parametrize(
    "platform", ["my-app", random_letters(3_000), "x" * 3_000], ids=["unknown", "random", "long"]
)
def test_a_capture_naming_a_platform_ghostmem_does_not_know_is_refused(
    gm: GhostMem, pg_dsn: str, platform: str
) -> None:
    """``platform=`` is typed but was not checked: any string was stored (one the platform filter can never name,
    3,000 repeated bytes even compressed into every key and headed each search hit whole), 3,000 random bytes failed
    only at the write. It is refused in one sentence, before anything is written."""
    for write in (gm.capture_append, gm.capture_replace):
        with pytest.raises(
            InvalidArgument, match=r"unknown platform '.*': a conversation comes from one of claude"
        ):
            write("c1", messages("how do I restart postgres"), platform=platform)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="unknown platform"):
        gm.capture_sync("c1", messages("x"), ["a"], platform=platform)  # type: ignore[arg-type]
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute(
            "SELECT count(*) FROM ghostmem.messages WHERE owner = %s", (gm.owner,)
        ).fetchone() == (0,)
        assert conn.execute(
            "SELECT count(*) FROM ghostmem.conversations WHERE owner = %s", (gm.owner,)
        ).fetchone() == (0,)


def test_a_long_speaker_is_kept_shortened_and_a_name_that_lower_grows_fits(
    gm: GhostMem, pg_dsn: str, tmp_path: Path
) -> None:
    """A message's speaker is in the (owner, lower(speaker)) index: an import line naming a speaker of 3,000 random
    bytes was refused whole ("index row size"); it is imported with the speaker shortened. A speaker at the bound
    whose lower() grows by half ('Ⱥ' → 'ⱥ'), beside an owner at its own, fits."""
    hostile = random_text(3_000)
    export = jsonl(tmp_path / "speakers.jsonl", [
        {"conv_id": "s1", "messages": [{"role": "user", "text": "who restarts postgres?", "speaker": hostile},
                                       {"role": "assistant", "text": "Ann does", "speaker": "Bot"}]},
    ])  # fmt: skip
    report = gm.import_paths([export], embed=False)
    assert report.problems == [] and report.conversations_new == 1
    with psycopg.connect(pg_dsn) as conn:
        speakers = [r[0] for r in conn.execute(
            "SELECT speaker FROM ghostmem.messages WHERE owner = %s ORDER BY seq", (gm.owner,)
        )]  # fmt: skip
    assert speakers == [shortened(hostile, STORED_SPEAKER_BYTES), "Bot"]
    growing = "Ⱥ" * (STORED_SPEAKER_BYTES // 2)  # U+023A, 2 bytes; its lower case U+2C65 is 3
    assert nbytes(growing) == STORED_SPEAKER_BYTES
    owner = random_text(STORED_OWNER_BYTES)
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as at_limit:
        turn = [
            MessageRecord(
                native_id="m0", role="user", text="restart it", ts=datetime.now(UTC), speaker=growing
            )
        ]
        assert at_limit.capture_append("c1", turn, platform="langchain").messages_new == 1
        with psycopg.connect(pg_dsn) as conn:
            grown = conn.execute(
                "SELECT octet_length(lower(speaker)) FROM ghostmem.messages WHERE owner = %s", (owner,)
            )
            assert grown.fetchone() == (STORED_SPEAKER_BYTES * 3 // 2,)


def test_a_summary_naming_a_leaf_by_an_overlong_id_is_a_problem_of_its_line(
    gm: GhostMem, tmp_path: Path
) -> None:
    """A Claude Code summary names the last message of the session it titles; an id longer than ghostmem keeps
    names no stored message. It failed its file's summary with PostgreSQL's "index row size" text at line 0; it is
    a problem of its line, and the rest is imported."""
    project = tmp_path / "projects" / "-repo"
    jsonl(project / "s1.jsonl", [cc("user", "u1", None, "how do I restart postgres", sessionId="s1")])
    summaries = jsonl(project / "summaries.jsonl", [
        {"type": "summary", "summary": "Restart", "leafUuid": random_text(2_700)},
        {"type": "summary", "summary": "Restart postgres", "leafUuid": "u1"},
    ])  # fmt: skip
    report = gm.import_paths([tmp_path / "projects"], embed=False)
    assert [str(p) for p in report.problems] == [
        f"{summaries}:1: a summary names its message by an id of 2,700 bytes, longer than the 1,000 bytes ghostmem"
        " keeps of an id; skipped"
    ]
    assert report.conversations_new == 1
    assert [r.title for r in gm.list_recent_conversations(days=MAX_DAYS).data.rows] == ["Restart postgres"]


def test_a_project_granted_to_a_role_is_bounded_like_a_conversations(gm: GhostMem) -> None:
    """A role's project map is keyed by (role, project): a project over the bound is refused in one sentence before
    anything is written (3,000 random bytes failed at the write)."""
    for project in (random_text(3_000), random_text(STORED_PROJECT_BYTES + 1)):
        with pytest.raises(
            InvalidArgument, match=r"bytes, longer than the 1,000 bytes ghostmem keeps of a project"
        ):
            gm.grant_project("postgres", project)
    assert gm.grant_project("postgres", at_limit := random_text(STORED_PROJECT_BYTES)) == [at_limit]
    assert gm.revoke_project("postgres") == []


NAMES_TOO_LONG = {
    "3,000 random bytes": random_text(3_000),
    "one byte over, multi-byte": random_text(STORED_EMBEDDER_NAME_BYTES + 1),
    "one byte over, ASCII": "/models/" + "m" * (STORED_EMBEDDER_NAME_BYTES - 7),
}


@pytest.fixture(scope="module")
def embedded(server_dsn: str) -> Iterator[str]:
    """A database of its own holding an embedded conversation: a re-embedding changes the whole database."""
    with fresh_database(server_dsn, "ghostmem_embedder") as dsn:
        with GhostMem(dsn=dsn, owner="embedded", embedder=HashEmbedder()) as gm:
            gm.capture_append(
                "c1", messages("how do I restart postgres", "with pg_ctl"), platform="langchain"
            )
        yield dsn


def vectors_and_model(dsn: str) -> tuple[Any, ...]:
    """What a re-embedding changes: the vectors, the model the settings name, the cache, the vector indexes."""
    with psycopg.connect(dsn) as conn:
        return tuple(
            conn.execute(query).fetchone()
            for query in (
                "SELECT count(*) FROM ghostmem.messages WHERE embedding IS NOT NULL",
                "SELECT value FROM ghostmem.settings WHERE key = 'embed_model'",
                "SELECT count(*), max(octet_length(model)) FROM ghostmem.embedding_cache",
                "SELECT count(*) FROM pg_indexes WHERE indexdef LIKE '%hnsw%'",
            )
        )


@pytest.mark.parametrize("hostile", list(NAMES_TOO_LONG.values()), ids=list(NAMES_TOO_LONG))
def test_an_embedder_named_longer_than_ghostmem_keeps_is_refused_where_it_is_configured(
    gm: GhostMem,
    pg_dsn: str,
    embedded: str,
    hostile: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An embedder's name keys the embedding cache: 3,000 random bytes failed at the first embedding with
    PostgreSQL's "index row size" text, after an import had written its conversations, or after a re-embedding had
    dropped every vector. It is refused in one sentence wherever an embedder comes in, before anything is written."""
    said = (
        f"is {nbytes(hostile):,} bytes, longer than the 1,000 bytes ghostmem keeps of an embedder's name (it keys "
        "the embedding cache): name it by"
    )
    refused = re.escape(said)
    gm.migrate()  # the schema exists, so "nothing written" can be checked
    # the client: an application's own embedder, a model's name, the environment; sync and async
    for given in (Renamed(hostile), hostile):
        for client in (GhostMem, AsyncGhostMem):
            with pytest.raises(InvalidArgument, match=refused):
                client(dsn=pg_dsn, owner="named", embedder=given)
    with monkeypatch.context() as env:
        env.setenv("GHOSTMEM_EMBED_MODEL", hostile)
        with pytest.raises(InvalidArgument, match=refused):
            GhostMem(dsn=pg_dsn, owner="named")
        # the command line: one sentence on stderr, nothing imported
        export = jsonl(tmp_path / "g.jsonl", [
            {"conv_id": "c1", "messages": [{"role": "user", "text": "how do I restart postgres"}]},
        ])  # fmt: skip
        capsys.readouterr()
        assert main(["import", "--dsn", pg_dsn, "--owner", "named", str(export)]) != 0
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err and "index row size" not in err
    # the adapters: each builds its store with the embedder it is given
    for adapter in (Binding, GhostMemStore, GhostMemRetriever, GhostMemChatStore):
        with pytest.raises(InvalidArgument, match=refused):
            adapter(pg_dsn, owner="named", embedder=Renamed(hostile))
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute(
            "SELECT count(*) FROM ghostmem.conversations WHERE owner = 'named'"
        ).fetchone() == (0,)
        assert conn.execute(
            "SELECT count(*) FROM ghostmem.embedding_cache WHERE octet_length(model) > %s",
            (STORED_EMBEDDER_NAME_BYTES,),
        ).fetchone() == (0,)
    # a re-embedding, by the client and the command line, changes nothing (it dropped every vector first)
    before = vectors_and_model(embedded)
    assert before[0] == (2,) and before[1] == ("hash",) and before[3][0] > 0  # type: ignore[index]
    with GhostMem(dsn=embedded, owner="embedded", embedder=HashEmbedder()) as store:
        with pytest.raises(InvalidArgument, match=refused):
            store.reembed(Renamed(hostile))
        with pytest.raises(InvalidArgument, match=refused):
            store.reembed(hostile)
        assert store.embedder.name == "hash"
    capsys.readouterr()
    assert main(["reembed", "--dsn", embedded, "--model", hostile]) != 0
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    assert vectors_and_model(embedded) == before


def test_an_embedder_name_with_a_nul_is_refused(pg_dsn: str) -> None:
    """PostgreSQL's text holds no NUL: such a name failed at the first embedding; it is refused where it comes in."""
    for given in (Renamed("my-model\x00v2"), "my-model\x00v2"):
        with pytest.raises(InvalidArgument, match=r"the embedder's name 'my-model\\x00v2' contains a NUL"):
            GhostMem(dsn=pg_dsn, embedder=given)


def test_an_embedder_named_at_the_bound_imports_and_finds_by_meaning(
    pg_dsn: str, owner: str, tmp_path: Path
) -> None:
    """A name of exactly STORED_EMBEDDER_NAME_BYTES random bytes (multi-byte, incompressible) keys every cached
    vector, and an import embeds with it and a search by meaning finds what it embedded."""
    name = random_text(STORED_EMBEDDER_NAME_BYTES)
    assert nbytes(name) == STORED_EMBEDDER_NAME_BYTES
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=Renamed(name)) as gm:
        import_generic(gm, tmp_path / "c.jsonl", [
            conversation("pg", "Postgres", 1, ["autovacuum keeps running on the orders table", "tune it"]),
            conversation("cats", "Cats", 2, ["which food do cats like", "cats love fish"]),
        ])  # fmt: skip
        found = gm.search_personal_memory("cats fish", mode="vector").data.rows
        assert [row.conv_id for row in found][:1] == ["cats"]
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute(
            "SELECT count(*) FROM ghostmem.messages WHERE owner = %s AND embedding IS NOT NULL", (owner,)
        ).fetchone() == (4,)
        assert conn.execute(
            "SELECT count(*) FROM ghostmem.embedding_cache WHERE model = %s", (name,)
        ).fetchone() == (4,)
