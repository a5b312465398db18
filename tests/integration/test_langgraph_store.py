"""GhostMemStore against LangGraph's store contract, ported from the cases LangGraph runs on its own stores
(langgraph ships no store conformance suite), plus the owner boundary and a LangMem agent on top."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder
from ghostmem.embed import Embedder
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langmem import create_manage_memory_tool, create_search_memory_tool
from support.adapters import ScriptedChatModel, call
from support.statements import read_without_jit

from langchain_ghostmem import GhostMemStore


@pytest.fixture
def store(gm: GhostMem) -> Iterator[GhostMemStore]:
    """Every item of this test belongs to the test's owner, whatever its namespace."""
    yield GhostMemStore(gm, owner=gm.owner)


@pytest.fixture
def shared(gm: GhostMem) -> Iterator[GhostMemStore]:
    """The default rule: the namespace's first label is the owner."""
    yield GhostMemStore(gm)


# --- the contract ----------------------------------------------------------------------------------------------


def test_put_get_update_delete(store: GhostMemStore) -> None:
    ns = ("docs", "public")
    store.put(ns, "d1", {"title": "First", "body": {"text": "hello", "n": 1}})
    first = store.get(ns, "d1")
    assert first is not None and isinstance(first, Item)
    assert (first.namespace, first.key, first.value) == (
        ns,
        "d1",
        {"title": "First", "body": {"text": "hello", "n": 1}},
    )
    time.sleep(0.01)
    store.put(ns, "d1", {"title": "Second"})
    second = store.get(ns, "d1")
    assert second is not None and second.value == {"title": "Second"}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    assert store.get(("docs", "private"), "d1") is None  # same key, other namespace
    assert store.get(("docs",), "d1") is None  # a prefix is not the namespace
    store.delete(ns, "d1")
    assert store.get(ns, "d1") is None
    store.delete(ns, "never-existed")  # deleting nothing is not an error


def test_batch_runs_in_order_with_every_result(store: GhostMemStore) -> None:
    store.put(("t", "foo"), "k1", {"data": "v1"})
    results = store.batch(
        [
            GetOp(("t", "foo"), "k1"),
            PutOp(("t", "bar"), "k2", {"data": "v2"}),
            GetOp(("t", "bar"), "k2"),  # sees the put before it
            SearchOp(("t",), filter={"data": "v2"}),
            ListNamespacesOp(max_depth=None, limit=10),
            PutOp(("t", "bar"), "k2", None),
            GetOp(("t", "bar"), "k2"),
            PutOp(("t", "x"), "k", {"n": 1}),
            PutOp(("t", "x"), "k", {"n": 2}),  # the later put of the same item wins
        ]
    )
    assert len(results) == 9
    assert isinstance(results[0], Item) and results[0].value == {"data": "v1"}
    assert results[1] is None
    assert isinstance(results[2], Item) and results[2].value == {"data": "v2"}
    assert [i.key for i in results[3]] == ["k2"]  # type: ignore[union-attr]
    assert results[4] == [("t", "bar"), ("t", "foo")]
    assert results[6] is None
    got = store.get(("t", "x"), "k")
    assert got is not None and got.value == {"n": 2}


def test_list_namespaces(store: GhostMemStore) -> None:
    spaces = [
        ("test", "documents", "public"),
        ("test", "documents", "private"),
        ("test", "images", "public"),
        ("test", "images", "private"),
        ("prod", "documents", "public"),
        ("prod", "documents", "private"),
    ]
    for ns in spaces:
        store.put(ns, "dummy", {"content": "dummy"})
    assert store.list_namespaces() == sorted(spaces)
    assert store.list_namespaces(prefix=("test",)) == sorted(s for s in spaces if s[0] == "test")
    assert store.list_namespaces(suffix=("public",)) == sorted(s for s in spaces if s[-1] == "public")
    assert store.list_namespaces(prefix=("*", "documents")) == sorted(
        s for s in spaces if s[1] == "documents"
    )
    assert store.list_namespaces(prefix=("test",), suffix=("*", "private")) == [
        ("test", "documents", "private"),
        ("test", "images", "private"),
    ]
    assert store.list_namespaces(max_depth=2) == [
        ("prod", "documents"),
        ("test", "documents"),
        ("test", "images"),
    ]
    assert store.list_namespaces(max_depth=1) == [("prod",), ("test",)]
    assert store.list_namespaces(limit=3) == sorted(spaces)[:3]
    assert store.list_namespaces(limit=3, offset=4) == sorted(spaces)[4:]
    assert store.list_namespaces(prefix=("test", "documents", "public", "deeper")) == []
    assert store.batch([ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("private",)),))])[
        0
    ] == sorted(s for s in spaces if s[-1] == "private")
    for ns in spaces:
        store.delete(ns, "dummy")
    assert store.list_namespaces() == []


def test_search_by_namespace_filter_and_pages(store: GhostMemStore) -> None:
    data = [
        (
            ("test", "docs"),
            "doc1",
            {"title": "First Doc", "author": "Alice", "tags": ["important"], "meta": {"v": 1}},
        ),
        (
            ("test", "docs"),
            "doc2",
            {"title": "Second Doc", "author": "Bob", "tags": ["draft"], "meta": {"v": 2}},
        ),
        (("test", "images"), "img1", {"title": "Image 1", "author": "Alice", "tags": ["final"]}),
    ]
    for ns, key, value in data:
        store.put(ns, key, value)
        time.sleep(0.002)
    # without a query: most recently updated first, no score
    everything = store.search(("test",))
    assert [i.key for i in everything] == ["img1", "doc2", "doc1"] and all(
        i.score is None for i in everything
    )
    assert {i.key for i in store.search(("test", "docs"))} == {"doc1", "doc2"}
    assert {i.key for i in store.search(("test",), filter={"author": "Alice"})} == {"doc1", "img1"}
    assert [i.key for i in store.search(("test",), filter={"tags": ["draft"]})] == [
        "doc2"
    ]  # a list as a whole
    assert store.search(("test",), filter={"tags": "draft"}) == []
    assert [i.key for i in store.search(("test",), filter={"meta": {"v": 2}})] == ["doc2"]  # nested equality
    assert [i.key for i in store.search(("test",), filter={"author": "Alice", "title": "Image 1"})] == [
        "img1"
    ]
    assert [i.key for i in store.search(("test",), filter={"author": {"$ne": "Alice"}})] == ["doc2"]
    assert [i.key for i in store.search(("test",), filter={"meta": {"$ne": {"v": 1}}})] == ["img1", "doc2"]
    assert len(store.search(("test",), limit=2)) == 2
    assert [i.key for i in store.search(("test",), offset=2)] == ["doc1"]
    assert store.search(("test",), limit=0) == []
    assert [i.key for i in store.search(("test",), query="doc", limit=10**9)][
        :1
    ] != []  # a huge page is bounded
    assert store.search(("test",), query="doc", offset=10**6) == []
    for bad in ({"limit": -1}, {"offset": -5}):
        with pytest.raises(ValueError, match="must not be negative"):
            store.search(("test",), **bad)
        with pytest.raises(ValueError, match="must not be negative"):
            store.list_namespaces(**bad)
    assert store.search(("nothing",)) == []


def test_comparison_filters_compare_numbers_as_numbers(store: GhostMemStore) -> None:
    ns = ("test", "scores")
    for key, score in [("a", 2), ("b", 9), ("c", 10), ("d", 11), ("e", 9.5), ("s", "10")]:
        store.put(ns, key, {"score": score})

    def scores(flt: dict[str, Any]) -> list[Any]:
        return sorted((i.value["score"] for i in store.search(ns, filter=flt)), key=str)

    assert scores({"score": {"$gte": 10}}) == [10, 11]  # not 9 (text order) and not the string "10"
    assert scores({"score": {"$gt": 9}}) == [10, 11, 9.5]
    assert scores({"score": {"$lt": 10}}) == [2, 9, 9.5]
    assert scores({"score": {"$lte": 9, "$gt": 2}}) == [9]
    assert scores({"score": {"$eq": 10}}) == [10]
    assert scores({"score": {"$gte": "10"}}) == ["10"]  # strings compare with strings
    with pytest.raises(ValueError, match=r"'\$regex' on 'score' is not supported"):
        store.search(ns, filter={"score": {"$regex": "1.*"}})


def test_search_with_a_query_ranks_by_words_and_meaning(store: GhostMemStore) -> None:
    ns = ("memories",)
    store.put(ns, "dark", {"content": "The user prefers dark mode in every editor"})
    store.put(ns, "deploy", {"content": "Deploys go out on Tuesdays after the migration check"})
    store.put(ns, "food", {"content": "Allergic to peanuts; likes spicy ramen"})
    store.put(ns, "hidden", {"content": "dark mode secret note"}, index=False)
    store.put(ns, "title-only", {"title": "ramen recipes", "content": "unrelated words"}, index=["title"])
    hits = store.search(ns, query="which editor theme, dark mode?")
    assert hits[0].key == "dark"
    assert hits[0].score is not None and 0 < hits[0].score <= 1
    assert all(a.score >= b.score for a, b in itertools.pairwise(hits))  # type: ignore[operator]
    assert "hidden" not in {h.key for h in hits}  # index=False: stored, never found by a query ...
    assert store.get(ns, "hidden") is not None  # ... but still there
    assert {h.key for h in store.search(ns, query="ramen")[:2]} == {"title-only", "food"}
    assert store.search(ns, query="recipes")[0].key == "title-only"
    # a filter narrows a query's candidates; offset pages through the ranking
    assert [
        h.key for h in store.search(ns, query="dark mode", filter={"content": {"$ne": "x"}}, limit=1)
    ] == ["dark"]
    ranked = [h.key for h in store.search(ns, query="dark mode deploys ramen", limit=10)]
    assert [h.key for h in store.search(ns, query="dark mode deploys ramen", limit=2, offset=1)] == ranked[
        1:3
    ]


def test_a_found_items_score_says_how_much_of_the_query_it_holds(store: GhostMemStore) -> None:
    """``score`` is a search hit's relevance (``ghostmem.search.relevance``): 1 for an item holding every word of
    the query, a share for one holding some (a rare word counting more), 0 for one sharing neither words nor
    meaning. The rank-based score it replaces gave the first of unrelated items 0.5 (first in the vector leg
    alone) and an item second in both legs 0.98."""
    ns = ("memories",)
    store.put(ns, "paris", {"content": "the weather in Paris is rainy in November"})
    store.put(ns, "report", {"content": "weather report"})
    store.put(ns, "pizza", {"content": "pizza with extra cheese"})
    hits = store.search(ns, query="weather in Paris")
    assert [h.key for h in hits][:2] == ["paris", "report"]
    assert hits[0].score == pytest.approx(1.0)
    # "report" holds "weather" (in two of the three items) and not "Paris" (in one): less than half the words' idf
    assert hits[1].score is not None and 0.3 < hits[1].score < 0.8
    assert all(a.score >= b.score for a, b in itertools.pairwise(hits))  # type: ignore[operator]
    # the nearest items still come back, but score nothing: they share no word and are far in meaning
    unrelated = store.search(ns, query="quantum chromodynamics")
    assert len(unrelated) == 3 and {h.score for h in unrelated} == {0.0}
    # a page after the first is scored as in the whole ranking (never above the item ranked before it)
    ranked = [(h.key, h.score) for h in store.search(ns, query="weather report Paris cheese")]
    paged = [
        (h.key, h.score) for h in store.search(ns, query="weather report Paris cheese", offset=1, limit=2)
    ]
    assert paged == ranked[1:3]


def test_with_the_real_model_a_paraphrase_scores_high_and_the_rest_low(
    pg_dsn: str, owner: str, real_embedder: Embedder
) -> None:
    """all-MiniLM-L6-v2 end to end: an item that answers the query in other words scores high, the others (and
    every item, for a query about something never stored) low."""
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=real_embedder) as gm:
        store = GhostMemStore(gm, owner=owner)
        ns = ("memories",)
        store.put(ns, "food", {"content": "Allergic to peanuts; likes spicy ramen"})
        store.put(ns, "dark", {"content": "The user prefers dark mode in every editor"})
        store.put(ns, "deploy", {"content": "Deploys go out on Tuesdays after the migration check"})
        for query, key in (("food allergies", "food"), ("which editor theme", "dark")):
            hits = store.search(ns, query=query)
            assert hits[0].key == key and (hits[0].score or 0) >= 0.5, (query, hits)
            assert all((h.score or 0) < 0.2 for h in hits[1:]), (query, hits)
        assert all((h.score or 0) < 0.2 for h in store.search(ns, query="quantum chromodynamics"))


def test_search_fields_choose_what_an_item_is_found_by(gm: GhostMem) -> None:
    store = GhostMemStore(gm, owner=gm.owner, fields=["summary"])
    store.put(("n",), "a", {"summary": "quarterly budget review", "body": "zebra giraffe"})
    store.put(("n",), "b", {"summary": "zebra migration photos", "body": "budget"})
    top = store.search(("n",), query="zebra")[0]
    assert top.key == "b" and (top.score or 0) > 0.5  # found by its words and its vector
    # "giraffe" is only in a field nobody indexed: no item has it as a word, so no score passes the vector share
    assert all((h.score or 0) <= 0.5 for h in store.search(("n",), query="giraffe"))


def test_an_unchanged_text_is_not_embedded_again(gm: GhostMem, owner: str) -> None:
    calls: list[int] = []

    class Counting(HashEmbedder):
        def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
            calls.append(len(texts))
            return super().embed_documents(texts)

    with GhostMem(dsn=gm.dsn, owner=owner, embedder=Counting()) as counted:
        store = GhostMemStore(counted, owner=owner)
        store.put(("n",), "a", {"content": "a memory worth a vector"})
        store.put(("n",), "a", {"content": "a memory worth a vector", "seen": 2})  # same text, new value
        store.put(("n",), "a", {"content": "a changed memory"})
    assert calls == [1, 1]
    assert [h.key for h in store.search(("n",), query="changed memory")] == ["a"]


def test_ttl_expires_refreshes_and_sweeps(gm: GhostMem, owner: str) -> None:
    store = GhostMemStore(gm, owner=owner, ttl={"default_ttl": 5, "refresh_on_read": True})
    store.put(("t",), "short", {"content": "expiring note"})
    store.put(("t",), "forever", {"content": "kept note"}, ttl=None)

    def expire(key: str, minutes_ago: float) -> None:
        with gm.connection() as conn:
            conn.execute(
                "UPDATE ghostmem.store_items SET expires_at = now() - %s * interval '1 minute'"
                " WHERE owner = %s AND key = %s",
                (minutes_ago, owner, key),
            )

    def expires_at(key: str) -> Any:
        with gm.connection() as conn:
            row = conn.execute(
                "SELECT expires_at - now() FROM ghostmem.store_items WHERE owner = %s AND key = %s",
                (owner, key),
            ).fetchone()
        return row[0] if row else "gone"

    assert 4 * 60 < expires_at("short").total_seconds() <= 5 * 60
    assert expires_at("forever") is None
    # a read refreshes: push the expiry close, read, and it is five minutes away again (a minute away, not a
    # second: a loaded machine's stall of a second between the two let the item expire before the read)
    with gm.connection() as conn:
        conn.execute(
            "UPDATE ghostmem.store_items SET expires_at = now() + interval '1 minute'"
            " WHERE owner = %s AND key = 'short'",
            (owner,),
        )
    assert store.get(("t",), "short") is not None
    assert expires_at("short").total_seconds() > 4 * 60
    store.get(("t",), "short", refresh_ttl=False)
    store.search(("t",), query="expiring", refresh_ttl=False)
    expire("short", 1)
    assert store.get(("t",), "short") is None
    assert [i.key for i in store.search(("t",))] == ["forever"]
    assert [i.key for i in store.search(("t",), query="expiring note")] == ["forever"]
    assert store.list_namespaces() == [("t",)]
    assert store.sweep_ttl() >= 1
    assert expires_at("short") == "gone" and expires_at("forever") is None
    with pytest.raises(ValueError, match="ttl must be a positive number"):
        store.put(("t",), "bad", {"x": 1}, ttl=-1)


async def test_async_methods(store: GhostMemStore) -> None:
    await store.aput(("a", "b"), "k", {"content": "asynchronous memory of the harbour"})
    got = await store.aget(("a", "b"), "k")
    assert got is not None and got.value["content"].startswith("asynchronous")
    found, spaces = await asyncio.gather(
        store.asearch(("a",), query="harbour"), store.alist_namespaces(prefix=("a",))
    )
    assert [i.key for i in found] == ["k"] and spaces == [("a", "b")]
    await store.adelete(("a", "b"), "k")
    assert await store.aget(("a", "b"), "k") is None


# --- the owner boundary -------------------------------------------------------------------------------------


def test_the_first_label_is_the_owner(shared: GhostMemStore, gm: GhostMem) -> None:
    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    shared.put((alice, "memories"), "m", {"content": "alice likes sailing"})
    shared.put((bob, "memories"), "m", {"content": "bob likes sailing too"})
    with gm.connection() as conn:
        rows = conn.execute(
            "SELECT owner, namespace FROM ghostmem.store_items WHERE owner IN (%s, %s) ORDER BY owner",
            (alice, bob),
        ).fetchall()
    assert rows == [(alice, [alice, "memories"]), (bob, [bob, "memories"])]
    assert [i.value["content"] for i in shared.search((alice,), query="sailing")] == ["alice likes sailing"]
    assert shared.list_namespaces(prefix=(bob,)) == [(bob, "memories")]
    # operations that name no owner are refused rather than read across owners
    for attempt in (
        lambda: shared.search((), query="sailing"),
        lambda: shared.list_namespaces(),
        lambda: shared.list_namespaces(suffix=("memories",)),
        lambda: shared.list_namespaces(prefix=("*", "memories")),
    ):
        with pytest.raises(InvalidNamespaceError):
            attempt()


def test_a_mapping_names_the_owner_and_nothing_crosses_it(gm: GhostMem) -> None:
    store = GhostMemStore(gm, owner=lambda ns: ns[1])
    alice, mallory = f"alice-{uuid.uuid4().hex[:6]}", f"mallory-{uuid.uuid4().hex[:6]}"
    store.put(("memories", alice), "secret", {"content": "alice's bank is in Zurich"})
    store.put(("memories", mallory), "x", {"content": "mallory"})
    # mallory's namespace, alice's key, every trick a caller could put in a label or a filter
    assert store.get(("memories", mallory), "secret") is None
    assert {i.namespace for i in store.search(("memories", mallory), query="bank Zurich")} == {
        ("memories", mallory)
    }
    assert store.search(("memories", mallory), filter={"content') OR true --": 1}) == []
    assert store.search(("memories", mallory), filter={"content": {"$ne": "nothing"}})[0].key == "x"
    store.delete(("memories", mallory), "secret")  # deletes nothing of alice's
    assert store.get(("memories", alice), "secret") is not None
    with pytest.raises(InvalidNamespaceError):
        store.search(("memories",), query="bank")  # no owner label
    for label in ("a.b", "a\x00b", ""):
        with pytest.raises(InvalidNamespaceError):
            store.batch([GetOp(("memories", label), "k")])
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph", alice), "k", {"x": 1})


def test_hostile_values_round_trip_and_stay_bound(store: GhostMemStore) -> None:
    deep: dict[str, Any] = {"leaf": "bottom"}
    for _ in range(200):
        deep = {"d": deep}
    hostile = {
        "quote": "'; DROP TABLE ghostmem.store_items; --",
        "unicode": "会話 🚀 \u202e",
        "big": "word " * 50_000,
        "deep": deep,
        "nums": [1, 2.5, -3.25e-7, None, True],
    }
    store.put(("h",), "k'\"\\", hostile)
    got = store.get(("h",), "k'\"\\")
    assert got is not None and got.value == hostile
    assert [i.key for i in store.search(("h",), query="DROP TABLE")] == ["k'\"\\"]


# --- LangMem on it ---------------------------------------------------------------------------------------------


def langmem_script(messages: Sequence[BaseMessage]) -> AIMessage:
    """Store the facts after "remember:" with LangMem's manage tool, or search for what follows "recall:"."""
    done = [m for m in messages if isinstance(m, ToolMessage)]
    question = next(m for m in reversed(messages) if isinstance(m, HumanMessage)).text
    if done:
        return AIMessage(f"done: {done[-1].content}")
    if question.startswith("remember:"):
        facts = question.removeprefix("remember:").split(";")
        return AIMessage(
            "",
            tool_calls=[
                {"name": "manage_memory", "args": {"content": f.strip(), "action": "create"}, "id": f"c{n}"}
                for n, f in enumerate(facts)
            ],
        )
    return call("search_memory", 0, query=question.removeprefix("recall:").strip())


def test_langmem_manage_and_search_tools_on_ghostmem(gm: GhostMem) -> None:
    store = GhostMemStore(gm, owner=lambda ns: ns[1])
    namespace = ("memories", "{langgraph_user_id}")
    agent = create_agent(
        ScriptedChatModel(script=langmem_script),
        tools=[
            create_manage_memory_tool(namespace=namespace),
            create_search_memory_tool(namespace=namespace),
        ],
        store=store,
    )
    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    for user, facts in (
        (alice, "remember: prefers window seats on trains; allergic to shellfish"),
        (bob, "remember: allergic to pollen"),
    ):
        agent.invoke({"messages": [HumanMessage(facts)]}, {"configurable": {"langgraph_user_id": user}})
    stored = store.search(("memories", alice))
    assert sorted(i.value["content"] for i in stored) == [
        "allergic to shellfish",
        "prefers window seats on trains",
    ]
    out = agent.invoke(
        {"messages": [HumanMessage("recall: what food allergy?")]},
        {"configurable": {"langgraph_user_id": alice}},
    )
    found = [m for m in out["messages"] if isinstance(m, ToolMessage)][-1]
    assert "shellfish" in str(found.content) and "pollen" not in str(found.content)  # bob's stays bob's
    # update through the tool keeps the key, delete removes it
    memory_id = next(i.key for i in stored if "shellfish" in i.value["content"])
    tool = create_manage_memory_tool(namespace=("memories", alice), store=store)
    tool.invoke({"content": "allergic to shellfish and peanuts", "action": "update", "id": memory_id})
    got = store.get(("memories", alice), memory_id)
    assert got is not None and got.value["content"] == "allergic to shellfish and peanuts"
    tool.invoke({"action": "delete", "id": memory_id})
    assert store.get(("memories", alice), memory_id) is None


def test_store_rows_live_in_the_ghostmem_database(gm: GhostMem, pg_dsn: str, store: GhostMemStore) -> None:
    store.put(("x",), "k", {"content": "in postgres"})
    with psycopg.connect(pg_dsn) as conn:
        row = conn.execute(
            "SELECT value, text, embedding IS NOT NULL FROM ghostmem.store_items WHERE owner = %s",
            (gm.owner,),
        ).fetchone()
    assert row == ({"content": "in postgres"}, "in postgres", True)


def test_a_query_of_thousands_of_words_is_answered_by_its_longest(gm: GhostMem, owner: str) -> None:
    """An agent's query is any text: one of 3,000 words (22 kB) over 300 items was matched and ranked word by word
    against every item (20 s for 2,000 words, 160 s for 1,000 words over 5,000 items). It keeps its 64 longest
    words, as a search of messages does: answered well within a statement timeout, the item holding the longest
    words among the found."""
    from ghostmem.items import ItemWrite, search_items, write_items

    rng = random.Random(7)
    with gm.connection() as conn:
        writes = [
            ItemWrite(("n",), f"k{i}", {"i": i}, " ".join(f"w{rng.randrange(5000)}" for _ in range(20)), None)
            for i in range(300)
        ]
        writes.append(
            ItemWrite(
                ("n",), "long", {"i": -1}, "antidisestablishmentarianism of the counterrevolutionaries", None
            )
        )
        write_items(conn, owner, writes, gm.embedder)
        query = " ".join(
            ["counterrevolutionaries", "antidisestablishmentarianism"] + [f"w{i}" for i in range(3000)]
        )
        conn.execute("SET statement_timeout = '10s'")
        found = search_items(conn, owner, ("n",), embedder=gm.embedder, query=query, limit=60)
    assert "long" in [item.key for item in found], [(item.key, item.score) for item in found]


def test_a_large_namespace_is_planned_as_large_and_its_idf_read_from_a_sample(
    gm: GhostMem, owner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planner knows how many items a namespace prefix holds (migration 129's statistics; it guessed 0.5% of the
    owner's items, so a large namespace was read whole and sorted by distance instead of walking the HNSW index),
    and the idf is counted on at most IDF_SAMPLE items of the scope, read in key order through the primary key
    (every item and each word's were counted on every search): the plan of a search of 4,000 items walks the HNSW
    index and counts the idf on IDF_SAMPLE of them."""
    from ghostmem import items

    rng = random.Random(3)
    with gm.connection() as conn:
        writes = [
            items.ItemWrite(
                ("big", "n"), f"k{i}", {"i": i}, " ".join(f"w{rng.randrange(300)}" for _ in range(8)), None
            )
            for i in range(4_000)
        ]
        writes += [items.ItemWrite(("small", "n"), f"s{i}", {"i": i}, f"w{i} small", None) for i in range(20)]
        items.write_items(conn, owner, writes, gm.embedder)
        conn.execute("ANALYZE ghostmem.store_items")
        seen: list[tuple[Any, Any]] = []
        execute = psycopg.Cursor.execute

        def recording(cur: psycopg.Cursor[Any], query: Any, params: Any = None, **kw: Any) -> Any:
            seen.append((query, params))
            return execute(cur, query, params, **kw)

        monkeypatch.setattr(psycopg.Cursor, "execute", recording)
        found = items.search_items(conn, owner, ("big",), embedder=gm.embedder, query="w7 w11 w13", limit=5)
        monkeypatch.undo()
        assert found and all(item.namespace[0] == "big" for item in found)
        query, params = seen[-1]
        plan = "\n".join(r[0] for r in conn.execute(b"EXPLAIN " + query.as_bytes(conn), params))
    vector_leg = plan[plan.index("Subquery Scan on nearest") :].splitlines()[1:3]
    assert "Index Scan using store_items_embedding_hnsw" in vector_leg[1], plan
    sample = plan[plan.index("CTE sample") :].splitlines()[1]
    assert "Limit" in sample and f"rows={items.IDF_SAMPLE} " in sample, plan


@pytest.mark.parametrize("item_filter", [None, {"kind": "note"}])
def test_a_store_search_never_compiles_its_statement(gm: GhostMem, owner: str, item_filter: Any) -> None:
    """A store search with a query reads the table twice under a filter (the idf's sample, the vector leg): its
    estimated cost grows with the table, every owner's items, and passes PostgreSQL's default ``jit_above_cost``
    (100,000) at some 450,000 items, where a server built with JIT would compile its expressions on every search.
    The search turns JIT off in its transaction, whatever the session says, and only there."""
    from ghostmem.items import ItemWrite, search_items, write_items

    with gm.connection() as conn:
        write_items(
            conn, owner, [ItemWrite(("n",), "k", {"kind": "note"}, "deploy notes", None)], gm.embedder
        )
        conn.commit()
        found = read_without_jit(
            conn,
            lambda: search_items(
                conn, owner, ("n",), embedder=gm.embedder, query="deploy notes", filter=item_filter
            ),
        )
    assert [item.key for item in found] == ["k"]
