"""How fast the importers' bounded readers read exports, and that their time grows linearly with the input.

    python -m bench.reading

Three cases, each timed in this process against baselines on the same bytes (medians of ``--repeat`` runs):

* **export**: a ChatGPT-shaped ``conversations.json`` array (``--conversations``) read record by record by
  :func:`ghostmem.ingest.reading.read_document`, against ``ijson.items`` (the streaming reader the importers used
  before) and one ``json.loads`` of the whole document (fastest possible, unbounded memory);
* **long string**: one conversation holding a single string of 4 to 32 MB — seconds per MB must stay flat
  (``ijson`` re-lexes a string that spans its buffers: its seconds per MB grow with the string);
* **deep nesting**: arrays nested 1,000 to 100,000 levels — refused in time linear in the depth (``ijson``'s
  prefixes grow with the depth: quadratic time and memory, so it is only timed up to 10,000 levels).

Results go to ``bench/results/reading.json``; ``python -m bench.report`` puts them in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ijson
from ghostmem.ingest.reading import read_document

from bench.common import RESULTS
from bench.scale import provenance

COMMAND = "python -m bench.reading"


def export_document(conversations: int) -> bytes:
    """A minified ChatGPT export: each conversation a root, eight alternating messages of ~1 KB."""
    filler = "lorem ipsum dolor sit amet, consectetur adipiscing elit " * 18
    parts = []
    for i in range(conversations):
        mapping: dict[str, Any] = {
            "root": {"id": "root", "parent": None, "children": ["m0"], "message": None}
        }
        for m in range(8):
            mapping[f"m{m}"] = {
                "id": f"m{m}",
                "parent": "root" if m == 0 else f"m{m - 1}",
                "children": [f"m{m + 1}"] if m < 7 else [],
                "message": {"id": f"m{m}", "author": {"role": "user" if m % 2 == 0 else "assistant"},
                            "create_time": 1.7e9 + m, "content": {"content_type": "text", "parts": [f"{i} {filler}"]},
                            "metadata": {}},
            }  # fmt: skip
        parts.append(json.dumps({"id": f"c{i}", "title": f"t{i}", "mapping": mapping, "current_node": "m7"}))
    return ("[" + ",".join(parts) + "]").encode()


def median_seconds(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def ours(data: bytes) -> Callable[[], int]:
    return lambda: sum(1 for _ in read_document(io.BytesIO(data)))


def with_ijson(data: bytes, prefix: str) -> Callable[[], int]:
    return lambda: sum(1 for _ in ijson.items(io.BytesIO(data), prefix, use_float=True))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--conversations", type=int, default=3000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--max-string-mb", type=int, default=32, help="the longest string timed (4, 8, 16, 32 MB)")
    p.add_argument("--results", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    command = COMMAND + (f" --conversations {args.conversations}" if args.conversations != 3000 else "")

    data = export_document(args.conversations)
    mb = len(data) / 2**20
    export = {
        "conversations": args.conversations,
        "mb": round(mb, 1),
        "read_document_s": median_seconds(ours(data), args.repeat),
        "ijson_items_s": median_seconds(with_ijson(data, "item"), args.repeat),
        "json_loads_whole_s": median_seconds(lambda: json.loads(data), args.repeat),
    }
    export["ratio_over_ijson"] = round(export["read_document_s"] / export["ijson_items_s"], 2)
    export["ratio_over_json_loads"] = round(export["read_document_s"] / export["json_loads_whole_s"], 2)
    print(f"export {mb:.1f} MB: {export}")

    strings = []
    for size in (s for s in (4, 8, 16, 32) if s <= args.max_string_mb):
        doc = b'{"conv_id": "c", "messages": [{"role": "user", "text": "' + b"a" * (size << 20) + b'"}]}'
        row = {"mb": size, "read_document_s_per_mb": median_seconds(ours(doc), args.repeat) / size}
        if size <= 16:
            row["ijson_s_per_mb"] = median_seconds(with_ijson(doc, ""), 1) / size
        strings.append(row)
        print(f"string {size} MB: {row}")

    nesting = []
    for depth in (1_000, 10_000, 100_000):
        doc = b"[" + b"[" * depth + b"]" * depth + b"]"
        row: dict[str, Any] = {"depth": depth, "read_document_s": median_seconds(ours(doc), args.repeat)}
        if depth <= 10_000:
            row["ijson_s"] = median_seconds(with_ijson(doc, "item"), 1)
        nesting.append(row)
        print(f"nesting {depth}: {row}")

    result = {
        **provenance("reading", command),
        "export": export,
        "long_string": strings,
        "deep_nesting": nesting,
    }
    path = args.results / "reading.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
