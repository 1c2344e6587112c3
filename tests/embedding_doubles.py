"""An embedder that needs no model: for tests of what surrounds the encoder (the cache, the
database, the HTTP service), where loading the real model would only cost seconds."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_searcheval.engine.embed import Embedder, Vector


class HashEmbedder(Embedder):
    """Encodes without a model: the same text always gives the same unit vector."""

    encoded: int = 0

    @property
    def vector_space(self) -> str:
        return "hash"

    def _encode(self, texts: list[str]) -> list[Vector | None]:
        out: list[Vector | None] = []
        for text in texts:
            out.append(hash_vector(text, self.dimensions))
            self.encoded += 1
        return out


def hash_vector(text: str, dimensions: int) -> Vector:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    vec = np.random.default_rng(seed).standard_normal(dimensions).astype(np.float32)
    return vec / np.linalg.norm(vec)


class FailingEmbedder(Embedder):
    """Encodes as :class:`HashEmbedder` does, except that a batch holding a text in ``poison``
    raises ``error``, as a model failing on one input would: the embedder's own retry, one
    text at a time, then finds which text failed and why."""

    def __init__(self, *args: Any, error: type[Exception] = RuntimeError, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.poison: set[str] = set()
        self.error = error

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        bad = [t for t in texts if t in self.poison]
        if bad:
            raise self.error(f"cannot encode {bad[0][:30]!r}")
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.stack([hash_vector(t, self.dimensions) for t in texts])
