"""The operation methods of GhostMem/AsyncGhostMem: generated from OPS, typed, and seen by mypy."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest
from ghostmem import OPS, AsyncGhostMem, GhostMem, op_methods, op_methods_gen

REPO = Path(__file__).resolve().parents[2]


def test_regenerating_changes_nothing() -> None:
    assert op_methods_gen.render() == op_methods_gen.TARGET.read_text(encoding="utf-8"), (
        "core/ghostmem/op_methods.py is stale: run `python -m ghostmem.op_methods_gen`"
    )


@pytest.mark.parametrize("cls", [GhostMem, AsyncGhostMem])
def test_one_method_per_operation_with_its_arguments_description_and_result(cls: type) -> None:
    mixin = op_methods.AsyncOps if cls is AsyncGhostMem else op_methods.SyncOps
    assert {n for n, v in vars(mixin).items() if inspect.isfunction(v)} == {spec.name for spec in OPS}
    for spec in OPS:
        method = getattr(cls, spec.name)
        assert inspect.iscoroutinefunction(method) is (cls is AsyncGhostMem)
        params = list(inspect.signature(method).parameters.values())[1:]
        assert [p.name for p in params] == list(spec.args_model.model_fields)
        positional = [p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        assert positional == list(spec.cli_positional)
        assert " ".join((method.__doc__ or "").split()) == spec.description
        assert inspect.signature(method).return_annotation == f"OpResult[{spec.result_model.__name__}]"


def test_a_method_passes_every_argument_to_run() -> None:
    calls: list[tuple[str, dict[str, object]]] = []

    class Recording(GhostMem):
        def run(self, name: str, arguments: object = None) -> object:  # type: ignore[override]
            calls.append((name, dict(arguments)))  # type: ignore[call-overload]
            return None

    Recording(dsn="postgresql://unused").remember(
        "Pin the versions", scope="shared-restricted", allowlist=("a",)
    )
    assert calls == [
        (
            "remember",
            {"content": "Pin the versions", "kind": "rule", "scope": "shared-restricted", "project": None,
             "allowlist": ["a"]},
        )
    ]  # fmt: skip


@pytest.mark.slow
def test_mypy_sees_the_methods_and_their_types(tmp_path: Path) -> None:
    snippet = tmp_path / "use_client.py"
    snippet.write_text(
        "from ghostmem import GhostMem\n"
        "from ghostmem.models import SearchResult\n"
        "gm = GhostMem()\n"
        "ok: SearchResult = gm.search_personal_memory('deploy', days=7).data\n"
        "bad_name = gm.search_personal_memry('deploy')\n"
        "bad_arg = gm.search_personal_memory('deploy', dayz=7)\n"
        "bad_type = gm.give_feedback(1, 'thanks')\n"
        "bad_result: SearchResult = gm.list_recent_conversations().data\n",
        encoding="utf-8",
    )
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--follow-imports=silent",
            str(snippet),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors = {line.split(":")[1] for line in res.stdout.splitlines() if ": error:" in line}
    assert errors == {"5", "6", "7", "8"}, res.stdout
