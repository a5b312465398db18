"""Import the threads a LangGraph ``PostgresSaver`` already holds into personal memory (``ghostmem import
--langgraph-checkpoints DSN``), incrementally: the same threads the capture middleware records live."""

from __future__ import annotations

from dataclasses import dataclass, field

from ghostmem import GhostMem, db
from ghostmem.binding import identity_named
from ghostmem.context import checked_owner
from ghostmem.errors import InvalidArgument
from langchain_core.messages import BaseMessage

from langchain_ghostmem.messages import to_record
from langchain_ghostmem.middleware import PLATFORM


@dataclass(slots=True)
class CheckpointImport:
    """What one import did: threads read, messages written, and the threads that could not be read (and why)."""

    threads: int = 0
    messages_new: int = 0
    conversations_new: int = 0
    owners: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "threads": self.threads,
            "conversations_new": self.conversations_new,
            "messages_new": self.messages_new,
            "owners": sorted(self.owners),
            "problems": self.problems,
        }

    def render(self) -> str:
        lines = [
            f"{self.threads} LangGraph threads read, {self.conversations_new} new conversations, "
            f"{self.messages_new} new messages, {len(self.owners)} owner(s)"
        ]
        lines += [f"  problem: {p}" for p in self.problems]
        return "\n".join(lines)


def import_langgraph_checkpoints(
    store: GhostMem, from_dsn: str, *, owner_key: str = "user_id", project: str | None = None
) -> CheckpointImport:
    """Sync every thread of the ``PostgresSaver`` at ``from_dsn`` to a conversation (``conv_id`` = thread id).

    A thread's owner is the ``owner_key`` its runs were given (LangGraph keeps the call's ``configurable`` values
    in each checkpoint's metadata), else ``store``'s owner. Only the latest checkpoint of each thread is read, and
    only messages not stored yet are written: running the import again writes nothing new. The saver's tables are
    only read.
    """
    from langgraph.checkpoint.postgres import PostgresSaver

    report = CheckpointImport()
    with db.connect(from_dsn) as conn:
        threads = [
            str(r[0])
            for r in conn.execute(
                "SELECT DISTINCT thread_id FROM checkpoints WHERE checkpoint_ns = '' ORDER BY 1"
            )
        ]
    with PostgresSaver.from_conn_string(from_dsn) as saver:
        for thread in threads:
            report.threads += 1
            latest = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
            messages = (latest.checkpoint.get("channel_values") or {}).get("messages") if latest else None
            if not messages:
                continue
            if not all(isinstance(m, BaseMessage) for m in messages):
                report.problems.append(f"thread {thread}: its messages are not LangChain messages; skipped")
                continue
            owner = identity_named(latest.metadata.get(owner_key)) or store.owner  # type: ignore[union-attr]
            try:
                checked_owner(owner)
            except InvalidArgument as exc:
                report.problems.append(f"thread {thread}: {exc}; skipped")
                continue
            result = store.capture_sync(
                thread,
                [to_record(m) for m in messages],
                [m.id or f"pos-{n}" for n, m in enumerate(messages)],
                platform=PLATFORM,
                project=project,
                owner=owner,
            )
            report.owners.add(owner)
            report.messages_new += result.messages_new
            report.conversations_new += int(result.created)
    return report
