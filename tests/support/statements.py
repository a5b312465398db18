"""The SQL statements an operation's program sends, recorded as they go (for tests that read or EXPLAIN them)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from ghostmem.program import Params, Program, Query
from psycopg import Connection

_PARAMETER = re.compile(r"%\((\w+)\)s")
T = TypeVar("T")


def inspecting(
    program: Program[Any], conn: Connection[Any], look: Callable[[str, Params], None]
) -> Program[Any]:
    """``program`` as it is, with ``look`` called on the text (as sent on ``conn``) and parameters of each composed
    statement it sends, before it is sent (in the transaction it will run in, its settings made)."""
    reply: Any = None
    try:
        while True:
            step = program.send(reply)
            if isinstance(step, Query) and not isinstance(step.text, bytes | str):
                look(step.text.as_string(conn), step.params)
            reply = yield step
    except StopIteration as done:
        return done.value


def recording(program: Program[Any], conn: Connection[Any], seen: list[tuple[str, Params]]) -> Program[Any]:
    """``program`` as it is, with the text (as sent on ``conn``) and parameters of each composed statement it
    sends appended to ``seen``."""
    return inspecting(program, conn, lambda text, params: seen.append((text, params)))


def generic_plan(conn: Connection[Any], text: str) -> str:
    """``EXPLAIN (GENERIC_PLAN)`` of a statement recorded by :func:`recording`: the plan a prepared statement gets
    with ``plan_cache_mode = force_generic_plan`` (its ``%(name)s`` parameters become ``$1``, ``$2``, ...)."""
    names: list[str] = []

    def placeholder(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    numbered = _PARAMETER.sub(placeholder, text)
    rows = conn.execute(f"EXPLAIN (GENERIC_PLAN, COSTS OFF) {numbered}".encode())
    return "\n".join(str(r[0]) for r in rows)


# The GIN indexes a search reads: migration 116 bounds the pending list that each of their scans reads whole.
SEARCHED_GIN = ("messages_owner_words", "conversations_title_trgm", "conversations_project_trgm")
STORE_GIN = (
    "store_items_tsv"  # the LangGraph store's word index, read by every store search with a query (130)
)
PENDING_LIST_OPTIONS = ["gin_pending_list_limit=256"]  # kB
PENDING_LIST_PAGES = 256 // 8  # the most a pending list of 256 kB holds (8 kB pages)
WORD_FETCH = (
    "SELECT m.id FROM ghostmem.messages m WHERE ghostmem.owner_words(m.owner, m.tsv)"
    " @@ ghostmem.owner_word_query(%(owner)s, %(lexeme)s) AND (m.owner || '') = %(owner)s"
)  # one word of an owner, fetched as the lexical leg fetches it
TITLE_FETCH = "SELECT c.conv_id FROM ghostmem.conversations c WHERE c.title ILIKE %(pattern)s"
PROJECT_FETCH = "SELECT c.conv_id FROM ghostmem.conversations c WHERE c.project ILIKE %(pattern)s"
ITEM_FETCH = (
    "SELECT i.key FROM ghostmem.store_items i"
    " WHERE i.tsv @@ ghostmem.lexeme_query(%(lexeme)s) AND (i.owner || '') = %(owner)s"
)  # one word of a store's items, matched as ghostmem.items' lexical leg matches it


def index_pages(conn: Connection[Any], statement: str, params: Params, index: str) -> int:
    """The buffers the scan of ``index`` reads when ``statement`` runs (``EXPLAIN (ANALYZE, BUFFERS)``, sequential
    scans off as in a search): for a GIN index, its entries and the whole of its pending list."""
    conn.execute("SET enable_seqscan = off")
    try:
        (plan,) = conn.execute(
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {statement}".encode(), params
        ).fetchone() or [None]
    finally:
        conn.execute("RESET enable_seqscan")

    def scans(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
        yield node
        for child in node.get("Plans", []):
            yield from scans(child)

    found = [n for n in scans(plan[0]["Plan"]) if n.get("Index Name") == index]
    assert found, plan
    return sum(int(n["Shared Hit Blocks"]) + int(n["Shared Read Blocks"]) for n in found)


def gin_options(conn: Connection[Any], names: Sequence[str] = SEARCHED_GIN) -> dict[str, list[str] | None]:
    """The storage options of the GIN indexes ``names`` (those a message search reads)."""
    rows = conn.execute(
        "SELECT c.relname, c.reloptions FROM pg_catalog.pg_class c"
        " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'ghostmem' AND c.relname = ANY(%s)",
        (list(names),),
    )
    return {name: options for name, options in rows}


def merge_pending(conn: Connection[Any], names: Sequence[str]) -> list[int]:
    """Merge the pending lists of the GIN indexes ``names``: the pages each held."""
    rows = conn.execute(
        "SELECT gin_clean_pending_list(('ghostmem.' || i)::regclass) FROM unnest(%s::text[]) WITH ORDINALITY AS u(i, n)"
        " ORDER BY n",
        (list(names),),
    )
    return [int(r[0]) for r in rows]


def check_short_pending_lists(conn: Connection[Any], fetches: list[tuple[str, Params, str]]) -> None:
    """The pending list of the GIN index each of ``fetches`` (statement, parameters, index) reads holds at most
    :data:`PENDING_LIST_PAGES` pages, and each fetch reads at most that many pages more than once they are merged."""
    queued = [index_pages(conn, *fetch) for fetch in fetches]
    pending = merge_pending(conn, [index for _, _, index in fetches])
    merged = [index_pages(conn, *fetch) for fetch in fetches]
    assert all(n <= PENDING_LIST_PAGES for n in pending), pending
    assert all(0 <= q - m <= PENDING_LIST_PAGES for q, m in zip(queued, merged, strict=True)), (
        queued,
        merged,
    )


def read_without_jit(conn: Connection[Any], read: Callable[[], T]) -> T:
    """What ``read`` returns, checking that it ran on ``conn`` with JIT compilation off in its transaction although
    the session asked for it (as a database's or a role's setting would), and only there: the session's setting
    is back once the transaction commits."""
    conn.execute("SET jit = on")
    try:
        result = read()
        jit = "SELECT current_setting('jit')"
        assert conn.execute(jit).fetchone() == ("off",)  # in the read's transaction
        conn.commit()
        assert conn.execute(jit).fetchone() == ("on",)  # not after it
        return result
    finally:
        conn.execute("RESET jit")


def message_indexes(conn: Connection[Any], prefix: str) -> dict[str, tuple[str, str | None, str]]:
    """Each index of ghostmem.messages whose name begins with ``prefix`` (a LIKE pattern, ``_`` escaped): name ->
    (its predicate, its comment, its definition)."""
    rows = conn.execute(
        "SELECT c.relname, pg_get_expr(i.indpred, i.indrelid), obj_description(c.oid, 'pg_class'),"
        " pg_get_indexdef(c.oid)"
        " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE i.indrelid = 'ghostmem.messages'::regclass AND c.relname LIKE %s",
        (prefix + "%",),
    ).fetchall()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def conjunction_search(gm: Any, args: Any, names: str) -> tuple[list[Any], set[str]]:
    """The fused rows of ``args``'s search by ``gm`` (a GhostMem; depth 60, floor off) and the GIN indexes of words
    (names matching the regular expression ``names``) that its conjunction fetch (``lex_all``) reads in the
    statement's generic plan (EXPLAINed in the search's transaction, where its plan statement made plans generic);
    none without a lexical leg. The fetch never reads the table whole nor ANDs two bitmaps."""
    from ghostmem.program import run_sync
    from ghostmem.search import search_messages

    seen: list[tuple[str, Params]] = []
    with gm.connection() as conn:
        rows = run_sync(
            recording(search_messages(gm.context, args, depth=60, floor=-1), conn, seen), conn, gm.embedder
        )
        text, params = seen[-1]
        plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN (COSTS OFF) {text}".encode(), params))
    if "CTE lex_all" not in plan:
        return rows, set()
    fetch = plan[plan.index("CTE lex_all") : plan.index("CTE lex_enough")]
    assert "Seq Scan" not in fetch and "BitmapAnd" not in fetch, plan
    return rows, set(re.findall(rf"Bitmap Index Scan on ({names})", fetch))
