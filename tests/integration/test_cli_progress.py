"""ghostmem's progress display, seen as a person and as a program see it: on a pseudo-terminal the import shows each
step (the model's load on its own), a bar per counted phase that moves batch by batch with its rate and time
left; through pipes, under ``--json``, with ``--no-progress`` or in CI nothing but the report is written. And the
embedding time reported is the embedding's, the model's load apart."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from ghostmem import GhostMem
from ghostmem.embed import HashEmbedder, SentenceTransformerEmbedder
from ghostmem.ingest.runner import autocommit
from ghostmem.store import EMBED_CHUNK, EMBED_WINDOW, embed_pending
from support.cli import ghostmem, ghostmem_on_terminal
from support.conversations import write_corpus

EMBED_FRAME = re.compile(r"embedding .*?([\d,]+)/([\d,]+) messages · (–|[\d,]+)/s · eta (–|\d+:\d\d)")


def _env(pg_dsn: str, owner: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}  # this suite may itself run in CI
    return {
        **env,
        "GHOSTMEM_DSN": pg_dsn,
        "GHOSTMEM_OWNER": owner,
        "GHOSTMEM_EMBED_MODEL": "hash",
        "TERM": "xterm",
    }


def _number(text: str) -> int:
    return int(text.replace(",", ""))


@pytest.mark.slow
def test_a_terminal_sees_each_step_and_bars_with_rate_and_eta(
    pg_dsn: str, owner: str, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    write_corpus(corpus, files=4, convs_per_file=80)  # 1,920 messages: 8 batches to embed
    run = ghostmem_on_terminal("import", str(corpus), env=_env(pg_dsn, owner))
    assert run.returncode == 0, run.raw
    lines = [line.strip() for line in run.lines]

    def index(pattern: str) -> int:
        found = [i for i, line in enumerate(lines) if re.fullmatch(pattern, line)]
        assert found, f"no line {pattern!r} in {lines}"
        return found[0]

    # each step stays as a line, in the order it ran; the model's load is a step of its own
    steps = [
        index(r"importing: 4 files in \d+\.\d s"),
        index(r"loading the embedding model… \d+\.\d s"),
        index(r"embedding: 1,920 messages in \d+\.\d s"),
        index(r"enriching 320 conversations… \d+\.\d s"),
        index(r"files: 4 read, 0 unchanged, 0 skipped · 1920 messages embedded · 320 conversations enriched"),
    ]
    assert steps == sorted(steps)
    # the embedding bar was drawn part way (how often depends on the machine's speed: the feeding itself is
    # checked call by call below), with a rate and the time left once known
    frames = [m.groups() for m in map(EMBED_FRAME.search, run.frames) if m]
    assert frames and {_number(total) for _, total, _, _ in frames} == {1920}
    assert {_number(done) for done, _, _, _ in frames} - {0, 1920}, frames
    assert any(rate != "–" and eta != "–" for _, _, rate, eta in frames), frames
    importing = [f for f in run.frames if re.search(r"importing .*/4 files · ", f)]
    assert importing, run.frames


@pytest.mark.slow
def test_pipes_json_no_progress_and_ci_get_the_report_alone(pg_dsn: str, owner: str, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write_corpus(corpus, files=2, convs_per_file=20)
    piped = ghostmem("import", str(corpus), env=_env(pg_dsn, owner + "-pipe"))
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    assert piped.stdout.splitlines()[0].split()[0] == "platform"
    assert "loading the embedding model" not in piped.stdout

    as_json = ghostmem_on_terminal("import", "--json", str(corpus), env=_env(pg_dsn, owner + "-json"))
    assert as_json.returncode == 0
    assert json.loads("\n".join(as_json.lines))["messages_embedded"] == 240  # the terminal got the JSON alone

    quiet = ghostmem_on_terminal("import", "--no-progress", str(corpus), env=_env(pg_dsn, owner + "-quiet"))
    in_ci = ghostmem_on_terminal("import", str(corpus), env={**_env(pg_dsn, owner + "-ci"), "CI": "true"})
    dumb = ghostmem_on_terminal("import", str(corpus), env={**_env(pg_dsn, owner + "-dumb"), "TERM": "dumb"})
    for run in (quiet, in_ci, dumb):
        assert run.returncode == 0
        assert next(line for line in run.lines if line.strip()).split()[0] == "platform", run.lines
        assert "eta" not in run.raw and "loading the embedding model" not in run.raw
        assert "\x1b[" not in run.raw  # no cursor movement, no colour


def test_embedding_time_leaves_the_model_load_out(
    pg_dsn: str, owner: str, tmp_path: Path, real_embedder
) -> None:  # type: ignore[no-untyped-def]
    corpus = tmp_path / "corpus"
    write_corpus(corpus, files=1, convs_per_file=10)
    fresh = SentenceTransformerEmbedder(real_embedder.name)  # the real model, not loaded yet
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=fresh) as gm:
        gm.import_paths([corpus], embed=False)
        started = time.perf_counter()
        report = gm.embed_pending()
        wall = time.perf_counter() - started
    assert report.embedded == 60
    assert report.seconds_model_load > 0.05  # reading a real model's weights
    assert report.seconds_model_load + report.seconds <= wall
    assert re.fullmatch(
        r"embedded 60 messages in \d+\.\ds \(\d+ messages/s\) after loading the model in \d+\.\ds; "
        r"refreshed 10 conversations",
        report.render(),
    ), report.render()
    assert report.to_dict()["seconds_model_load"] == round(report.seconds_model_load, 3)


def test_embedding_progress_is_fed_call_by_call(pg_dsn: str, owner: str, tmp_path: Path) -> None:
    """The bar hears of every call to the embedder (EMBED_CHUNK texts), not once per transaction, and its counts add
    up to the messages exactly, repeated and cached texts included."""
    corpus = tmp_path / "corpus"
    write_corpus(corpus, files=2, convs_per_file=100, seed=owner)  # 1,200 new messages: two windows
    with (corpus / "part-001.jsonl").open("a") as fh:  # 100 messages repeating texts already there
        fh.write((corpus / "part-000.jsonl").read_text().replace('"conv_id": "f0-', '"conv_id": "again-'))
    embedder = HashEmbedder()
    calls: list[int] = []
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=embedder) as gm:
        gm.import_paths([corpus], embed=False)
        with gm.connection() as conn, autocommit(conn):
            done = embed_pending(conn, owner, embedder, progress=calls.append)
    assert done == sum(calls) == 1800
    # 1,200 distinct texts in two windows: a call per 128 of them (at least 8 full ones); the 600 repeats are
    # accounted for at the end of their window, where nothing is embedded for them
    assert EMBED_WINDOW < 1800 and sum(1 for n in calls if n == EMBED_CHUNK) >= 8, calls


def test_doctor_shows_what_it_checks_on_a_terminal_only(pg_dsn: str, owner: str) -> None:
    """doctor prints its report at the end (on a fresh home its model check first prepares the model): at a terminal
    a step says what is being checked meanwhile, and stays as a line with its time; a pipe gets the report alone."""
    run = ghostmem_on_terminal("doctor", env=_env(pg_dsn, owner))
    assert run.returncode == 0, run.raw
    lines = [line.strip() for line in run.lines if line.strip()]
    assert re.fullmatch(r"checking the server, the schema and the embedding model… \d+\.\d s", lines[0]), (
        lines
    )
    assert lines[1].startswith("[ok  ] server:") and lines[-1] == "all good"
    piped = ghostmem("doctor", "--no-model", env=_env(pg_dsn, owner))
    assert piped.returncode == 0 and piped.stderr == "" and piped.stdout.startswith("[ok  ] server:")
    as_json = ghostmem_on_terminal("doctor", "--json", env=_env(pg_dsn, owner))
    assert json.loads(as_json.raw)["ok"] is True  # the terminal gets the JSON alone
