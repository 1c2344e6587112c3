"""Cross-encoder reranking of the hybrid candidate list (profile ``hybrid_rerank``).

The model is a ``sentence_transformers.CrossEncoder`` loaded from a local path: the settings'
``reranker_path`` or the ``SEARCHEVAL_RERANKER`` environment variable. Without one, or when loading
fails, the profile is *unavailable* with the reason; it is never scored as zero. The reranked
score is the first output of ``CrossEncoder.predict`` for (query, document text), i.e. after
the model's activation (a sigmoid for one-label models unless the model's config names
another; MS MARCO cross-encoders name the identity and return logits). The top ``depth``
hybrid candidates are reordered, the tail keeps its hybrid order below them.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

ENV_VAR = "SEARCHEVAL_RERANKER"


def configured_path(setting: str | os.PathLike[str] | None) -> Path | None:
    if setting is not None:
        return Path(setting)
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else None


def _fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    for weights in sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin")):
        st = weights.stat()
        digest.update(f"{weights.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


class Reranker:
    """Lazy CrossEncoder; ``unavailable`` is None when usable, else the reason."""

    def __init__(self, path: Path | None, *, max_length: int = 256, batch_size: int = 32) -> None:
        self.path = path
        self.max_length = max_length
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()
        self.unavailable: str | None = None
        if path is None:
            self.unavailable = (
                f"no cross-encoder configured (set EngineSettings.reranker_path or {ENV_VAR})"
            )
        elif not path.is_dir():
            self.unavailable = f"reranker path {path} does not exist or is not a directory"

    def info(self) -> dict[str, Any]:
        return {
            "path": str(self.path) if self.path else None,
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
        raw = self._model.predict(
            [(query, t) for t in texts],
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return [float(x) for x in raw.reshape(len(texts), -1)[:, 0]]


class Scorer(Protocol):
    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


def rerank_head(
    reranker: Scorer,
    query: str,
    ranked: Sequence[tuple[str, float]],
    passages: Mapping[str, str],
    *,
    depth: int,
) -> tuple[list[tuple[str, float]], dict[str, float]]:
    """(``ranked`` with its top ``depth`` reordered by the cross-encoder, head id -> score).

    ``passages`` holds the text of each head listing (one missing from it leaves the head).
    Ties order by id; the tail keeps its order strictly below the reranked head.
    """
    head = [d for d, _ in ranked[:depth] if d in passages]
    scores = reranker.score(query, [passages[d] for d in head])
    reranked = sorted(zip(head, scores, strict=True), key=lambda x: (-x[1], x[0]))
    floor = min(scores, default=0.0)
    tail = [(d, floor - 1.0 - i) for i, (d, _) in enumerate(ranked[depth:])]
    return reranked + tail, dict(reranked)
