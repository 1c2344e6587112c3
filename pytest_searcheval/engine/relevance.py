"""The engine's own relevance model: the packaged MiniLM's query side, fine-tuned.

It ships beside this module (``models/relevance/``): a low-rank adapter (engine/lora.py) over the
packaged all-MiniLM-L6-v2 weights, trained by ``construction/relevance_train.py`` from the
committed training data (training/) to place a need near the listings that serve it, and away
from every listing when none does. Only queries go through it: the listings keep the vectors
the engine stores (the packaged model's), so nothing is re-indexed and a reranked head costs one
more query encoding. ``manifest.json`` names the inputs' sha256, the configuration, the learned
"nothing serves this" cosine and what the model was measured at. Nothing is downloaded.

The score of (query, listing) is the cosine of the adapted query vector and the listing's stored
vector: in [-1, 1], higher is more relevant.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

PACKAGED = Path(__file__).resolve().parent / "models" / "relevance"
WEIGHTS = "query.safetensors"
MANIFEST = "manifest.json"


def packaged_path() -> Path | None:
    """The shipped model's directory, or None when this install has none."""
    return PACKAGED if is_relevance_model(PACKAGED) else None


def is_relevance_model(path: Path) -> bool:
    return (path / WEIGHTS).is_file() and (path / MANIFEST).is_file()


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest of the model at ``path`` (construction/relevance_train.py writes it)."""
    manifest: dict[str, Any] = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    return manifest


def _manifest_text(path: Path, key: str) -> str | None:
    value = read_manifest(path).get(key)
    return str(value) if value else None


def trained_space(path: Path) -> str | None:
    """The vectors the model at ``path`` was trained against (``Embedder.vector_space``)."""
    return _manifest_text(path, "vectors")


def trained_catalog(path: Path) -> str | None:
    """The content hash (collection/hashing.py) of the catalog the model at ``path`` was
    trained for."""
    return _manifest_text(path, "catalog")


class QueryEncoder:
    """Queries -> L2-normalised float32 vectors through the adapted model."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._model: Any = None

    def load(self) -> None:
        if self._model is not None:
            return
        with self._lock:
            if self._model is not None:
                return
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            from pytest_searcheval.engine import lora
            from pytest_searcheval.engine.embed import default_model_path

            model = SentenceTransformer(str(default_model_path()), device="cpu")
            lora.merge(model[0].auto_model, self.path / WEIGHTS)
            model.eval()
            self._model = model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.load()
        return np.asarray(
            self._model.encode(
                list(texts), batch_size=64, normalize_embeddings=True, show_progress_bar=False
            ),
            dtype=np.float32,
        )


class RelevanceScorer:
    """The ``hybrid_rerank`` scorer: adapted query vector against the listings' stored vectors.

    ``vectors`` maps the texts it is given (the listings' embedding texts) to their stored
    vectors (the engine's embedder, cached); a listing without one scores ``-inf``.
    """

    def __init__(
        self, encoder: QueryEncoder, vectors: Callable[[Sequence[str]], list[Any]]
    ) -> None:
        self.encoder = encoder
        self.vectors = vectors

    def load(self) -> None:
        self.encoder.load()

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        q = self.encoder.encode([query])[0]
        return [
            float(np.dot(q, v)) if v is not None else float("-inf") for v in self.vectors(texts)
        ]
