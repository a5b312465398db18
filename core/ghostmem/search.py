"""Conversation operations: hybrid search, threads, lists and summaries (one SQL statement per question)."""

from __future__ import annotations

from ghostmem.args import (
    GetConversationArgs,
    GetConversationSummaryArgs,
    ListProjectConversationsArgs,
    ListRecentConversationsArgs,
    SearchPersonalMemoryArgs,
)
from ghostmem.context import OpContext
from ghostmem.errors import NotImplementedYet
from ghostmem.models import ConversationList, ConversationSummary, SearchResult, Thread
from ghostmem.program import Program


def search_personal_memory(ctx: OpContext, args: SearchPersonalMemoryArgs) -> Program[SearchResult]:
    raise NotImplementedYet("search_personal_memory is not implemented yet")
    yield


def get_conversation(ctx: OpContext, args: GetConversationArgs) -> Program[Thread]:
    raise NotImplementedYet("get_conversation is not implemented yet")
    yield


def list_recent_conversations(ctx: OpContext, args: ListRecentConversationsArgs) -> Program[ConversationList]:
    raise NotImplementedYet("list_recent_conversations is not implemented yet")
    yield


def list_project_conversations(
    ctx: OpContext, args: ListProjectConversationsArgs
) -> Program[ConversationList]:
    raise NotImplementedYet("list_project_conversations is not implemented yet")
    yield


def get_conversation_summary(
    ctx: OpContext, args: GetConversationSummaryArgs
) -> Program[ConversationSummary]:
    raise NotImplementedYet("get_conversation_summary is not implemented yet")
    yield
