"""How each surface names the operations and their arguments in what it says.

A message that names an operation or an argument (an error, the hint under a result) is written once, as parts:
plain text and the terms :class:`Op` and :class:`Arg`. Each surface says the terms in its own vocabulary, a
:class:`Words`: a model and the Python client read the tool names (``get_conversation``, ``offset=200``); the
``ghostmem`` command says its commands and flags (```ghostmem show```, ``--offset 200``; its words come from the
operations' CLI names in ``ghostmem.ops`` and live in ``ghostmem.cli``). No surface rewrites another's text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True, slots=True)
class Op:
    """An operation, by its tool name (``search_personal_memory``)."""

    name: str


@dataclass(frozen=True, slots=True)
class Arg:
    """An argument of an operation, by its name in the args model; with ``value``, how to pass that value.

    ``op`` is the operation it belongs to (None: the same name in every operation that has it), which decides,
    for instance, whether the command line takes it as a flag or as a positional argument.
    """

    name: str
    op: str | None = None
    value: Any = UNSET


Part = str | Op | Arg


class Words:
    """The tool vocabulary, what a model and the Python client read: names as in the schemas and keyword
    arguments (``days``, ``offset=200``, ``search_personal_memory``). A surface with other names subclasses it."""

    def op(self, term: Op) -> str:
        return term.name

    def arg(self, term: Arg) -> str:
        return term.name if term.value is UNSET else f"{term.name}={term.value!r}"

    def say(self, *parts: Part) -> str:
        """The message of ``parts`` in this vocabulary."""
        out = []
        for part in parts:
            if isinstance(part, Op):
                out.append(self.op(part))
            elif isinstance(part, Arg):
                out.append(self.arg(part))
            else:
                out.append(str(part))
        return "".join(out)


TOOL_WORDS = Words()
