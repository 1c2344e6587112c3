"""The reference engine: index a collection into an isolated PostgreSQL schema and search it.

Profiles (see docs/engine.md for formulas):

- ``lexical``: BM25F over the fields title, text, meta (tags/provider), url, tool, from the
  postings PostgreSQL stores, ranked from their in-memory copy (engine/postings.py);
- ``semantic``: all-MiniLM-L6-v2 cosine in pgvector (exact scan below
  ``DenseParams.exact_below`` documents, HNSW above);
- ``hybrid``: weighted RRF of the two (ranked over the unfiltered catalog) plus a bounded
  liveness/settlement prior and a title-match boost, times a term-stuffing factor, with
  near-duplicate groups collapsed; hard filters and tombstones then restrict the list;
- ``hybrid_rerank``: the hybrid top ``rerank_depth`` reordered by the relevance model (by
  default the packaged one, engine/relevance.py; a configured cross-encoder otherwise).

:class:`Engine` is three parts, one per concern: its life here (start, open, close, clone,
scratch copies, health and description), its writes (engine/writes.py: seed, upsert, delete,
reindex, the HNSW index) and its reads (engine/reads.py: search, the listing pages, threshold
samples and calibration). What they use lives beside them: settings (engine/settings.py),
documents and their rows (engine/documents.py), the in-memory catalog (engine/catalog.py), the
profile pipelines (engine/search.py), hard filters (engine/restrict.py), the no-result decision
(engine/decision.py) and its calibration (engine/calibrate.py), the reranker
(engine/rerank.py, with the packaged relevance model of engine/relevance.py).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_searcheval.collection.model import Asset, Collection
from pytest_searcheval.engine import calibrate as calibration
from pytest_searcheval.engine import dense, documents
from pytest_searcheval.engine.catalog import Catalog
from pytest_searcheval.engine.documents import (
    INDEX_TABLES,
    document_from_record,
    embedding_text,
    rerank_text,
)
from pytest_searcheval.engine.embed import Embedder
from pytest_searcheval.engine.reads import EngineReads
from pytest_searcheval.engine.rerank import Reranker, configured_path, default_path
from pytest_searcheval.engine.settings import (
    MAX_LIMIT,
    PROFILES,
    EngineSettings,
    ProfileUnavailable,
    iter_profiles,
)
from pytest_searcheval.engine.writes import EngineWrites

if TYPE_CHECKING:
    from pytest_searcheval.engine.isolation import IsolatedSchema, RolledBackSchema

__all__ = [
    "INDEX_TABLES",
    "MAX_LIMIT",
    "PROFILES",
    "Engine",
    "EngineSettings",
    "ProfileUnavailable",
    "document_from_record",
    "embedding_text",
    "iter_profiles",
    "rerank_text",
]


class _ServerRef:
    """Shared server handle: clones use their parent's server; the last close stops it."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.count = 1
        self.lock = threading.Lock()

    def acquire(self) -> _ServerRef:
        with self.lock:
            self.count += 1
        return self

    def release(self) -> None:
        with self.lock:
            self.count -= 1
            last = self.count == 0
        if last:
            self.server.stop()


def _import_model_runtime() -> None:
    """Import torch and sentence-transformers before the server starts. A stop signal that
    lands while torch's import is running aborts the process (SIGABRT, no Python handler
    runs); with a server already started that left its directory and its postgres behind
    (measured: SIGINT as the server directory appeared, 3 of 7 runs)."""
    import importlib

    for name in ("torch", "sentence_transformers"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


class Engine(EngineWrites, EngineReads):
    """See the module docstring. Build with :meth:`start`; use as a context manager. The
    writes are :class:`engine.writes.EngineWrites`, the searches
    :class:`engine.reads.EngineReads`; this class holds the engine's life."""

    def __init__(
        self,
        *,
        server: _ServerRef,
        schema: IsolatedSchema | RolledBackSchema,
        settings: EngineSettings,
        embedder: Embedder,
        reranker: Reranker,
        assets: Sequence[Asset],
        owns_embedder: bool = True,
    ) -> None:
        self._server = server
        self.schema = schema
        self.settings = settings
        self.embedder = embedder
        self.reranker = reranker
        self.assets = list(assets)
        self._owns_embedder = owns_embedder
        self.catalog = Catalog()
        #: the lexical half of a fused query runs here while the caller encodes the query
        self.lexical_pool = ThreadPoolExecutor(
            max_workers=max(1, settings.pool_max // 2), thread_name_prefix="searcheval-lexical"
        )
        self._write_lock = threading.RLock()
        self._hnsw = False
        self._recall: dict[str, Any] | None = None
        self._recall_queries: list[str] = []
        #: live or tombstoned listing id -> why it has no stored embedding (engine/writes.py)
        self._unembedded: Mapping[str, str] = {}
        #: embedding counts of the last write that embedded (seed, upsert, reindex)
        self.embedding_write: dict[str, Any] | None = None
        self.timings: dict[str, float] = {}
        self.calibration: dict[str, Any] = {"status": "rules from settings"}
        self._closed = False
        self.versions: dict[str, str | None] = {}
        #: open :meth:`scratch` copies, closed before this engine closes
        self._scratches: weakref.WeakSet[Engine] = weakref.WeakSet()

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        collection: Collection,
        *,
        dsn: str | None = None,
        settings: EngineSettings | None = None,
        embedder: Embedder | None = None,
    ) -> Engine:
        """Open a server (``dsn`` > ``$SEARCHEVAL_DSN`` > embedded), an isolated schema, and
        index ``collection``. ``embedder`` lets several engines share one model and cache."""
        from pytest_searcheval.engine import db

        settings = settings or EngineSettings()
        t0 = time.perf_counter()
        _import_model_runtime()
        server = _ServerRef(db.open_server(dsn))
        try:
            engine = cls._open(server, collection.assets, settings, embedder)
        except BaseException:
            server.release()
            raise
        engine.timings["server_seconds"] = time.perf_counter() - t0
        try:
            engine._recall_queries = [q.text for q in collection.queries.values()]
            engine._seed(list(collection.documents.values()))
            engine.reranker.check_catalog(collection.documents)
            if engine.reranker.unavailable is None:
                engine.reranker.load()  # a model that fails to load says so now, not at a query
            if settings.no_result is None:
                rules_file = os.environ.get(calibration.RULES_ENV)
                if rules_file:
                    calibration.use_rules_file(engine, rules_file)
                else:
                    calibration.auto_calibrate(engine, collection)
        except BaseException:
            engine.close()
            raise
        return engine

    @classmethod
    def _open(
        cls,
        server: _ServerRef,
        assets: Sequence[Asset],
        settings: EngineSettings,
        embedder: Embedder | None,
        reranker: Reranker | None = None,
    ) -> Engine:
        """``reranker``: share this one (a clone's); by default a new one, not yet loaded."""
        import psycopg

        from pytest_searcheval.engine import db
        from pytest_searcheval.engine.isolation import IsolatedSchema

        owns = embedder is None
        if embedder is None:
            embedder = Embedder(
                Path(settings.model_path) if settings.model_path else None,
                cache_dir=Path(settings.cache_dir) if settings.cache_dir else None,
                batch_size=settings.embed_batch,
            )
        dsn = server.server.dsn
        schema = IsolatedSchema(
            dsn,
            params={"embedding_dim": embedder.dimensions},
            pool_max=settings.pool_max,
            on_connect=dense.register_vector,
            wait_seconds=settings.db_wait_seconds,
            query_seconds=settings.db_query_seconds,
        )
        schema.open()
        try:
            if reranker is None:
                reranker = Reranker(
                    default_path(configured_path(settings.reranker_path)),
                    vectors=embedder.embed,
                    space=embedder.vector_space,
                )
            engine = cls(
                server=server,
                schema=schema,
                settings=settings,
                embedder=embedder,
                reranker=reranker,
                assets=assets,
                owns_embedder=owns,
            )
            with psycopg.connect(dsn, **db.connection_kwargs(dsn)) as conn:
                engine.versions = db.server_versions(conn)
        except BaseException:
            schema.close()
            raise
        engine.timings.update(schema.timings)
        return engine

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop the run schema, release the server (stopped if embedded and last), close cache."""
        if self._closed:
            return
        self._closed = True
        for copy in list(self._scratches):
            copy.close()
        self.lexical_pool.shutdown(wait=True)
        try:
            self.schema.close()
            if not self._owns_schema():
                # The rolled-back rows stay in the engine's tables as dead tuples, which slow
                # its searches (7.8 to 19.8 ms median after three copies' churn) until vacuumed.
                documents.vacuum_tables(self.dsn, self.schema_name)
        finally:
            try:
                if self._owns_embedder:
                    self.embedder.close()
            finally:
                self._server.release()

    @property
    def schema_name(self) -> str:
        return self.schema.name

    @property
    def dsn(self) -> str:
        return str(self.schema.dsn)

    @property
    def hnsw(self) -> bool:
        """True when dense search walks the HNSW graph (catalog at or above ``exact_below``)."""
        return self._hnsw

    def clone(self) -> Engine:
        """A new engine on a new isolated schema with a copy of this one's tables (same server)."""
        source = self._own_schema("clone")
        server = self._server.acquire()
        try:
            clone = Engine._open(
                server, self.assets, self.settings, self.embedder, reranker=self.reranker
            )
        except BaseException:
            server.release()
            raise
        clone.calibration = self.calibration
        clone._recall_queries = self._recall_queries
        clone._unembedded = self._unembedded
        clone.embedding_write = self.embedding_write
        try:
            with self._write_lock, clone.schema.connection() as conn:
                documents.copy_tables(conn, source.name, clone.schema_name)
                # A version is never changed, so the clone starts from this one's and its
                # writes build versions of their own.
                clone.catalog = self.catalog
                clone._maybe_hnsw(conn)
        except BaseException:
            clone.close()
            raise
        return clone

    def _owns_schema(self) -> bool:
        from pytest_searcheval.engine.isolation import IsolatedSchema

        return isinstance(self.schema, IsolatedSchema)

    def _own_schema(self, what: str) -> IsolatedSchema:
        from pytest_searcheval.engine.isolation import IsolatedSchema, IsolationError

        if not isinstance(self.schema, IsolatedSchema):  # a scratch copy's view
            # Its writes live in one uncommitted transaction that no other connection sees.
            raise IsolationError(f"cannot {what} a scratch copy; {what} its engine instead")
        return self.schema

    def scratch(self) -> Engine:
        """A private copy of this engine that costs no copying: this engine's schema seen
        through one connection in a transaction that :meth:`close` rolls back (see
        engine/isolation.py, :class:`RolledBackSchema`). It answers, and changes, exactly as a
        :meth:`clone` would; nothing it writes is ever seen by this engine or committed.

        Meant for short-lived checks: while it is open, this engine's writes to the rows it
        changed and its DDL (HNSW build or drop, :meth:`close`) wait for it, so this engine
        closes its open scratch copies first. With an HNSW index (a catalog at or above
        ``exact_below``) this is a :meth:`clone`, since dropping that index in a re-index
        would lock this engine's readers out until the copy closes.
        """
        if self._hnsw:
            return self.clone()
        from pytest_searcheval.engine.isolation import RolledBackSchema

        view = RolledBackSchema(self._own_schema("scratch")).open()
        try:
            copy = type(self)(
                server=self._server.acquire(),
                schema=view,
                settings=self.settings,
                embedder=self.embedder,
                reranker=self.reranker,
                assets=self.assets,
                owns_embedder=False,
            )
        except BaseException:
            view.close()
            raise
        copy.versions = dict(self.versions)
        copy.calibration = self.calibration
        copy._recall_queries = self._recall_queries
        copy._unembedded = self._unembedded  # replaced, never changed, by a write
        copy.embedding_write = self.embedding_write
        copy.catalog = self.catalog  # shared as a clone shares it
        self._scratches.add(copy)
        return copy

    # -- describing -----------------------------------------------------------------------------

    def profiles(self, catalog: Catalog | None = None) -> dict[str, str | None]:
        """Profile name -> None when usable, else the reason it is unavailable (for the
        catalog version given, by default the current one)."""
        catalog = self.catalog if catalog is None else catalog
        semantic: str | None = None
        counts = self.embedding_counts(catalog)
        if counts["listings"] and not counts["embedded"]:
            semantic = "every document embedding failed"
        return {
            "lexical": None,
            "semantic": semantic,
            "hybrid": semantic,
            "hybrid_rerank": semantic or self.reranker.unavailable,
        }

    def model_info(self) -> dict[str, Any]:
        return self.embedder.info()

    def health(self) -> dict[str, Any]:
        """What ``/healthz`` reports, at the cost of one round trip: raises (within the
        connection wait, about a second) when the database is down, within the query bound
        (``IsolatedSchema.query_seconds``) when it hangs, and when the run's schema is gone
        (dropped by someone else: every search would fail)."""
        from pytest_searcheval.engine.isolation import IsolationError

        with self.schema.connection(bounded=True) as conn:
            row = conn.execute(
                "SELECT to_regnamespace(%s) IS NOT NULL", (self.schema_name,)
            ).fetchone()
        if not (row and row[0]):
            raise IsolationError(f"the run schema {self.schema_name} is gone")
        catalog = self.catalog
        return {
            **self.versions,
            "model": self.model_info(),
            "documents": len(catalog.docs) - len(catalog.tombstones),
            "embeddings": self.embedding_counts(),
        }

    @property
    def database_hung(self) -> bool:
        """True while the server has stopped answering within a request's bound: the HTTP
        service then refuses database work it cannot start at once (engine/app.py)."""
        return bool(getattr(self.schema, "hung", False))

    def describe(self) -> dict[str, Any]:
        with self.schema.connection() as conn:
            counts = conn.execute(
                "SELECT (SELECT count(*) FROM documents WHERE deleted_at IS NULL),"
                " (SELECT count(*) FROM terms),"
                " (SELECT count(*) FROM embeddings),"
                " (SELECT count(*) FROM documents d JOIN embeddings e ON e.doc_id = d.id"
                "  WHERE d.deleted_at IS NULL)"
            ).fetchone()
        n_docs, n_postings, n_vectors, n_live_vectors = (
            counts if counts is not None else (0, 0, 0, 0)
        )
        return {
            "engine": "pytest-searcheval reference engine",
            "schema": self.schema_name,
            "server": getattr(self._server.server, "source", "unknown"),
            "reaped": list(getattr(self._server.server, "reaped", [])),
            **self.versions,
            "documents": int(n_docs),
            "tombstones": len(self.catalog.tombstones),
            "postings": int(n_postings),
            # the counts the writes kept, and the stored rows: every vector (tombstoned
            # listings' too) and those of live listings, which equal "embedded"
            "embeddings": {
                **self.embedding_counts(),
                "stored": int(n_vectors),
                "stored_live": int(n_live_vectors),
            },
            "model": self.model_info(),
            "embedding_cache": self.embedder.cache_info(),
            "analyzer": "nfkc+casefold, strip accents, split non-alphanumerics, stop, porter",
            "dense": {
                "mode": "hnsw" if self._hnsw else "exact",
                "hnsw_recall": self._recall,
            },
            "reranker": self.reranker.info(),
            "no_result": self.calibration,
            "profiles": self.profiles(),
            "settings": self.settings.as_dict(),
            "timings": {k: round(v, 4) for k, v in self._timings().items()},
        }

    def _timings(self) -> dict[str, float]:
        if not self.embedder.model_loaded:
            return self.timings
        return {**self.timings, "model_load_seconds": self.embedder.load_seconds}
