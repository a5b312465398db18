"""Typical async use of ghostmem in a process of its own (tools of LangChain and LlamaIndex called in parallel
from event loops that come and go): what it leaves on stderr at exit is what a user would see."""

from __future__ import annotations

import os
import subprocess
import sys

from psycopg.conninfo import conninfo_to_dict

SCRIPT = """
import asyncio, os, sys, time
import psycopg
from ghostmem import GhostMem, HashEmbedder
from langchain_ghostmem import GhostMemToolkit
from llama_index_ghostmem import GhostMemToolSpec

name, mode = os.environ["APP_NAME"], sys.argv[1]
servers = [os.environ["ADMIN_DSN"], *filter(None, [os.environ.get("READ_ADMIN_DSN")])]

def backends():  # the connections left, once they settle (a closed one leaves pg_stat_activity shortly after)
    deadline = time.monotonic() + 5
    while True:
        count = 0
        for admin in servers:
            with psycopg.connect(admin, autocommit=True) as conn:
                query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
                count += conn.execute(query, (name,)).fetchone()[0]
        if count == 0 or time.monotonic() > deadline:
            return count
        time.sleep(0.05)

gm = GhostMem(dsn=os.environ["DSN"], read_dsn=os.environ.get("READ_DSN"), owner="nobody", embedder=HashEmbedder())
ops = ["search_ghost_memories", "search_personal_memory"]  # the ghost search runs on the primary, the other reads
toolkit = GhostMemToolkit(gm, ops=ops)
spec = GhostMemToolSpec(gm, ops=ops)

async def calls():
    await asyncio.gather(
        *(
            tool.ainvoke({"query": "x"}, config={"configurable": {"user_id": f"u{i}"}})
            for i in range(4)
            for tool in toolkit.get_tools()
        ),
        *(tool.acall(query="x") for _ in range(2) for tool in spec.to_tool_list()),
    )

if mode == "run-twice-then-close":
    asyncio.run(calls())
    asyncio.run(calls())  # a new loop: pools of its own, the first loop's closed on the way
    gm.close()
    left = backends(); assert left == 0, left
elif mode == "aclose":
    async def main():
        await calls()
        await toolkit.aclose()  # the application's store: stays open
        await gm.aclose()
    asyncio.run(main())
    left = backends(); assert left == 0, left
elif mode == "idle-loop-then-close":
    loop = asyncio.new_event_loop()
    loop.run_until_complete(calls())
    gm.close()  # the loop is idle, not closed: the pools close on it
    loop.close()
    left = backends(); assert left == 0, left
elif mode == "closed-loop-then-close":
    loop = asyncio.new_event_loop()
    loop.run_until_complete(calls())
    loop.run_until_complete(loop.shutdown_asyncgens())
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    gm.close()
    left = backends(); assert left == 0, left
elif mode == "never-closed":
    loop = asyncio.new_event_loop()
    loop.run_until_complete(calls())  # nothing closed: the exit closes it
print("ok", mode)
"""

ASYNC_USES = [
    "run-twice-then-close",
    "aclose",
    "idle-loop-then-close",
    "closed-loop-then-close",
    "never-closed",
]

# What must never reach a user's stderr. (The never-closed case leaves the application's own loop unclosed:
# Python's ResourceWarning about it is not ghostmem's, and names neither psycopg nor a pool.)
SYMPTOMS = ("Task was destroyed", "Event loop is closed", "never awaited", "Traceback", "psycopg", "pool")


def run_async_use(
    mode: str,
    dsn: str,
    admin_dsn: str,
    read_dsn: str | None = None,
    read_admin_dsn: str | None = None,
) -> str:
    """Run the script in ``mode`` against ``dsn`` (and a standby at ``read_dsn``), DSNs made by
    :func:`support.connections.tagged` (their connections are counted through the admin DSNs); returns its stderr
    once it said it finished."""
    env = {
        **os.environ,
        "DSN": dsn,
        "APP_NAME": conninfo_to_dict(dsn)["application_name"],
        "ADMIN_DSN": admin_dsn,
        "PYTHONWARNINGS": "default",
    }
    if read_dsn is not None and read_admin_dsn is not None:
        # a loaded machine may take longer than the default 0.25 s to connect: the reads would then go to the
        # primary and say so in a warning, which is not what this script looks at
        env |= {"READ_DSN": read_dsn, "READ_ADMIN_DSN": read_admin_dsn, "GHOSTMEM_READ_WAIT": "30"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and done.stdout.strip() == f"ok {mode}", done.stderr
    return done.stderr
