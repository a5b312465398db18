"""Embedders for tests that check what a program embeds (real vectors, from the hash embedder)."""

from __future__ import annotations

from ghostmem import HashEmbedder


class CountingEmbedder(HashEmbedder):
    """The hash embedder, keeping every query text it embedded (a search or a ghost operation embeds one)."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed_query(self, text: str) -> list[float]:
        self.texts.append(text)
        return super().embed_query(text)


class Renamed(HashEmbedder):
    """The hash embedder under a name of the test's choosing, as an application's own embedder names itself."""

    def __init__(self, name: str, dim: int = 384) -> None:
        super().__init__(dim)
        self._name = name

    @property
    def name(self) -> str:
        return self._name
