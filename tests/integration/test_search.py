"""search_personal_memory on imported data: ranking, every filter, Japanese, iterative scans, plans, explain."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder, japanese, search
from ghostmem.args import ListRecentConversationsArgs, SearchPersonalMemoryArgs
from ghostmem.embed import Embedder
from ghostmem.ingest import runner
from ghostmem.program import Params, Program, run_sync
from ghostmem.search import (
    ASKS_WHEN,
    SIMILARITY_FLOOR,
    list_recent_conversations,
    search_messages,
    search_personal_memory,
    strip_names,
    vector_weight,
)
from ghostmem.store import fill_morphemes
from psycopg import Connection, sql
from support.conversations import conversation, ids, import_generic
from support.copies import owner_index, share_ids
from support.embedders import CountingEmbedder
from support.statements import generic_plan, inspecting, recording


@pytest.fixture
def store(gm: GhostMem, tmp_path: Path) -> GhostMem:
    import_generic(
        gm,
        tmp_path / "convs.jsonl",
        [
            conversation(
                "pg",
                "Postgres vacuum",
                1,
                ["autovacuum keeps running on the orders table", "lower the vacuum scale factor"],
                "ops/db",
            ),
            conversation("cats", "Cat food", 2, ["which food do cats like", "cats love fish"], "home"),
            conversation(
                "jp", "日本語の会話", 3, ["昨日の会話をまとめてください", "はい、会話の要点です"], "nihongo"
            ),
            conversation("jp-other", "天気", 3, ["明日の天気はどうですか", "晴れです"], "nihongo"),
            conversation(
                "old-pg", "Old vacuum notes", 90, ["vacuum full locks the table", "use pg_repack"], "ops/db"
            ),
        ],
    )
    return gm


def test_best_match_first_with_its_messages(store: GhostMem) -> None:
    result = store.search_personal_memory("autovacuum running", limit=3)
    assert ids(result)[0] == "pg"
    hit = result.data.rows[0]
    assert hit.matches[0].text == "autovacuum keeps running on the orders table"
    assert hit.score >= result.data.rows[-1].score
    assert result.text.splitlines()[0].startswith("[pg | generic | ")
    assert "  > #0 " in result.text


def test_stemming_finds_other_word_forms(store: GhostMem) -> None:
    result = store.search_personal_memory("cat", mode="lexical")
    assert ids(result) == ["cats"]


def test_japanese_words_are_found(store: GhostMem) -> None:
    lexical = store.search_personal_memory("会話", mode="lexical")
    assert ids(lexical) == ["jp"]
    assert {m.seq for m in lexical.data.rows[0].matches} == {0, 1}
    assert ids(store.search_personal_memory("会話"))[0] == "jp"
    assert ids(store.search_personal_memory("天気", mode="lexical")) == ["jp-other"]
    # English stemming of the rest of a mixed query does not get in the way.
    assert set(ids(store.search_personal_memory("running 会話", mode="lexical"))) == {"pg", "jp"}


def test_filters_apply(store: GhostMem) -> None:
    assert set(ids(store.search_personal_memory("vacuum", mode="lexical"))) == {"pg", "old-pg"}
    assert ids(store.search_personal_memory("vacuum", mode="lexical", days=30)) == ["pg"]
    assert set(ids(store.search_personal_memory("vacuum", project="OPS/", mode="lexical", days=365))) == {
        "pg",
        "old-pg",
    }
    assert ids(store.search_personal_memory("vacuum", project="home", mode="lexical")) == []
    assert ids(store.search_personal_memory("food", project="cat food", mode="lexical")) == ["cats"]  # title
    assert ids(store.search_personal_memory("vacuum", platform="codex")) == []
    for mode in ("vector", "hybrid"):
        found = ids(store.search_personal_memory("vacuum", mode=mode, days=30, project="ops"))
        assert found == ["pg"]


def test_library_only_when_asked(store: GhostMem, tmp_path: Path) -> None:
    import_generic(
        store,
        tmp_path / "lib.jsonl",
        [conversation("lib", "Curated", 1, ["zeppelin hangar notes"])],
        "library",
    )
    assert "lib" not in ids(store.search_personal_memory("zeppelin"))
    found = store.search_personal_memory("zeppelin", include_library=True)
    assert ids(found)[0] == "lib"
    assert found.data.rows[0].tier == "library"


def test_explain_shows_each_leg(store: GhostMem) -> None:
    plain = store.search_personal_memory("autovacuum")
    assert all(hit.explain is None for hit in plain.data.rows)
    top = store.search_personal_memory("autovacuum", explain=True).data.rows[0]
    assert top.explain is not None
    assert top.explain["lexical_rank"] == 1 and top.explain["vector_rank"] >= 1
    assert top.explain["fused"] == pytest.approx(1.0)  # first in both legs
    assert top.explain["relevance"] == pytest.approx(top.score)
    lexical_only = store.search_personal_memory("autovacuum", explain=True, mode="lexical").data.rows[0]
    assert lexical_only.explain is not None and lexical_only.explain["vector_rank"] is None


def test_owner_isolation(store: GhostMem, pg_dsn: str) -> None:
    with GhostMem(dsn=pg_dsn, owner=store.owner + "-other", embedder=store.embedder) as other:
        assert ids(other.search_personal_memory("autovacuum")) == []


def test_a_query_naming_another_owners_word_key_finds_none_of_its_messages(
    store: GhostMem, pg_dsn: str
) -> None:
    """The lexical index keys each lexeme by its owner (migration 102): an attacker writes the victim's key into
    the query (as it is, quoted, with tsquery syntax, across a zero-width joiner, a full-width colon and in full-width letters) and
    searches in every mode; the victim's words under that key are really in the index, yet nothing of them comes
    back, and the victim still finds them."""
    with store.connection() as conn:
        key = conn.execute("SELECT ghostmem.owner_key(%s)", (store.owner,)).fetchone()
        assert key is not None
        armed = conn.execute(  # the victim's posting list the crafted queries aim at
            "SELECT count(*) FROM ghostmem.messages WHERE ghostmem.owner_words(owner, tsv) @@ ghostmem.lexeme_query(%s)",
            (key[0] + "autovacuum",),
        ).fetchone()
    assert armed == (1,)
    crafted = [
        f"{key[0]}autovacuum",
        f"'{key[0]}autovacuum'",
        f"{key[0]}autovacuum:* | {key[0]}vacuum",
        f"{key[0]}\u200dautovacuum",
        f"{key[0][:-1]}\uff1aautovacuum",
        f"{key[0].upper()}AUTOVACUUM",
        f"autovacuum {key[0]}",
        "".join(chr(ord(c) + 0xFEE0) for c in f"{key[0]}autovacuum" if c != ":"),
    ]
    with GhostMem(dsn=pg_dsn, owner=store.owner + "-attacker", embedder=store.embedder) as attacker:
        found = {
            (query, mode): ids(attacker.search_personal_memory(query, mode=mode))
            for query in crafted
            for mode in ("lexical", "hybrid", "vector")
        }
    assert all(v == [] for v in found.values()), found
    assert ids(store.search_personal_memory(f"{key[0]}autovacuum", mode="lexical")) == ["pg"]


def test_speaker_names_are_stripped_from_the_dense_query() -> None:
    assert strip_names("What did Caroline's sister say?", ["caroline"]) == "What did sister say?"
    assert strip_names("Caroline?", ["caroline"]) == "Caroline?"  # nothing would be left
    assert strip_names("Carolinea paints", ["caroline"]) == "Carolinea paints"  # whole words only


def test_a_mentioned_speaker_does_not_change_lexical_results(gm: GhostMem, tmp_path: Path) -> None:
    conv = conversation("talk", "talk", 1, ["I planted tomatoes", "Nice garden, Alice!"])
    conv["messages"][0]["speaker"] = "Alice"
    conv["messages"][1]["speaker"] = "Bob"
    import_generic(gm, tmp_path / "t.jsonl", [conv])
    rows = _messages(gm, "What did Alice plant?", "hybrid")
    assert rows[0]["text"] == "I planted tomatoes"


def test_a_tool_s_name_is_no_speaker(gm: GhostMem, pg_dsn: str, tmp_path: Path) -> None:
    """A tool call's speaker is the tool's name (Claude Code's ``Read``): a query saying "read" names no speaker, so
    the word stays in the text the vector leg embeds and the tool's calls get no speaker bonus; a person's name is
    still taken out. The lookup reads migration 273's index of people's names, which holds no tool call."""
    conv = conversation(
        "novel", "novel", 1, ["I read the novel on the train", "Read novel.md", "It was long"]
    )
    conv["messages"][0]["speaker"] = "Ann"
    conv["messages"][1].update(role="tool_call", speaker="Read")
    import_generic(gm, tmp_path / "t.jsonl", [conv])
    counting = CountingEmbedder()
    with GhostMem(dsn=pg_dsn, owner=gm.owner, embedder=counting) as store:
        seen: list[tuple[str, Params]] = []
        args = SearchPersonalMemoryArgs(query="What did Ann read", mode="hybrid")
        with store.connection() as conn:
            rows = run_sync(recording(search_messages(store.context, args, 50), conn, seen), conn, counting)
            lookup = generic_plan(conn, seen[0][0])
    assert counting.texts == ["What did read"]  # Ann taken out, "read" kept
    assert seen[0][1]["names"] and "read" in seen[0][1]["names"]  # "read" was looked up, and not found
    assert rows[0]["text"] == "I read the novel on the train"
    assert "messages_owner_person" in lookup, lookup
    with gm.connection() as conn:  # migration 020's index of every speaker, tools' names too, is gone
        assert conn.execute("SELECT to_regclass('ghostmem.messages_owner_speaker')").fetchone() == (None,)


def test_a_speaker_is_looked_up_in_the_owner_s_searched_tiers_only(
    gm: GhostMem, pg_dsn: str, tmp_path: Path
) -> None:
    """A name another owner's messages were spoken by, or one of the owner's library (not searched), names no
    speaker: the lookup cannot tell a query whether someone else's store holds that name."""
    other = conversation("theirs", "theirs", 1, ["Ann fixed the boiler", "ok"])
    other["messages"][0]["speaker"] = "Ann"
    with GhostMem(dsn=pg_dsn, owner=f"{gm.owner}-other", embedder=gm.embedder) as them:
        import_generic(them, tmp_path / "o.jsonl", [other])
    shelf = conversation("shelf", "shelf", 1, ["Bob wrote the manual", "ok"])
    shelf["messages"][0]["speaker"] = "Bob"
    import_generic(gm, tmp_path / "l.jsonl", [shelf], tier="library")
    import_generic(gm, tmp_path / "m.jsonl", [conversation("mine", "mine", 1, ["the boiler manual", "ok"])])
    counting = CountingEmbedder()
    with GhostMem(dsn=pg_dsn, owner=gm.owner, embedder=counting) as store:
        store.search_personal_memory("What did Ann and Bob say", mode="hybrid")
        store.search_personal_memory("What did Ann and Bob say", mode="hybrid", include_library=True)
    assert counting.texts == ["What did Ann and Bob say", "What did Ann and say"]


def test_a_message_is_found_by_the_words_of_its_neighbours(gm: GhostMem, tmp_path: Path) -> None:
    """The lexical leg ranks a message as the document of its window (itself and the messages next to it)."""
    chat = [
        "What gave you the idea to open the bakery?",
        "My grandmother made bread every morning when I was a child.",
        "That is lovely.",
        "Anyway, the weather turned cold.",
    ]
    import_generic(
        gm,
        tmp_path / "w.jsonl",
        [
            conversation("chat", "chat", 1, chat),
            conversation("other", "other", 1, ["A bakery sells bread.", "Sure."]),
            conversation("far", "far", 1, ["nothing in common", "still nothing"]),
        ],
    )
    rows = _messages(gm, "Why did she open the bakery?", "lexical")
    found = [r["text"] for r in rows]
    # the answer holds none of the query's words: its question, the turn before it, lends them
    assert chat[1] in found
    assert found.index(chat[0]) < found.index(chat[1])  # the window that holds more is first
    assert chat[3] not in found  # two turns away from any match
    assert not {"nothing in common", "still nothing"} & set(found)  # windows stay inside their conversation
    assert all(r["lex_rank"] is not None for r in rows)


def test_a_one_message_conversation_is_ranked_by_plain_bm25(gm: GhostMem, tmp_path: Path) -> None:
    """A conversation of one message is its own window: the shorter of two equal matches comes first."""
    long = "sourdough " + " ".join(f"filler{i} word{i}" for i in range(40))
    import_generic(
        gm,
        tmp_path / "one.jsonl",
        [
            conversation("long", "long", 1, [long]),
            conversation("short", "short", 1, ["sourdough starter"]),
        ],
    )
    rows = _messages(gm, "sourdough", "lexical")
    assert [r["conv_id"] for r in rows] == ["short", "long"]
    assert rows[0]["lex_score"] > rows[1]["lex_score"]


def test_a_query_of_the_most_words_credits_each_message_with_its_own(gm: GhostMem, tmp_path: Path) -> None:
    """A query keeps up to MAX_QUERY_TERMS (64) lexemes, and the window ranking holds a message's query words as
    the bits of a bigint: 64 messages, each holding one of the 64 words, are each found and credited with that
    word alone (a word given another's bit would credit a message with two, or with none)."""
    words = [f"{a}a{b}ox" for a in "bdfgkmpt" for b in "bdfgkmpt"]
    assert len(words) == search.MAX_QUERY_TERMS == 64
    import_generic(gm, tmp_path / "words.jsonl", [conversation(w, w, 1, [f"note on {w}"]) for w in words])
    args = SearchPersonalMemoryArgs(query=" ".join(reversed(words)), mode="lexical")
    with gm.connection() as conn:
        rows = run_sync(search_messages(gm.context, args, 100), conn, gm.embedder)
    assert sorted(r["conv_id"] for r in rows) == sorted(words)
    assert all(r["lex_cover"] == pytest.approx(1 / 64) for r in rows), [r["lex_cover"] for r in rows]
    assert len({round(r["lex_score"], 9) for r in rows}) == 1  # the same idf, the same length


def test_a_query_of_rare_and_common_words_credits_each_message_with_the_words_it_holds(
    gm: GhostMem, pg_dsn: str, tmp_path: Path
) -> None:
    """Each word-by-word candidate's query words are tested on the row its fetch read (lex_hits), not read again:
    the lexical results equal a direct computation from the stored words. 120 of the owner's messages hold the
    common words (df capped at DF_CAP), a few hold rare ones, another owner holds the rare words many times: the
    candidates are exactly the owner's messages holding a rare word, each scored by the idf of every query word its
    words hold (the common ones included), df counted in the owner's messages only."""
    other = f"other-{uuid.uuid4().hex[:6]}"
    with GhostMem(dsn=pg_dsn, owner=other, embedder=HashEmbedder()) as og:
        import_generic(
            og,
            tmp_path / "other.jsonl",
            [conversation(f"o{i}", "o", 1, ["zebra quokka deploy"]) for i in range(30)],
        )
    texts = [f"routine deploy log {i}" for i in range(120)]
    texts += [
        "zebra deploy",
        "zebra routine deploy note",
        "quokka zebra",
        "quokka",
        "zebra of the plains",
        "deploy",
    ]
    import_generic(
        gm, tmp_path / "mine.jsonl", [conversation(f"m{i}", "m", 1, [t]) for i, t in enumerate(texts)]
    )
    rows = _messages(gm, "zebra quokka deploy routine", "lexical")
    held, df, idf = _stored_words(gm, "zebra quokka deploy routine")
    assert df["deploy"] == search.DF_CAP and 0 < df["zebra"] < search.DF_CAP  # common and rare words mixed
    rare = {w for w in df if df[w] < search.DF_CAP}
    expected = {conv: sum(idf[w] for w in h) / sum(idf.values()) for (conv, _), h in held.items() if h & rare}
    assert {r["conv_id"]: r["lex_cover"] for r in rows} == pytest.approx(expected)


def test_a_window_holds_the_words_of_its_candidates_whichever_way_its_idf_is_summed(
    gm: GhostMem, pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window's query words are those of the candidates at its place and beside it (each candidate's words tested
    once, however many of its words fetched it), and its idf is summed once per set of query words (lex_sums) when
    the query has few lexemes and the leg has at least as many candidates as sets, else once per window: both give
    each returned message the coverage a direct computation from the stored words gives, and the same scores. The
    rare words are held in threads of three, beside common words; another owner holds them in conversations of the
    same ids with other neighbours, which never count."""
    query = "zebra quokka deploy routine"
    rare = ["zebra deploy", "quokka", "zebra quokka routine", "quokka deploy"]
    threads = [[f"routine deploy log {i}", rare[i % 4], "fine"] for i in range(24)]
    threads += [[f"routine deploy step {i}", f"deploy note {i}"] for i in range(100)]
    other = f"other-{uuid.uuid4().hex[:6]}"
    with GhostMem(dsn=pg_dsn, owner=other, embedder=HashEmbedder()) as og:
        import_generic(
            og,
            tmp_path / "other.jsonl",
            [
                conversation(f"t{i}", "o", 1, ["routine", "zebra", "quokka deploy", "zebra"])
                for i in range(24)
            ],
        )
    import_generic(
        gm, tmp_path / "mine.jsonl", [conversation(f"t{i}", "t", 1, texts) for i, texts in enumerate(threads)]
    )
    held, df, idf = _stored_words(gm, query)
    assert df["deploy"] == df["routin"] == search.DF_CAP and 0 < df["zebra"] < search.DF_CAP
    candidates = {place for place, h in held.items() if h & {w for w in df if df[w] < search.DF_CAP}}
    assert 2 ** len(df) <= len(candidates) and len(df) <= search.WORD_SET_BITS  # sums once per set

    def window(conv: str, seq: int) -> set[str]:
        return set().union(*(held[(conv, s)] for s in (seq - 1, seq, seq + 1) if (conv, s) in candidates))

    found = {}
    default = search.WORD_SET_BITS
    for bits in (default, 0):  # 0: every window sums its own
        monkeypatch.setattr(search, "WORD_SET_BITS", bits)
        rows = _messages(gm, query, "lexical")
        assert len(rows) == 50 and all((r["conv_id"], r["seq"]) in held for r in rows)
        for r in rows:
            expected = sum(idf[w] for w in window(r["conv_id"], r["seq"])) / sum(idf.values())
            assert r["lex_cover"] == pytest.approx(expected, rel=1e-12), r
        found[bits] = [(r["id"], r["lex_rank"], r["lex_score"], r["lex_cover"]) for r in rows]
    assert found[default] == found[0]


def test_a_windows_length_is_the_sum_of_its_messages_read_once_a_candidate(
    gm: GhostMem, pg_dsn: str, tmp_path: Path
) -> None:
    """Each candidate's neighbourhood (seq - 2 to seq + 2) is read once and gives its three windows their lengths
    and centres (session 30; one read a window before): every returned message's BM25 score equals a direct
    computation from the stored words — its window's idf (the words of the candidates at its place and beside it)
    times the length factor of the window's messages (length(tsv) summed over seq - 1 to seq + 1, a conversation's
    first and last windows holding two), over the mean length of the ranked windows (those whose centre exists).
    Candidates sit at every place of five-message threads, some beside another candidate (windows two candidates
    share); another owner's conversations of the same ids, their messages far longer, never count."""
    query = "zeppelin quokka"
    threads = []
    for i in range(20):
        texts = [" ".join(f"w{i}k{k}n{j}" for j in range((3 * i + 7 * k) % 9 + 1)) for k in range(5)]
        texts[i % 5] += " zeppelin"
        if i % 2 == 0:
            texts[(i + 1) % 5] += " quokka"
        threads.append(texts)
    other = f"other-{uuid.uuid4().hex[:6]}"
    with GhostMem(dsn=pg_dsn, owner=other, embedder=HashEmbedder()) as og:
        long = " ".join(f"filler{j}" for j in range(40))
        import_generic(
            og,
            tmp_path / "other.jsonl",
            [conversation(f"t{i}", "o", 1, [long, f"zeppelin {long}", long]) for i in range(20)],
        )
    import_generic(
        gm, tmp_path / "mine.jsonl", [conversation(f"t{i}", "t", 1, texts) for i, texts in enumerate(threads)]
    )
    held, df, idf = _stored_words(gm, query)
    assert set(df) == {"zeppelin", "quokka"} and all(0 < d < search.DF_CAP for d in df.values())
    with gm.connection() as conn:
        length = {
            (conv, seq): n
            for conv, seq, n in conn.execute(
                "SELECT conv_id, seq, length(tsv) FROM ghostmem.messages WHERE owner = %s",
                (gm.context.owner,),
            )
        }
    candidates = {place for place, h in held.items() if h}

    def near(conv: str, seq: int) -> list[tuple[str, int]]:
        return [(conv, s) for s in (seq - 1, seq, seq + 1) if (conv, s) in length]

    windows = {(conv, seq + d) for conv, seq in candidates for d in (-1, 0, 1)}
    docs = {w: sum(length[p] for p in near(*w)) for w in windows if w in length}  # a window ranks its centre
    assert any(len(near(*w)) == 2 for w in docs) and len(windows) < 3 * 50  # edges; no window cut
    avgdl = max(sum(docs.values()) / len(docs), 1)
    k1, b = search.BM25_K1, search.BM25_B
    rows = _messages(gm, query, "lexical")
    assert len(rows) == 50
    for r in rows:
        place = (r["conv_id"], r["seq"])
        words = set().union(*(held[p] for p in near(*place) if p in candidates))
        expected = sum(idf[w] for w in words) * (k1 + 1) / (1 + k1 * (1 - b + b * docs[place] / avgdl))
        assert r["lex_score"] == pytest.approx(expected, rel=1e-12), (r, docs[place], avgdl)
    # one read of the lengths a candidate, not one a window
    seen: list[tuple[str, Params]] = []
    args = SearchPersonalMemoryArgs(query=query, mode="lexical")
    with gm.connection() as conn:
        run_sync(recording(search_messages(gm.context, args, 50), conn, seen), conn, gm.embedder)
        text, params = seen[-1]
        plan = "\n".join(
            str(row[0])
            for row in conn.execute(
                f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {text}".encode(), params
            )
        )
    read = plan.split("on message_lengths", 1)[1].split("\n", 1)[0]
    assert f"loops={len(candidates)})" in read and len(candidates) < len(docs), plan


def _stored_words(
    gm: GhostMem, query: str
) -> tuple[dict[tuple[str, int], set[str]], dict[str, int], dict[str, float]]:
    """Computed directly from the owner's stored words and counts, as the lexical leg defines them: the query's
    lexemes each message holds (by conversation and place), each lexeme's document frequency (capped at DF_CAP) and
    its idf (the store's size counted up to N_CAP)."""
    with gm.connection() as conn:
        words = [
            r[0]
            for r in conn.execute("SELECT unnest(tsvector_to_array(ghostmem.lexemes(%s, true)))", (query,))
        ]
        held = {
            (conv, seq): set(lexemes) & set(words)
            for conv, seq, lexemes in conn.execute(
                "SELECT conv_id, seq, tsvector_to_array(tsv) FROM ghostmem.messages WHERE owner = %s",
                (gm.context.owner,),
            )
        }
        (n,) = conn.execute(
            "SELECT least(sum(n), %s)::int FROM ghostmem.message_counts WHERE owner = %s",
            (search.N_CAP, gm.context.owner),
        ).fetchone() or [0]
    df = {w: min(sum(w in h for h in held.values()), search.DF_CAP) for w in words}
    idf = {w: math.log(1 + (max(n, df[w]) - df[w] + 0.5) / (df[w] + 0.5)) for w in words}
    return held, df, idf


def _messages(gm: GhostMem, query: str, mode: str, **kw: Any) -> list[dict[str, Any]]:
    args = SearchPersonalMemoryArgs(query=query, mode=mode, **kw)
    with gm.connection() as conn:
        return run_sync(search_messages(gm.context, args, 50), conn, gm.embedder)


def _bulk(gm: GhostMem, tmp_path: Path, n_big: int, n_small: int) -> None:
    convs = [
        conversation(f"big-{i}", f"big {i}", 1, [f"routine deploy log {i} again", "fine"], "big")
        for i in range(n_big)
    ]
    convs += [
        conversation(f"tiny-{i}", f"tiny {i}", 1, [f"deploy of tiny {i}", "ok"], "tiny")
        for i in range(n_small)
    ]
    import_generic(gm, tmp_path / "bulk.jsonl", convs)


def _run_forced(gm: GhostMem, program: Program[Any], *disabled: str) -> tuple[Any, list[str]]:
    """Run a program with sequential scans (and ``disabled`` plan types) off; return its result and its plans.

    At test scale a scan of the owner's rows and a sort is cheaper than any index: the settings make the planner
    pick the plan it picks on a large store.
    """
    plans: list[str] = []
    with gm.connection() as conn:
        for setting in ("enable_seqscan", *disabled):
            conn.execute(f"SET LOCAL {setting} = off".encode())

        def explain(text: str, params: Params) -> None:
            # the statements of search.py, not its preamble (the settings and counts)
            if "ghostmem.conversations c" in text and "set_config" not in text:
                rows = conn.execute(f"EXPLAIN (COSTS OFF) {text}".encode(), params).fetchall()  # type: ignore[arg-type]
                plans.append("\n".join(r[0] for r in rows))

        result = run_sync(inspecting(program, conn, explain), conn, gm.embedder)
    return result, plans


def test_only_the_shown_messages_are_read(gm: GhostMem, tmp_path: Path) -> None:
    """The statement returns a row per shown message (at most MATCHES_PER_HIT a conversation, best first) and reads
    only those from ghostmem.messages, however many of each conversation's messages the legs fused; each shown
    conversation is read once from ghostmem.conversations (not once per shown message), and one sort of the fused
    messages serves the similarity floor's window and their places in their conversations."""
    matching = [
        conversation(f"c{i}", f"talk {i}", 1, [f"deploy step {j} of plan {i}" for j in range(6)])
        for i in range(6)
    ]
    others = [conversation(f"o{i}", f"other {i}", 1, [f"lunch note {i}", "fine"]) for i in range(300)]
    import_generic(gm, tmp_path / "many.jsonl", matching + others)
    args = SearchPersonalMemoryArgs(query="deploy step", limit=2, explain=True)
    read: list[int] = []
    with gm.connection() as conn:
        conn.execute(b"ANALYZE ghostmem.messages")
        result = run_sync(
            _reading_shown(search_personal_memory(gm.context, args), conn, read), conn, gm.embedder
        )
        fused = run_sync(search_messages(gm.context, args, 100), conn, gm.embedder)
    assert len(fused) >= 36  # every message of the six conversations holds both words
    assert len(result.rows) == 2
    for hit in result.rows:
        assert len(hit.matches) == search.MATCHES_PER_HIT
        assert hit.explain is not None and hit.explain["message_seq"] == hit.matches[0].seq
        assert len(hit.explain["evidence"]) == search.MATCHES_PER_HIT
        best_first = [m["seq"] for m in fused if m["conv_id"] == hit.conv_id][: search.MATCHES_PER_HIT]
        assert [m.seq for m in hit.matches] == best_first
    assert read == [2 * search.MATCHES_PER_HIT, 2, 1]  # the shown messages, their conversations, one sort


def _reading_shown(program: Program[Any], conn: Connection[Any], read: list[int]) -> Program[Any]:
    """Run ``program``, adding to ``read`` how many rows its main statement read as the shown messages, how many
    from ghostmem.conversations, and how many sorts order the fused messages by conversation."""

    def count(text: str, params: Params) -> None:
        if "ghostmem.messages shown" not in text:
            return
        explained = f"EXPLAIN (ANALYZE, FORMAT JSON) {text}".encode()
        plan = conn.execute(explained, params).fetchone()[0]  # type: ignore[arg-type,index]
        nodes = list(_nodes(plan[0]["Plan"]))
        for reads in ("shown", "conversations"):
            read.append(
                sum(
                    n["Actual Rows"] * n["Actual Loops"]
                    for n in nodes
                    if reads in (n.get("Alias"), n.get("Relation Name"))
                )
            )
        fused = next(n for n in nodes if n.get("Subplan Name") == "CTE fused")
        read.append(
            sum(
                n["Node Type"] in ("Sort", "Incremental Sort") and "conv_id" in " ".join(n["Sort Key"])
                for n in _nodes(fused)
            )
        )

    return inspecting(program, conn, count)


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def test_narrow_filter_still_fills_the_limit(
    gm: GhostMem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Few rows pass the filter: the HNSW scan must keep going (iterative scan) instead of stopping at ef_search.
    (A store this small has its scope read whole, test_search_speed: the HNSW scan is chosen here.)"""
    monkeypatch.setattr(search, "vector_scan", lambda *_: "hnsw")
    _bulk(gm, tmp_path, n_big=300, n_small=8)
    args = SearchPersonalMemoryArgs(query="deploy of tiny", project="tiny", limit=5, mode="vector")
    result, plans = _run_forced(gm, search_personal_memory(gm.context, args), "enable_sort")
    with gm.connection() as conn:  # the HNSW graph of the owner's partition of the compact vectors (163)
        assert (
            f"Index Scan using {owner_index(conn, 'message_vectors_embedding_hnsw', gm.context.owner)}"
            in plans[0]
        )
    assert len(result.rows) == 5
    assert all(r.conv_id.startswith("tiny-") for r in result.rows)


@pytest.fixture
def own_database_gm(server_dsn: str, owner: str) -> Iterator[GhostMem]:
    """A store on a database of its own: plans depend on statistics, which other tests' rows would skew."""
    name = f"ghostmem_plans_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = psycopg.conninfo.make_conninfo(server_dsn, dbname=name)
    try:
        with GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder()) as store:
            yield store
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def test_plans_use_the_indexes(
    own_database_gm: GhostMem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plans of a large store (where the vector leg walks HNSW, test_search_speed)."""
    monkeypatch.setattr(search, "vector_scan", lambda *_: "hnsw")
    gm = own_database_gm
    _bulk(gm, tmp_path, n_big=100, n_small=2)
    with gm.connection() as conn:
        conn.execute("ANALYZE ghostmem.messages")
    args = SearchPersonalMemoryArgs(query="tiny deploy", days=7)
    result, plans = _run_forced(gm, search_personal_memory(gm.context, args), "enable_sort")
    assert result.rows[0].conv_id.startswith("tiny-")
    assert "messages_owner_words" in plans[0]
    with gm.connection() as conn:
        assert (
            f"Index Scan using {owner_index(conn, 'message_vectors_embedding_hnsw', gm.context.owner)}"
            in plans[0]
        )
    recent = list_recent_conversations(gm.context, ListRecentConversationsArgs(days=2))
    listed, list_plans = _run_forced(gm, recent, "enable_sort")
    assert listed.rows and "conversations_owner_ended" in list_plans[0]


def test_real_model_finds_meaning_without_shared_words(
    pg_dsn: str, owner: str, real_embedder: Embedder, tmp_path: Path
) -> None:
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=real_embedder) as gm:
        import_generic(
            gm,
            tmp_path / "m.jsonl",
            [
                conversation(
                    "pet", "new family member", 1, ["We adopted a puppy last week and he chews every shoe"]
                ),
                conversation(
                    "tax", "paperwork", 1, ["The quarterly tax filing deadline is approaching fast"]
                ),
                conversation("jp", "会話", 1, ["昨日の会話はとても楽しかった"]),
            ],
        )
        assert ids(gm.search_personal_memory("my young dog destroys footwear", mode="vector"))[0] == "pet"
        assert ids(gm.search_personal_memory("my young dog destroys footwear"))[0] == "pet"
        assert ids(gm.search_personal_memory("会話"))[0] == "jp"
        # the similarity floor: nothing here is about this, and the model agrees
        assert ids(gm.search_personal_memory("quantum chromodynamics on a lattice")) == []


def test_a_long_query_is_bounded_and_still_finds(store: GhostMem) -> None:
    words = " ".join(f"filler{i}" for i in range(150))
    query = (f"autovacuum {words} " * 2)[:2000]
    found = ids(store.search_personal_memory(query, mode="lexical", limit=5))
    assert found == ["pg"]  # the query keeps its 64 longest lexemes: "autovacuum" is one of them


def test_cjk_queries_rank_by_words() -> None:
    assert vector_weight("会話") == 0.0
    assert vector_weight("2024年の会話") == 0.0
    assert (
        vector_weight("Ein hypermoderner Dirigentを日本で言うと") == 0.0
    )  # a quoted phrase in a Japanese query
    assert vector_weight("What did Ann say in 2024?") == 1.0


def test_a_search_never_shows_another_owners_message_of_the_same_id(pg_dsn: str, tmp_path: Path) -> None:
    """The key of messages is (id, owner) (migration 100): two owners may hold one id (rows written with explicit
    ids by a restore or a merge of two stores). Every join of the search back to the messages names the owner, so
    ann's hits show her messages only, in every mode, with a speaker or a time in the query too (their bonuses
    read the messages); joined by id alone, bob's secret came back among ann's matches."""
    owners = [f"ann-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"]
    texts = {
        owners[0]: ["when did ann deploy the staging server on friday", "it went fine on friday"],
        owners[1]: ["bob's secret password is hunter2, friday deploy staging", "keep it secret"],
    }
    for owner in owners:
        with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as gm:
            import_generic(gm, tmp_path / f"{owner}.jsonl", [conversation("c", "deploys", 1, texts[owner])])
    with GhostMem(dsn=pg_dsn, owner=owners[0], embedder=HashEmbedder()) as gm:
        with gm.connection() as conn:
            assert share_ids(conn, owners[1], owners[0]) == 2
        for mode in ("hybrid", "lexical", "vector"):
            for query in ("friday deploy staging secret", "when did ann deploy on friday"):
                hits = gm.search_personal_memory(query, mode=mode).data.rows
                shown = [m.text for hit in hits for m in hit.matches]
                assert shown and set(shown) <= set(texts[owners[0]]), (mode, query, shown)
                args = SearchPersonalMemoryArgs(query=query, mode=mode)
                with gm.connection() as conn:
                    rows = run_sync(search_messages(gm.context, args, 50, floor=-1.0), conn, gm.embedder)
                assert {r["text"] for r in rows} <= set(texts[owners[0]]), (mode, query)


@pytest.mark.parametrize("mode", ["hybrid", "vector"])
def test_a_search_of_a_scope_without_messages_embeds_nothing(store: GhostMem, pg_dsn: str, mode: str) -> None:
    """An empty store (a new home's first search), a project or a platform without messages gives the vector leg
    nothing to find: the query is not embedded, which with the real model on a new home would first prepare it
    (~20 s); a search by meaning alone then has no leg to run and finds nothing, as the hybrid does."""
    counting = CountingEmbedder()
    with GhostMem(dsn=pg_dsn, owner=store.owner, embedder=counting) as gm:
        assert ids(gm.search_personal_memory("vacuum", project="no-such-project", mode=mode)) == []
        # nor a platform without messages: its scope is its own rows (migration 120), counted as none
        assert ids(gm.search_personal_memory("vacuum", platform="codex", days=30, mode=mode)) == []
        assert ids(gm.search_personal_memory("vacuum", platform="codex", mode=mode)) == []
        args = SearchPersonalMemoryArgs(query="vacuum", project="no-such-project", mode=mode)
        with gm.connection() as conn:
            assert run_sync(search_messages(gm.context, args, 50), conn, gm.embedder) == []
        assert counting.texts == []
        assert ids(gm.search_personal_memory("vacuum locks", limit=5, mode=mode))[0] in {"pg", "old-pg"}
        assert counting.texts == ["vacuum locks"]  # a scope with messages is searched by meaning too
    with GhostMem(dsn=pg_dsn, owner=f"nobody-yet-{uuid.uuid4()}", embedder=counting) as empty:
        result = empty.search_personal_memory("vacuum locks", mode=mode)
        assert result.data.rows == [] and result.text.startswith("Nothing relevant to")
    assert counting.texts == ["vacuum locks"]


def test_a_filtered_vector_leg_is_shallower(gm: GhostMem, tmp_path: Path) -> None:
    """Unfiltered, the vector leg is as deep as the lexical one; under a filter it stops at five per requested
    conversation, at least 50 (cost grows with the rows a filtered HNSW scan must find)."""
    _bulk(gm, tmp_path, n_big=60, n_small=0)

    def deepest(**kw: Any) -> int:
        args = SearchPersonalMemoryArgs(query="routine deploy log", mode="vector", limit=10, **kw)
        with gm.connection() as conn:
            rows = run_sync(search_messages(gm.context, args, 100, floor=-1.0), conn, gm.embedder)
        return max(r["vec_rank"] for r in rows)

    assert deepest() == 100
    assert deepest(days=3650) == 50


def test_the_search_statement_is_planned_once_per_connection(gm: GhostMem, tmp_path: Path) -> None:
    """After psycopg prepares the statement (its sixth run on a connection), Postgres reuses one generic plan."""
    _bulk(gm, tmp_path, n_big=20, n_small=2)
    args = SearchPersonalMemoryArgs(query="tiny deploy", days=30)
    with gm.connection() as conn:
        first = run_sync(search_personal_memory(gm.context, args), conn, gm.embedder)
        for _ in range(7):
            again = run_sync(search_personal_memory(gm.context, args), conn, gm.embedder)
            assert again == first
        rows = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
            ("%lex_terms%",),
        ).fetchall()
    assert rows and rows[0][0] >= 1 and rows[0][1] == 0


# --- identifiers, scores and the similarity floor -------------------------------------------------------------


def test_identifier_parts_are_lexemes(gm: GhostMem) -> None:
    with gm.connection() as conn:
        row = conn.execute(
            "SELECT tsvector_to_array(ghostmem.lexemes(%s)), tsvector_to_array(ghostmem.lexemes(%s, true))",
            ("run fibonacci.py, parseConfig in src/HTTPServer.ts and home_budget_calculator.py", "fibonacci"),
        ).fetchone()
    assert row is not None
    doc, query = set(row[0]), set(row[1])
    # the whole token stays (an exact search still matches), and its parts join it, stemmed like any word
    assert {"fibonacci.py", "fibonacci", "py", "parseconfig", "pars", "config", "http", "server", "ts"} <= doc
    assert {"home", "budget", "calcul", "home_budget_calculator.py"} <= doc
    assert query == {"fibonacci"}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("fibonacci", "fib"),
        ("fibonacci.py", "fib"),
        ("parse config", "cfg"),
        ("home budget calculator", "budget"),
        ("http server", "cfg"),
    ],
)
def test_identifiers_are_found_by_their_parts(
    gm: GhostMem, tmp_path: Path, query: str, expected: str
) -> None:
    import_generic(
        gm,
        tmp_path / "code.jsonl",
        [
            conversation("fib", "a script", 1, ["please speed up fibonacci.py", "memoise it"]),
            conversation("cfg", "settings", 1, ["parseConfig fails in src/HTTPServer.ts", "check the path"]),
            conversation("budget", "money", 1, ["open home_budget_calculator.py", "done"]),
            conversation("other", "lunch", 1, ["what should I cook tonight", "pasta"]),
        ],
    )
    found = ids(gm.search_personal_memory(query, mode="lexical"))
    assert found[0] == expected and "other" not in found


def test_an_unrelated_query_returns_nothing_and_says_so_in_one_line(store: GhostMem) -> None:
    for query in ("quantum chromodynamics lattice", "量子色力学"):
        for mode in ("hybrid", "vector"):
            result = store.search_personal_memory(query, mode=mode)
            assert result.data.rows == []
            assert len(result.text.splitlines()) == 1 and result.text.startswith("Nothing relevant")


def test_scores_say_how_much_of_the_query_a_hit_holds(store: GhostMem) -> None:
    top = store.search_personal_memory("autovacuum running", explain=True).data.rows
    assert top[0].conv_id == "pg"
    assert top[0].explain is not None and top[0].explain["lexical_rank"] == top[0].explain["vector_rank"] == 1
    assert top[0].score == pytest.approx(1.0)  # every word of the query, in its best message
    assert store.search_personal_memory("autovacuum running", mode="lexical").data.rows[
        0
    ].score == pytest.approx(1.0)
    japanese = store.search_personal_memory("会話").data.rows  # the vector leg does not count: words alone
    assert japanese[0].conv_id == "jp" and japanese[0].score == pytest.approx(1.0)
    # half the query's words (a word the store never holds counts as missing, and weighs as a rare one)
    half = store.search_personal_memory("autovacuum zeppelin", mode="lexical", explain=True).data.rows[0]
    assert half.conv_id == "pg" and 0.3 < half.score < 0.7
    assert half.explain is not None and half.explain["evidence"][0][0] == pytest.approx(half.score)
    every = store.search_personal_memory("vacuum table food", limit=10, explain=True).data.rows
    assert len(every) >= 3 and every[0].score > 0.5 and all(0.0 <= hit.score <= 1.0 for hit in every)
    # the order is the fusion's, and the shown scores fall along it
    assert [h.explain["fused"] for h in every] == sorted((h.explain["fused"] for h in every), reverse=True)  # type: ignore[index]
    assert [h.score for h in every] == sorted((h.score for h in every), reverse=True)
    assert all(h.score <= h.explain["relevance"] for h in every)  # type: ignore[index]


def test_a_hit_sharing_one_common_word_scores_low_and_the_right_one_high(
    pg_dsn: str, owner: str, real_embedder: Embedder, tmp_path: Path
) -> None:
    """The real model end to end: an unrelated conversation that shares only `start` with the query used to show
    0.77 (third by words, 46th by meaning); its score now says how little of the query it holds."""
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=real_embedder) as gm:
        import_generic(
            gm,
            tmp_path / "convs.jsonl",
            [
                conversation(
                    "nginx",
                    "nginx after the upgrade",
                    1,
                    [
                        "my nginx server does not start after the upgrade",
                        "the port 80 is taken by apache, stop it",
                    ],
                ),
                conversation(
                    "party",
                    "Birthday party",
                    2,
                    ["let's start planning the birthday party", "start with the guest list and a cake"],
                ),
                conversation(
                    "bread", "Sourdough", 3, ["my sourdough starter barely rises", "feed it twice a day"]
                ),
            ],
        )
        hits = gm.search_personal_memory("server does not start", explain=True).data.rows
        scores = {h.conv_id: h.score for h in hits}
        assert hits[0].conv_id == "nginx" and scores["nginx"] > 0.9
        assert scores["party"] < 0.5
        assert scores.get("bread", 0.0) < 0.5


def test_conversations_only_the_vector_leg_found_far_away_are_not_returned(store: GhostMem) -> None:
    args = SearchPersonalMemoryArgs(query="autovacuum running", mode="hybrid")
    with store.connection() as conn:
        floored = run_sync(search_messages(store.context, args, 50), conn, store.embedder)
        unfloored = run_sync(search_messages(store.context, args, 50, floor=-1.0), conn, store.embedder)

    def relevant(rows: list[dict[str, Any]]) -> set[str]:
        return {
            r["conv_id"] for r in rows if r["lex_rank"] is not None or 1 - r["vec_dist"] >= SIMILARITY_FLOOR
        }

    assert {r["conv_id"] for r in unfloored} - relevant(unfloored)  # there is padding to drop ...
    assert {r["conv_id"] for r in floored} == relevant(unfloored)  # ... and only that is dropped
    kept = {r["id"] for r in unfloored if r["conv_id"] in relevant(unfloored)}
    assert {r["id"] for r in floored} == kept  # a kept conversation keeps all its fused messages


# --- Japanese words (SudachiPy) -----------------------------------------------------------------------------


def _import_reading(gm: GhostMem, tmp_path: Path) -> None:
    import_generic(
        gm,
        tmp_path / "ja.jsonl",
        [
            conversation("read", "読書", 1, ["昨日その本を読んだ", "面白かった?"]),
            conversation("en", "english", 1, ["plain English text", "ok"]),
        ],
    )


def _assert_reading_words(gm: GhostMem) -> None:
    with gm.connection() as conn:
        stored = dict(
            conn.execute(
                "SELECT text, morphemes FROM ghostmem.messages WHERE owner = %s", (gm.owner,)
            ).fetchall()
        )
    assert stored["昨日その本を読んだ"] == ["ja:其の", "ja:昨日", "ja:本", "ja:読む"]
    assert stored["plain English text"] is None
    # 読みます shares no character pair with 読んだ: only the normalised word 読む joins them
    assert ids(gm.search_personal_memory("読みます", mode="lexical")) == ["read"]


@pytest.mark.skipif(not japanese.available(), reason="needs the [ja] extra (SudachiPy)")
def test_japanese_words_are_stored_and_matched_across_inflections(gm: GhostMem, tmp_path: Path) -> None:
    _import_reading(gm, tmp_path)
    _assert_reading_words(gm)


@pytest.mark.skipif(not japanese.available(), reason="needs the [ja] extra (SudachiPy)")
def test_enrich_gives_japanese_words_to_messages_stored_without_them(gm: GhostMem, tmp_path: Path) -> None:
    """Messages imported before the [ja] extra was installed have no words; ``ghostmem enrich`` fills them."""
    _import_reading(gm, tmp_path)
    with gm.connection() as conn:
        # as stored without SudachiPy: no words, the character pairs alone (the trigger rebuilds tsv)
        conn.execute("UPDATE ghostmem.messages SET morphemes = NULL WHERE owner = %s", (gm.owner,))
    assert ids(gm.search_personal_memory("読みます", mode="lexical")) == []
    gm.enrich()
    _assert_reading_words(gm)
    with gm.connection() as conn, runner.autocommit(conn):
        assert fill_morphemes(conn, gm.owner) == 0  # nothing left to fill


def test_a_question_asking_when_prefers_a_message_that_says_when(gm: GhostMem, tmp_path: Path) -> None:
    import_generic(
        gm,
        tmp_path / "when.jsonl",
        [
            conversation("plain", "Dance", 2, ["the dance competition: my team won", "congrats!"]),
            conversation(
                "dated",
                "Dance again",
                2,
                ["the dance competition last Friday was long and loud: my team won", "wow"],
            ),
        ],
    )
    # without a question of time the shorter, closer message is first; asked when, the one that says when is
    assert ids(gm.search_personal_memory("how did my team do at the dance competition"))[:2] == [
        "plain",
        "dated",
    ]
    assert ids(gm.search_personal_memory("when did my team win the dance competition"))[:2] == [
        "dated",
        "plain",
    ]
    assert ids(gm.search_personal_memory("which year did my team win the dance competition"))[0] == "dated"
    assert not ASKS_WHEN.search("whenever the team dances") and ASKS_WHEN.search("How long ago did we meet?")
