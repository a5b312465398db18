"""The same data gives the same results whichever scan the vector leg takes, also when many messages are at the
same distance from the query (a text said again and again: "thanks", a repeated prompt)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ghostmem import GhostMem, HashEmbedder, search
from ghostmem.args import SearchPersonalMemoryArgs
from ghostmem.program import run_sync
from ghostmem.search import search_messages, search_personal_memory
from support.conversations import conversation, import_generic

SAID_AGAIN = "thanks a lot for the deploy"


def test_messages_at_the_same_distance_are_taken_by_id_by_every_exact_and_quantized_scan(
    gm: GhostMem, pg_dsn: str, owner: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """120 conversations say the same sentence (one distance from the query, one Hamming distance): the vector leg
    ranks them by id, so the scan's LIMIT must cut the tie by id too. The exact scan and the quantized scan (its
    candidates all of the scope, or cut inside the tie) return the owner's first such messages, the same ones;
    another owner's copies, stored before them, never come back."""
    convs = [
        conversation(f"d{i}", f"t{i}", i % 20, [SAID_AGAIN, f"unrelated words {i} of another kind"])
        for i in range(120)
    ]
    with GhostMem(dsn=pg_dsn, owner=f"{owner}-other", embedder=HashEmbedder()) as other:
        import_generic(other, tmp_path / "other.jsonl", convs)
    import_generic(gm, tmp_path / "own.jsonl", convs)
    with gm.connection() as conn:
        tied = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM ghostmem.messages WHERE owner = %s AND text = %s ORDER BY id",
                (owner, SAID_AGAIN),
            )
        ]
        others = {
            r[0]
            for r in conn.execute("SELECT id FROM ghostmem.messages WHERE owner = %s", (f"{owner}-other",))
        }
    assert len(tied) == 120 and min(others) < tied[0]

    args = SearchPersonalMemoryArgs(query=SAID_AGAIN, mode="vector", limit=2)
    found: dict[tuple[str, int], tuple[list[int], list[str]]] = {}
    for scan, candidates in (("exact", 20), ("quantized", 20), ("quantized", 1)):
        monkeypatch.setattr(search, "vector_scan", lambda *_, scan=scan: scan)
        monkeypatch.setattr(
            search, "QUANTIZED_CANDIDATES", candidates
        )  # 20: the whole scope; 1: cut in the tie
        with gm.connection() as conn:
            rows = run_sync(search_messages(gm.context, args, depth=10, floor=-1), conn, gm.embedder)
            result = run_sync(search_personal_memory(gm.context, args), conn, gm.embedder)
        ids = [r["id"] for r in rows]
        assert ids == tied[:10], (scan, candidates, ids)
        found[(scan, candidates)] = (ids, [hit.conv_id for hit in result.rows])
    assert len(set(map(str, found.values()))) == 1, found
    assert found[("exact", 20)][1] == ["d0", "d1"]
