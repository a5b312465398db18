"""LangGraph's ``BaseStore`` on ghostmem: long-term agent memory (LangMem, ``create_agent(store=...)``) in Postgres.

Items live in ``ghostmem.store_items`` next to personal memory, under the same owner boundary (see
:mod:`ghostmem.items`); a search with a ``query`` ranks by words and meaning with ghostmem's embedder, no LLM.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ghostmem import GhostMem
from ghostmem.context import checked_owner
from ghostmem.embed import Embedder
from ghostmem.errors import InvalidArgument
from ghostmem.items import (
    ItemWrite,
    checked_key,
    checked_namespace,
    get_items,
    list_namespaces,
    search_items,
    sweep_expired,
    write_items,
)
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

OwnerRule = str | Callable[[tuple[str, ...]], str] | None
WHOLE_VALUE = "$"


class GhostMemStore(BaseStore):
    """A LangGraph store whose items are ghostmem rows, searchable by words and meaning.

    Example::

        store = GhostMemStore(GhostMem())
        store.put(("alice", "memories"), "m1", {"content": "Prefers dark mode"})
        store.search(("alice", "memories"), query="ui preferences")
        agent = create_agent(model, tools=[...], store=store)

    Args:
        store: a :class:`~ghostmem.GhostMem`, a DSN, or ``None`` (embedded server / ``GHOSTMEM_DSN``).
        owner: whose memory an item is. ``None`` (default): the namespace's first label, so ``("alice", ...)``
            belongs to ``alice``, and an operation whose namespace does not name an owner (an empty search prefix,
            a ``list_namespaces`` without prefix) is refused rather than read across owners. A string: every item
            belongs to that owner. A callable: maps a namespace to its owner (e.g. ``lambda ns: ns[1]`` for
            LangMem's ``("memories", "{user_id}")``); operations whose namespace it cannot map are refused.
        fields: the JSON paths of a value that it is found by (LangGraph's ``IndexConfig["fields"]`` syntax);
            ``"$"`` (default) is every string in the value. A put's ``index=[...]`` overrides it, ``index=False``
            stores the item unindexed.
        ttl: LangGraph's ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``). Expired items are never
            returned; :meth:`sweep_ttl` deletes them.
        embedder: the embedder of a store built here (ignored when a :class:`~ghostmem.GhostMem` is given).
    """

    supports_ttl = True

    def __init__(
        self,
        store: GhostMem | str | None = None,
        *,
        owner: OwnerRule = None,
        fields: Sequence[str] = (WHOLE_VALUE,),
        ttl: TTLConfig | None = None,
        embedder: Embedder | str | None = None,
    ) -> None:
        self._owns_store = not isinstance(store, GhostMem)
        self.gm = store if isinstance(store, GhostMem) else GhostMem(dsn=store, embedder=embedder)
        self.owner_rule = checked_owner(owner) if isinstance(owner, str) else owner
        self.fields = tuple(fields)
        self.ttl_config = ttl

    # --- owners --------------------------------------------------------------------------------------------

    def owner_of(self, namespace: tuple[str, ...]) -> str:
        """The owner of the items under ``namespace`` (see ``owner`` in the class docstring); one longer than
        ghostmem keeps is refused like a namespace that names none."""
        if isinstance(self.owner_rule, str):
            return self.owner_rule
        if self.owner_rule is None:
            if not namespace:
                raise InvalidNamespaceError(
                    "This store takes the owner from the namespace's first label: name it (e.g. ('alice',))."
                )
            owner = namespace[0]
        else:
            try:
                owner = self.owner_rule(namespace)
            except (IndexError, KeyError) as exc:
                raise InvalidNamespaceError(f"The namespace {namespace!r} does not name an owner.") from exc
            if not isinstance(owner, str) or not owner:
                raise InvalidNamespaceError(f"The namespace {namespace!r} does not name an owner.")
        try:
            return checked_owner(owner)
        except InvalidArgument as exc:
            raise InvalidNamespaceError(str(exc)) from None

    # --- BaseStore -----------------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order in one transaction; consecutive puts are written together."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = [None] * len(ops)
        with self.gm.connection() as conn:
            pending: list[ItemWrite] = []
            owner = ""
            for n, op in enumerate(ops):
                if isinstance(op, PutOp):
                    op_owner = self.owner_of(op.namespace)
                    if pending and op_owner != owner:
                        write_items(conn, owner, pending, self.gm.embedder)
                        pending = []
                    owner = op_owner
                    pending.append(self._write(op))
                    continue
                if pending:
                    write_items(conn, owner, pending, self.gm.embedder)
                    pending = []
                if isinstance(op, GetOp):
                    found = get_items(
                        conn,
                        self.owner_of(op.namespace),
                        [(op.namespace, op.key)],
                        refresh_ttl=op.refresh_ttl,
                    )[0]
                    results[n] = _langgraph_item(found) if found else None
                elif isinstance(op, SearchOp):
                    results[n] = [
                        SearchItem(i.namespace, i.key, i.value, i.created_at, i.updated_at, i.score)
                        for i in search_items(
                            conn,
                            self.owner_of(op.namespace_prefix),
                            op.namespace_prefix,
                            embedder=self.gm.embedder,
                            query=op.query,
                            filter=op.filter,
                            limit=op.limit,
                            offset=op.offset,
                            refresh_ttl=op.refresh_ttl,
                        )
                    ]
                elif isinstance(op, ListNamespacesOp):
                    results[n] = self._list_namespaces(conn, op)
                else:
                    raise ValueError(f"Unknown store operation: {type(op).__name__}.")
            if pending:
                write_items(conn, owner, pending, self.gm.embedder)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (embedding is CPU-bound; the pool is thread-safe)."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _write(self, op: PutOp) -> ItemWrite:
        try:
            checked_namespace(op.namespace)
        except InvalidArgument as exc:
            raise InvalidNamespaceError(str(exc)) from None
        checked_key(op.key)  # a refused write fails its whole batch: it runs in one transaction
        if op.value is None:
            return ItemWrite(op.namespace, op.key, None)
        if op.namespace[0] == "langgraph":
            raise InvalidNamespaceError(
                f"Namespace {op.namespace!r} is reserved (its first label is langgraph)."
            )
        paths = self.fields if op.index is None else op.index or ()
        return ItemWrite(op.namespace, op.key, op.value, _indexed_text(op.value, paths), op.ttl)

    def _list_namespaces(self, conn: Any, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefix: tuple[str, ...] = ()
        suffix: tuple[str, ...] = ()
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix":
                prefix = tuple(condition.path)
            elif condition.match_type == "suffix":
                suffix = tuple(condition.path)
            else:
                raise ValueError(f"Unknown namespace match type: {condition.match_type!r}.")
        owner = self.owner_of(prefix)
        if owner == "*" and not isinstance(self.owner_rule, str):
            raise InvalidNamespaceError("A namespace prefix whose owner label is '*' would list every owner.")
        return list_namespaces(
            conn,
            owner,
            prefix=prefix,
            suffix=suffix,
            max_depth=op.max_depth,
            limit=op.limit,
            offset=op.offset,
        )

    # --- maintenance ---------------------------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Delete every expired item; returns how many (run it on a schedule, e.g. with the import timer)."""
        with self.gm.connection() as conn:
            return sweep_expired(conn)

    def close(self) -> None:
        """Close the pool when this store opened it (a :class:`~ghostmem.GhostMem` passed in stays open)."""
        if self._owns_store:
            self.gm.close()

    def __enter__(self) -> GhostMemStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _langgraph_item(item: Any) -> Item:
    return Item(
        value=item.value,
        key=item.key,
        namespace=item.namespace,
        created_at=item.created_at,
        updated_at=item.updated_at,
    )


def _strings(value: Any) -> list[str]:
    """Every string in a JSON value, depth first in document order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def _indexed_text(value: Mapping[str, Any], paths: Sequence[str]) -> str | None:
    """The text an item is found by: the strings at ``paths`` joined by newlines (None when there are none)."""
    texts: list[str] = []
    for path in paths:
        texts.extend(_strings(value) if path == WHOLE_VALUE else get_text_at_path(value, tokenize_path(path)))
    text = "\n".join(t for t in texts if t.strip())
    return text or None
