"""An embedder that needs no model: for tests of what surrounds the encoder (the cache, the
database, the HTTP service), where loading the real model would only cost seconds."""

from __future__ import annotations

import hashlib

import numpy as np

from pytest_searcheval.engine.embed import Embedder, Vector


class HashEmbedder(Embedder):
    """Encodes without a model: the same text always gives the same unit vector."""

    encoded: int = 0

    def _encode(self, texts: list[str]) -> list[Vector | None]:
        out: list[Vector | None] = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            vec = np.random.default_rng(seed).standard_normal(self.dimensions).astype(np.float32)
            out.append(vec / np.linalg.norm(vec))
            self.encoded += 1
        return out
