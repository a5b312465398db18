"""The module map of docs/architecture.md, checked: no import cycle among ghostmem's modules, and imports go down
the layers only (a module may import its own layer and the ones below it).

Every import counts, also one inside a function or under ``TYPE_CHECKING``: a lazy import that goes back up is
still a module that calls its caller (the client and the importer once did).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import ghostmem

PACKAGE = Path(ghostmem.__file__).parent

# The layers of docs/architecture.md, bottom up. A new module goes into one of them (and into the doc).
LAYERS: dict[str, int] = {
    # 0 facts: errors, records, limits, text scripts, settings, result models; import only each other
    **dict.fromkeys(
        ["errors", "words", "records", "context", "models", "redact", "config", "limits", "text"],
        0,
    ),
    # 1 mechanisms: embedding, the program drivers, argument models, rendering, the database, the write path
    **dict.fromkeys(
        [
            "embed",
            "japanese",
            "program",
            "args",
            "render",
            "strict",
            "content",
            "progress",
            "db",
            "db.migrate",
            "db.server",
            "db.roles",
            "db.replica",
            "db.loops",
            "store",
            "enrich",
        ],
        1,
    ),
    # 2 work: the operations' programs, the importers, live capture, the LangGraph store's items
    **dict.fromkeys(["search", "ghosts", "ingest", "capture", "items"], 2),
    # 3 the contract and its typed methods; the jobs around the operations
    **dict.fromkeys(["ops", "op_methods", "op_methods_gen", "maintenance", "reembed", "doctor"], 3),
    # 4 the client
    "client": 4,
    # 5 surfaces: the package's front door, adapters' binding, MCP, the CLI
    **dict.fromkeys(["", "binding", "mcp", "cli"], 5),
}


def modules() -> dict[str, Path]:
    """Dotted names below ``ghostmem`` ("" for the package itself, "ingest.codex", ...) → their files."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def layer(name: str) -> int:
    for key in (name, name.split(".")[0]):
        if key in LAYERS:
            return LAYERS[key]
    raise AssertionError(
        f"ghostmem.{name} is in no layer: add it to LAYERS in {Path(__file__).name} and to docs/architecture.md"
    )


def imports(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """The ghostmem modules ``name`` imports, anywhere in the file."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{path}: relative import (ghostmem imports absolutely)"
            base = node.module or ""
            # `from ghostmem import db` imports the module ghostmem.db; `from ghostmem import __version__` the package
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}"[9:] in known else base for a in node.names]
        else:
            continue
        for target in targets:
            if target == "ghostmem" or target.startswith("ghostmem."):
                local = target[len("ghostmem.") :] if target != "ghostmem" else ""
                if local != name and local in known:
                    yield local


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: set(imports(name, path, set(found))) for name, path in found.items()}


def test_no_import_cycle() -> None:
    edges = graph()
    # a package importing its own submodules is how a package presents them, not a cycle
    edges = {m: {t for t in ts if not (m and t.startswith(f"{m}."))} for m, ts in edges.items()}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt]
                raise AssertionError(
                    "import cycle: " + " -> ".join(f"ghostmem.{m}".rstrip(".") for m in cycle)
                )
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)


def test_imports_go_down_the_layers() -> None:
    upward = [
        f"ghostmem.{source} (layer {layer(source)}) imports ghostmem.{target} (layer {layer(target)})"
        for source, targets in sorted(graph().items())
        for target in sorted(targets)
        if layer(target) > layer(source)
    ]
    assert upward == []


def test_the_checks_see_what_they_must() -> None:
    edges = graph()
    assert "maintenance" in edges["client"] and "ingest.runner" in edges["maintenance"]
    assert "client" not in edges["ingest.runner"]  # the importer no longer reaches back into the client
    assert layer("ingest.codex") == LAYERS["ingest"]
