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
