"""Capture middleware for LangChain v1 ``create_agent``: every thread an agent runs becomes personal memory."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ghostmem import GhostMem
from ghostmem.binding import Binding
from ghostmem.embed import Embedder
from ghostmem.records import Platform
from ghostmem.store import SaveResult
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.messages import BaseMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from langchain_ghostmem.messages import to_record

PLATFORM: Platform = "langgraph"


class GhostMemCaptureMiddleware(AgentMiddleware):
    """Records each agent thread in personal memory as it runs, so the next search finds it.

    After every model call and when the agent finishes, the thread's messages are synced to the conversation
    ``conv_id = thread_id`` (platform ``langgraph``): only messages not stored yet are written and embedded
    (a turn costs its own messages; running the hook twice writes nothing), and a thread whose history another
    middleware rewrote (summarised, trimmed) is stored as it now is. Messages keep everything (content blocks,
    tool calls, artifacts; see :mod:`langchain_ghostmem.messages`).

    The owner is the call's ``config["configurable"][owner_key]`` (``user_id`` by default, as LangGraph's
    ``config``/``context`` conventions have it), else the same key in the runtime ``context``, else the owner the
    middleware was built with. A run without a ``thread_id`` (no checkpointer) is stored under ``run-<id of its
    first message>``.

    Example::

        agent = create_agent(model, tools=toolkit.get_tools(), checkpointer=saver,
                             middleware=[GhostMemCaptureMiddleware(gm, project="webapp")])
        agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "t-42", "user_id": "alice"}})

    Args:
        store: a :class:`~ghostmem.GhostMem`, a DSN, or ``None`` (embedded server / ``GHOSTMEM_DSN``).
        owner: whose memory when the call names no owner.
        owner_key: the ``configurable`` / context key naming the owner of a call.
        project: the project the agent's conversations are about.
    """

    def __init__(
        self,
        store: GhostMem | str | None = None,
        *,
        owner: str | None = None,
        owner_key: str = "user_id",
        project: str | None = None,
        embedder: Embedder | str | None = None,
        binding: Binding | None = None,
    ) -> None:
        super().__init__()
        self.binding = binding or Binding(store, owner=owner, embedder=embedder, owner_key=owner_key)
        self.project = project

    def owner_of_call(self, runtime: Runtime[Any] | None = None) -> str:
        """Whose memory the running call writes (see the class docstring)."""
        configurable = get_config().get("configurable")
        context = runtime.context if runtime is not None else None
        return self.binding.context_for(configurable, context).owner

    def capture(self, messages: Sequence[BaseMessage], runtime: Runtime[Any] | None = None) -> SaveResult:
        """Sync ``messages`` (the thread's whole list) to the running call's conversation."""
        if not messages:
            return SaveResult()
        thread = (get_config().get("configurable") or {}).get("thread_id")
        conv_id = str(thread) if thread is not None else f"run-{messages[0].id or 'anonymous'}"
        ids = [m.id or f"pos-{n}" for n, m in enumerate(messages)]
        return self.binding.store.capture_sync(
            conv_id,
            [to_record(m) for m in messages],
            ids,
            platform=PLATFORM,
            project=self.project,
            owner=self.owner_of_call(runtime),
        )

    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self.capture(state["messages"], runtime)
        return None

    async def aafter_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        await asyncio.to_thread(self.capture, state["messages"], runtime)
        return None

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self.capture(state["messages"], runtime)
        return None

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        await asyncio.to_thread(self.capture, state["messages"], runtime)
        return None

    def close(self) -> None:
        self.binding.close()
