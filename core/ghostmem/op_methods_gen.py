"""Writes :mod:`ghostmem.op_methods`, the typed operation methods of the clients, from :data:`ghostmem.ops.OPS`.

Run ``python -m ghostmem.op_methods_gen`` after changing an operation's name, description or arguments; a test
fails while the committed file differs from what this renders. Each method takes the operation's arguments with
their types and defaults (those in ``cli_positional`` may be positional, the rest are keyword-only), says the
operation's description, and returns ``OpResult`` of the operation's result model, so that mypy and IDEs see them.
"""

from __future__ import annotations

import json
import sys
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ghostmem import args as args_module
from ghostmem import records
from ghostmem.ops import OPS, OpSpec

TARGET = Path(__file__).with_name("op_methods.py")
WIDTH = 110
_ALIAS_MODULES = (records, args_module)  # where the Literal aliases of argument types are named


def _aliases() -> dict[tuple[Any, ...], tuple[str, str]]:
    """Literal values → (module, alias name), so that ``Literal['a', 'b']`` is written as its alias."""
    found: dict[tuple[Any, ...], tuple[str, str]] = {}
    for module in _ALIAS_MODULES:
        for name, value in vars(module).items():
            if typing.get_origin(value) is typing.Literal:
                found.setdefault(typing.get_args(value), (module.__name__, name))
    return found


def _literal(value: Any) -> str:
    """A default as the formatter writes it (double-quoted strings)."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


class _Writer:
    def __init__(self) -> None:
        self.aliases = _aliases()
        self.imports: dict[str, set[str]] = {}

    def need(self, module: str, name: str) -> str:
        self.imports.setdefault(module, set()).add(name)
        return name

    def type(self, annotation: Any) -> str:
        origin = typing.get_origin(annotation)
        if origin in (typing.Union, types.UnionType):
            return " | ".join(self.type(a) for a in typing.get_args(annotation))
        if origin is typing.Annotated:
            return self.type(typing.get_args(annotation)[0])
        if origin is typing.Literal:
            module, name = self.aliases.get(typing.get_args(annotation), ("", ""))
            if not name:
                self.need("typing", "Literal")
                return f"Literal[{', '.join(_literal(v) for v in typing.get_args(annotation))}]"
            return self.need(module, name)
        if origin is list:
            return f"list[{self.type(typing.get_args(annotation)[0])}]"
        if annotation is type(None):
            return "None"
        if annotation in (str, int, float, bool):
            return str(annotation.__name__)
        raise TypeError(f"op_methods_gen cannot write the type {annotation!r}: teach _Writer.type")

    def parameter(self, name: str, info: FieldInfo) -> tuple[str, str]:
        """The parameter as written in the signature, and the expression that passes its value on."""
        if info.default_factory is list and typing.get_origin(info.annotation) is list:
            self.need("collections.abc", "Sequence")
            item = self.type(typing.get_args(info.annotation)[0])
            return f"{name}: Sequence[{item}] = ()", f"list({name})"
        written = f"{name}: {self.type(info.annotation)}"
        if info.default is PydanticUndefined:
            if info.default_factory is not None:
                raise TypeError(f"op_methods_gen cannot write the default of {name}: teach _Writer.parameter")
            return written, name
        return f"{written} = {_literal(info.default)}", name

    def method(self, spec: OpSpec[Any, Any], asynchronous: bool) -> list[str]:
        result = self.need(spec.result_model.__module__, spec.result_model.__name__)
        positional: list[str] = []
        keyword: list[str] = []
        passed: list[str] = []
        for name, info in spec.args_model.model_fields.items():
            written, value = self.parameter(name, info)
            (positional if name in spec.cli_positional else keyword).append(written)
            passed.append(f'"{name}": {value}')
        params = ["self", *positional, *(["*", *keyword] if keyword else [])]
        head = "async def" if asynchronous else "def"
        call = "await self.run" if asynchronous else "self.run"
        doc = textwrap.wrap(spec.description, WIDTH - 8)
        return [
            f"    {head} {spec.name}(",
            *(f"        {p}," for p in params),
            f"    ) -> OpResult[{result}]:",
            f'        """{doc[0]}',
            *(f"        {line}" for line in doc[1:]),
            '        """',
            f"        return {call}(",
            f'            "{spec.name}",',
            "            {",
            *(f"                {p}," for p in passed),
            "            },",
            "        )",
        ]

    def module(self) -> str:
        body: list[str] = []
        for cls, asynchronous in (("SyncOps", False), ("AsyncOps", True)):
            run = "async def run" if asynchronous else "def run"
            twin = "AsyncGhostMem" if asynchronous else "GhostMem"
            body += [
                "",
                "",
                f"class {cls}:",
                f'    """One method per operation of ``OPS`` for :class:`ghostmem.{twin}` (its ``run`` does the work)."""',
                "",
                "    if TYPE_CHECKING:",
                "",
                f"        {run}(self, name: str, arguments: Any = None) -> OpResult[Any]: ...",
            ]
            for spec in OPS:
                body += ["", *self.method(spec, asynchronous)]
        self.need("typing", "TYPE_CHECKING")
        self.need("typing", "Any")
        self.need("ghostmem.ops", "OpResult")
        return "\n".join([*self._head(), *body]) + "\n"

    def _head(self) -> list[str]:
        groups: list[list[str]] = [[], [], []]  # standard library, third party, ghostmem
        for module in sorted(self.imports):
            names = ", ".join(sorted(self.imports[module], key=lambda n: (not n.isupper(), n)))
            top = module.split(".")[0]
            group = 2 if top == "ghostmem" else 0 if top in sys.stdlib_module_names else 1
            line = f"from {module} import {names}"
            if len(line) > WIDTH:
                line = f"from {module} import (\n" + "".join(f"    {n},\n" for n in names.split(", ")) + ")"
            groups[group].append(line)
        lines = [
            '"""The operations of :data:`ghostmem.ops.OPS` as typed methods of ``GhostMem`` and ``AsyncGhostMem``.',
            "",
            "Generated by ``python -m ghostmem.op_methods_gen`` from ``OPS``: do not edit by hand.",
            '"""',
            "",
            "from __future__ import annotations",
        ]
        for imports in groups:
            if imports:
                lines += ["", *imports]
        return lines


def render() -> str:
    """The source of :mod:`ghostmem.op_methods` for the current ``OPS``."""
    return _Writer().module()


def main() -> int:
    TARGET.write_text(render(), encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
