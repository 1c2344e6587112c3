"""Reranking of the hybrid candidate list (profile ``hybrid_rerank``).

The model is, by default, the engine's own relevance model (engine/relevance.py: the packaged
MiniLM's query side with a shipped adapter, scored against the listings' stored vectors). The
settings' ``reranker_path`` or the ``SEARCHEVAL_RERANKER`` environment variable name another: a
directory of that kind, or a ``sentence_transformers.CrossEncoder`` (whose score is the first
output of ``CrossEncoder.predict`` for (query, document text), i.e. after the model's
activation: a sigmoid for one-label models unless the model's config names another; MS MARCO
cross-encoders name the identity and return logits). ``none`` turns reranking off. Without a
model, or when loading fails, the profile is *unavailable* with the reason; it is never scored
as zero. The top ``depth`` hybrid candidates are reordered, the tail keeps its hybrid order
below them.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

ENV_VAR = "SEARCHEVAL_RERANKER"
#: the value of ``reranker_path`` / ``SEARCHEVAL_RERANKER`` that turns reranking off
OFF = "none"


def configured_path(setting: str | os.PathLike[str] | None) -> Path | None:
    """The configured model directory; None for the default (the packaged model). ``none``
    comes back as ``Path("none")``, which :class:`Reranker` reads as off."""
    if setting is not None:
        return Path(setting)
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else None


def default_path(configured: Path | None) -> Path | None:
    """What to load: the configured directory (``Path("none")``: off), else the packaged
    relevance model (None when this install ships none)."""
    if configured is not None:
        return configured
    from pytest_searcheval.engine.relevance import packaged_path

    return packaged_path()


def _fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    for weights in sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin")):
        st = weights.stat()
        digest.update(f"{weights.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def relevance_mismatch(path: Path, vectors: Any, space: str | None) -> str | None:
    """Why the relevance model at ``path`` cannot score the engine's vectors (None: it can)."""
    from pytest_searcheval.engine.relevance import trained_space

    if vectors is None or space is None:
        return f"the relevance model at {path} needs the engine's vectors"
    want = trained_space(path)
    if want != space:
        return (
            f"the relevance model at {path} scores against {want} vectors, the engine embeds "
            f"with {space} (set {ENV_VAR} to a model for them, or to {OFF})"
        )
    return None


class Reranker:
    """Lazy CrossEncoder; ``unavailable`` is None when usable, else the reason."""

    def __init__(
        self,
        path: Path | None,
        *,
        max_length: int = 256,
        batch_size: int = 32,
        vectors: Any = None,
        space: str | None = None,
    ) -> None:
        """``vectors``: texts -> the engine's stored vectors (its embedder's ``embed``), which a
        relevance-model directory scores against, and ``space`` what they are comparable with
        (``Embedder.vector_space``): a relevance model trained against other vectors, or none
        given, is unavailable."""
        self.path = path
        self.max_length = max_length
        self.batch_size = batch_size
        self.vectors = vectors
        self._model: Any = None
        self._lock = threading.Lock()
        self.unavailable: str | None = None
        #: which text of a listing the model reads: "rerank" (title. text) or "embedding"
        self.reads = "rerank"
        self.kind = "cross-encoder"
        from pytest_searcheval.engine.relevance import PACKAGED

        #: the model shipped in the package (the default), not one configured by path
        self.packaged = path is not None and path.resolve() == PACKAGED
        if path is None:
            self.unavailable = (
                f"no cross-encoder configured (set EngineSettings.reranker_path or {ENV_VAR})"
            )
        elif str(path) == OFF:
            self.unavailable = (
                f"reranking is off ({ENV_VAR} or EngineSettings.reranker_path is {OFF})"
            )
        elif not path.is_dir():
            self.unavailable = f"reranker path {path} does not exist or is not a directory"
        else:
            from pytest_searcheval.engine.relevance import is_relevance_model

            if is_relevance_model(path):
                self.kind, self.reads = "relevance-model", "embedding"
                self.unavailable = relevance_mismatch(path, vectors, space)

    def check_catalog(self, documents: Mapping[str, Any]) -> None:
        """The packaged relevance model serves only the catalog it was trained for: on any
        other corpus (a held-out capability costs it ranking, docs/engine.md) it is unavailable
        with the reason. A model configured by path is the user's choice and is not checked."""
        if self.unavailable is not None or not self.packaged:
            return
        from pytest_searcheval.collection.hashing import hash_documents
        from pytest_searcheval.engine.relevance import trained_catalog

        assert self.path is not None
        want = trained_catalog(self.path)
        if want is not None and hash_documents(documents) != want:
            self.unavailable = (
                "the packaged relevance model was trained for the shipped catalog, not this "
                f"corpus (train one with construction/relevance_train.py and set {ENV_VAR})"
            )

    def info(self) -> dict[str, Any]:
        return {
            "path": str(self.path) if self.path else None,
            "kind": self.kind,
            "fingerprint": _fingerprint(self.path) if self.path and self.path.is_dir() else None,
            "unavailable": self.unavailable,
        }

    def load(self) -> None:
        """Load the model now; records the failure reason instead of raising."""
        if self._model is not None or self.unavailable is not None:
            return
        with self._lock:
            if self._model is not None:
                return
            try:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                assert self.path is not None
                if self.kind == "relevance-model":
                    from pytest_searcheval.engine.relevance import QueryEncoder, RelevanceScorer

                    scorer = RelevanceScorer(QueryEncoder(self.path), self.vectors)
                    scorer.load()
                    self._model = scorer
                    return
                from sentence_transformers import CrossEncoder

                self._model = CrossEncoder(str(self.path), device="cpu", max_length=self.max_length)
            except Exception as exc:
                self.unavailable = f"cross-encoder at {self.path} failed to load: {exc}"

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.load()
        if self.unavailable is not None:
            raise RuntimeError(self.unavailable)
        if not texts:
            return []
        if self.kind == "relevance-model":
            return list(self._model.score(query, texts))
        raw = self._model.predict(
            [(query, t) for t in texts],
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return [float(x) for x in raw.reshape(len(texts), -1)[:, 0]]


class Scorer(Protocol):
    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


#: the rank constant of the head's fusion when ``mix`` < 1 (as the hybrid fusion's k)
MIX_K = 20


def rerank_head(
    reranker: Scorer,
    query: str,
    ranked: Sequence[tuple[str, float]],
    passages: Mapping[str, str],
    *,
    depth: int,
    mix: float = 1.0,
) -> tuple[list[tuple[str, float]], dict[str, float]]:
    """(``ranked`` with its top ``depth`` reordered, head id -> the model's score).

    ``mix`` 1 orders the head by the model's score; below 1 by the weighted reciprocal ranks
    ``mix / (MIX_K + model rank) + (1 - mix) / (MIX_K + hybrid rank)``, which keeps part of the
    hybrid order (the ranking's scores are then those). ``passages`` holds the text of each
    head listing (one missing from it leaves the head). Ties order by id; the tail keeps its
    order strictly below the reranked head.
    """
    head = [d for d, _ in ranked[:depth] if d in passages]
    scores = reranker.score(query, [passages[d] for d in head])
    by_model = sorted(zip(head, scores, strict=True), key=lambda x: (-x[1], x[0]))
    if mix >= 1.0:
        reranked = by_model
    else:
        model_rank = {d: r for r, (d, _) in enumerate(by_model, start=1)}
        fused = [
            (d, mix / (MIX_K + model_rank[d]) + (1.0 - mix) / (MIX_K + r))
            for r, d in enumerate(head, start=1)
        ]
        reranked = sorted(fused, key=lambda x: (-x[1], x[0]))
    finite = [v for _, v in reranked if v != float("-inf")]
    floor = min(finite, default=0.0)
    tail = [(d, floor - 1.0 - i) for i, (d, _) in enumerate(ranked[depth:])]
    return reranked + tail, dict(by_model)
