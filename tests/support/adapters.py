"""What the adapter suites share: a few conversations on distinct subjects and a ghost memory in one owner, a
scripted chat model (no LLM is reachable), and one operation called as a model would through each tool surface."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ghostmem import GhostMem
from ghostmem.binding import Binding
from ghostmem.mcp import build_server
from ghostmem.records import ConversationRecord, MessageRecord
from ghostmem.store import save_conversation
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from mcp import Client
from pydantic import Field

from langchain_ghostmem import GhostMemToolkit
from llama_index_ghostmem import GhostMemToolSpec

# name -> (project, [(role, text), ...]); the words are distinct so each question has one right answer.
CONVERSATIONS: dict[str, tuple[str | None, list[tuple[str, str]]]] = {
    "deploy": (
        "/home/dev/webapp",
        [
            (
                "user",
                "The nightly deploy of the webapp fails: the database migrations run after the integration tests.",
            ),
            (
                "assistant",
                "Move the migrate step before the test step in the CI pipeline so the schema exists.",
            ),
            ("user", "Done, the pipeline is green again."),
        ],
    ),
    "vault": (
        "/home/dev/infra",
        [
            ("user", "How do I rotate the vault tokens for the staging cluster?"),
            ("assistant", "Renew them with the periodic role and restart the vault agents afterwards."),
        ],
    ),
    "carbonara": (
        None,
        [
            ("user", "Give me a carbonara recipe with guanciale and pecorino."),
            (
                "assistant",
                "Fry the guanciale, whisk eggs with pecorino, toss with the spaghetti off the heat.",
            ),
        ],
    ),
    "kaiwa": (
        None,
        [
            ("user", "会話の履歴を検索する方法を教えてください。"),
            ("assistant", "全文検索とベクトル検索を組み合わせて会話を探します。"),
        ],
    ),
}

RULE = "Always run the database migrations before the integration tests."


def seed_conversations(gm: GhostMem, platform: str = "claude_code") -> dict[str, str]:
    """Store :data:`CONVERSATIONS` (recent, one hour apart) for ``gm``'s owner; returns name -> conv_id."""
    now = datetime.now(UTC)
    ids: dict[str, str] = {}
    with gm.connection() as conn:
        for n, (name, (project, turns)) in enumerate(CONVERSATIONS.items()):
            start = now - timedelta(hours=n + 1)
            record = ConversationRecord(
                conv_id=f"conv-{name}",
                platform=platform,  # type: ignore[arg-type]
                project=project,
                messages=[
                    MessageRecord(native_id=str(i), role=role, text=text, ts=start + timedelta(minutes=i))  # type: ignore[arg-type]
                    for i, (role, text) in enumerate(turns)
                ],
            )
            save_conversation(conn, gm.owner, "personal", record, embedder=gm.embedder)
            ids[name] = record.conv_id
    return ids


def seed_rule(gm: GhostMem, content: str = RULE) -> int:
    """Store one ghost memory; returns its memory_id."""
    return int(gm.run("remember", {"content": content}).data.memory.memory_id)


def counts(gm: GhostMem) -> tuple[object, ...]:
    """A fingerprint of what the owner stored: rows and checksums of conversations, messages and ghost memories.

    Ghost-memory usage counters are left out: a search counting as use is the ranking's design, not a write.
    """
    with gm.connection() as conn:
        row = conn.execute(
            """
            SELECT (SELECT count(*) FROM ghostmem.conversations WHERE owner = %(o)s),
                   (SELECT md5(coalesce(string_agg(concat_ws('|', conv_id, title, project, msg_count), '/'
                                                   ORDER BY conv_id), ''))
                      FROM ghostmem.conversations WHERE owner = %(o)s),
                   (SELECT md5(coalesce(string_agg(text, '|' ORDER BY id), ''))
                      FROM ghostmem.messages WHERE owner = %(o)s),
                   (SELECT md5(coalesce(string_agg(concat_ws('|', memory_id, content, scope, project, endorsements,
                                                             corrections, incidents_prevented, prediction_errors),
                                                   '/' ORDER BY memory_id), ''))
                      FROM agent.ghost_memories WHERE owner = %(o)s)
            """,
            {"o": gm.owner},
        ).fetchone()
    assert row is not None
    return tuple(row)


Script = Callable[[Sequence[BaseMessage]], AIMessage]


class ScriptedChatModel(BaseChatModel):
    """Decides its next message from the conversation so far, like a model would, but by a fixed script."""

    script: Script
    bound_tools: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, AIMessage]:
        # What a provider integration sends: the OpenAI-format functions.
        return self.model_copy(update={"bound_tools": [convert_to_openai_tool(t) for t in tools]})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        assert self.bound_tools, "the agent must bind the tools before calling the model"
        return ChatResult(generations=[ChatGeneration(message=self.script(messages))])


def call(name: str, n: int, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call-{n}", "type": "tool_call"}])


Call = Callable[[str, dict[str, Any]], Awaitable[tuple[bool, str, list[str]]]]


def surface_caller(surface: str, gm: GhostMem, **binding: Any) -> Call:
    """Call one operation as a model would through ``surface``; returns (error?, text, contents of the rows)."""

    def rows(data: Any) -> list[str]:
        return [row.content for row in getattr(data, "rows", [])]

    async def langchain(name: str, args: dict[str, Any]) -> tuple[bool, str, list[str]]:
        toolkit = GhostMemToolkit(gm, ops=[name], **binding)
        answer = await toolkit.get_tools()[0].ainvoke(
            {"name": name, "args": args, "id": "c", "type": "tool_call"}
        )
        await toolkit.aclose()
        return answer.status == "error", str(answer.content), rows(answer.artifact)

    async def llamaindex(name: str, args: dict[str, Any]) -> tuple[bool, str, list[str]]:
        spec = GhostMemToolSpec(gm, ops=[name], **binding)
        output = await spec.to_tool_list()[0].acall(**args)
        await spec.aclose()
        return output.is_error, output.content, rows(output.raw_output)

    async def mcp(name: str, args: dict[str, Any]) -> tuple[bool, str, list[str]]:
        bound = Binding(gm, **binding)
        async with Client(build_server(bound)) as client:
            answer = await client.call_tool(name, args)
        await bound.aclose()
        found = (answer.structured_content or {}).get("rows", [])
        return bool(answer.is_error), answer.content[0].text, [row["content"] for row in found]

    return {"langchain": langchain, "llamaindex": llamaindex, "mcp": mcp}[surface]
