"""The command line names its own commands and flags in every error and hint, never the tools' parameters.

The messages are found in the code, not picked by hand: every message that names an operation or an argument is
built of :mod:`ghostmem.words` terms, so a scan of the package finds each one (the function it is in and its first
words). Each must have a command line here that shows it, unless the command line cannot reach it (then the
reason is written down); a new message without either fails. A second scan makes sure no message names a tool
the old way, in plain text, where the terms cannot translate it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import ghostmem
import pytest
from ghostmem import GhostMem
from ghostmem.cli import main
from ghostmem.ops import OPS
from ghostmem.words import TOOL_WORDS, Arg, Op
from support.conversations import conversation, import_generic

PACKAGE = Path(ghostmem.__file__).parent
CONV = "words-thread"

# message (module.function: its first words) -> the command line that shows it and what the user must read there
CASES: dict[str, tuple[list[str], str]] = {
    "render.conversation_list: No conversations match. Widen `": (
        ["recent", "--days", "1", "--platform", "codex"],
        "Widen `--days`, drop a filter, or use `ghostmem search`.",
    ),
    "render.conversation_list: No conversations active in the last {}. ": (
        ["recent", "--days", "1"],
        "No conversations active in the last 1 day. The most recent one before that, newest first "
        "(`--days 2` lists them):",
    ),
    "render.thread: … more messages: call again with ": (
        ["show", CONV, "--limit", "2"],
        "call again with --offset 2",
    ),
    "render.thread: no message at ": (
        ["show", CONV, "--offset", "100"],
        "no message at --offset 100 (6 messages, 0–5)",
    ),
    "render.summary: … {} messages omitted (": (
        ["summary", CONV, "--max-messages", "2"],
        "(`ghostmem show` reads them)",
    ),
    "render.ghost_list: No ghost memory that applies here is sto": (
        ["ghosts", "deploy rules"],
        "(none at all, or only other projects'): `ghostmem remember` stores one.",
    ),
    "ops.validation_error_parts: invalid arguments for ": (
        ["recent", "--days", "0"],
        "invalid arguments for `ghostmem recent`: --days: ",
    ),
    "ops.validation_error_parts: ": (
        ["recent", "--limit", "1000", "--days", "-1"],
        "invalid arguments for `ghostmem recent`: --days: Input should be greater than or equal to 1 (got -1); "
        "--limit: Input should be less than or equal to 100 (got 1000)",
    ),
    "ghosts.remember: : scope 'project' needs `": (
        ["remember", "a rule", "--scope", "project"],
        "`ghostmem remember`: scope 'project' needs `--project`",
    ),
    "ghosts.remember: : scope 'shared-restricted' needs `": (
        ["remember", "a rule", "--scope", "shared-restricted"],
        "needs `--allowlist`",
    ),
    "ghosts.remember: : `": (["remember", "a rule", "--allowlist", "p"], "`--allowlist` applies only"),
    "ghosts.give_feedback: : there is no ghost memory with memory_i": (
        ["feedback", "999999", "endorse"],
        "`ghostmem feedback`: there is no ghost memory with memory_id 999999 here; use a memory_id from a "
        "`ghostmem ghosts` result",
    ),
    "ghosts.update_memory: ": (
        ["update-memory", "999999", "new words"],
        "`ghostmem update-memory`: there is",
    ),
    "ghosts.retire_memory: ": (["retire-memory", "999999", "--reason", "old"], "`ghostmem retire-memory`: "),
    "ghosts._not_changeable: : there is no ghost memory with memory_i": (
        ["retire-memory", "999999", "--reason", "old"],
        "from a `ghostmem ghosts` result",
    ),
    "search._not_found: no conversation {} in personal memory or": (
        ["show", "no-such-id"],
        "find conv_ids with `ghostmem search` or `ghostmem recent`",
    ),
    "maintenance.forget: no conversation {} is stored: check the ": (
        ["forget", "no-such-id"],
        "before it is ever imported (--force)",
    ),
}
# messages the command line cannot show, and why
UNREACHABLE = {
    "ops.validate: : arguments must be an object of named v": "the command line always passes named values",
    "ghosts.remember: : this agent may store only {} memories,": "scopes are limited by an application's binding (MCP, "
    "LangChain), never by the command line",
}


def _first_words(expression: ast.AST) -> str:
    """The first text of a message (at most 40 characters) (an f-string's placeholders as ``{}``), names inside terms left out."""
    inside = {
        id(c)
        for n in ast.walk(expression)
        if isinstance(n, ast.JoinedStr) or (isinstance(n, ast.Call) and _is_term(n))
        for c in ast.walk(n)
        if c is not n or not isinstance(n, ast.JoinedStr)
    }
    texts = []
    for n in ast.walk(expression):
        if isinstance(n, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in n.values)
            texts.append((n.lineno, n.col_offset, text))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in inside:
            texts.append((n.lineno, n.col_offset, n.value))
    return min(texts)[2][:40] if texts else ""


def _is_term(node: ast.Call) -> bool:
    return isinstance(node.func, ast.Name) and node.func.id in ("Op", "Arg")


def message_sites() -> set[str]:
    """``module.function: first words`` of every message with an :class:`Op` or :class:`Arg` term."""
    sites = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).with_suffix("").as_posix().replace("/", ".")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("Op", "Arg")
            ):
                continue
            expression: ast.AST = node
            function = None
            while not isinstance(parents[expression], ast.stmt):
                expression = parents[expression]
            scope: ast.AST = expression
            while scope in parents:
                scope = parents[scope]
                if isinstance(scope, ast.FunctionDef):
                    function = function or scope.name
            sites.add(f"{module}.{function}: {_first_words(expression)}")
    return sites


def test_every_message_with_a_tool_name_is_covered_here() -> None:
    found = message_sites()
    assert found == set(CASES) | set(UNREACHABLE), (
        f"new: {sorted(found - set(CASES) - set(UNREACHABLE))}; gone: {sorted((set(CASES) | set(UNREACHABLE)) - found)}"
    )


# What the tools call things: an operation's name (unless its command has the same one), an argument in backticks
# or passed as name=value.
_OP_NAMES = sorted({spec.name for spec in OPS if spec.name != spec.cli_name}, key=len, reverse=True)
_ARG_NAMES = sorted({name for spec in OPS for name in spec.args_model.model_fields})
TOOL_NAMES = re.compile(
    rf"\b({'|'.join(_OP_NAMES)})\b|`({'|'.join(_ARG_NAMES)})`|\b({'|'.join(_ARG_NAMES)})=(?!\w+\b\s*\()"
)
# Modules whose text is for models only: the contract's descriptions, the generated methods, the MCP server's
# instructions, and SQL.
MODEL_TEXT = {"ops", "op_methods", "op_methods_gen", "mcp"}


def test_no_message_names_a_tool_in_plain_text() -> None:
    """A sentence naming a tool outside the terms would reach the command line untranslated."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).with_suffix("").as_posix().replace("/", ".")
        if module in MODEL_TEXT:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module)
            and ast.get_docstring(node, clean=False) is not None
        }
        for node in ast.walk(tree):
            if (
                not isinstance(node, ast.Constant)
                or not isinstance(node.value, str)
                or id(node) in docstrings
            ):
                continue
            text = node.value
            if (
                text.strip() in _OP_NAMES
                or "%s" in text
                or re.match(r"\s*(SELECT|WITH|INSERT|UPDATE)\b", text)
            ):
                continue  # a term's name, or SQL
            if TOOL_NAMES.search(text):
                offenders.append(f"{module}:{node.lineno}: {text[:80]!r}")
    assert not offenders


def test_the_scans_see_what_they_must() -> None:
    """The scans are not vacuous: they find a known message, and the plain-text pattern catches the old wording."""
    assert "search._not_found: no conversation {} in personal memory or" in message_sites()
    for old in ("call again with offset=3", "needs `project`", "or use search_personal_memory."):
        assert TOOL_NAMES.search(old), old
    assert not TOOL_NAMES.search("call again with --offset 3, or use `ghostmem search`")


@pytest.fixture
def words_store(gm: GhostMem, tmp_path: Path) -> GhostMem:
    texts = [f"step {i} of the migration plan" for i in range(6)]
    import_generic(gm, tmp_path / "words.jsonl", [conversation(CONV, "Migration plan", 1, texts)])
    return gm


@pytest.mark.parametrize("site", sorted(CASES))
def test_the_command_line_says_it_in_its_words(
    site: str,
    words_store: GhostMem,
    pg_dsn: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GHOSTMEM_EMBED_MODEL", "hash")
    argv, expected = CASES[site]
    main([*argv, "--dsn", pg_dsn, "--owner", words_store.owner])
    out, err = capsys.readouterr()
    said = out + err
    assert expected in said, said
    assert not TOOL_NAMES.search(said), said


def test_the_tools_keep_their_names(words_store: GhostMem) -> None:
    """The same messages, for a model (and the Python client), keep the tool names."""
    assert (
        "call again with offset=2" in words_store.run("get_conversation", {"conv_id": CONV, "limit": 2}).text
    )
    with pytest.raises(ghostmem.InvalidArgument) as err:
        words_store.run("remember", {"content": "a rule", "scope": "project"})
    assert "remember: scope 'project' needs `project`" in str(err.value)


def test_cli_words_of_values() -> None:
    from ghostmem.cli import CLI_WORDS

    assert CLI_WORDS.arg(Arg("offset", "get_conversation", 200)) == "--offset 200"
    assert CLI_WORDS.arg(Arg("conv_id", "get_conversation", "a b")) == "'a b'"
    assert CLI_WORDS.arg(Arg("conv_id", "get_conversation")) == "conv_id"
    assert CLI_WORDS.arg(Arg("current_project", "search_ghost_memories", "x")) == "--project x"
    assert CLI_WORDS.arg(Arg("include_library", "search_personal_memory", True)) == "--include-library"
    assert CLI_WORDS.arg(Arg("allowlist", "remember", ["a", "b c"])) == "--allowlist a 'b c'"
    assert CLI_WORDS.op(Op("list_project_conversations")) == "`ghostmem project`"
    assert TOOL_WORDS.arg(Arg("force", "forget", True)) == "force=True"
