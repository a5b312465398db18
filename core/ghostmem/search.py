"""Conversation operations: hybrid search, threads, lists and summaries (one SQL statement per question).

Search ranks *messages* with two legs and fuses them by reciprocal rank (``1 / (RRF_K + rank)`` summed):

* **lexical**: the ``tsv`` column (English-stemmed words plus CJK character grams, filled by a trigger, see
  migration 020) scored like BM25 over a bounded candidate set. Its GIN index keys each word by its owner (migration
  102), so an owner's fetches read only its own posting lists. One GIN scan of the conjunction of the query's
  lexemes fetches messages holding all of them (at most ``depth``); only when fewer than :data:`DF_CAP` hold them
  all does each lexeme fetch at most :data:`DF_CAP` matches (their count is its document frequency, capped; the
  messages of lexemes rarer than the cap join the candidates), except a lexeme the owner's list of known-common
  words holds (migration 220: its df is the cap, nothing fetched); when no lexeme is rarer than the cap, the
  messages holding them all are the only candidates. Time, platform and
  project filters are checked on the fetched rows, so no filter or common word makes the leg read every match.
  A message is ranked as the document of its window (itself and its neighbours in the thread): a candidate lends
  its query lexemes to both neighbours, and the window's BM25 counts its messages' length.
* **vector**: pgvector HNSW over the owner's own graph (migration 163: the compact half-precision copies of the
  message embeddings, migration 101, partitioned by owner, an HNSW index each), with iterative scans so that tier,
  time, platform and project filters apply inside the scan and a narrow filter still yields its rows
  (:func:`vector_depth` says how many); or, when that is cheaper (:func:`vector_scan`), every row of the search's
  scope read from the compact copies, or ranked by their bits (migration 110) and the nearest ranked again. It does
  not count for a query in CJK scripts (:func:`vector_weight`: the default model reads English).

The statement's sizes and constants are literals and the search transaction asks for generic plans, so a
connection plans it once (psycopg prepares it on its sixth run).

Speaker names are metadata (the ``speaker`` column), never embedded: a name the query mentions (a person's: a
tool call's speaker is the tool's name) is removed from the text the vector leg embeds, because a name says who
spoke, not what was said; in the fusion, that speaker's own messages get a small bonus. The fused messages are
grouped into conversations (score = the best message's), whose best messages become the hit's ``matches``.
:func:`search_messages` returns the fused messages themselves (the retrieval benchmark scores them); both share one
query builder. See docs/search.md.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from psycopg import sql

from ghostmem import japanese
from ghostmem.args import (
    MAX_DAYS,
    GetConversationArgs,
    GetConversationSummaryArgs,
    ListProjectConversationsArgs,
    ListRecentConversationsArgs,
    SearchPersonalMemoryArgs,
)
from ghostmem.context import OpContext
from ghostmem.errors import NotFound
from ghostmem.limits import READ_MATCH_CHARS, READ_SUMMARY_CHARS, READ_THREAD_CHARS
from ghostmem.models import (
    ConversationList,
    ConversationRow,
    ConversationSummary,
    MessageView,
    SearchHit,
    SearchResult,
    Thread,
)
from ghostmem.program import Embed, Program, Query, Row, Tuples
from ghostmem.records import CONVERSATIONAL_ROLES
from ghostmem.text import CJK
from ghostmem.words import Op

RRF_K = 60
DEPTH_PER_LEG = 100  # messages each leg contributes to the fusion (at least 5 per requested conversation)
FILTERED_VECTOR_PER_HIT = (
    5  # under a narrow filter the vector leg gives this many per requested conversation ...
)
FILTERED_VECTOR_DEPTH_MIN = 50  # ... and at least this many
WIDE_FILTER_SHARE = 0.05  # filters keeping at least this share of the owner's messages are wide ...
WIDE_VECTOR_PER_HIT = 2  # ... and the vector leg gives this many per requested conversation ...
WIDE_VECTOR_DEPTH_MIN = 20  # ... and at least this many
HNSW_EF_SEARCH = 100  # candidates an HNSW search keeps (pgvector's default is 40)
# ... and a filtered walk at least: of a project's own graph (migration 155; 200 until session 28, 100 until
# session 29), or of a graph under 56,000 rows (session 37), never below the rows asked
FILTERED_EF_SEARCH = 75
# Candidates the vector leg's walk of an owner's graph keeps (hnsw.ef_search; migration 163: a graph of the owner's
# own): MESSAGE_EF_SEARCH for a graph of MESSAGE_EF_ROWS messages, and MESSAGE_EF_PER_DECADE more (or fewer) for
# each tenfold beyond (or below), so 200 at a million (see message_ef_search).
MESSAGE_EF_SEARCH = 100
MESSAGE_EF_ROWS = 100_000
MESSAGE_EF_PER_DECADE = 100
# JIT compilation off for the rest of a read's transaction: the message search and the LangGraph store's search are
# estimated above PostgreSQL's default jit_above_cost (100,000) at sizes a store reaches, and a server built with JIT
# would compile their expressions on every call, tens of milliseconds for statements that run in a few
# (docs/search.md, "No JIT compilation").
NO_JIT = sql.SQL("set_config('jit', 'off', true)")
# A conjunction fetch through the index of a scope's words (a project's or a platform's, migration 250; a time
# window's recent messages', 240, since session 32) keeps this many rows fewer than its share of the depth, rounded
# down: the fetch of all the owner's kept the scope's rows in runs (a conversation's matches are neighbours; of 44
# project searches of the bench's million, 11 kept 0-1, two 13-14, mean 3.4), and a fusion's top conversations lose
# at most a few to the lexical leg's, so a fetch of the mean in every search displaced more of the nearest
# conversations than the runs did (docs/search.md, "An index of a project's or a platform's words"; the same for
# the last 7 and 30 days at 100k, "Session 32, days").
SCOPE_FETCH_BELOW = 1
DF_CAP = 100  # document frequencies are counted up to this; rarer lexemes gather the lexical candidates
# A long query keeps its longest (most specific) lexemes; at most 64, the bits of a bigint (the window ranking).
MAX_QUERY_TERMS = 64
# A query of at most this many lexemes has the idf of each set of them summed once (2^n sets), not once per window.
WORD_SET_BITS = 7
N_CAP = 20_000  # the store size in the idf is counted up to this (a bigger store counts as this big)
MAX_NAME_WORDS = 64  # speaker names are looked for among the query's first words
BM25_K1 = 1.2
BM25_B = 0.75
MATCHES_PER_HIT = 3
HNSW_MAX_SCAN_TUPLES = 100000
# What the vector leg's three scans cost, in rows of an exact scan of the compact vectors of migration 101 (measured at
# 100k and 1M messages, see docs/search.md "Small scopes: an exact scan" and "Scopes between: a quantized scan"):
# search.vector_scan chooses the cheapest.
EXACT_ROWS_PER_HNSW_ROW = 25  # a row an HNSW scan passes over
QUANTIZED_ROW_COST = 0.45  # a row of a quantized scan (migration 110: its bits' Hamming distance) ...
QUANTIZED_INDEX_ROW_COST = 0.28  # ... read from its index alone (a window, a platform: migration 164) ...
RERANK_ROW_COST = 5.0  # ... and each of its candidates, ranked again by the compact vector's distance
QUANTIZED_CANDIDATES = 10  # candidates a quantized scan ranks again, per row it returns ...
QUANTIZED_CANDIDATES_MAX = 1000  # ... and at most this many (a deep list's last ranks weigh little)
QUANTIZED_RERANKED = 6  # ... of which this many per row, the nearest by the query's planes, are ranked again
QUANTIZED_PLANES = 3  # the query's vector as this many weighted sign vectors (query_planes)
# A quantized scan of a scope read from the index alone sorts only the rows within a cut taken from a sample of it
# (migration 200: the messages whose id hashes to 0 modulo QUANTIZED_SAMPLE, a power of two), the distance within
# which the sample holds QUANTIZED_SAMPLE_MARGIN times the candidates' share (see quantized_sample_rank).
QUANTIZED_SAMPLE = 16
QUANTIZED_SAMPLE_MARGIN = 2
SPEAKER_BONUS = 0.005
# A question asking when (an English "when", "what year", "how long ago") is answered by a message that says when:
# such messages (MENTIONS_TIME) get this bonus in the fusion, about half of what rank 1 of a leg adds (docs/search.md,
# "Questions asking when").
WHEN_BONUS = 0.0075
ASKS_WHEN = re.compile(
    r"\b(when|what (date|day|time|year|month|week)|which (year|month|day)|how long ago)\b", re.I
)
# PostgreSQL's regular expression (matched case-insensitively; `\m` / `\M` bound words) for words that place an
# event in time.
MENTIONS_TIME = (
    r"\m(yesterday|today|tonight|tomorrow|ago|last|next|recently|earlier|later|weekend|"
    r"(mon|tues|wednes|thurs|fri|satur|sun)days?|january|february|march|april|june|july|august|september|"
    r"october|november|december|weeks?|months?|years?|\d{4})\M"
)
TIME_CHARS = 2000  # a message's first characters are where MENTIONS_TIME is looked for
# A message only the vector leg found is returned when its cosine similarity to the query is at least this
# (calibrated on the retrieval data sets, see docs/search.md): below it, MiniLM neighbours are padding.
SIMILARITY_FLOOR = 0.2
# A cosine at least this counts as full evidence of meaning in a hit's shown score (see relevance).
SIMILARITY_FULL = 0.6

Scan = Literal["hnsw", "exact", "quantized", "graph"]

_ROW_COLUMNS = sql.SQL(
    "c.conv_id, c.tier, c.platform, c.started_at, c.ended_at, c.title, c.project, c.topic, c.cluster, "
    "c.msg_count, c.intensity, c.first_snippet AS snippet"
)
_WORD = re.compile(r"\w+", re.UNICODE)


def like_pattern(text: str) -> str:
    """A case-insensitive substring pattern for ``ILIKE`` with the user's ``%``, ``_`` and ``\\`` taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _conversation_row(row: Row) -> ConversationRow:
    return ConversationRow.model_validate({k: row[k] for k in ConversationRow.model_fields})


def _message_view(item: dict[str, Any]) -> MessageView:
    return MessageView.model_validate({k: item[k] for k in MessageView.model_fields if k in item})


def _message_json(limit: int) -> sql.Composed:
    """A ``jsonb`` object of a message row ``m`` (text cut to ``limit`` characters)."""
    return sql.SQL(
        "jsonb_build_object('seq', m.seq, 'role', m.role, 'ts', m.ts, 'speaker', m.speaker, "
        "'text', left(m.text, {n}), 'truncated', char_length(m.text) > {n})"
    ).format(n=sql.Literal(limit))


# --- search --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plan:
    """What one search statement needs besides its SQL text: bound parameters (what the user gave, the query
    vector) and literals (sizes and constants, written into the text so that its generic plan knows them)."""

    params: dict[str, Any]
    # the literals' values (numbers, and the owner as ``owner_constant``): the statement's text is composed from
    # them and the plan's other fields (see _statement), never from params
    constants: dict[str, Any]
    lexical: bool
    vector: bool
    stored: bool  # the owner holds messages in the tiers searched, whatever the filters (a hint's truth)
    scan: Scan = "hnsw"  # how the vector leg reads (vector_scan)
    graphs: tuple[str, ...] = ()  # the listed projects that have a graph of their own (migration 155)
    since: str | None = None  # an HNSW walk of the owner's recent messages' graph: its day (migration 210)
    platform_graph: str | None = None  # an HNSW walk of the platform's graph: the platform (migration 230)
    # the conjunction fetch through the words of a scope the filters keep: the column and value of the index's
    # predicate, ("ts", day) for the recent messages' (migration 240), ("project" | "platform", name) for a
    # project's or a platform's (migration 250)
    words_scope: tuple[str, str] | None = None
    sampled: bool = False  # a quantized scan's scope read from the index alone: cut by its sample (200)

    @property
    def searches(self) -> bool:
        """False when no leg runs (a vector search of a scope without messages): nothing to find, no statement."""
        return self.lexical or self.vector

    @property
    def literals(self) -> dict[str, sql.Composable]:
        """The constants as SQL literals (the owner written in: :func:`_written`), made when a text is composed."""
        return {
            k: _written(v) if k == "owner_constant" else sql.Literal(v) for k, v in self.constants.items()
        }


# A project is a case-insensitive substring of the message's project or of its conversation's title. An OR with a
# sub-select keeps this a (hashed) filter of the scan instead of a join after it; the conversations whose title
# matches are found once per search, by the plan statement (_TITLED_ROWS), and handed to the statement (_TITLED).
_PROJECT_FILTER = sql.SQL("(m.project ILIKE %(project)s OR m.conv_id IN (SELECT t.conv_id FROM titled t))")
# The same rows for an exact scan of ghostmem.message_vectors: the owner's projects that match, listed from the
# counts of migration 092 (``%(projects)s``), and the titled conversations, each an index condition (owner, tier,
# project / conv_id), so that only the project's rows are read.
_LISTED_PROJECT_FILTER = sql.SQL(
    "(m.project = ANY(%(projects)s) OR m.conv_id = ANY(ARRAY(SELECT t.conv_id FROM titled t)))"
)


def _scope_filters(
    args: SearchPersonalMemoryArgs, project: sql.Composable | None = _PROJECT_FILTER
) -> list[sql.Composable]:
    """The optional filters of a search (time, platform, project) on ``m`` = ghostmem.messages (``project`` None:
    the project's is left out)."""
    parts: list[sql.Composable] = []
    if args.days is not None:
        parts.append(sql.SQL("m.ts >= now() - make_interval(days => %(days)s)"))
    if args.platform is not None:
        parts.append(sql.SQL("m.platform = %(platform)s"))
    if args.project is not None and project is not None:
        parts.append(project)
    return parts


# The conversations whose title matches a project filter, found by the plan statement (_TITLED_ROWS) and bound as
# ``%(titled)s``: the trigram search of the titles ran in both statements (0.5 ms each at a million messages).
_TITLED = """
titled AS MATERIALIZED (
    SELECT t.conv_id FROM unnest(%(titled)s::text[]) AS t(conv_id)
)"""


_OWNER_FILTER = sql.SQL("m.owner = %(owner)s AND m.tier = ANY(%(tiers)s)")
# ghostmem.message_vectors is partitioned by owner (migration 163) and read with the owner as a constant: the planner
# then keeps only the owner's partition in the plan, and its generic plan walks that partition's HNSW graph. With
# the owner as a parameter a generic plan keeps every owner's partition (pruned when it runs) and, at a few hundred
# owners, sorts the owner's rows instead of merging a walk of every partition's graph (9 ms against 0.3 ms for
# 10,000 messages beside 1,000 empty partitions).
_PARTITION_FILTER = "m.owner = {owner_constant} AND m.tier = ANY(%(tiers)s)"
# The lexical leg's fetches read through the GIN index of words keyed by owner alone (migration 102: the owner's
# own posting lists) and check owner and tier on the rows they fetch (the legs stop at their LIMIT): the owner is
# compared as an expression no btree index matches. With the plain
# column, the generic plan of a database holding two owners (the owner's selectivity taken as 1/2) either AND-ed
# the GIN bitmap with an (owner, tier, ...) btree bitmap of half the table, or, expecting its LIMIT to come early,
# scanned the table sequentially: a rare word then read all of it (p95 11.6 s at a million messages beside a
# second owner of 10,000).
_OWNER_CHECK = sql.SQL("m.owner || '' = %(owner)s AND m.tier = ANY(%(tiers)s)")


def _partition_filter(plan: _Plan) -> sql.Composable:
    """:data:`_PARTITION_FILTER` with the search's owner written in (see :func:`_written`: an owner ``100%`` failed
    its searches, and one named ``me%%`` read the partition of ``me%``)."""
    return sql.SQL(_PARTITION_FILTER).format(owner_constant=plan.literals["owner_constant"])


def _vector_filters(args: SearchPersonalMemoryArgs, owner: sql.Composable | None = None) -> sql.Composed:
    """Every filter of a search on ``m`` = ghostmem.message_vectors (``owner``: :func:`_partition_filter`) or
    ghostmem.message_bits (the owner a parameter), the project as a list: the vector leg applies them inside its
    scan."""
    return sql.SQL(" AND ").join([owner or _OWNER_FILTER, *_scope_filters(args, _LISTED_PROJECT_FILTER)])


def _kept(args: SearchPersonalMemoryArgs) -> sql.Composable:
    """A boolean column: does message ``m`` pass the optional filters (the lexical leg applies them after its
    bounded index fetches, so a narrow filter cannot make it read every match of a common word)."""
    parts = _scope_filters(args)
    return sql.SQL(" AND ").join(parts) if parts else sql.SQL("true")


_LEXICAL_LEG = """
-- Each query lexeme with its fetch (tq: the owner's words, migration 102), its own one-lexeme query (lq: a tsvector
-- holds lexemes of at most 2046 bytes, longer ones are no tsquery) and a bit of its own: the ranking below holds a
-- message's or a window's query lexemes as the bits of a bigint (MAX_QUERY_TERMS is at most 64). `common`: the owner's
-- list (migration 220, kept by maintenance) says at least df_cap of its messages of a searched tier hold it, so its
-- fetch below would only count to the cap; a scalar LIMIT 1 lookup by primary key (an EXISTS was planned as a hashed
-- sub-plan reading the whole list every search).
lex_terms AS MATERIALIZED (
    SELECT q.lexeme, q.tq, CASE WHEN octet_length(q.lexeme) <= 2046 THEN ghostmem.lexeme_query(q.lexeme) END AS lq,
           1::bigint << (dense_rank() OVER (ORDER BY q.lexeme) - 1)::integer AS bit,
           coalesce((SELECT true FROM ghostmem.common_words c
                     WHERE c.owner = %(owner)s AND c.lexeme = q.lexeme AND c.tier = ANY(%(tiers)s)
                       AND c.df >= {df_cap} LIMIT 1), false) AS common
    FROM (
        SELECT q.lexeme, ghostmem.owner_word_query(%(owner)s, q.lexeme) AS tq
        FROM unnest(tsvector_to_array(ghostmem.lexemes(%(query)s, true)) || %(morphemes)s::text[]) AS q(lexeme)
        ORDER BY length(q.lexeme) DESC, q.lexeme
        LIMIT {max_terms}
    ) q
),
-- The conjunction: messages holding every word. Under a filter that keeps a scope with an index of its own words (the
-- owner's recent messages, migration 240, for a time window that starts on or after their day; a project or a
-- platform, 250; the smallest: its predicate written in), read through that index, and only the scope's share of the
-- fetch (conj_limit of depth): as many of the filter's messages, on average, as a fetch of depth of all the owner's
-- keeps, from a bitmap of the scope's matches alone.
lex_all AS MATERIALIZED (
    SELECT m.id, m.tier, m.conv_id, m.seq, {kept} AS kept FROM ghostmem.messages m
    WHERE {owner}{scope}
      AND ghostmem.owner_words(m.owner, m.tsv) @@ (SELECT string_agg(t.tq::text, ' & ')::tsquery FROM lex_terms t)
    LIMIT {conj_limit}
),
-- Enough messages hold every word, or so many do (filters aside) that every word is common: the per-word fetches
-- below would only add arbitrary samples of common words, so they are skipped. A fetch of a scope (above) that
-- fills its share counts as a full one (n_all = depth): the words' df, and so their idf, are what a fetch of all
-- the owner's messages gives.
lex_enough AS MATERIALIZED (
    SELECT count(*) FILTER (WHERE kept) >= {depth} OR count(*) >= {conj_enough} AS enough,
           CASE WHEN count(*) >= {conj_limit} THEN {depth} ELSE count(*) END AS n_all
    FROM lex_all
),
-- Each word's fetch (at most df_cap messages), but a known-common word's. A fetched message that passes the filters
-- keeps its place and its words (tsv, as read: no second read of the message); the candidates below test them once
-- a message.
lex_hits AS MATERIALIZED (
    SELECT t.lexeme, m.id, m.kept, m.tier, m.conv_id, m.seq, m.tsv
    FROM lex_terms t
    CROSS JOIN LATERAL (
        SELECT m.id, m.kept, CASE WHEN m.kept THEN m.tier END AS tier,
               CASE WHEN m.kept THEN m.conv_id END AS conv_id, CASE WHEN m.kept THEN m.seq END AS seq,
               CASE WHEN m.kept THEN m.tsv END AS tsv
        FROM (
            SELECT m.id, {kept} AS kept, m.tier, m.conv_id, m.seq, m.tsv FROM ghostmem.messages m
            WHERE {owner} AND ghostmem.owner_words(m.owner, m.tsv) @@ t.tq
            LIMIT {df_cap}
        ) m
    ) m
    WHERE NOT (SELECT enough FROM lex_enough) AND NOT t.common
),
-- The store size of the idf: the owner's messages of the searched tiers, capped, as the plan statement read them from
-- the counts (store_n, :func:`store_size`: no second read of them here).
lex_n AS MATERIALIZED (
    SELECT CASE WHEN NOT (SELECT enough FROM lex_enough) THEN %(store_n)s::float8 ELSE {n_cap}::float8 END AS n
),
-- Each query lexeme the store holds, with its idf and its bit.
lex_idf AS MATERIALIZED (
    SELECT d.lexeme, d.df, ln(1 + (greatest(n.n, d.df) - d.df + 0.5) / (d.df + 0.5)) AS idf, d.bit
    FROM (
        SELECT t.lexeme, t.bit,
               CASE WHEN t.common AND NOT (SELECT enough FROM lex_enough) THEN {df_cap}
                    ELSE greatest(count(h.id), (SELECT n_all FROM lex_enough)) END AS df
        FROM lex_terms t LEFT JOIN lex_hits h ON h.lexeme = t.lexeme
        GROUP BY t.lexeme, t.bit, t.common
    ) d, lex_n n
    WHERE d.df > 0
),
-- The idf of every query lexeme, those the store does not hold included (df 0): a hit's word coverage is the share
-- of it that its window holds.
lex_total AS MATERIALIZED (
    SELECT greatest(sum(coalesce(i.idf, ln(1 + (n.n + 0.5) / 0.5))), 1e-9) AS total
    FROM lex_terms t CROSS JOIN lex_n n LEFT JOIN lex_idf i ON i.lexeme = t.lexeme
),
-- A message of the conjunction holds every query lexeme (all the bits). A word-by-word candidate (a message fetched
-- for a word rarer than the cap: when every word is common, their fetched rows would be arbitrary samples, and only
-- the conjunction is ranked) holds the query lexemes its words match: each tested once a message, with the lexeme's
-- one-lexeme query, on the words its fetch read. The word-by-word candidates leave out the conjunction's by NOT IN,
-- a hashed set of its ids (never NULL), which the planner also takes for the CTE's few-row guesses; NOT EXISTS made
-- a nested-loop anti join (300 x 100 tests).
lex_cand AS MATERIALIZED (
    SELECT a.id, a.tier, a.conv_id, a.seq, (SELECT bit_or(t.bit) FROM lex_idf t) AS words
    FROM lex_all a WHERE a.kept
    UNION ALL
    SELECT h.id, h.tier, h.conv_id, h.seq, (SELECT bit_or(u.bit) FROM lex_terms u WHERE h.tsv @@ u.lq) AS words
    FROM (
        SELECT DISTINCT ON (h.id) h.id, h.tier, h.conv_id, h.seq, h.tsv
        FROM lex_hits h JOIN lex_idf t ON t.lexeme = h.lexeme
        WHERE h.kept AND t.df < {df_cap}
          AND h.id NOT IN (SELECT a.id FROM lex_all a WHERE a.kept)
        ORDER BY h.id
    ) h
),
-- The idf of each set of query lexemes a window can hold (a bigint of their bits, below 2 x the highest bit), summed
-- once a set instead of once a window (about 900 windows, 32-64 sets for a query of 5-6 words), as the windows sum
-- it (the same sub-select, so the same sum): a window reads its set's place in the array. NULL (a set of lexemes the
-- store does not hold) is kept as -1 (an idf is positive). A query of more than {set_bits} lexemes, or with fewer
-- candidates than sets (there are at least as many windows as candidates), sums per window.
lex_sums AS MATERIALIZED (
    SELECT CASE WHEN m.top < (1::bigint << {set_bits}) AND 2 * m.top <= (SELECT count(*) FROM lex_cand) THEN ARRAY(
        SELECT coalesce((SELECT sum(t.idf) FROM lex_idf t WHERE s.words & t.bit <> 0), -1)
        FROM generate_series(0, 2 * m.top - 1) AS s(words)
        ORDER BY s.words
    ) END AS sums
    FROM (SELECT max(t.bit) AS top FROM lex_terms t) m
),
-- A message is ranked as the document of its window: itself and its neighbours in the thread (seq - 1, seq + 1).
-- Each candidate lends its query lexemes to both neighbours; the 3 x depth windows holding the most idf are scored
-- by BM25 over the window (its length the sum of its messages'). A one-message conversation is its own window.
-- The lengths come from the narrow rows of ghostmem.message_lengths (migration 107), one index range a candidate:
-- its neighbourhood (seq - 2 to seq + 2) holds the messages of its three windows, whose lengths and centres (the
-- message a window ranks, when it passes the filters) are summed there at once, found by the hash of the
-- conversation id and the place (migration 190: integer keys); the owner, tier and conversation id are checked on
-- the range's rows. (One range a window read 288 ranges for the 100 candidates of a common query: 0.8 ms at 100k.)
lex_nb AS MATERIALIZED (
    SELECT o.tier, o.conv_id, o.seq, o.words, x.len_b, x.len_c, x.len_a, x.id_b, x.id_c, x.id_a
    FROM lex_cand o CROSS JOIN LATERAL (
        SELECT sum(m.lexemes) FILTER (WHERE m.seq <= o.seq) AS len_b,
               sum(m.lexemes) FILTER (WHERE m.seq BETWEEN o.seq - 1 AND o.seq + 1) AS len_c,
               sum(m.lexemes) FILTER (WHERE m.seq >= o.seq) AS len_a,
               max(m.id) FILTER (WHERE m.seq = o.seq - 1 AND {kept}) AS id_b,
               max(m.id) FILTER (WHERE m.seq = o.seq AND {kept}) AS id_c,
               max(m.id) FILTER (WHERE m.seq = o.seq + 1 AND {kept}) AS id_a
        FROM ghostmem.message_lengths m
        WHERE hashtextextended(m.conv_id, 0) = hashtextextended(o.conv_id, 0) AND m.seq BETWEEN o.seq - 2 AND o.seq + 2
          AND m.owner = %(owner)s AND m.tier = o.tier AND m.conv_id = o.conv_id
    ) x
    WHERE o.words IS NOT NULL
),
lex_win AS MATERIALIZED (
    SELECT w.tier, w.conv_id, w.seq, s.idf, w.id, w.len
    FROM (
        SELECT o.tier, o.conv_id, o.seq + d.d AS seq, bit_or(o.words) AS words,
               max(CASE d.d WHEN -1 THEN o.id_b WHEN 0 THEN o.id_c ELSE o.id_a END) AS id,
               max(CASE d.d WHEN -1 THEN o.len_b WHEN 0 THEN o.len_c ELSE o.len_a END) AS len
        FROM lex_nb o CROSS JOIN (VALUES (-1), (0), (1)) AS d(d)
        GROUP BY o.tier, o.conv_id, o.seq + d.d
    ) w CROSS JOIN lex_sums a
    CROSS JOIN LATERAL (
        SELECT CASE WHEN a.sums IS NOT NULL THEN nullif(a.sums[w.words::integer + 1], -1)
                    ELSE (SELECT sum(t.idf) FROM lex_idf t WHERE w.words & t.bit <> 0) END AS idf
    ) s
    ORDER BY s.idf DESC, w.tier, w.conv_id, w.seq
    LIMIT 3 * {depth}
),
-- The windows whose centre passes the filters: the documents ranked.
lex_doc AS NOT MATERIALIZED (
    SELECT w.tier, w.conv_id, w.idf, w.id, w.len FROM lex_win w WHERE w.id IS NOT NULL
),
lex_avgdl AS MATERIALIZED (
    SELECT greatest(avg(len), 1)::float8 AS avgdl FROM lex_doc
),
-- Term frequency is taken as 1, so a window's BM25 is the idf its lexemes sum to times its length's factor.
lex AS (
    SELECT d.id, d.tier, d.conv_id, s.score, d.idf / t.total AS cover,
           row_number() OVER (ORDER BY s.score DESC, d.id) AS rank
    FROM lex_doc d CROSS JOIN lex_avgdl a CROSS JOIN lex_total t
    CROSS JOIN LATERAL (SELECT d.idf * ({k1} + 1) / (1 + {k1} * (1 - {b} + {b} * d.len / a.avgdl)) AS score) s
    ORDER BY s.score DESC, d.id
    LIMIT {depth}
)"""

# A wide scope walks the HNSW graph of the owner's partition of the compact vectors (migration 163), the filters
# checked on the rows it passes over.
_HNSW_SCAN = """
vec_scan AS MATERIALIZED (
    SELECT m.id, m.tier, m.conv_id, m.embedding <=> %(qvec)s::vector::halfvec AS dist
    FROM ghostmem.message_vectors m
    WHERE {filters}
    ORDER BY m.embedding <=> %(qvec)s::vector::halfvec
    LIMIT {vec_depth}
)"""

# A small scope (vector_scan) is read whole: its rows of the compact copies of migration 101 (the same columns as
# `messages`, the vector as halfvec), every distance computed and sorted. The query vector is converted once (a
# sub-select): in the generic plan a cast of the parameter is computed again for every row (a third of the scan).
# Messages at the same distance (the same text, said again) are taken by id, as _VECTOR_RANK ranks them: the LIMIT
# cuts a tie the same way whichever scan reads it (in the order the sort met them, an exact and a quantized scan
# returned different messages of the same data, and never the first ones). The distance is cosine_distance(), the
# function behind `<=>`, which no index answers: ordered by `<=>`, a generic plan could walk the owner's graph
# (migration 163) in the distance's order instead, approximate and, under a narrow filter, long (a project at
# 10,000 messages: 7.5 against 1.9 ms).
_EXACT_ROWS = """
    SELECT m.id, m.tier, m.conv_id, cosine_distance(m.embedding, (SELECT %(qvec)s::vector::halfvec)) AS dist
    FROM ghostmem.message_vectors m
    WHERE {filters}
    ORDER BY 4, 1
    LIMIT {vec_depth}
"""
_EXACT_SCAN = "\nvec_scan AS MATERIALIZED (" + _EXACT_ROWS + ")"

# A larger scope (vector_scan) is ranked by the Hamming distance of its quantized vectors (migration 110: one bit a
# dimension, a narrow table; a time window's or a platform's read from the index alone, whose entries hold the id
# and the bits, migration 164), and its nearest `candidates` are ranked again by their compact vectors' distance
# (one index scan of message_vectors' primary key for all of them), so the rows come back in the order of the
# exact scan's distances (cosine_distance, as there); quantized_candidates are enough to find nearly all of the exact
# scan's rows. Only the `reranked` of them nearest by the query's planes (_PLANE_DISTANCE, see query_planes) are
# ranked again: at 100k messages, 300 of 500 candidates kept as many of the exact scan's rows as all 500 did.
# {nearest} is the candidates' ids and bits (_NEAREST_BITS, or vec_cand after _SAMPLED_CUT).
_QUANTIZED_SCAN = """
vec_scan AS MATERIALIZED (
    SELECT v.id, v.tier, v.conv_id, cosine_distance(v.embedding, (SELECT %(qvec)s::vector::halfvec)) AS dist
    FROM ghostmem.message_vectors v
    WHERE v.owner = {owner_constant} AND v.id = ANY(ARRAY(
        SELECT c.id FROM ({nearest}) c ORDER BY {plane_distance}, c.id LIMIT {reranked}
    ))
    ORDER BY 4, 1
    LIMIT {vec_depth}
)"""

# The scope's `candidates` nearest rows by the Hamming distance of their bits, ties by id ({below}: only the rows
# within the cut of _SAMPLED_CUT).
_NEAREST_BITS = """
        SELECT m.id, m.bits FROM ghostmem.message_bits m
        WHERE {filters}{below}
        ORDER BY {distance}, m.id
        LIMIT {candidates}
    """
_BITS_DISTANCE = sql.SQL("m.bits <~> (SELECT binary_quantize(%(qvec)s::vector))")
# How far a candidate's bits ``c.bits`` are from the query by its planes (query_planes): the sum of the Hamming
# distances to each plane, weighted.
_PLANE_DISTANCE = sql.SQL(" + ").join(
    sql.SQL("(c.bits <~> (SELECT {plane}::varbit)) * {weight}").format(
        plane=sql.Placeholder(f"plane{b}"), weight=sql.Placeholder(f"weight{b}")
    )
    for b in range(QUANTIZED_PLANES)
)
_WITHIN_CUT = sql.SQL(" AND {distance} <= coalesce((SELECT c.cut FROM vec_cut c), 'Infinity')").format(
    distance=_BITS_DISTANCE
)

# A scope read from the index alone (a time window, a platform: migration 164) is sorted only where it is near the
# query. Its sample (migration 200: every sixteenth message by a hash of its id, its bits in the leaf entries of
# two small partial indexes) gives the cut: the distance within which the sample holds QUANTIZED_SAMPLE_MARGIN
# times the candidates' share (its nearest row past `sample_rank`). vec_near keeps the scope's nearest candidates
# within the cut; when the cut holds `candidates` rows, those are the scope's nearest candidates (every row farther
# sorts after them), else (a sample unlike the rest of its scope) vec_cand sorts the whole scope as before, and
# without a cut (a sample of fewer rows) vec_near did. Either way the candidates are the same rows; the top-N sort,
# which formed and compared every row of the scope (at 100k messages about as dear as reading them), gets a few
# times the candidates.
_SAMPLED_CUT = """
vec_cut AS MATERIALIZED (
    SELECT {distance} AS cut FROM ghostmem.message_bits m
    WHERE {filters} AND (hashint8(m.id) & {sample_mask}) = 0
    ORDER BY 1
    LIMIT 1 OFFSET {sample_rank}
),
vec_near AS MATERIALIZED ({near}),
vec_short AS MATERIALIZED (
    SELECT count(*) < {candidates} AND EXISTS (SELECT FROM vec_cut) AS short FROM vec_near
),
vec_cand AS MATERIALIZED (
    SELECT n.id, n.bits FROM vec_near n WHERE NOT (SELECT s.short FROM vec_short s)
    UNION ALL
    SELECT a.id, a.bits FROM ({whole}) a WHERE (SELECT s.short FROM vec_short s)
),"""


def _quantized_scan(args: SearchPersonalMemoryArgs, plan: _Plan) -> sql.Composed:
    """The vector leg of _QUANTIZED_SCAN, its candidates found through _SAMPLED_CUT for a scope read from the index
    alone (``plan.sampled``)."""
    filters = _vector_filters(args)  # message_bits is one table, the owner a parameter

    def nearest(below: sql.Composable) -> sql.Composed:
        return sql.SQL(_NEAREST_BITS).format(
            filters=filters, below=below, distance=_BITS_DISTANCE, **plan.literals
        )

    if not plan.sampled:
        return sql.SQL(_QUANTIZED_SCAN).format(
            nearest=nearest(sql.SQL("")), plane_distance=_PLANE_DISTANCE, **plan.literals
        )
    cut = sql.SQL(_SAMPLED_CUT).format(
        filters=filters,
        distance=_BITS_DISTANCE,
        near=nearest(_WITHIN_CUT),
        whole=nearest(sql.SQL("")),
        sample_mask=sql.Literal(QUANTIZED_SAMPLE - 1),
        **plan.literals,
    )
    return cut + sql.SQL(_QUANTIZED_SCAN).format(
        nearest=sql.SQL("SELECT c.id, c.bits FROM vec_cand c"),
        plane_distance=_PLANE_DISTANCE,
        **plan.literals,
    )


# A project search whose matching projects have graphs of their own (migration 155: a partial HNSW index of
# message_vectors per large (owner, project)) walks each of those graphs for its nearest rows, and reads the rest
# of its scope (the matching projects without a graph, the conversations whose title matches) exactly; the arms
# are merged by distance (a message of a titled conversation in a project with a graph comes from both: once).
# Each graph's owner and project are literals of the statement: its generic plan can then prove the partial
# index's predicate (a bound parameter could be any owner and project). The distances are the exact scan's.
_GRAPH_SCAN = """
vec_scan AS MATERIALIZED (
    SELECT DISTINCT ON (u.dist, u.id) u.id, u.tier, u.conv_id, u.dist
    FROM ({arms}) u
    ORDER BY u.dist, u.id
    LIMIT {vec_depth}
)"""

_GRAPH_ARM = """(
    SELECT m.id, m.tier, m.conv_id, m.embedding <=> %(qvec)s::vector::halfvec AS dist
    FROM ghostmem.message_vectors m
    WHERE m.owner = {owner} AND m.project = {project} AND {filters}
    ORDER BY m.embedding <=> %(qvec)s::vector::halfvec
    LIMIT {vec_depth}
)"""


def _scope_words(plan: _Plan) -> sql.Composable:
    """The conjunction fetch's predicate of the index of a scope's words it reads (``plan.words_scope``): the owner's
    recent messages' (migration 240: only when the search's time window starts on or after its day), or a project's
    or a platform's (migration 250: the one the filter keeps), the owner and the scope written in so that the
    generic plan proves the index's predicate; it keeps every message the filters keep."""
    if plan.words_scope is None:
        return sql.SQL("")
    column, value = plan.words_scope
    if column == "ts":
        scope = sql.SQL("m.ts >= {since}::timestamptz").format(since=_written(value))
    else:
        scope = sql.SQL("m.{column} = {value}").format(column=sql.Identifier(column), value=_written(value))
    return sql.SQL(" AND m.owner || '' = {owner} AND {scope}").format(
        owner=plan.literals["owner_constant"], scope=scope
    )


def _written(text: str) -> sql.Composable:
    """``text`` written into a statement as a literal instead of bound. The statement then passes through
    psycopg's ``%(name)s`` formatting of its parameters, where a ``%`` of the text would be read as a placeholder:
    it is doubled."""
    return sql.SQL(sql.Literal(text).as_string().replace("%", "%%"))


# The rest of the scope: the listed projects without a graph and the titled conversations.
_UNGRAPHED_FILTER = sql.SQL(
    "(m.project = ANY(%(ungraphed)s) OR m.conv_id = ANY(ARRAY(SELECT t.conv_id FROM titled t)))"
)


def _graph_scan(args: SearchPersonalMemoryArgs, plan: _Plan) -> sql.Composed:
    """The vector leg of _GRAPH_SCAN: an arm per graph (the other filters checked on its rows), one for the rest."""
    others = sql.SQL(" AND ").join([sql.SQL("m.tier = ANY(%(tiers)s)"), *_scope_filters(args, None)])
    arms = [
        sql.SQL(_GRAPH_ARM).format(
            owner=plan.literals["owner_constant"], project=_written(project), filters=others, **plan.literals
        )
        for project in plan.graphs
    ]
    rest = sql.SQL(" AND ").join([_partition_filter(plan), *_scope_filters(args, _UNGRAPHED_FILTER)])
    arms.append(sql.SQL("(" + _EXACT_ROWS + ")").format(filters=rest, **plan.literals))
    return sql.SQL(_GRAPH_SCAN).format(arms=sql.SQL(" UNION ALL ").join(arms), **plan.literals)


_VECTOR_RANK = """
vec AS (
    SELECT id, tier, conv_id, dist, row_number() OVER (ORDER BY dist, id) AS rank FROM vec_scan
)"""

_FUSED_BOTH = """
scored AS (
    SELECT coalesce(l.id, v.id) AS id, coalesce(l.tier, v.tier) AS tier, coalesce(l.conv_id, v.conv_id) AS conv_id,
           (coalesce(1.0 / ({rrf_k} + l.rank), 0) + coalesce(%(vector_weight)s / ({rrf_k} + v.rank), 0){bonus}{when})
               / %(score_max)s AS score,
           l.rank AS lex_rank, l.score AS lex_score, l.cover AS lex_cover, v.rank AS vec_rank, v.dist AS vec_dist,
           l.id IS NOT NULL OR v.dist <= {max_dist} AS relevant
    FROM lex l FULL OUTER JOIN vec v ON l.id = v.id
)"""

_FUSED_LEXICAL = """
scored AS (
    SELECT id, tier, conv_id, ({rrf_k} + 1.0) / ({rrf_k} + rank) AS score, rank AS lex_rank, score AS lex_score,
           cover AS lex_cover, NULL::bigint AS vec_rank, NULL::float8 AS vec_dist, true AS relevant
    FROM lex
)"""

_FUSED_VECTOR = """
scored AS (
    SELECT id, tier, conv_id, ({rrf_k} + 1.0) / ({rrf_k} + rank) AS score, NULL::bigint AS lex_rank,
           NULL::float8 AS lex_score, NULL::float8 AS lex_cover, rank AS vec_rank, dist AS vec_dist,
           dist <= {max_dist} AS relevant
    FROM vec
)"""

# No padding: a conversation is returned when one of its messages shares the query's words (the lexical leg found
# it) or is close enough in meaning (similarity at least the floor); its other fused messages come with it. `pos` is
# the message's place in its conversation (best first): one sort of the fused messages serves both windows, the
# floor's and the places (the floor keeps or drops a conversation whole, so its places are those of its kept rows).
_FLOORED = """
fused AS (
    SELECT id, tier, conv_id, score, lex_rank, lex_score, lex_cover, vec_rank, vec_dist, pos
    FROM (
        SELECT s.*, bool_or(s.relevant) OVER w AS keep, row_number() OVER (w ORDER BY s.score DESC, s.id) AS pos
        FROM scored s
        WINDOW w AS (PARTITION BY s.tier, s.conv_id)
    ) k
    WHERE keep
)"""

# A message that says when gets a small bonus when the query asks when (see WHEN_BONUS).
_WHEN_BONUS_SQL = sql.SQL(
    " + CASE WHEN EXISTS (SELECT 1 FROM ghostmem.messages x WHERE x.id = coalesce(l.id, v.id)"
    " AND x.owner = %(owner)s AND left(x.text, {time_chars}) ~* %(mentions_time)s) THEN {when_bonus} ELSE 0 END"
)

# A message written by a speaker the query names gets a small bonus in the fusion (about a third of what rank 1 of
# a leg adds): "what did Ann say about X" is more often answered by Ann's messages than by those addressing her.
_SPEAKER_BONUS_SQL = sql.SQL(
    " + CASE WHEN EXISTS (SELECT 1 FROM ghostmem.messages x WHERE x.id = coalesce(l.id, v.id)"
    " AND x.owner = %(owner)s AND lower(x.speaker) = ANY(%(speakers)s) AND {people}) THEN {speaker_bonus} ELSE 0 END"
)


def _people(alias: str) -> sql.Composed:
    """``<alias>.role`` is one of the roles people write (CONVERSATIONAL_ROLES): a tool call's or a tool result's
    speaker is the tool's name (Claude Code's ``Read``, ChatGPT's ``python``), never a name a query mentions. The
    speaker lookup's index (migration 273) holds these rows: its predicate is this test, roles in this order."""
    return sql.SQL("{role} IN ({roles})").format(
        role=sql.Identifier(alias, "role"),
        roles=sql.SQL(", ").join(map(sql.Literal, sorted(CONVERSATIONAL_ROLES))),
    )


def _fused_messages(args: SearchPersonalMemoryArgs, plan: _Plan) -> sql.Composed:
    """``WITH ... fused AS (id, tier, conv_id, score, lex_rank, lex_score, lex_cover, vec_rank, vec_dist, pos)``
    (``pos``: the message's place in its conversation, best first): the one query builder."""
    legs: list[sql.Composable] = [sql.SQL(_TITLED)] if args.project is not None else []
    if plan.lexical:
        legs.append(
            sql.SQL(_LEXICAL_LEG).format(
                owner=_OWNER_CHECK, scope=_scope_words(plan), kept=_kept(args), **plan.literals
            )
        )
    if plan.vector:
        if plan.scan == "graph":
            scan = _graph_scan(args, plan)
        elif plan.scan == "quantized":
            scan = _quantized_scan(args, plan)
        else:  # message_vectors is read with the owner a constant
            shape = {"hnsw": _HNSW_SCAN, "exact": _EXACT_SCAN}[plan.scan]
            filters = _vector_filters(args, _partition_filter(plan))
            # the walked graph's own predicate, as a literal: the generic plan proves it and walks that graph
            if plan.platform_graph is not None:
                filters += sql.SQL(" AND m.platform = {platform}").format(
                    platform=_written(plan.platform_graph)
                )
            elif plan.since is not None:
                filters += sql.SQL(" AND m.ts >= {since}::timestamptz").format(since=_written(plan.since))
            scan = sql.SQL(shape).format(filters=filters, **plan.literals)
        legs += [scan, sql.SQL(_VECTOR_RANK)]
    if plan.lexical and plan.vector:
        bonus = (
            _SPEAKER_BONUS_SQL.format(people=_people("x"), **plan.literals)
            if plan.params.get("speakers")
            else sql.SQL("")
        )
        when = _WHEN_BONUS_SQL.format(**plan.literals) if plan.params.get("mentions_time") else sql.SQL("")
        legs.append(sql.SQL(_FUSED_BOTH).format(bonus=bonus, when=when, **plan.literals))
    else:
        legs.append(sql.SQL(_FUSED_LEXICAL if plan.lexical else _FUSED_VECTOR).format(**plan.literals))
    legs.append(sql.SQL(_FLOORED))
    return sql.SQL("WITH") + sql.SQL(",").join(legs)


def _speaker_candidates(query: str) -> list[str]:
    """Every run of one to three words of the query, lower-cased: the names a query could mention."""
    words = _WORD.findall(query.lower())[:MAX_NAME_WORDS]
    return sorted({" ".join(words[i : i + n]) for n in (1, 2, 3) for i in range(len(words) - n + 1)})


def strip_names(query: str, names: list[str]) -> str:
    """The query without the given names (and their possessive ``'s``); the query itself if nothing is left."""
    stripped = query
    for name in sorted(names, key=len, reverse=True):
        stripped = re.sub(rf"\b{re.escape(name)}(?:'s|’s)?\b", " ", stripped, flags=re.IGNORECASE)
    stripped = " ".join(stripped.split())
    return stripped if _WORD.search(stripped) else query


def relevance(cover: float | None, similarity: float | None) -> float:
    """How strongly a message answers the query, from 0 to 1, from the evidence a person can check: ``cover``, the
    share of the query's words (weighted by idf, a rare word counting more) that the message and its neighbours
    hold, and ``similarity``, its cosine to the query, read as evidence from :data:`SIMILARITY_FLOOR` (none) to
    :data:`SIMILARITY_FULL` (full). Either kind of evidence alone can make a message relevant; both together make
    it more so (``1 - (1 - words)(1 - meaning)``). A hit's score is the best of its shown messages', capped by the
    score of the hit ranked before it (docs/search.md, "What a score means")."""
    words = min(max(cover or 0.0, 0.0), 1.0)
    meaning = 0.0
    if similarity is not None:
        meaning = min(max((similarity - SIMILARITY_FLOOR) / (SIMILARITY_FULL - SIMILARITY_FLOOR), 0.0), 1.0)
    return 1.0 - (1.0 - words) * (1.0 - meaning)


def vector_weight(query: str) -> float:
    """How much the vector leg counts in the fusion: 0 for a query that holds any CJK letter, else 1.

    The default model, all-MiniLM-L6-v2, was trained on English; on Japanese, Chinese or Korean its neighbours are
    close to random (JSQuAD recall@5 0.41 alone, against 0.96 for the CJK-gram lexical leg) and would only push the
    lexical matches down. A query in those scripts is therefore ranked by its words, also when it quotes Latin
    names or phrases: weighting the vector leg by the share of Latin letters (as before) lost recall@1 on such
    JSQuAD questions, and this way the hybrid of a CJK query is never below its lexical leg alone.
    """
    return 0.0 if CJK.search(query) else 1.0


def store_size(owner_rows: Any) -> float:
    """The store size of the lexical leg's idf (its ``lex_n``): the owner's messages of the searched tiers, as the
    plan statement summed them from migration 092's counts (``owner_rows``), counted up to :data:`N_CAP` and at
    least 1. The main statement read the same counts again for it (an index scan and an aggregate of the owner's
    few dozen rows, and their plan nodes started on every search) until session 31."""
    return float(max(min(int(owner_rows or 0), N_CAP), 1))


def vector_depth(limit: int, depth: int, share: float | None) -> int:
    """How many nearest messages the vector leg contributes when ``limit`` conversations are asked for, given the
    share of the owner's messages the search's filters keep (``None``: no filter; see :func:`_filter_share`; a
    vector leg that runs alone, ``mode=vector``, fills the results by itself and is given 0, as narrow).

    ``depth``, as the lexical leg, unless a filter (time, platform, project) applies. A filtered HNSW scan costs in
    proportion to the rows it must find divided by the share of rows that pass (at a million messages, 100 rows
    with ``days=30`` took 7.7 ms, 50 took 4.1 ms), and a vector rank past a few per conversation adds little to
    the fusion (1/(60+50) against 1/61 for the first). Under a wide filter (at least :data:`WIDE_FILTER_SHARE` of
    the messages: a month, a platform) two per requested conversation, at least 20: the lexical leg finds enough
    of its own there, and on the bench's 100k corpus conversation recall held or rose (``days=30`` 0.558 -> 0.585,
    ``platform=codex`` 0.610 -> 0.623, ``days=7`` 0.633 -> 0.640) at about half the scan. Under a narrow one (one
    project: 3-4% of the messages) five per conversation, at least 50: there the lexical leg keeps few of its
    matches and the vector leg fills the results (with 20 rows a project search's recall fell from 0.763 to 0.727
    and 14 of 48 queries got fewer than 10 conversations instead of 4). Unfiltered, the deeper list is cheap
    (+0.5 ms) and the retrieval benchmarks, which do not filter, were better with it: 100 against 40 rows gave
    LongMemEval_S dev35 hybrid recall_all@5 0.967 against 0.933, JSQuAD dev recall@5 0.961 against 0.953, LoCoMo
    dev turn recall@10 0.716 against 0.724.
    """
    if share is None:
        return depth
    if share >= WIDE_FILTER_SHARE:
        return min(depth, max(WIDE_VECTOR_DEPTH_MIN, WIDE_VECTOR_PER_HIT * limit))
    return min(depth, max(FILTERED_VECTOR_DEPTH_MIN, FILTERED_VECTOR_PER_HIT * limit))


# The search's values as one row that the planner cannot see into (OFFSET 0 keeps it a sub-query): the plan statement
# runs before the settings that ask for generic plans, so PostgreSQL plans it for its values five times, then keeps
# its generic plan only when that is estimated as cheap. With the values visible it never was for a time window or
# for a small owner beside a large one (the estimates of a few dozen rows of counts differ with the owner and the
# window), and the statement was planned again on every such search (0.12-0.27 ms at 100k messages, about what it
# takes to run); read from this row, the estimates are the same for every value. The plan statement reads the
# search's values from ``p``, never from its parameters.
_SEARCH_VALUES = sql.SQL(
    "(SELECT %(owner)s::text AS owner, %(tiers)s::text[] AS tiers, %(days)s::integer AS days,"
    " %(platform)s::text AS platform, %(project)s::text AS project, %(names)s::text[] AS names OFFSET 0) p"
)

# The owner's messages of the searched tiers (migration 092's counts): all a search by words alone asks of them.
_OWNER_ROWS = sql.SQL(
    "(SELECT coalesce(sum(c.n), 0) FROM ghostmem.message_counts c WHERE c.owner = p.owner AND c.tier = ANY(p.tiers))"
)
# A matching project (of the counts' row ``c``) that has a graph of its own (migration 155: its name is a digest of
# the owner and the project, the catalog the only record of it).
_GRAPHED = sql.SQL("to_regclass('ghostmem.' || ghostmem.project_graph_name(p.owner, c.project)) IS NOT NULL")
# The searched platform has a graph of its own (migration 230: named like a project's graph, the catalog the only record).
_PLATFORM_GRAPHED = sql.SQL(
    "to_regclass('ghostmem.' || ghostmem.platform_graph_name(p.owner, p.platform)) IS NOT NULL"
)


def _counts(args: SearchPersonalMemoryArgs, graphed: bool) -> sql.Composed:
    """SQL for the row ``k`` of the plan statement: the owner's rows of the counts of migration 092
    (``message_counts``, a few dozen) read once and summed by what the search needs: ``all_rows`` (every tier: the
    owner's graph, migration 163), ``owner_rows`` (the tiers searched), ``kept_rows`` (those the platform and project
    filters keep), with a platform ``platform_rows``, with a project ``project_rows`` and ``projects`` (the owner's
    projects that match, sorted), and for a project filter alone (``graphed``) ``graph_rows`` and ``graphs`` (the
    matching projects that have a graph of their own, sorted). Each row's tier, platform and project are compared
    once (OFFSET 0 keeps the comparisons in the sub-query instead of repeating them in every sum), and a project's
    graph is looked for only when it matches. Each of these was a scan of its own (four to seven per search, 0.1-0.25
    ms of the plan statement at 100k messages, docs/search.md "The plan statement")."""
    columns: list[sql.Composable] = [sql.SQL("c.n, c.tier = ANY(p.tiers) AS counted")]
    kept: list[sql.Composable] = [sql.SQL("c.counted")]
    sums: list[sql.Composable] = [
        sql.SQL("coalesce(sum(c.n), 0) AS all_rows"),
        sql.SQL("coalesce(sum(c.n) FILTER (WHERE c.counted), 0) AS owner_rows"),
    ]
    if args.platform is not None:
        columns.append(sql.SQL("c.platform = p.platform AS on_platform"))
        kept.append(sql.SQL("c.on_platform"))
        sums.append(
            sql.SQL("coalesce(sum(c.n) FILTER (WHERE c.counted AND c.on_platform), 0) AS platform_rows")
        )
        sums.append(
            sql.SQL(
                "CASE WHEN {graphed} THEN coalesce(sum(c.n) FILTER (WHERE c.on_platform), 0) END AS platform_graph_rows"
            ).format(graphed=_PLATFORM_GRAPHED)
        )
    if args.project is not None:
        columns.append(sql.SQL("c.project, c.project ILIKE p.project AS matched"))
        kept.append(sql.SQL("c.matched"))
        sums.append(sql.SQL("coalesce(sum(c.n) FILTER (WHERE c.counted AND c.matched), 0) AS project_rows"))
        sums.append(
            sql.SQL(
                "array_agg(DISTINCT c.project ORDER BY c.project) FILTER (WHERE c.counted AND c.matched) AS projects"
            )
        )
    if graphed:
        matched_graph = sql.SQL("c.counted AND c.matched AND {graphed}").format(graphed=_GRAPHED)
        sums.append(sql.SQL("coalesce(sum(c.n) FILTER (WHERE {g}), 0) AS graph_rows").format(g=matched_graph))
        sums.append(
            sql.SQL("array_agg(DISTINCT c.project ORDER BY c.project) FILTER (WHERE {g}) AS graphs").format(
                g=matched_graph
            )
        )
    sums.append(
        sql.SQL("coalesce(sum(c.n) FILTER (WHERE {kept}), 0) AS kept_rows").format(
            kept=sql.SQL(" AND ").join(kept)
        )
    )
    # With a project filter (and no platform's: a row of the counts is one platform's) the rows are first summed by
    # what the comparisons read, tier and project: the ILIKE lower-cases both its texts on every row, and a matching
    # project's graph is looked for twice a row (the bench's 100k owner: 78 rows, 22 projects, each on 4 platforms).
    rows: sql.Composable = sql.SQL("ghostmem.message_counts c WHERE c.owner = p.owner")
    if args.project is not None and args.platform is None:
        rows = sql.SQL(
            "(SELECT c.tier, c.project, sum(c.n) AS n FROM {rows} GROUP BY c.tier, c.project) c"
        ).format(rows=rows)
    return sql.SQL("(SELECT {sums} FROM (SELECT {columns} FROM {rows} OFFSET 0) c) k").format(
        sums=sql.SQL(", ").join(sums), columns=sql.SQL(", ").join(columns), rows=rows
    )


# The comment of a relation (``regclass``: SQL for its regclass, NULL when there is none), where migrations 210 and 240
# write an index's day: pg_description read through its index in the statement's own plan. obj_description() ran
# as an SQL function of its own on every call (with a look-up of pg_class by name inside): about 35 us of a plan
# statement a call, against 5-10 for this sub-select (2,000 calls each on a copy of the 100k bench store).
def _comment(regclass: str) -> sql.Composed:
    return sql.SQL(
        "(SELECT d.description FROM pg_catalog.pg_description d"
        " WHERE d.objoid = {regclass} AND d.classoid = 'pg_catalog.pg_class'::regclass AND d.objsubid = 0)"
    ).format(regclass=sql.SQL(regclass))


_RECENT_WORDS_DAY = _comment("to_regclass('ghostmem.' || ghostmem.recent_words_name(p.owner))")


# The row ``w`` of a search's time window, from message_days (migration 092) read once: the owner's messages of the
# searched tiers in the window (``rows``), and when the owner has a graph of its recent messages (migration 210: a
# partial HNSW index of its vectors since a day, named project_graph_name(owner, ''), the day its comment) and the
# window starts on or after that day, the day as written there (``since``) and the owner's messages since then in
# every tier (``recent_rows``: what the graph holds); NULLs without such a graph or for a longer window. The day is
# looked up once (OFFSET 0: flattened, each of its uses read the catalog again, 5 ms at 100k messages).
_WINDOW = sql.SQL(
    """(
    SELECT coalesce(sum(c.n) FILTER (WHERE c.tier = ANY(p.tiers) AND c.day >= d.start), 0) AS rows,
           CASE WHEN d.since IS NOT NULL THEN g.since END AS since,
           CASE WHEN d.since IS NOT NULL THEN coalesce(sum(c.n) FILTER (WHERE c.day >= d.since), 0) END AS recent_rows,
           CASE WHEN d.since IS NULL THEN g.since::timestamptz + make_interval(days => p.days) END AS until
    FROM (SELECT {since} AS since OFFSET 0) g
    CROSS JOIN LATERAL (
        SELECT ((now() - make_interval(days => p.days)) AT TIME ZONE 'UTC')::date AS start,
               CASE WHEN now() - make_interval(days => p.days) >= g.since::timestamptz
                    THEN (g.since::timestamptz AT TIME ZONE 'UTC')::date END AS since
    ) d
    LEFT JOIN ghostmem.message_days c ON c.owner = p.owner AND c.day >= least(d.start, d.since)
    GROUP BY g.since, d.start, d.since
) w"""
).format(since=_comment("to_regclass('ghostmem.' || ghostmem.project_graph_name(p.owner, ''))"))


def _filter_share(args: SearchPersonalMemoryArgs) -> sql.Composable:
    """SQL for the share of the owner's messages the search's filters keep, from the counts kept by migration 092
    (:func:`_counts`): platform and project from ``message_counts`` (a project matching only titles is not counted:
    the share is a lower bound), the time window from ``message_days``, taken as independent."""
    window = sql.SQL(" * w.rows / k.owner_rows::float8") if args.days is not None else sql.SQL("")
    return sql.SQL("CASE WHEN k.owner_rows > 0 THEN k.kept_rows / k.owner_rows::float8{window} END").format(
        window=window
    )


def _scope_rows(args: SearchPersonalMemoryArgs) -> sql.Composable:
    """SQL for how many rows an exact scan of the vector leg would read (the index it reads through; the other
    filters are checked on those rows): with a project, the rows of the owner's matching projects and titled
    conversations; else with a platform, the platform's rows (migration 120's (owner, tier, platform, ts) index),
    within the time window if there is one (its share of the owner's messages, taken as independent, as in
    :func:`_filter_share`); else with a time window, the owner's messages in it; else all of them. From migration
    092's counts and the conversations' message counts, which also count messages without a vector: an upper
    bound, except a platform within a window, which is an estimate; each is 0 only when nothing is in scope."""
    if args.project is not None:
        return sql.SQL("(k.project_rows + t.rows)")
    if args.platform is not None:
        if args.days is None:
            return sql.SQL("k.platform_rows")
        return sql.SQL("ceil(k.platform_rows * w.rows / greatest(k.owner_rows, 1))")
    return sql.SQL("w.rows" if args.days is not None else "k.owner_rows")


def quantized_candidates(vec_depth: int) -> int:
    """How many rows of its scope a quantized scan ranks again by their compact vectors' distance: at 100k
    messages, 20 per returned row kept 0.99–0.998 of the exact scan's nearest rows, 10 per row 0.98–0.99, 4 per
    row 0.89–0.94; for a project of a million-message store 10 per row kept 0.983 of its 50 nearest and every one
    of their first 10 conversations, and took 9.5 against 11.3 ms for 20 per row (docs/search.md, "Scopes between:
    a quantized scan")."""
    return min(QUANTIZED_CANDIDATES * vec_depth, QUANTIZED_CANDIDATES_MAX)


def query_planes(qvec: Sequence[float]) -> dict[str, str | float]:
    """The query's vector as :data:`QUANTIZED_PLANES` weighted sign vectors, the parameters of _PLANE_DISTANCE:
    ``plane0``, ``plane1``, ... (bit strings, 1 where positive) and ``weight0``, ... (floats). The first is the
    query's signs weighted by its mean magnitude, each next one the signs of what the ones before leave out,
    weighted by its mean magnitude.

    A candidate's Hamming distance compares the query's signs with its bits; the planes let the query keep its
    magnitudes. Its vector is about ``Σ w_b · s_b`` (``s_b`` a plane as ±1), so its dot product with a candidate's
    bits as ±1 is about ``Σ w_b · (n − 2 · hamming(plane_b, bits))``: the candidates ranked by ``Σ w_b · hamming``
    are ranked by how much of the query points their way. At 100k messages (the bench's 48 queries, 50 rows asked,
    computed over the stored vectors) the 300 of the 500 Hamming candidates nearest by 3 planes kept every exact
    row that the 500 held (0.994 / 0.991 / 0.987 of the exact rows for a week, a month, a platform); the 300
    nearest by Hamming distance kept 0.978 / 0.977 / 0.974 (docs/search.md, "Scopes between: a quantized
    scan")."""
    rest = np.asarray(qvec, dtype=np.float64)
    planes: dict[str, str | float] = {}
    for b in range(QUANTIZED_PLANES):
        positive = rest > 0
        weight = float(np.abs(rest).mean()) if rest.size else 0.0
        planes[f"plane{b}"] = "".join("1" if p else "0" for p in positive)
        planes[f"weight{b}"] = weight
        rest = rest - np.where(positive, weight, -weight)
    return planes


def quantized_sample_rank(candidates: int) -> int:
    """How many of the nearest sampled rows lie within a quantized scan's cut (migration 200): the sample's share
    of ``candidates`` times :data:`QUANTIZED_SAMPLE_MARGIN`. With a margin of 2, at 100k messages the cut of a
    week, a month and a platform (7,800-15,000 rows, 500 candidates) held 750-1,420 rows for each of the bench's
    48 queries (with 1.5, as few as 456: the whole scope sorted again); with 1, fewer than the candidates for a
    third of them (docs/search.md, "Scopes between: a quantized scan")."""
    return -(-QUANTIZED_SAMPLE_MARGIN * candidates // QUANTIZED_SAMPLE)


# The row ``t`` of a project filter's titled conversations (the owner's of the searched tiers whose title matches):
# their ids (``ids``, for _TITLED) and their messages (``rows``, for :func:`_scope_rows`), one trigram search.
_TITLED_ROWS = sql.SQL(
    " CROSS JOIN LATERAL (SELECT coalesce(sum(c.msg_count), 0) AS rows,"
    " coalesce(array_agg(c.conv_id), ARRAY[]::text[]) AS ids FROM ghostmem.conversations c"
    " WHERE c.owner = p.owner AND c.tier = ANY(p.tiers) AND c.title ILIKE p.project) t"
)


def _titled(args: SearchPersonalMemoryArgs) -> tuple[sql.Composable, sql.Composable]:
    """The plan statement's ``titled`` column and the row it reads (:data:`_TITLED_ROWS`), with a project filter."""
    if args.project is None:
        return sql.SQL("NULL::text[]"), sql.SQL("")
    return sql.SQL("t.ids"), _TITLED_ROWS


# The plan statement's ``recent_words`` column: the day of the owner's index of its recent messages' words (migration
# 240: a partial GIN index since the day of its recent graph, named recent_words_name(owner), the day its comment)
# when the search's time window starts on or after it, with the recent messages' share of the owner's (the window
# row's recent_rows, since the graph's day, which the index shares, over the counts' all_rows: no count read again);
# NULL without one or for a longer window. Looked up once (OFFSET 0, as the graph's day in _WINDOW). A search by words
# alone reads no window row: its conjunction fetch reads the owner's whole index. Each of the words columns is
# ARRAY[column, value, share] (:func:`_scope_conjunction`).
_RECENT_WORDS = sql.SQL(
    "(SELECT CASE WHEN now() - make_interval(days => p.days) >= r.since::timestamptz AND w.recent_rows IS NOT NULL"
    " THEN ARRAY['ts', r.since, (w.recent_rows::float8 / greatest(k.all_rows, 1))::text] END"
    " FROM (SELECT {day} AS since OFFSET 0) r)"
).format(day=_RECENT_WORDS_DAY)
# The ``project_words`` column: the project when the filter keeps one project of the owner's (the counts' matching
# projects, :func:`_counts`) and no conversation by its title, and that project has an index of its words (migration
# 250, named project_words_name(owner, project)), with its share of the owner's messages of the searched tiers.
# The ``recent_words`` column of an unfiltered hybrid search: the same index's day, its share 1: the conjunction
# fetch (depth messages holding every word, an arbitrary sample when more do) takes the owner's recent messages'
# instead of its whole index's first ones in the table's order. At a million messages the whole index's AND of six
# common words decodes their 16k-48k-entry lists (2.7 ms median, 4 ms at worst); the recent index's are a sixth.
_RECENT_WORDS_UNFILTERED = sql.SQL(
    "(SELECT CASE WHEN r.since IS NOT NULL THEN ARRAY['ts', r.since, '1'] END"
    " FROM (SELECT {day} AS since OFFSET 0) r)"
).format(day=_RECENT_WORDS_DAY)
_PROJECT_WORDS = sql.SQL(
    "CASE WHEN cardinality(k.projects) = 1 AND cardinality(t.ids) = 0 AND k.owner_rows > 0"
    " AND to_regclass('ghostmem.' || ghostmem.project_words_name(p.owner, k.projects[1])) IS NOT NULL"
    " THEN ARRAY['project', k.projects[1], (k.project_rows::float8 / k.owner_rows)::text] END"
)
# The ``platform_words`` column: the platform when it has an index of its words (migration 250), with its share.
_PLATFORM_WORDS = sql.SQL(
    "CASE WHEN k.owner_rows > 0"
    " AND to_regclass('ghostmem.' || ghostmem.platform_words_name(p.owner, p.platform)) IS NOT NULL"
    " THEN ARRAY['platform', p.platform, (k.platform_rows::float8 / k.owner_rows)::text] END"
)
_WORDS_COLUMNS = ("recent_words", "project_words", "platform_words")


def _words_columns(args: SearchPersonalMemoryArgs, lexical: bool) -> sql.Composable:
    """The plan statement's words columns (:data:`_WORDS_COLUMNS`) of a hybrid search (NULL for a search by meaning
    alone, or a filter it does not have; an unfiltered search's recent words: :data:`_RECENT_WORDS_UNFILTERED`)."""
    given = (args.days is not None, args.project is not None, args.platform is not None)
    columns = (_RECENT_WORDS, _PROJECT_WORDS, _PLATFORM_WORDS)
    if not any(given):
        given, columns = (True, False, False), (_RECENT_WORDS_UNFILTERED, _PROJECT_WORDS, _PLATFORM_WORDS)
    return sql.SQL(", ").join(
        sql.SQL("{value} AS {name}").format(
            value=column if lexical and wanted else sql.SQL("NULL::text[]"), name=sql.Identifier(name)
        )
        for name, column, wanted in zip(_WORDS_COLUMNS, columns, given, strict=True)
    )


def _scope_conjunction(
    constants: dict[str, Any], depth: int, scopes: Sequence[list[str] | None]
) -> tuple[str, str] | None:
    """The scope whose index of words the conjunction fetch reads (else None): of the plan statement's words columns
    (``[column, value, share]``), the smallest share, and that fetch's size: the scope's share of the owner's
    messages of ``depth`` (of DF_CAP for ``enough``, rounded up), so that the fetch keeps as many of the filter's
    messages, on average, as a fetch of ``depth`` of all the owner's would, rounded down and, for a scope narrower
    than the owner's messages (a time window's recent messages, migration 240; a project or a platform, 250),
    :data:`SCOPE_FETCH_BELOW` fewer, at least 1; an unfiltered search's recent messages (share 1) fetch ``depth``."""
    constants["conj_limit"] = depth
    constants["conj_enough"] = DF_CAP
    found = [s for s in scopes if s is not None]
    if not found:
        return None
    column, value, shared = min(found, key=lambda s: float(s[2]))
    share = min(max(float(shared), 0.0), 1.0)
    # a narrower scope's fetch: below its share (see SCOPE_FETCH_BELOW)
    limit = max(1, math.floor(depth * share) - (SCOPE_FETCH_BELOW if share < 1 else 0))
    constants["conj_limit"] = limit
    constants["conj_enough"] = min(limit, max(1, math.ceil(DF_CAP * share)))
    return column, value


_OWNER_GRAPH_ROWS = sql.SQL("k.all_rows")  # the owner's messages of every tier (:func:`_counts`): its graph's


def message_ef_search(least: int, rows: sql.Composable = _OWNER_GRAPH_ROWS) -> sql.Composable:
    """SQL for the ``hnsw.ef_search`` of the vector leg (as text, for ``set_config``): :data:`MESSAGE_EF_SEARCH`
    candidates for a graph of :data:`MESSAGE_EF_ROWS` messages (``rows``: the owner's, ``k.all_rows`` of
    :func:`_counts`, or its recent messages', migration 210, or its platform's, 230), and
    :data:`MESSAGE_EF_PER_DECADE` more for each tenfold beyond, as many fewer below, never fewer than ``least``: the
    leg's rows unfiltered (the search's depth), under a filter the most a filtered leg asks or
    :data:`FILTERED_EF_SEARCH`, whichever is more (:func:`_walk_least`).

    An HNSW walk finds fewer of the nearest rows as its graph grows, and an owner's graph has no other owner's rows
    to skip: in the graph every owner shared, those made pgvector's iterative scan go on past ``ef_search``. At
    100,000 messages 100 candidates found 0.99 of the exact nearest 100; at a million 0.89, and 200 found 0.95,
    more than the shared graph did with 100 (0.93) (docs/search.md, "A graph per owner"). A filtered leg asks 20 or
    50 rows, and in a smaller graph 75 candidates find them as well: the 100k bench store's month graph (15,600
    rows) and platform graph walked at 75 returned the same conversations in every hybrid search, 2-5% less of the
    server's CPU (docs/search.md, "Session 37")."""
    return sql.SQL(
        "greatest({least}, round({ef} + {per_decade} * log(greatest({rows}, 1)::float8 / {base})))::integer::text"
    ).format(
        least=sql.Literal(least),
        ef=sql.Literal(MESSAGE_EF_SEARCH),
        per_decade=sql.Literal(MESSAGE_EF_PER_DECADE),
        rows=rows,
        base=sql.Literal(MESSAGE_EF_ROWS),
    )


def _walk_least(limit: int, depth: int) -> int:
    """The fewest candidates a filtered walk keeps: the most rows a filtered vector leg asks (:func:`vector_depth`
    of a narrow filter: 50 for 10 conversations) or :data:`FILTERED_EF_SEARCH`, whichever is more."""
    return max(vector_depth(limit, depth, 0.0), FILTERED_EF_SEARCH)


def vector_scan(
    scope_rows: int,
    kept_rows: float,
    owner_graph_rows: float,
    vec_depth: int,
    ef_search: int,
    graphs: int = 0,
    graph_rows: int = 0,
    index_only: bool = False,
) -> Scan:
    """How the vector leg reads: the cheapest of an HNSW scan of the owner's own graph (migration 163, its
    ``owner_graph_rows`` vectors), an exact scan of its scope's compact vectors (migration 101) and a quantized scan
    of the scope (migration 110), each cost counted in rows of an exact scan (``scope_rows``, see
    :func:`_scope_rows`).

    An HNSW scan passes over at least ``ef_search`` rows, and under a filter about ``vec_depth × owner_graph_rows /
    kept_rows`` to find ``vec_depth`` that the filters keep (the filters' share of the graph); each costs about as
    much as :data:`EXACT_ROWS_PER_HNSW_ROW` rows of an exact scan. A quantized scan reads every row of the scope at
    :data:`QUANTIZED_ROW_COST` and ranks its :func:`quantized_candidates` again at :data:`RERANK_ROW_COST` each. So
    a short time window or a small project is read whole, a project of a million-message store is read quantized,
    and a wide scope walks the graph, whatever other owners the database holds. ``kept_rows`` of 0 (nothing passes,
    as far as the counts know) never walks the graph: it would run to its tuple cap.

    A scope a quantized scan reads from the index alone (``index_only``: a time window, a platform, both; migration
    164: its entries hold the id and the bits) costs :data:`QUANTIZED_INDEX_ROW_COST` a row against the walk, so
    a month or a platform of a 100k-message store searched by meaning alone is read quantized instead of walked
    (1.0–1.37× less of the server's CPU, as many of the exact scan's rows: docs/search.md, "A quantized scan read
    from the index"). The exact scan keeps the scopes it wins at :data:`QUANTIZED_ROW_COST`: there the index-only
    scan was 4–13% cheaper but kept 0.983–0.994 of the exact rows.

    A project search whose scope holds ``graphs`` projects with a graph of their own (migration 155), ``graph_rows``
    rows in all, may walk those instead: each walk passes over about ``max(ef_search, vec_depth)`` rows (every row of
    the graph is the project's), each costing about as much as :data:`EXACT_ROWS_PER_HNSW_ROW` rows of an exact
    scan, and the rest of the scope is read exactly: with :data:`FILTERED_EF_SEARCH`, 1,875 rows per graph,
    well below the size past which migration 155 builds one (at 100k messages the walk of a 4,000-row project's
    graph at ``ef_search`` 200 cost a little more than reading it; at 1M a 31,000-row project's about half as much
    as its quantized scan, at 100 candidates 1.16x less again and at 75 1.03x: docs/search.md, "A graph of each
    large project's own").
    """
    passed_over = max(ef_search, vec_depth * max(owner_graph_rows, kept_rows, 1.0) / max(kept_rows, 1.0))
    rerank = RERANK_ROW_COST * min(scope_rows, quantized_candidates(vec_depth))
    costs: dict[Scan, float] = {
        "exact": scope_rows,
        "quantized": QUANTIZED_ROW_COST * scope_rows + rerank,
        "hnsw": EXACT_ROWS_PER_HNSW_ROW * passed_over,
    }
    if graphs:
        walks = EXACT_ROWS_PER_HNSW_ROW * max(ef_search, vec_depth) * graphs
        costs["graph"] = walks + max(scope_rows - graph_rows, 0)
    choice = min(costs, key=costs.__getitem__)
    if index_only and choice != "exact":
        costs["quantized"] = QUANTIZED_INDEX_ROW_COST * scope_rows + rerank
        choice = min(costs, key=costs.__getitem__)
    return choice


# Composed statement texts a process keeps, one per shape searched (the least recently used go first).
STATEMENTS_KEPT = 512


@dataclass(frozen=True, slots=True)
class _Shape:
    """A search statement's shape: what its text is composed from (``key``), and how (``compose``, not compared)."""

    key: tuple[Any, ...]
    compose: Callable[[], sql.Composable] = field(compare=False)


@lru_cache(maxsize=STATEMENTS_KEPT)
def _composed(shape: _Shape) -> sql.SQL:
    return sql.SQL(shape.compose().as_string())


def _text(key: tuple[Any, ...], compose: Callable[[], sql.Composable]) -> sql.SQL:
    """A statement's text, composed once per ``key`` (all that its composition reads) and then reused: composing
    (psycopg's ``format`` and quoting of its parts) was repeated on every search for the same few shapes."""
    return _composed(_Shape(key, compose))


def _given(args: SearchPersonalMemoryArgs) -> tuple[bool, bool, bool]:
    """Which optional filters a search gives (days, platform, project): all that its statements' texts read of
    its filters (their values are bound)."""
    return args.days is not None, args.platform is not None, args.project is not None


# The settings of the statement, made in its transaction. The statement is planned once per connection
# (psycopg prepares a statement run five times; its generic plan then saves ~1 ms of planning per search:
# its sizes are literals, and its shape is fixed by the materialised legs — GIN scans, the HNSW scan,
# primary keys). Iterative scans keep a filtered HNSW scan going until `vec_depth` rows pass the filters;
# ef_search is how many candidates each step of the scan keeps (the wider, the closer to the exact rows).
# Sequential scans are off: every leg reads through its index, and a generic plan that guessed a LIMIT would
# come early from a scan of the table would read all of it when it does not (see _OWNER_CHECK). So are
# parallel workers: an exact scan of a few thousand rows was planned in parallel, and starting the workers
# cost more than the scan (38 against 7 ms at 100k messages, on two busy cores). And so is JIT compilation:
# the statement's estimated cost (158,000-171,000 at 100k messages, every case) is above PostgreSQL's default
# jit_above_cost (100,000), so on a server built with JIT every search compiled its expressions again (a
# generic plan keeps no compiled code), for a statement that runs a few milliseconds (docs/search.md).
_SETTINGS = sql.SQL(
    "set_config('plan_cache_mode', 'force_generic_plan', true) AS plans,"
    " set_config('hnsw.iterative_scan', 'relaxed_order', true) AS iterative,"
    " set_config('hnsw.max_scan_tuples', %(max_scan)s, true) AS max_scan,"
    " set_config('enable_seqscan', 'off', true) AS seqscan,"
    " set_config('max_parallel_workers_per_gather', '0', true) AS parallel, {jit} AS jit"
).format(jit=NO_JIT)
_SETTING_PARAMS = {"max_scan": str(HNSW_MAX_SCAN_TUPLES)}

# The speaker names the query mentions (``p.names``: _speaker_candidates) that people of the owner's searched tiers
# are (_people): the plan statement's and the check statement's ``speakers``.
_SPEAKERS = sql.SQL(
    "ARRAY(SELECT n.name FROM unnest(p.names) AS n(name) WHERE EXISTS (SELECT 1 FROM ghostmem.messages m"
    " WHERE m.owner = p.owner AND lower(m.speaker) = n.name AND m.speaker IS NOT NULL AND {people}"
    " AND m.tier = ANY(p.tiers)))"
).format(people=_people("m"))
# The owner's token (migration 274): replaced by every write of what the plan statement reads.
_TOKEN = sql.SQL("(SELECT c.token FROM ghostmem.owner_changes c WHERE c.owner = p.owner)")
# The next midnight (UTC): a time window's first day (_WINDOW's start) moves then.
_MIDNIGHT = sql.SQL("((date_trunc('day', now() AT TIME ZONE 'UTC') + interval '1 day') AT TIME ZONE 'UTC')")
# The instant a time window starts on or after the day of the owner's index of its recent messages' words
# (migration 240) when it does not yet (_RECENT_WORDS), else NULL.
_RECENT_WORDS_UNTIL = sql.SQL(
    "(SELECT CASE WHEN now() - make_interval(days => p.days) < r.since::timestamptz"
    " THEN r.since::timestamptz + make_interval(days => p.days) END FROM (SELECT {day} AS since OFFSET 0) r)"
).format(day=_RECENT_WORDS_DAY)


def _valid_until(args: SearchPersonalMemoryArgs, lexical: bool) -> sql.Composable:
    """The plan statement's ``valid_until``: when what it read of a time window changes without a write (the
    window's first day at midnight, the day its start passes an index's day: _WINDOW's ``until``,
    :data:`_RECENT_WORDS_UNTIL`), NULL without a window (its row holds until the owner's token changes)."""
    if args.days is None:
        return sql.SQL("NULL::timestamptz")
    moments = [_MIDNIGHT, sql.SQL("w.until")] + ([_RECENT_WORDS_UNTIL] if lexical else [])
    return sql.SQL("least({moments})").format(moments=sql.SQL(", ").join(moments))  # least skips NULLs


def _check_statement(vector: bool) -> sql.Composed:
    """The statement a search runs instead of its plan statement when the process keeps that statement's row for
    the same owner and filters (:func:`_plan_row`): the settings (the walk's ``ef_search`` as kept), the speakers
    this query names, and whether the row is still valid (the owner's token unchanged, ``valid_until`` not
    passed)."""
    columns: list[sql.Composable] = [_SETTINGS]
    if vector:
        columns.append(sql.SQL("set_config('hnsw.ef_search', %(ef_search)s, true) AS ef_search"))
        columns.append(sql.SQL("{speakers} AS speakers").format(speakers=_SPEAKERS))
    columns.append(
        sql.SQL(
            "{token} = %(token)s::uuid AND now() < coalesce(%(valid_until)s::timestamptz, 'infinity') AS valid"
        ).format(token=_TOKEN)
    )
    return sql.SQL("SELECT {columns} FROM {values}").format(
        columns=sql.SQL(", ").join(columns), values=_SEARCH_VALUES
    )


# Plan statements' rows a process keeps (the least recently used go first), by statement, owner and filter values.
PLANS_KEPT = 4096
_kept_plans: OrderedDict[tuple[Any, ...], Row] = OrderedDict()
_kept_lock = threading.Lock()


def _kept_plan(key: tuple[Any, ...]) -> Row | None:
    with _kept_lock:
        row = _kept_plans.get(key)
        if row is not None:
            _kept_plans.move_to_end(key)
        return row


def _keep_plan(key: tuple[Any, ...], row: Row) -> None:
    with _kept_lock:
        _kept_plans[key] = row
        _kept_plans.move_to_end(key)
        while len(_kept_plans) > PLANS_KEPT:
            _kept_plans.popitem(last=False)


def _plan_row(key: tuple[Any, ...], statement: sql.SQL, vector: bool, params: dict[str, Any]) -> Program[Row]:
    """The row of a search's plan statement (``statement``, its shape and values ``key``): the one the process
    keeps when the check statement finds it still valid (with this query's speakers), else the statement's own
    (kept when the owner has a token). What the plan statement reads changes with the owner's writes and, for a
    time window, with the clock; a kept row is used only in a transaction that sees neither change (docs/search.md,
    "Kept plans")."""
    kept = _kept_plan(key)
    if kept is not None:
        checked = {
            "token": kept["token"],
            "valid_until": kept["valid_until"],
            "ef_search": kept.get("ef_search"),
        }
        checks: list[Row] = yield Query(
            _text(("check", vector), lambda: _check_statement(vector)), {**params, **checked}
        )
        if checks[0]["valid"]:
            return {**kept, "speakers": checks[0]["speakers"]} if vector else kept
    rows: list[Row] = yield Query(statement, params)
    if rows[0]["token"] is not None:
        _keep_plan(key, rows[0])
    return rows[0]


def _plan_statement(args: SearchPersonalMemoryArgs, lexical: bool, vector: bool, depth: int) -> sql.Composed:
    """The plan statement of a search: its settings, the owner's counts and the search's scope (and for a search by
    meaning the speakers its query names, the walk's graph); what it reads of ``args`` is which filters are given
    (their values are bound)."""
    filtered = any(_given(args))  # the same filters both legs apply
    # The projects' own graphs serve a project filter alone: a time window or a platform within a project would
    # make their walks pass over the rows it leaves out.
    graphed = args.project is not None and args.days is None and args.platform is None
    titled, titled_rows = _titled(args)
    if not vector:
        return sql.SQL(
            "SELECT {settings}, {token} AS token, NULL::timestamptz AS valid_until, {owner_rows} AS owner_rows,"
            " {titled} AS titled, {words} FROM {values}{t}"
        ).format(
            settings=_SETTINGS,
            token=_TOKEN,
            owner_rows=_OWNER_ROWS,
            titled=titled,
            words=_words_columns(args, False),
            values=_SEARCH_VALUES,
            t=titled_rows,
        )
    # The graph an HNSW walk would take, the smallest that holds the scope: the owner's recent messages' when the
    # time window is within them (migration 210), the platform's (230), else the owner's whole graph (163).
    graph_rows: list[sql.Composable] = []
    if args.days is not None:
        graph_rows.append(sql.SQL("w.recent_rows"))
    if args.platform is not None:
        graph_rows.append(sql.SQL("k.platform_graph_rows"))
    walked_rows = (
        sql.SQL("least({rows}, k.all_rows)").format(rows=sql.SQL(", ").join(graph_rows))  # least skips NULLs
        if graph_rows
        else _OWNER_GRAPH_ROWS
    )
    # Speaker names the query mentions (people's: _people) and how narrow its filters are (the same round trip).
    return sql.SQL(
        """
            SELECT {settings}, set_config('hnsw.ef_search', {ef_search}, true) AS ef_search,
            {speakers} AS speakers, {token} AS token, {valid_until} AS valid_until, {share} AS share, k.owner_rows,
            {scope_rows} AS scope_rows, {projects} AS projects, {graphs} AS graphs, {graph_rows} AS graph_rows,
            {walked_rows} AS owner_graph_rows, {since} AS since,
            {titled} AS titled, {platform_graph_rows} AS platform_graph_rows, {words}
            FROM {values} CROSS JOIN LATERAL {counts}{window}{titled_rows}
            """
    ).format(
        settings=_SETTINGS,
        speakers=_SPEAKERS,
        token=_TOKEN,
        valid_until=_valid_until(args, lexical),
        # a project filter alone walks a matching project's graph when there is one, keeping at least the rows a
        # filtered leg asks at most (vector_depth of a narrow filter); without one, the search's depth
        ef_search=sql.SQL("CASE WHEN k.graphs IS NULL THEN {depth} ELSE {walk} END").format(
            depth=sql.Literal(str(depth)),
            walk=sql.Literal(str(_walk_least(args.limit, depth))),
        )
        if graphed
        else message_ef_search(_walk_least(args.limit, depth) if filtered else depth, walked_rows),
        share=_filter_share(args) if filtered else sql.SQL("1::float8"),
        scope_rows=_scope_rows(args),
        projects=sql.SQL(
            "coalesce(k.projects, ARRAY[]::text[])" if args.project is not None else "NULL::text[]"
        ),
        graphs=sql.SQL("coalesce(k.graphs, ARRAY[]::text[])" if graphed else "ARRAY[]::text[]"),
        graph_rows=sql.SQL("k.graph_rows" if graphed else "0"),
        values=_SEARCH_VALUES,
        counts=_counts(args, graphed),
        walked_rows=walked_rows,
        since=sql.SQL("w.since" if args.days is not None else "NULL::text"),
        platform_graph_rows=sql.SQL(
            "k.platform_graph_rows" if args.platform is not None else "NULL::numeric"
        ),
        window=sql.SQL(" CROSS JOIN LATERAL {window}").format(window=_WINDOW)
        if args.days is not None
        else sql.SQL(""),
        titled=titled,
        titled_rows=titled_rows,
        words=_words_columns(args, lexical),
    )


def _plan(ctx: OpContext, args: SearchPersonalMemoryArgs, depth: int, floor: float) -> Program[_Plan]:
    """Resolve the query embedding and the scan settings of one search (steps before the one statement)."""
    lexical = args.mode in ("hybrid", "lexical")
    # A hybrid search whose vector leg would not count (a CJK query) neither embeds the query nor scans HNSW.
    vector = args.mode == "vector" or (args.mode == "hybrid" and vector_weight(args.query) > 0)
    tiers = ["personal", "library"] if args.include_library else ["personal"]
    params: dict[str, Any] = {
        "owner": ctx.owner,
        "tiers": tiers,
        "query": args.query,
        "morphemes": japanese.terms(args.query)
        or [],  # the query's Japanese words, as the write path stores them
        "days": args.days,
        "platform": args.platform,
        "project": like_pattern(args.project) if args.project is not None else None,
    }
    filtered = any(_given(args))  # the same filters both legs apply
    constants: dict[str, Any] = {
        "depth": depth,
        "limit": args.limit,
        "df_cap": DF_CAP,
        "max_terms": MAX_QUERY_TERMS,
        "set_bits": WORD_SET_BITS,
        "n_cap": N_CAP,
        "k1": BM25_K1,
        "b": BM25_B,
        "rrf_k": RRF_K,
        "matches": MATCHES_PER_HIT,
        "speaker_bonus": SPEAKER_BONUS,
        "when_bonus": WHEN_BONUS,
        "time_chars": TIME_CHARS,
        "max_dist": 1.0 - floor,
    }
    constants["owner_constant"] = ctx.owner  # the vector leg's partition (_PARTITION_FILTER), written in
    statement = _text(
        ("plan", lexical, vector, *_given(args), depth, args.limit),
        lambda: _plan_statement(args, lexical, vector, depth),
    )
    # the plan statement reads the owner, its tiers and filters (and the query's names, whose speakers are looked
    # up on every search)
    key = (
        ctx.owner,
        tuple(tiers),
        args.days,
        args.platform,
        params["project"],
        lexical,
        vector,
        depth,
        args.limit,
    )
    names = _speaker_candidates(args.query) if vector else None
    row = yield from _plan_row(key, statement, vector, {**_SETTING_PARAMS, **params, "names": names})
    if not vector:
        stored = bool(row["owner_rows"])
        params["store_n"] = store_size(row["owner_rows"])
        params["titled"] = row["titled"]
        scope = _scope_conjunction(constants, depth, [row[c] for c in _WORDS_COLUMNS])
        return _Plan(params, constants, lexical, vector, stored, words_scope=scope)
    stored = bool(row["owner_rows"])
    params["store_n"] = store_size(row["owner_rows"])
    params["speakers"] = list(row["speakers"])
    params["mentions_time"] = MENTIONS_TIME if ASKS_WHEN.search(args.query) else None
    params["projects"] = row["projects"]
    params["titled"] = row["titled"]
    # The vector leg alone (mode=vector) fills the results by itself: it is as deep as under a narrow filter. A
    # store without counted messages (share NULL) counts as narrow too: its scan is short anyway.
    share = float(row["share"] or 0.0)
    vec_depth = vector_depth(args.limit, depth, (share if lexical else 0.0) if filtered else None)
    constants["vec_depth"] = vec_depth
    if not row["scope_rows"]:
        # No message in scope (an empty store, a project, platform or time window without any): the vector leg
        # could find nothing, so the query is not embedded (on a new home that would first prepare the model,
        # ~20 s); a search by meaning alone then runs no leg at all.
        scope = _scope_conjunction(constants, depth, [row[c] for c in _WORDS_COLUMNS])
        return _Plan(params, constants, lexical, False, stored, words_scope=scope)
    candidates = quantized_candidates(vec_depth)
    constants["candidates"] = candidates
    constants["sample_rank"] = quantized_sample_rank(candidates)
    constants["reranked"] = min(candidates, QUANTIZED_RERANKED * vec_depth)
    # a window's or a platform's scope is read from the index alone, a project's from the table
    index_only = filtered and args.project is None
    # owner_graph_rows: the rows of the graph a walk takes, the owner's (every tier) or its recent messages'
    scan = vector_scan(
        int(row["scope_rows"]),
        share * float(row["owner_rows"]),
        float(row["owner_graph_rows"]),
        vec_depth,
        int(row["ef_search"]),
        len(row["graphs"]),
        int(row["graph_rows"]),
        index_only,
    )
    graphs = tuple(row["graphs"]) if scan == "graph" else ()
    # a walk takes the platform's graph when it is the smallest (owner_graph_rows: least of the graphs' rows)
    platform_graph = (
        args.platform
        if scan == "hnsw"
        and row["platform_graph_rows"] is not None
        and row["platform_graph_rows"] == row["owner_graph_rows"]
        else None
    )
    since = row["since"] if scan == "hnsw" and platform_graph is None else None
    params["ungraphed"] = [p for p in params["projects"] or [] if p not in graphs]
    dense_query = strip_names(args.query, params["speakers"])
    params["qvec"] = yield Embed(dense_query)
    if scan == "quantized":
        params.update(query_planes(params["qvec"]))
    params["vector_weight"] = weight = vector_weight(args.query)
    # The fusion's scores (they order the messages; `explain` shows a hit's) are divided by the best a message can
    # get (first in every leg that counts, and the speaker bonus): 1 = ranked first by words and by meaning. The
    # score a hit shows is its relevance instead (see relevance).
    params["score_max"] = (
        (1.0 + weight) / (RRF_K + 1)
        + (SPEAKER_BONUS if params["speakers"] else 0.0)
        + (WHEN_BONUS if params["mentions_time"] else 0.0)
    )
    return _Plan(
        params=params,
        constants=constants,
        lexical=lexical,
        vector=vector,
        stored=stored,
        scan=scan,
        graphs=graphs,
        since=since,
        platform_graph=platform_graph,
        sampled=index_only,
        words_scope=_scope_conjunction(constants, depth, [row[c] for c in _WORDS_COLUMNS]),
    )


def _statement(
    builder: str,
    args: SearchPersonalMemoryArgs,
    plan: _Plan,
    compose: Callable[[], sql.Composable],
) -> sql.SQL:
    """The text of a search's main statement (:func:`_text`), its shape what the composing functions read of
    ``args`` (which filters are given) and of ``plan`` (its literals, legs and scans, whether speakers or a time
    bonus count); ``builder`` names who composes it."""
    key = (
        builder,
        *_given(args),
        plan.lexical,
        plan.vector,
        plan.scan,
        plan.graphs,
        plan.since,
        plan.platform_graph,
        plan.words_scope,
        plan.sampled,
        bool(plan.params.get("speakers")),
        bool(plan.params.get("mentions_time")),
        tuple(sorted(plan.constants.items())),
    )
    return _text(key, compose)


def search_messages(
    ctx: OpContext, args: SearchPersonalMemoryArgs, depth: int, floor: float = SIMILARITY_FLOOR
) -> Program[list[Row]]:
    """The fused messages of a search, best first (at most ``depth``): what conversations are ranked from.

    Each row has ``id, tier, conv_id, score, lex_rank, lex_score, lex_cover, vec_rank, vec_dist, seq, native_id,
    role, ts, speaker, text`` (``score`` is the fusion's, which orders them; see :func:`relevance` for what a hit
    shows). ``floor`` is the similarity floor of vector-only messages (the benchmark varies it to
    calibrate :data:`SIMILARITY_FLOOR`; -1 turns it off).
    """
    plan = yield from _plan(ctx, args, depth, floor)
    if not plan.searches:
        return []
    statement = _statement(
        "search_messages",
        args,
        plan,
        lambda: (
            _fused_messages(args, plan)
            + sql.SQL(
                """
        SELECT f.id, f.tier, f.conv_id, f.score, f.lex_rank, f.lex_score, f.lex_cover, f.vec_rank, f.vec_dist,
               m.seq, m.native_id, m.role, m.ts, m.speaker, m.text
        FROM fused f JOIN ghostmem.messages m ON m.id = f.id AND m.owner = %(owner)s
        ORDER BY f.score DESC, f.id
        LIMIT {depth}
        """
            ).format(**plan.literals)
        ),
    )
    rows: list[Row] = yield Query(statement, plan.params)
    return rows


def _shown_matches(found: Tuples) -> list[list[tuple[Any, ...]]]:
    """The rows of a search (one per shown message, each conversation's together, best message first) grouped by
    conversation, in their order."""
    tier, conv_id = found.at["tier"], found.at["conv_id"]
    grouped: list[list[tuple[Any, ...]]] = []
    for row in found.rows:
        if grouped and (grouped[-1][0][tier], grouped[-1][0][conv_id]) == (row[tier], row[conv_id]):
            grouped[-1].append(row)
        else:
            grouped.append([row])
    return grouped


def _best_conversations(args: SearchPersonalMemoryArgs, plan: _Plan) -> sql.Composed:
    """The statement of :func:`search_personal_memory`: a row per shown message of the best conversations."""
    return _fused_messages(args, plan) + sql.SQL(
        """,
        best AS MATERIALIZED (
            -- The best conversations (a conversation's score is its best message's, at pos 1), each read once.
            SELECT {columns}, b.score
            FROM (
                SELECT f.tier, f.conv_id, f.score FROM fused f WHERE f.pos = 1
                ORDER BY f.score DESC, f.tier = 'library', f.conv_id
                LIMIT {limit}
            ) b
            JOIN ghostmem.conversations c ON c.owner = %(owner)s AND c.tier = b.tier AND c.conv_id = b.conv_id
        )
        -- A row per shown message (at most {matches} a conversation, best first): only they are read from the
        -- messages, the legs carrying each message's conversation. The client groups them into hits, so no json
        -- is built for them.
        SELECT b.*, shown.seq, shown.role, shown.ts, shown.speaker,
               left(shown.text, {chars}) AS text, char_length(shown.text) > {chars} AS truncated,
               h.lex_cover, coalesce(1 - h.vec_dist, {similarity}) AS similarity,
               h.score::float8 AS fused, h.lex_rank, h.lex_score, h.vec_rank, h.vec_dist
        FROM best b
        JOIN fused h ON h.tier = b.tier AND h.conv_id = b.conv_id AND h.pos <= {matches}
        JOIN ghostmem.messages shown ON shown.id = h.id AND shown.owner = %(owner)s
        ORDER BY b.score DESC, b.tier = 'library', b.conv_id, h.pos
        """
    ).format(
        columns=_ROW_COLUMNS,
        chars=sql.Literal(READ_MATCH_CHARS),
        # the cosine of a shown message only the lexical leg found (its vector is read for these few rows only)
        similarity=sql.SQL("1 - (shown.embedding <=> %(qvec)s::vector)" if plan.vector else "NULL::float8"),
        **plan.literals,
    )


def search_personal_memory(ctx: OpContext, args: SearchPersonalMemoryArgs) -> Program[SearchResult]:
    plan = yield from _plan(ctx, args, max(DEPTH_PER_LEG, 5 * args.limit), SIMILARITY_FLOOR)
    if not plan.searches:
        return SearchResult(query=args.query, rows=[], nothing_stored=not plan.stored)
    statement = _statement("search_personal_memory", args, plan, lambda: _best_conversations(args, plan))
    # rows as tuples: a dict per row cost 0.1 ms more to fetch (23 rows of 26 columns)
    found: Tuples = yield Query(statement, plan.params, fetch="tuples")
    at = found.at
    cover, similar = at["lex_cover"], at["similarity"]
    shown_fields = [(k, at[k]) for k in MessageView.model_fields if k in at]
    hits = []
    shown = 1.0
    for conversation in _shown_matches(found):
        first = dict(zip(at, conversation[0], strict=True))
        evidence_pairs = [[r[cover], r[similar]] for r in conversation]
        evidence = max(relevance(cover, similarity) for cover, similarity in evidence_pairs)
        shown = min(shown, evidence)  # never above the hit ranked before it: the order stays the fusion's
        # explain: the best message's ranks and fused score, and each shown message's [word coverage, cosine]
        explain = (
            {
                "fused": first["fused"],
                "lexical_rank": first["lex_rank"],
                "lexical_score": first["lex_score"],
                "vector_rank": first["vec_rank"],
                "vector_distance": first["vec_dist"],
                "message_seq": first["seq"],
                "evidence": evidence_pairs,
                "relevance": evidence,
            }
            if args.explain
            else None
        )
        hits.append(
            SearchHit(
                **_conversation_row(first).model_dump(),
                score=shown,
                matches=[
                    MessageView.model_validate({k: r[i] for k, i in shown_fields}) for r in conversation
                ],
                explain=explain,
            )
        )
    return SearchResult(query=args.query, rows=hits, nothing_stored=not plan.stored)


# --- reading one conversation --------------------------------------------------------------------------------

_FIND_CONVERSATION = sql.SQL(
    """
    conv AS (
        SELECT {columns} FROM ghostmem.conversations c
        WHERE c.owner = %(owner)s AND c.conv_id = %(conv_id)s
        ORDER BY c.tier = 'personal' DESC
        LIMIT 1
    )"""
).format(columns=_ROW_COLUMNS)


PREFIX_MATCHES = 3  # the conv_ids a conversation not found names when they begin with what was given


def conv_ids_beginning(owner: str, given: str) -> Program[list[str]]:
    """The owner's conv_ids (either tier) that begin with ``given`` (an id copied short, as git's are), at most
    :data:`PREFIX_MATCHES` and one more (to say there are more): read only when ``given`` is not an id."""
    rows = yield Query(
        "SELECT DISTINCT c.conv_id FROM ghostmem.conversations c"
        " WHERE c.owner = %(owner)s AND starts_with(c.conv_id, %(given)s) ORDER BY 1 LIMIT %(n)s",
        {"owner": owner, "given": given, "n": PREFIX_MATCHES + 1},
    )
    return [r["conv_id"] for r in rows]


def beginning_with(ids: list[str]) -> str:
    """What an error says of the conv_ids :func:`conv_ids_beginning` found."""
    more = " and more (give more of the id)" if len(ids) > PREFIX_MATCHES else " (give one whole)"
    return f"conv_ids beginning with it: {', '.join(map(repr, ids[:PREFIX_MATCHES]))}{more}"


def _not_found(ctx: OpContext, conv_id: str) -> Program[NotFound]:
    """The error of a conversation that is not stored, naming the owner's conv_ids that begin with what was given."""
    ids = yield from conv_ids_beginning(ctx.owner, conv_id)
    if not ids:
        return NotFound(
            f"no conversation {conv_id!r} in personal memory or the library: find conv_ids with ",
            Op("search_personal_memory"),
            " or ",
            Op("list_recent_conversations"),
        )
    return NotFound(f"no conversation {conv_id!r} in personal memory or the library; {beginning_with(ids)}")


def get_conversation(ctx: OpContext, args: GetConversationArgs) -> Program[Thread]:
    statement = (
        sql.SQL("WITH")
        + _FIND_CONVERSATION
        + sql.SQL(
            """
            SELECT conv.*,
                   (SELECT count(*) FROM ghostmem.messages m
                    WHERE m.owner = %(owner)s AND m.tier = conv.tier AND m.conv_id = conv.conv_id) AS total,
                   (SELECT coalesce(jsonb_agg(p.message ORDER BY p.seq), '[]'::jsonb) FROM (
                        SELECT m.seq, {message} AS message FROM ghostmem.messages m
                        WHERE m.owner = %(owner)s AND m.tier = conv.tier AND m.conv_id = conv.conv_id
                        ORDER BY m.seq
                        OFFSET %(offset)s LIMIT %(limit)s
                    ) p) AS messages
            FROM conv
            """
        ).format(message=_message_json(READ_THREAD_CHARS))
    )
    rows = yield Query(
        statement, {"owner": ctx.owner, "conv_id": args.conv_id, "offset": args.offset, "limit": args.limit}
    )
    if not rows:
        raise (yield from _not_found(ctx, args.conv_id))
    row = rows[0]
    messages = [_message_view(m) for m in row["messages"]]
    end = args.offset + len(messages)
    return Thread(
        conversation=_conversation_row(row),
        messages=messages,
        offset=args.offset,
        total=int(row["total"]),
        next_offset=end if end < row["total"] else None,
    )


def get_conversation_summary(
    ctx: OpContext, args: GetConversationSummaryArgs
) -> Program[ConversationSummary]:
    head = (args.max_messages + 1) // 2
    statement = (
        sql.SQL("WITH")
        + _FIND_CONVERSATION
        + sql.SQL(
            """,
            msgs AS (
                SELECT m.seq, {message} AS message, row_number() OVER (ORDER BY m.seq) AS i
                FROM conv JOIN ghostmem.messages m
                  ON m.owner = %(owner)s AND m.tier = conv.tier AND m.conv_id = conv.conv_id
                WHERE m.role IN ('user', 'assistant')
            ),
            n AS (SELECT count(*) AS n FROM msgs)
            SELECT conv.*, n.n AS total,
                   (SELECT coalesce(jsonb_agg(message ORDER BY seq), '[]'::jsonb) FROM msgs
                    WHERE i <= %(head)s) AS head,
                   (SELECT coalesce(jsonb_agg(message ORDER BY seq), '[]'::jsonb) FROM msgs
                    WHERE i > greatest(n.n - %(tail)s, %(head)s)) AS tail
            FROM conv, n
            """
        ).format(message=_message_json(READ_SUMMARY_CHARS))
    )
    rows = yield Query(
        statement,
        {"owner": ctx.owner, "conv_id": args.conv_id, "head": head, "tail": args.max_messages - head},
    )
    if not rows:
        raise (yield from _not_found(ctx, args.conv_id))
    row = rows[0]
    head_views = [_message_view(m) for m in row["head"]]
    tail_views = [_message_view(m) for m in row["tail"]]
    return ConversationSummary(
        conversation=_conversation_row(row),
        head=head_views,
        tail=tail_views,
        omitted=int(row["total"]) - len(head_views) - len(tail_views),
    )


# --- lists ---------------------------------------------------------------------------------------------------


BEFORE_SHOWN = 5  # conversations shown from before an empty window


def _list(
    ctx: OpContext, days: int, limit: int, platform: str | None, project: str | None
) -> Program[ConversationList]:
    """Personal conversations active in the last ``days``, newest activity first; when there is none, the few most
    recent before that window, and the window that would list them."""
    parts = [sql.SQL("c.owner = %(owner)s"), sql.SQL("c.tier = 'personal'")]
    if platform is not None:
        parts.append(sql.SQL("c.platform = %(platform)s"))
    if project is not None:
        parts.append(sql.SQL("(c.project ILIKE %(project)s OR c.title ILIKE %(project)s)"))
    window = sql.SQL("c.ended_at >= now() - make_interval(days => %(days)s)")
    statement = sql.SQL(
        "SELECT {columns} FROM ghostmem.conversations c WHERE {where} "
        "ORDER BY c.ended_at DESC NULLS LAST, c.conv_id LIMIT %(limit)s"
    )
    params = {
        "owner": ctx.owner,
        "days": days,
        "limit": limit,
        "platform": platform,
        "project": like_pattern(project) if project is not None else None,
    }
    rows = yield Query(
        statement.format(columns=_ROW_COLUMNS, where=sql.SQL(" AND ").join([*parts, window])), params
    )
    if rows:
        return ConversationList(rows=[_conversation_row(r) for r in rows], days=days)
    # days since each ended, rounded up past the next whole day: `days` = that lists it. A conversation none of
    # whose messages has a time is in no window: it comes after those that have one (or it would never be listed:
    # a project imported without times said "No conversations match")
    since = sql.SQL("floor(extract(epoch FROM now() - c.ended_at) / 86400)::int + 1 AS days_since")
    before = yield Query(
        statement.format(
            columns=sql.SQL(", ").join([_ROW_COLUMNS, since]), where=sql.SQL(" AND ").join(parts)
        ),
        {**params, "limit": min(limit, BEFORE_SHOWN)},
    )
    timed = [r["days_since"] for r in before if r["days_since"] is not None]
    return ConversationList(
        rows=[],
        days=days,
        before=[_conversation_row(r) for r in before],
        widen_to=min(MAX_DAYS, max(timed)) if timed else None,
        nothing_stored=not before and platform is None and project is None,
    )


def list_recent_conversations(ctx: OpContext, args: ListRecentConversationsArgs) -> Program[ConversationList]:
    return (yield from _list(ctx, args.days, args.limit, args.platform, args.project))


def list_project_conversations(
    ctx: OpContext, args: ListProjectConversationsArgs
) -> Program[ConversationList]:
    return (yield from _list(ctx, args.days, args.limit, None, args.project))
