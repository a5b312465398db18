"""The ``ghostmem`` command.

Every command takes ``--json`` (machine-readable output) and ``--dsn`` (any Postgres; default: the embedded
server). One command per operation of :data:`ghostmem.OPS` is generated from its args model, so the CLI can never
drift from the tools. What it says names its own commands and flags (:data:`CLI_WORDS`), never the tools'
parameter names: errors and hints are written once as :mod:`ghostmem.words` parts and said in its words here.
"""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import os
import shlex
import sys
import types
import typing
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from ghostmem.client import GhostMem
from ghostmem.config import Settings
from ghostmem.embed import make_embedder
from ghostmem.errors import GhostMemError, InvalidArgument
from ghostmem.ops import OPS, OPS_BY_NAME, OpSpec
from ghostmem.render import Reader
from ghostmem.text import visible
from ghostmem.words import UNSET, Arg, Op, Words

Handler = Callable[[argparse.Namespace], int]
_HANDLERS: dict[str, Handler] = {}


def command(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _HANDLERS[name] = fn
        return fn

    return register


def emit(args: argparse.Namespace, text: str, data: Any) -> None:
    """Print ``data`` as JSON with ``--json`` (the data as stored), else the human text, in which nothing a
    transcript holds can act on the terminal (:func:`ghostmem.text.visible`)."""
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    else:
        print(visible(text))


def say(text: str) -> None:
    """Tell the person running the command what it is doing that they would otherwise wait on without a word (it
    started the server, it prepares the model): one line on stderr, never on stdout, so ``--json`` stays one JSON
    document."""
    print(visible(f"ghostmem: {text}"), file=sys.stderr)


def open_store(settings: Settings) -> GhostMem:
    """The store a command uses; its embedder says when it prepares the model (the first use of a model on a
    home, about 20 s), rather than leave a silent terminal."""
    return GhostMem(
        settings=settings, embedder=make_embedder(settings.embed_model, settings.home, announce=say)
    )


def store(args: argparse.Namespace) -> GhostMem:
    return open_store(Settings.from_env(dsn=args.dsn, owner=args.owner))


# How to stop the embedded server, said wherever the CLI tells that it runs.
STOP_SERVER = "`ghostmem db stop` stops it (any command starts it again)"
# Commands that never open the store: `db` manages the embedded server itself, `mcp-token` writes a file.
WITHOUT_STORE = frozenset({"db", "mcp-token"})


def start_server(args: argparse.Namespace) -> None:
    """Start the embedded server the command is about to use (unless a DSN names another server) and, when this
    command is the one that starts it, say so once on stderr: where the data is, that the server keeps running,
    how to stop it. Never on stdout, so ``--json`` stays one JSON document; the demo says it in its report."""
    from ghostmem.db import EmbeddedServer

    settings = Settings.from_env(dsn=args.dsn)
    if args.command in WITHOUT_STORE or settings.dsn:
        return
    try:
        status = EmbeddedServer(settings.home).start()
    except GhostMemError:
        return  # the command meets the same failure and reports it its own way (doctor as a failed check)
    if status.started and args.command != "demo":
        say(
            f"started the embedded Postgres server (pid {status.pid}) for the data in {status.pgdata}; it keeps "
            f"running for the next commands: {STOP_SERVER}."
        )


def sample_exports() -> Path:
    """The real sample exports shipped with the package (see data/exports/SOURCES.md)."""
    return Path(str(resources.files("ghostmem").joinpath("data", "exports")))


# -- operation commands -------------------------------------------------------------------------------------------


class CliWords(Words):
    """The command line's vocabulary: ```ghostmem search```, ``--days``, ``--offset 200``; a positional argument
    by its name (``conv_id``) and with a value as the value itself. Jobs that are commands but not operations
    (``forget``) are named as their commands, their arguments as flags."""

    def op(self, term: Op) -> str:
        spec = OPS_BY_NAME.get(term.name)
        return f"`ghostmem {spec.cli_name if spec else term.name.replace('_', '-')}`"

    def arg(self, term: Arg) -> str:
        spec = OPS_BY_NAME.get(term.op) if term.op else None
        positional = spec is not None and term.name in spec.cli_positional
        flag = spec.cli_flag(term.name) if spec else "--" + term.name.replace("_", "-")
        if term.value is UNSET:
            return term.name if positional else flag
        values = term.value if isinstance(term.value, list) else [term.value]
        shown = " ".join(shlex.quote(str(v)) for v in values)
        if positional:
            return shown
        return flag if term.value is True else f"{flag} {shown}"


CLI_WORDS = CliWords()
READER = Reader(words=CLI_WORDS, person=True)


def _unwrap_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return annotation


def _add_field(parser: argparse.ArgumentParser, spec: OpSpec[Any, Any], name: str, info: FieldInfo) -> None:
    if info.exclude or name == "explain":
        return
    annotation = _unwrap_optional(info.annotation)
    kwargs: dict[str, Any] = {"help": info.description}
    if typing.get_origin(annotation) is typing.Literal:
        kwargs["choices"] = list(typing.get_args(annotation))
    elif annotation is int:
        kwargs["type"] = int
    if typing.get_origin(annotation) is list:
        kwargs["nargs"] = "*"
    # the args model's default, so that --help shows it (None, False, "" and [] are shown as nothing)
    default = argparse.SUPPRESS if info.is_required() else info.get_default(call_default_factory=True)
    if name in spec.cli_positional:
        if not info.is_required():
            kwargs["nargs"] = "?"
            kwargs["default"] = default
        parser.add_argument(name, **kwargs)
        return
    flags = list(dict.fromkeys(["--" + name.replace("_", "-"), spec.cli_flag(name)]))
    if annotation is bool:
        parser.add_argument(*flags, action="store_true", default=default, help=info.description)
        return
    parser.add_argument(*flags, dest=name, default=default, required=info.is_required(), **kwargs)


def _op_handler(spec: OpSpec[Any, Any]) -> Handler:
    def handler(args: argparse.Namespace) -> int:
        with store(args) as gm:
            result = gm.run(spec.name, args.arguments)
        emit(args, spec.render(result.data, READER), result.data.model_dump(mode="json"))
        return 0

    return handler


# -- server and schema --------------------------------------------------------------------------------------------


@command("db")
def cmd_db(args: argparse.Namespace) -> int:
    from ghostmem.db import EmbeddedServer, redact_dsn

    settings = Settings.from_env(dsn=args.dsn)
    if settings.dsn:
        if args.action == "url":
            emit(args, redact_dsn(settings.dsn), {"dsn": redact_dsn(settings.dsn), "embedded": False})
            return 0
        raise GhostMemError(
            "GHOSTMEM_DSN/--dsn points at an external server: `ghostmem db` manages only the embedded one"
        )
    server = EmbeddedServer(settings.home)
    if args.action == "start":
        status = server.start()
    elif args.action == "stop":
        stopped = server.stop()
        emit(args, "stopped" if stopped else "not running", {"stopped": stopped})
        return 0
    else:
        status = server.status()
    data = {"running": status.running, "pgdata": str(status.pgdata), "pid": status.pid, "dsn": status.dsn()}
    if args.action == "url":
        if not status.running:
            raise GhostMemError("the embedded server is not running: `ghostmem db start`")
        emit(args, status.dsn() or "", data)
    else:
        text = f"running (pid {status.pid}) at {status.dsn()}" if status.running else "not running"
        emit(args, f"{text}\ndata: {status.pgdata}", data)
    return 0


@command("migrate")
def cmd_migrate(args: argparse.Namespace) -> int:
    applied = store(args).migrate()
    emit(
        args,
        "applied: " + (", ".join(applied) if applied else "nothing (schema is current)"),
        {"applied": applied},
    )
    return 0


@command("reembed")
def cmd_reembed(args: argparse.Namespace) -> int:
    """Switch the embedding model (and vector dimension) and embed everything again."""
    with store(args) as gm:
        done = gm.reembed(args.model)
    emit(
        args,
        f"now {done['model']} ({done['dims']} dims): re-embedded {done['messages']} messages, "
        f"{done['ghost_memories']} ghost memories, {done['conversations']} conversations",
        done,
    )
    return 0


@command("doctor")
def cmd_doctor(args: argparse.Namespace) -> int:
    from ghostmem.doctor import diagnose, render_report
    from ghostmem.progress import display

    # the checks print at the end; on a fresh home the model check prepares the model first (seconds): a person at
    # a terminal sees what is going on meanwhile
    what = "the server and the schema" if args.no_model else "the server, the schema and the embedding model"
    with display(not args.json) as shown, shown.step(f"checking {what}"):
        settings = Settings.from_env(dsn=args.dsn, owner=args.owner)
        report = diagnose(settings, check_model=not args.no_model, announce=say)
    emit(args, render_report(report), report)
    return 0 if report["ok"] else 1


# -- ghost-memory scopes ------------------------------------------------------------------------------------------


@command("grant-project")
def cmd_grant_project(args: argparse.Namespace) -> int:
    with store(args) as gm:
        projects = gm.grant_project(args.role, args.project)
    emit(
        args, f"role {args.role} may claim: {', '.join(projects)}", {"role": args.role, "projects": projects}
    )
    return 0


@command("restore-memory")
def cmd_restore_memory(args: argparse.Namespace) -> int:
    with store(args) as gm:
        content = gm.restore_memory(args.memory_id)
    emit(
        args,
        f"restored ghost memory {args.memory_id}: {content}",
        {"memory_id": args.memory_id, "content": content},
    )
    return 0


@command("revoke-project")
def cmd_revoke_project(args: argparse.Namespace) -> int:
    with store(args) as gm:
        projects = gm.revoke_project(args.role, args.project)
    text = f"role {args.role} may claim: {', '.join(projects)}"
    if not projects:
        text = f"role {args.role} has no project map: it may claim any project"
    emit(args, text, {"role": args.role, "projects": projects})
    return 0


@command("grant-app")
def cmd_grant_app(args: argparse.Namespace) -> int:
    with store(args) as gm:
        gm.grant_app(args.role, read_only=args.read_only)
    access = "read" if args.read_only else "read and write"
    emit(
        args,
        f"role {args.role} may {access} personal memory and use ghost memories (as {gm.settings.runtime_role})",
        {"role": args.role, "read_only": args.read_only, "runtime_role": gm.settings.runtime_role},
    )
    return 0


@command("revoke-app")
def cmd_revoke_app(args: argparse.Namespace) -> int:
    with store(args) as gm:
        gm.revoke_app(args.role)
    emit(args, f"role {args.role} may no longer use ghostmem here", {"role": args.role})
    return 0


# -- import -------------------------------------------------------------------------------------------------------


@command("import")
def cmd_import(args: argparse.Namespace) -> int:
    with store(args) as gm:
        if args.langgraph_checkpoints:
            return _import_checkpoints(args, gm)
        if args.langchain_table:
            report = gm.import_langchain_table(
                args.from_dsn, args.langchain_table, tier=args.tier, embed=not args.no_embed,
                progress=not (args.no_progress or args.json),
            )  # fmt: skip
        elif args.watch:
            gm.watch(
                args.paths or None,
                tier=args.tier,
                embed=not args.no_embed,
                interval=args.interval,
                on_report=lambda r: emit(args, r.render(), r.to_dict()),
            )
            return 0
        else:
            report = gm.import_paths(
                args.paths or None,
                tier=args.tier,
                embed=not args.no_embed,
                progress=not (args.no_progress or args.json),
            )
    emit(args, report.render(), report.to_dict())
    return 0 if report.ok else 1


def _import_checkpoints(args: argparse.Namespace, gm: GhostMem) -> int:
    try:
        from langchain_ghostmem.checkpoints import import_langgraph_checkpoints
    except ImportError as exc:
        raise GhostMemError(
            f"--langgraph-checkpoints needs the LangGraph extras: pip install 'ghostmem[langchain]' ({exc})"
        ) from exc
    done = import_langgraph_checkpoints(gm, args.langgraph_checkpoints)
    emit(args, done.render(), done.to_dict())
    return 0 if not done.problems else 1


@command("embed")
def cmd_embed(args: argparse.Namespace) -> int:
    """Embed what `ghostmem import --no-embed` left for later, then refresh the conversations' vectors."""
    with store(args) as gm:
        report = gm.embed_pending(progress=not (args.no_progress or args.json))
    emit(args, report.render(), report.to_dict())
    return 0


@command("maintain")
def cmd_maintain(args: argparse.Namespace) -> int:
    """Bring the search's large-store speedups up to date as the end of an import does (a store fed by capture)."""
    with store(args) as gm:
        report = gm.maintain(every_owner=args.every_owner)
    emit(args, report.render(), report.to_dict())
    return 0


@command("forget")
def cmd_forget(args: argparse.Namespace) -> int:
    """Delete a conversation with its messages and vectors, and keep it from coming back on the next import (or,
    with --undo, let it come back)."""
    with store(args) as gm:
        if args.undo:
            restored = gm.unforget(args.conv_id)
            emit(
                args,
                f"{', '.join(restored)} will be imported again: the next `ghostmem import` reads every file anew",
                {"conv_id": args.conv_id, "unforgotten": restored},
            )
            return 0
        removed = gm.forget(args.conv_id, force=args.force)
    text = (
        f"forgot {', '.join(removed)}; it will not be imported again (`ghostmem forget --undo {args.conv_id}` "
        "lets it back)"
        if removed
        else f"{args.conv_id} is not stored; it will never be imported"
    )
    emit(args, text, {"conv_id": args.conv_id, "removed": removed})
    return 0


@command("enrich")
def cmd_enrich(args: argparse.Namespace) -> int:
    """Recompute intensity, conversation vectors, clusters and topics for every conversation."""
    with store(args) as gm:
        count = gm.enrich()
    emit(args, f"enriched {count} conversations and reclustered", {"conversations": count})
    return 0


DEMO_OWNER = "demo"
DEMO_QUERY = "server does not start"


@command("demo")
def cmd_demo(args: argparse.Namespace) -> int:
    """Import the real sample exports shipped with ghostmem under their own owner (``demo``, or ``--owner`` given
    on the command line; never the memory ``GHOSTMEM_OWNER`` names) and show them; ``--remove`` deletes them."""
    from ghostmem.db import EmbeddedServer, redact_dsn
    from ghostmem.maintenance import clear

    owner = args.owner or DEMO_OWNER
    mine = Settings.from_env(dsn=args.dsn).owner
    again = "" if owner == DEMO_OWNER else f" --owner {shlex.quote(owner)}"
    settings = Settings.from_env(dsn=args.dsn, owner=owner)
    with open_store(settings) as gm:
        if args.remove:
            with gm.connection() as conn:
                removed = clear(conn, owner)
            emit(
                args,
                f"removed the demo: {len(removed)} conversations of owner {owner!r}",
                {"removed": removed},
            )
            return 0
        report = gm.import_paths([sample_exports()], progress=not args.json)
        recent = gm.run("list_recent_conversations", {"days": 36500, "limit": 20})
        found = gm.run("search_personal_memory", {"query": DEMO_QUERY, "limit": 3})
    server = None if settings.dsn else EmbeddedServer(settings.home).status()
    where = (
        f"the embedded server's data directory {server.pgdata}" if server else redact_dsn(settings.dsn or "")
    )
    lines = [
        f"The demo's conversations are stored under owner {owner!r} in {where}; your own memory (owner {mine!r}) "
        "holds none of them.",
        f'Look around: ghostmem --owner {shlex.quote(owner)} search "..." (or recent, show, summary).',
    ]
    if server and server.running:
        lines.append(f"The embedded server is still running (pid {server.pid}): {STOP_SERVER}.")
    lines.append(f"Remove the demo's data: `ghostmem demo --remove{again}`.")
    text = (
        f"{report.render()}\n\nRecent conversations (ghostmem --owner {shlex.quote(owner)} recent --days 36500):\n"
        f"{OPS_BY_NAME[recent.op].render(recent.data, READER)}\n\nSearch '{DEMO_QUERY}' "
        f'(ghostmem --owner {shlex.quote(owner)} search "{DEMO_QUERY}"):\n'
        f"{OPS_BY_NAME[found.op].render(found.data, READER)}\n\n" + "\n".join(lines)
    )
    data = {
        "import": report.to_dict(),
        "recent": recent.data.model_dump(mode="json"),
        "search": found.data.model_dump(mode="json"),
        "owner": owner,
        "data": str(server.pgdata) if server else where,
        "server": {"running": server.running, "pid": server.pid, "stop": "ghostmem db stop"}
        if server
        else None,
        "remove": f"ghostmem demo --remove{again}",
    }
    emit(args, text, data)
    return 0 if report.ok else 1


@command("mcp")
def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve every operation over MCP: stdio by default, streamable HTTP on 127.0.0.1 with --http."""
    import anyio

    from ghostmem.binding import Binding
    from ghostmem.mcp import serve_http, serve_stdio

    binding = Binding(
        store(args), current_project=args.project, strict=args.strict, allowed_scopes=args.allow_scope
    )
    if args.http:
        anyio.run(serve_http, binding, args.port, args.read_only, args.callers)
    else:
        anyio.run(serve_stdio, binding, args.read_only)
    return 0


@command("mcp-token")
def cmd_mcp_token(args: argparse.Namespace) -> int:
    """Make a bearer token for OWNER, append its hash to the tokens file, print the token once."""
    from ghostmem.mcp import add_token

    token = add_token(Path(args.tokens), args.token_owner)
    emit(
        args,
        f"{token}\n(the token of {args.token_owner!r} for `ghostmem mcp --http --tokens {args.tokens}`; "
        "only its hash is stored: keep it now)",
        {"owner": args.token_owner, "token": token, "tokens_file": args.tokens},
    )
    return 0


# -- parser -------------------------------------------------------------------------------------------------------


class UsageError(InvalidArgument):
    """The command line itself is wrong (an unknown flag, a missing or malformed argument)."""


class _Help(argparse.HelpFormatter):
    """``--help`` shows every option's default (what it is when not given), unless its help says it already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or "default" in text
            or default in (None, False, "", [], argparse.SUPPRESS)
        ):
            return text
        shown = " ".join(map(str, default)) if isinstance(default, list) else str(default)
        return f"{text} (default: {shown.replace('%', '%%')})"


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line (where to look for help included), like every other error of the command, and
    honour ``--json`` like them (:func:`main`); ``--help`` shows the defaults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> typing.NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # a mistyped command: the nearest one, rather than argparse's list of all of them
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            near = difflib.get_close_matches(value, list(action.choices), n=1)
            raise argparse.ArgumentError(
                None,
                f"unknown command {value!r}" + (f": did you mean `{self.prog} {near[0]}`?" if near else ""),
            )
        super()._check_value(action, value)


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The command line read by ``parser``; an argument nobody takes is reported by the command's own parser (its
    ``--help`` is the one to read), with the nearest option that command has."""
    args, unknown = parser.parse_known_args(argv)
    if not unknown:
        return args
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    command: argparse.ArgumentParser = commands.get(args.command, parser)
    options = [o for action in command._actions for o in action.option_strings]
    near = {
        arg: match[0]
        for arg in unknown
        if arg.startswith("-") and (match := difflib.get_close_matches(arg.split("=", 1)[0], options, n=1))
    }
    guess = ", ".join(m if len(near) == 1 else f"{m} for {a}" for a, m in near.items())
    command.error(
        f"unrecognized arguments: {' '.join(unknown)}" + (f"; did you mean {guess}?" if near else "")
    )


def _global_options(*, defaults: bool) -> _Parser:
    """The options every command takes, before or after its name (``ghostmem --dsn X import`` is
    ``ghostmem import --dsn X``). Only the top-level parser holds their defaults: a command's parser sets one only
    when it is given there, so it never overwrites what was given before the command's name."""
    given: dict[str, Any] = {} if defaults else {"default": argparse.SUPPRESS}
    options = _Parser(add_help=False)
    options.add_argument("--json", action="store_true", help="print machine-readable JSON", **given)
    options.add_argument(
        "--dsn",
        help="Postgres DSN (default: $GHOSTMEM_DSN, else the embedded server)",
        **(given or {"default": None}),
    )
    options.add_argument(
        "--owner", help="whose memory (default: $GHOSTMEM_OWNER or 'default')", **(given or {"default": None})
    )
    options.add_argument("-v", "--verbose", action="store_true", help="log what happens", **given)
    return options


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a number from 1 to 65535, not {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"give a positive number of seconds, not {text!r}")
    return value


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ghostmem")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    common = _global_options(defaults=False)
    parser = _Parser(
        prog="ghostmem",
        description="Long-term memory for AI agents in Postgres.",
        parents=[_global_options(defaults=True)],
    )
    parser.add_argument("--version", action="version", version=f"ghostmem {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("db", parents=[common], help="the embedded server: start, stop, status, url")
    p.add_argument("action", choices=["start", "stop", "status", "url"])
    sub.add_parser("migrate", parents=[common], help="apply pending schema migrations")
    p = sub.add_parser(
        "reembed", parents=[common], help="switch the embedding model and embed everything again"
    )
    p.add_argument("--model", required=True, help="a sentence-transformers model name or path, or 'hash'")
    p = sub.add_parser("doctor", parents=[common], help="check the server, extensions, migrations and model")
    p.add_argument("--no-model", action="store_true", help="skip loading the embedding model")

    p = sub.add_parser(
        "import", parents=[common], help="import conversations (default: every platform's usual place)"
    )
    p.add_argument("paths", nargs="*", help="files, folders or export zips (default: discover)")
    p.add_argument(
        "--tier",
        choices=["personal", "library"],
        default="personal",
        help="personal: your own conversations; library: reference conversations, searched with --include-library",
    )
    p.add_argument(
        "--no-embed", action="store_true", help="store and index words now; embed later (`ghostmem embed`)"
    )
    p.add_argument("--watch", action="store_true", help="keep importing as transcripts grow (polling)")
    p.add_argument("--interval", type=_seconds, default=30.0, help="seconds between polls with --watch")
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress display (it is shown only on an interactive terminal anyway)",
    )
    p.add_argument(
        "--langchain-table",
        default=None,
        help="import a langchain-postgres chat history table (with --from-dsn)",
    )
    p.add_argument("--from-dsn", default=None, help="DSN of the database holding --langchain-table")
    p.add_argument(
        "--langgraph-checkpoints",
        metavar="DSN",
        default=None,
        help="import the threads a LangGraph PostgresSaver holds in that database (incremental)",
    )
    p = sub.add_parser("embed", parents=[common], help="embed messages imported with --no-embed")
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress display (it is shown only on an interactive terminal anyway)",
    )
    p = sub.add_parser(
        "maintain",
        parents=[common],
        help="build the owner's search indexes an import would (graphs, words, statistics): for captured stores",
    )
    p.add_argument(
        "--every-owner",
        action="store_true",
        help="every owner's, not only --owner's (the schema owner's role)",
    )
    p = sub.add_parser("forget", parents=[common], help="delete a conversation and never import it again")
    p.add_argument("conv_id", help="the conversation id (as shown in row headers)")
    p.add_argument(
        "--force",
        action="store_true",
        help="forget an id that is not stored (it will then never be imported)",
    )
    p.add_argument(
        "--undo",
        action="store_true",
        help="import it again from now on (what was deleted comes back with the next import of its files)",
    )
    sub.add_parser("enrich", parents=[common], help="recompute intensity, clusters and topics of everything")
    p = sub.add_parser(
        "demo",
        parents=[common],
        help=f"import the bundled sample exports under their own owner ('{DEMO_OWNER}') and show them",
    )
    p.add_argument("--remove", action="store_true", help="delete the demo's conversations again")
    p = sub.add_parser("mcp", parents=[common], help="serve the operations over MCP (stdio; --http for HTTP)")
    p.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 instead of stdio")
    p.add_argument("--port", type=_port, default=8765, help="port of --http")
    p.add_argument(
        "--project", default=None, help="bind the project ghost memories act for (hidden from the model)"
    )
    p.add_argument("--read-only", action="store_true", help="serve only the operations that do not write")
    p.add_argument(
        "--strict",
        action="store_true",
        help="input schemas for strict tool calling (every argument required)",
    )
    p.add_argument(
        "--token",
        default=None,
        help="with --http: callers must send 'Authorization: Bearer TOKEN' (default: $GHOSTMEM_MCP_TOKEN)",
    )
    p.add_argument(
        "--tokens",
        default=None,
        metavar="FILE",
        help="with --http: each caller's token names its owner, from FILE's 'OWNER sha256:HASH' lines "
        "(see mcp-token; default: $GHOSTMEM_MCP_TOKENS)",
    )
    p.add_argument(
        "--allow-scope",
        action="append",
        choices=["global", "project", "shared-restricted"],
        default=None,
        help="a ghost-memory scope the model may write (repeat; default with --project: project only)",
    )

    p = sub.add_parser(
        "mcp-token",
        parents=[common],
        help="make a bearer token for an owner of 'mcp --http --tokens FILE' (its hash appended to FILE)",
    )
    p.add_argument("token_owner", metavar="OWNER", help="whose memory the token's caller reads and writes")
    p.add_argument("--tokens", required=True, metavar="FILE", help="the tokens file (created if missing)")
    p = sub.add_parser(
        "grant-project",
        parents=[common],
        help="let a database login role claim a project for ghost memories (refuse its other claims)",
    )
    p.add_argument("role", help="a database role (the login role the application connects as)")
    p.add_argument("project", help="a project that role may claim")
    p = sub.add_parser(
        "restore-memory",
        parents=[common],
        help="operator: put a retired ghost memory back (same id, signals and feedback)",
    )
    p.add_argument("memory_id", type=int, help="the memory_id `ghostmem retire-memory` reported")
    p = sub.add_parser(
        "revoke-project", parents=[common], help="take a project (or the whole map) from a role"
    )
    p.add_argument("role", help="a database role")
    p.add_argument("project", nargs="?", default=None, help="the project to take away (default: all)")
    p = sub.add_parser(
        "grant-app",
        parents=[common],
        help="let an application's login role use ghostmem without migrating (run as the schema's owner)",
    )
    p.add_argument("role", help="the login role the application connects as")
    p.add_argument("--read-only", action="store_true", help="personal memory may be read, not written")
    p = sub.add_parser("revoke-app", parents=[common], help="take back what grant-app gave a role")
    p.add_argument("role", help="a login role")

    for spec in OPS:
        p = sub.add_parser(spec.cli_name, parents=[common], help=spec.description.split(". ")[0])
        for name, info in spec.args_model.model_fields.items():
            _add_field(p, spec, name, info)
        p.set_defaults(handler=_op_handler(spec), op_spec=spec)
    return parser


def check_usage(args: argparse.Namespace) -> None:
    """Say what the command line alone shows to be wrong before anything is started or created (the embedded
    server, its data directory, the model's export): an operation's arguments are validated by its args model here
    (the handler runs the validated ones), and flags that need each other are checked."""
    spec: OpSpec[Any, Any] | None = getattr(args, "op_spec", None)
    if spec is not None:
        fields = spec.args_model.model_fields
        args.arguments = spec.parse({k: v for k, v in vars(args).items() if k in fields})
    elif args.command == "import" and args.langchain_table and not args.from_dsn:
        raise UsageError(
            "--langchain-table needs --from-dsn (the database holding the table) (see `ghostmem import --help`)"
        )
    elif args.command == "mcp" and args.http:
        from ghostmem.mcp import resolve_callers

        # a token too short, or a tokens file that does not parse, is refused before the server starts
        owner = Settings.from_env(dsn=args.dsn, owner=args.owner).owner
        args.callers = resolve_callers(args.token, args.tokens, owner)
    elif args.command == "mcp" and (args.token is not None or args.tokens is not None):
        raise UsageError(
            "--token and --tokens protect --http; a stdio server is private to the process that started it "
            "(see `ghostmem mcp --help`)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; an error is one sentence on stderr, or with ``--json`` a JSON object on stdout
    (``{"error": ..., "type": ..., "exit_code": ...}``), and the exit status is nonzero (2; 130 when interrupted).
    When whatever reads the output stops reading (``ghostmem recent | head``), the command stops silently with status
    141, as a program that SIGPIPE ends (Python ignores the signal: each write then raised BrokenPipeError, and its
    traceback was printed)."""
    try:
        try:
            return _main(argv)
        finally:  # here, not at the interpreter's exit, whatever fits in the buffer meets a reader that has gone
            sys.stdout.flush()
    except BrokenPipeError:
        # what is still buffered cannot be written either: stdout goes nowhere, so the interpreter's last flush at
        # exit does not fail again ("Exception ignored ... BrokenPipeError")
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE: what a shell reports for a program the signal ended


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = _parse(parser, argv)
    except UsageError as exc:
        options = argv[: argv.index("--")] if "--" in argv else argv
        return _failed(str(exc), "UsageError", 2, as_json=any(_is_json_flag(a) for a in options))
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="ghostmem: %(levelname)s: %(message)s"
    )
    if not args.verbose:  # the driver's and the pool's warnings repeat what the one error sentence says
        logging.getLogger("psycopg").setLevel(logging.ERROR)
    handler: Handler | None = getattr(args, "handler", None) or _HANDLERS.get(args.command)
    if handler is None:  # pragma: no cover - argparse requires a command
        parser.error(f"unknown command {args.command}")
    try:
        check_usage(args)
        start_server(args)
        return handler(args)
    except GhostMemError as exc:
        return _failed(exc.say(CLI_WORDS), type(exc).__name__, 2, as_json=args.json)
    except KeyboardInterrupt:
        return _failed("interrupted", "Interrupted", 130, as_json=args.json)


def _is_json_flag(arg: str) -> bool:
    """``--json`` as argparse reads it (an unambiguous prefix counts), for errors before the flags are parsed."""
    return len(arg) > 3 and "--json".startswith(arg)


def _failed(message: str, kind: str, code: int, *, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"error": message, "type": kind, "exit_code": code}, ensure_ascii=False))
    else:
        print(f"ghostmem: error: {visible(message)}", file=sys.stderr)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
