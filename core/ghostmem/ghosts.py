"""Ghost memories: ranking in the database, feedback that tunes it, scopes enforced by the server."""

from __future__ import annotations

from ghostmem.args import GiveFeedbackArgs, RememberArgs, SearchGhostMemoriesArgs
from ghostmem.context import OpContext
from ghostmem.errors import NotImplementedYet
from ghostmem.models import FeedbackResult, GhostList, RememberResult
from ghostmem.program import Program


def search_ghost_memories(ctx: OpContext, args: SearchGhostMemoriesArgs) -> Program[GhostList]:
    raise NotImplementedYet("search_ghost_memories is not implemented yet")
    yield


def remember(ctx: OpContext, args: RememberArgs) -> Program[RememberResult]:
    raise NotImplementedYet("remember is not implemented yet")
    yield


def give_feedback(ctx: OpContext, args: GiveFeedbackArgs) -> Program[FeedbackResult]:
    raise NotImplementedYet("give_feedback is not implemented yet")
    yield
