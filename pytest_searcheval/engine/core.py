"""The reference engine: index a collection into an isolated PostgreSQL schema and search it.

Profiles (see docs/engine.md for formulas):

- ``lexical``: BM25F in SQL over the fields title, text, meta (tags/provider), url, tool;
- ``semantic``: all-MiniLM-L6-v2 cosine in pgvector (exact scan below
  ``DenseParams.exact_below`` documents, HNSW above);
- ``hybrid``: weighted RRF of the two (ranked over the unfiltered catalog) plus a bounded
  liveness/settlement prior and a title-match boost, times a term-stuffing factor, with
  near-duplicate groups collapsed; hard filters and tombstones then restrict the list;
- ``hybrid_rerank``: the hybrid top ``rerank_depth`` reordered by a configured cross-encoder.

Every response carries the model identity and the no-result decision. Hard filters are the
x402 layer's SQL predicate (engine/x402.py); query constraint extraction is engine/extract.py.
``delete`` tombstones a listing (statistics keep it until ``reindex``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_searcheval.collection.model import Asset, Collection, Document
from pytest_searcheval.engine import bm25, dedup, dense, fusion, index, threshold, title
from pytest_searcheval.engine.bm25 import BM25FParams
from pytest_searcheval.engine.dense import DenseParams
from pytest_searcheval.engine.embed import Embedder
from pytest_searcheval.engine.fusion import FusionParams
from pytest_searcheval.engine.rerank import Reranker, configured_path
from pytest_searcheval.engine.threshold import NoResultRule

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

    from pytest_searcheval.engine.isolation import IsolatedSchema

PROFILES: tuple[str, ...] = ("lexical", "semantic", "hybrid", "hybrid_rerank")
MAX_LIMIT = 1000
#: the engine's data tables (engine/migrations), in foreign-key order for copying
INDEX_TABLES: tuple[str, ...] = (
    "documents",
    "payment_options",
    "extensions",
    "terms",
    "doc_lengths",
    "field_stats",
    "embeddings",
)


class ProfileUnavailable(RuntimeError):
    """The profile cannot serve (e.g. no cross-encoder configured); the message says why."""


@dataclass(frozen=True)
class EngineSettings:
    """Everything that changes a ranking. Frozen; ``describe()`` reports it verbatim."""

    bm25: BM25FParams = field(default_factory=BM25FParams)
    dense: DenseParams = field(default_factory=DenseParams)
    fusion: FusionParams = field(default_factory=FusionParams)
    dedup: dedup.DedupParams = field(default_factory=dedup.DedupParams)
    #: per-profile no-result rules (an absent profile is never cut; ``{}`` disables the cut).
    #: ``None``: fit them at start on the collection's dev split (``Engine.calibrate``) when it
    #: has both no-result and answerable queries, else no cut.
    no_result: Mapping[str, NoResultRule] | None = None
    #: answerable dev queries the automatic calibration may suppress, as a share.
    max_answerable_loss: float = 0.02
    reranker_path: str | None = None
    rerank_depth: int = 30
    model_path: str | None = None
    cache_dir: str | None = None
    embed_batch: int = 64
    pool_max: int = 4
    #: measure HNSW recall@10 against exact on this many sampled queries when HNSW is built.
    recall_sample: int = 50

    def with_no_result(self, rules: Mapping[str, NoResultRule]) -> EngineSettings:
        return dataclasses.replace(self, no_result=dict(rules))

    def as_dict(self) -> dict[str, Any]:
        return {
            "bm25": {
                "k1": self.bm25.k1,
                "weights": dict(self.bm25.weights),
                "b": dict(self.bm25.b),
            },
            "dense": dataclasses.asdict(self.dense),
            "fusion": {
                "k": self.fusion.k,
                "weights": dict(self.fusion.weights),
                "prior_gamma": self.fusion.prior_gamma,
                "depth": self.fusion.depth,
                "candidate_depth": self.fusion.candidate_depth,
                "title_weight": self.fusion.title_weight,
                "title_threshold": self.fusion.title_threshold,
                "title_depth": self.fusion.title_depth,
            },
            "dedup": dataclasses.asdict(self.dedup),
            "no_result": None
            if self.no_result is None
            else {p: dataclasses.asdict(r) for p, r in sorted(self.no_result.items())},
            "max_answerable_loss": self.max_answerable_loss,
            "reranker_path": self.reranker_path,
            "rerank_depth": self.rerank_depth,
        }


# --- documents ------------------------------------------------------------------------------


def document_from_record(record: Mapping[str, Any] | Document) -> Document:
    """A :class:`Document` from a JSON record (``PUT /admin/resources/{id}`` body) or as is."""
    if isinstance(record, Document):
        return record
    doc_id = record.get("id")
    if not isinstance(doc_id, str) or not doc_id:
        raise ValueError("document record: field 'id': expected a non-empty string")
    for key in ("title", "text"):
        if not isinstance(record.get(key, ""), str):
            raise ValueError(f"document {doc_id}: field {key!r}: expected a string")
    for key in ("fields", "sidecar"):
        if not isinstance(record.get(key) or {}, Mapping):
            raise ValueError(f"document {doc_id}: field {key!r}: expected an object")
    x402 = record.get("x402")
    if x402 is not None and not isinstance(x402, Mapping):
        raise ValueError(f"document {doc_id}: field 'x402': expected an object or null")
    return Document(
        id=doc_id,
        title=str(record.get("title") or ""),
        text=str(record.get("text") or ""),
        fields=dict(record.get("fields") or {}),
        x402=dict(x402) if x402 is not None else None,
        sidecar=dict(record.get("sidecar") or {}),
    )


def embedding_text(doc: Document) -> str:
    """What the bi-encoder sees: title, description, tags/provider, MCP tool name."""
    texts = index.field_texts(doc.title, doc.text, doc.fields, doc.x402)
    parts = [texts["title"], texts["text"], texts["meta"], texts["tool"]]
    return "\n".join(p for p in parts if p.strip())


def rerank_text(doc: Document) -> str:
    """What the cross-encoder of ``hybrid_rerank`` reads beside the query."""
    return f"{doc.title}. {doc.text}"


def _resource(doc: Document) -> dict[str, Any]:
    if doc.x402 is not None:
        return dict(doc.x402)
    return {"title": doc.title}


# --- the x402 layer (engine/x402.py, engine/extract.py) ---------------------------------------


def _module(name: str) -> Any:
    """engine/x402.py or engine/extract.py, or None while a build ships without them."""
    import importlib

    try:
        return importlib.import_module(f"pytest_searcheval.engine.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"pytest_searcheval.engine.{name}":
            raise
        return None


def _option_rows(doc: Document, assets: Sequence[Asset]) -> list[Mapping[str, Any]]:
    x402 = _module("x402")
    if doc.x402 is None or x402 is None:
        return []
    return list(x402.option_rows(doc, assets))


def _extension_names(doc: Document) -> list[str]:
    ext = (doc.x402 or {}).get("extensions")
    return sorted(str(k) for k in ext) if isinstance(ext, Mapping) else []


# --- the engine ----------------------------------------------------------------------------


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


class Engine:
    """See the module docstring. Build with :meth:`start`; use as a context manager."""

    def __init__(
        self,
        *,
        server: _ServerRef,
        schema: IsolatedSchema,
        settings: EngineSettings,
        embedder: Embedder,
        reranker: Reranker,
        assets: Sequence[Asset],
        owns_embedder: bool = True,
    ) -> None:
        self._server = server
        self._schema = schema
        self.settings = settings
        self.embedder = embedder
        self.reranker = reranker
        self.assets = list(assets)
        self._owns_embedder = owns_embedder
        #: every indexed row, tombstoned ones included (they still count in the statistics)
        self._docs: dict[str, Document] = {}
        #: deleted ids awaiting ``reindex()``: removed from every result, kept in statistics
        self._tombstones: set[str] = set()
        self._titles = title.TitleIndex()
        self._groups = dedup.DuplicateGroups()
        self._stuffing: dict[str, float] = {}
        #: order in which each id was first indexed (kept across reindex): the collapse tie-break
        self._seq: dict[str, int] = {}
        self._priors: dict[str, float] = {}
        self._df_cache: dict[str, int] = {}
        self._filter_cache: dict[tuple[tuple[str, str], ...], frozenset[str]] = {}
        #: every indexed id in order (the listing order of ``list_resources``), until a write
        self._sorted_ids: list[str] | None = None
        self._executor = ThreadPoolExecutor(
            max_workers=max(1, settings.pool_max // 2), thread_name_prefix="searcheval-lexical"
        )
        self._write_lock = threading.RLock()
        self._hnsw = False
        self._recall: dict[str, Any] | None = None
        self._recall_queries: list[str] = []
        self.timings: dict[str, float] = {}
        self.calibration: dict[str, Any] = {"status": "rules from settings"}
        self._closed = False
        self.versions: dict[str, str | None] = {}

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
            if settings.no_result is None:
                engine._auto_calibrate(collection)
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
    ) -> Engine:
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
            dsn, params={"embedding_dim": embedder.dimensions}, pool_max=settings.pool_max
        )
        schema.open()
        try:
            reranker = Reranker(configured_path(settings.reranker_path))
            if reranker.unavailable is None:
                reranker.load()
            engine = cls(
                server=server,
                schema=schema,
                settings=settings,
                embedder=embedder,
                reranker=reranker,
                assets=assets,
                owns_embedder=owns,
            )
            with psycopg.connect(dsn) as conn:
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
        self._executor.shutdown(wait=True)
        try:
            self._schema.close()
        finally:
            try:
                if self._owns_embedder:
                    self.embedder.close()
            finally:
                self._server.release()

    @property
    def schema_name(self) -> str:
        return self._schema.name

    @property
    def dsn(self) -> str:
        return str(self._schema.dsn)

    # -- indexing -------------------------------------------------------------------------------

    def _seed(self, docs: Sequence[Document]) -> None:
        t0 = time.perf_counter()
        vectors = self.embedder.embed([embedding_text(d) for d in docs])
        t1 = time.perf_counter()
        with self._write_lock, self._schema.connection() as conn:
            with conn.transaction():
                self._write(conn, docs, vectors)
                self._refresh_stats(conn)
            t2 = time.perf_counter()
            for doc in docs:
                self._docs[doc.id] = doc
                self._titles.add(doc.id, doc.title)
            self._refresh_priors()
            self._index_adversarial(conn, docs)
            self._maybe_hnsw(conn)
        self.timings.update(
            embed_seconds=t1 - t0, write_seconds=t2 - t1, index_seconds=time.perf_counter() - t0
        )

    def _write(
        self,
        conn: psycopg.Connection[Any],
        docs: Sequence[Document],
        vectors: Sequence[Any],
    ) -> None:
        if not docs:
            return
        with conn.cursor() as cur:
            with cur.copy(
                "COPY documents (id, title, body, fields, x402, sidecar, doc_type, liveness,"
                " settlements) FROM STDIN"
            ) as cp:
                for d in docs:
                    settlements = d.sidecar.get("settlements")
                    cp.write_row(
                        (
                            d.id,
                            d.title,
                            d.text,
                            json.dumps(d.fields),
                            None if d.x402 is None else json.dumps(d.x402),
                            json.dumps(d.sidecar),
                            (d.x402 or {}).get("type") if d.x402 is not None else None,
                            d.sidecar.get("liveness"),
                            settlements if isinstance(settlements, int) else None,
                        )
                    )
            option_rows = [(d, _option_rows(d, self.assets)) for d in docs if d.x402 is not None]
            columns: list[str] | None = None
            for _, rows in option_rows:
                if rows:
                    columns = list(rows[0].keys())
                    break
            if columns is not None:
                from psycopg import sql as _sql

                stmt = _sql.SQL("COPY payment_options ({}) FROM STDIN").format(
                    _sql.SQL(", ").join(_sql.Identifier(c) for c in columns)
                )
                with cur.copy(stmt) as cp:
                    for _, opts in option_rows:
                        for opt in opts:
                            cp.write_row(tuple(_copy_value(opt.get(c)) for c in columns))
            with cur.copy("COPY extensions (doc_id, name) FROM STDIN") as cp:
                for d in docs:
                    for name in _extension_names(d):
                        cp.write_row((d.id, name))
            with (
                cur.copy("COPY terms (doc_id, field, term, tf) FROM STDIN") as cp_terms,
            ):
                lengths: list[tuple[str, str, int]] = []
                for d in docs:
                    per_field = index.field_terms(
                        index.field_texts(d.title, d.text, d.fields, d.x402)
                    )
                    for fname, counts in per_field.items():
                        lengths.append((d.id, fname, sum(counts.values())))
                        for term, tf in counts.items():
                            cp_terms.write_row((d.id, fname, term, tf))
            with cur.copy("COPY doc_lengths (doc_id, field, len) FROM STDIN") as cp:
                for row in lengths:
                    cp.write_row(row)
            with cur.copy("COPY embeddings (doc_id, model, embedding) FROM STDIN") as cp:
                for d, vec in zip(docs, vectors, strict=True):
                    if vec is not None:
                        cp.write_row((d.id, self.embedder.model_id, dense.vector_literal(vec)))

    def _refresh_stats(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute("DELETE FROM field_stats")
        conn.execute(
            "INSERT INTO field_stats (field, doc_count, total_len)"
            " SELECT field, count(*), sum(len) FROM doc_lengths GROUP BY field"
        )
        conn.execute("ANALYZE terms")
        conn.execute("ANALYZE doc_lengths")

    def _refresh_priors(self) -> None:
        # Every write path that changes statistics or options ends here, so the memos are
        # invalidated with it (a delete changes neither: tombstones are applied separately).
        self._df_cache = {}
        self._filter_cache = {}
        self._sorted_ids = None
        top = fusion.max_settlements([d.sidecar for d in self._docs.values()])
        self._priors = {i: fusion.prior_signal(d.sidecar, top) for i, d in self._docs.items()}

    def _index_adversarial(self, conn: psycopg.Connection[Any], docs: Sequence[Document]) -> None:
        """Stuffing penalties and near-duplicate groups for ``docs`` (engine/dedup.py)."""
        params = self.settings.dedup
        for doc in docs:
            self._seq.setdefault(doc.id, len(self._seq))
            self._stuffing[doc.id] = dedup.stuffing_penalty(doc.title, doc.text, params)
        if not params.collapse:
            return

        def vectors(ids: Sequence[str]) -> dict[str, Any]:
            import numpy as np

            rows = conn.execute(
                "SELECT doc_id, embedding::text FROM embeddings WHERE doc_id = ANY(%s)",
                (list(ids),),
            ).fetchall()
            out: dict[str, Any] = {}
            for doc_id, text in rows:
                vec = np.asarray(json.loads(text), dtype=np.float64)
                norm = float(np.linalg.norm(vec))
                if norm > 0:
                    out[str(doc_id)] = vec / norm
            return out

        self._groups.update([d.id for d in docs], {d.id: d.title for d in docs}, vectors, params)
        self._groups.assign(self._establishment)

    def _establishment(self, doc_id: str) -> tuple[int, int, float, int, str]:
        doc = self._docs[doc_id]
        resource = (doc.x402 or {}).get("resource")
        provider = doc.fields.get("provider")
        owner = dedup.owns_name(
            doc.title,
            resource if isinstance(resource, str) else None,
            provider if isinstance(provider, str) else None,
        )
        return dedup.establishment(doc.sidecar, self._seq.get(doc_id, 0), doc_id, owner)

    def _maybe_hnsw(self, conn: psycopg.Connection[Any]) -> None:
        if len(self._docs) < self.settings.dense.exact_below:
            if self._hnsw:
                dense.drop_hnsw(conn)
                conn.commit()
                self._hnsw = False
                self._recall = None
            return
        if not self._hnsw:
            seconds = dense.ensure_hnsw(conn, self.settings.dense)
            conn.commit()
            self._hnsw = True
            self.timings["hnsw_build_seconds"] = seconds
            self._recall = None
            if self.settings.recall_sample > 0:
                self.measure_hnsw_recall(sample=self.settings.recall_sample)

    def upsert(self, record: Mapping[str, Any] | Document) -> None:
        """Insert or replace one document (postings, options, embedding, statistics)."""
        doc = document_from_record(record)
        vec = self.embedder.embed([embedding_text(doc)])
        with self._write_lock, self._schema.connection() as conn:
            with conn.transaction():
                conn.execute("DELETE FROM documents WHERE id = %s", (doc.id,))
                self._write(conn, [doc], vec)
                self._refresh_stats(conn)
            self._docs[doc.id] = doc
            self._titles.add(doc.id, doc.title)
            self._tombstones.discard(doc.id)
            self._refresh_priors()
            self._index_adversarial(conn, [doc])
            self._maybe_hnsw(conn)

    def delete(self, doc_id: str) -> bool:
        """Tombstone a document: gone from every result at once. True if it was live.

        The row and its postings, lengths and embedding stay, so N, df, average field lengths,
        priors and the candidate ranks of every other listing are unchanged: deleting one
        listing cannot move an unrelated one. ``reindex()`` purges tombstones and recomputes.
        """
        with self._write_lock, self._schema.connection() as conn:
            with conn.transaction():
                cur = conn.execute(
                    "UPDATE documents SET deleted_at = now() WHERE id = %s AND deleted_at IS NULL",
                    (doc_id,),
                )
                existed = cur.rowcount > 0
            if existed:
                self._tombstones.add(doc_id)
        return existed

    def reindex(self) -> None:
        """Rebuild every index table from the live documents: purges tombstones, recomputes
        statistics, priors and (above the size threshold) the HNSW graph."""
        with self._write_lock:
            docs = [d for i, d in self._docs.items() if i not in self._tombstones]
            with self._schema.connection() as conn, conn.transaction():
                conn.execute("DELETE FROM documents")
                if self._hnsw:
                    dense.drop_hnsw(conn)
            self._hnsw = False
            self._docs.clear()
            self._tombstones.clear()
            self._titles.clear()
            self._groups.clear()
            self._stuffing.clear()
            self._seed(docs)

    def clone(self) -> Engine:
        """A new engine on a new isolated schema with a copy of this one's tables (same server)."""
        from psycopg import sql as _sql

        server = self._server.acquire()
        try:
            clone = Engine._open(server, self.assets, self.settings, self.embedder)
        except BaseException:
            server.release()
            raise
        clone.calibration = self.calibration
        clone._recall_queries = self._recall_queries
        try:
            with self._write_lock, clone._schema.connection() as conn:
                with conn.transaction():
                    for table in INDEX_TABLES:
                        conn.execute(
                            _sql.SQL("INSERT INTO {} SELECT * FROM {}").format(
                                _sql.Identifier(clone.schema_name, table),
                                _sql.Identifier(self.schema_name, table),
                            )
                        )
                # A bare ANALYZE would analyse every table of the database, the user's too.
                for table in INDEX_TABLES:
                    conn.execute(
                        _sql.SQL("ANALYZE {}").format(_sql.Identifier(clone.schema_name, table))
                    )
                clone._docs = dict(self._docs)
                clone._tombstones = set(self._tombstones)
                clone._titles = self._titles.copy()
                clone._groups = self._groups.copy()
                clone._stuffing = dict(self._stuffing)
                clone._seq = dict(self._seq)
                clone._refresh_priors()
                clone._maybe_hnsw(conn)
        except BaseException:
            clone.close()
            raise
        return clone

    # -- describing -----------------------------------------------------------------------------

    def profiles(self) -> dict[str, str | None]:
        """Profile name -> None when usable, else the reason it is unavailable."""
        semantic: str | None = None
        if self._docs and self.embedder.stats.failures >= len(self._docs) - len(self._tombstones):
            semantic = "every document embedding failed"
        return {
            "lexical": None,
            "semantic": semantic,
            "hybrid": semantic,
            "hybrid_rerank": semantic or self.reranker.unavailable,
        }

    def model_info(self) -> dict[str, Any]:
        return self.embedder.info()

    def measure_hnsw_recall(self, *, sample: int = 50, k: int = 10) -> dict[str, Any]:
        """HNSW recall@k against exact search; queries = collection queries, else documents."""
        texts = self._recall_queries[:sample]
        if len(texts) < sample:
            texts += [embedding_text(d) for d in list(self._docs.values())[: sample - len(texts)]]
        vectors = [v for v in self.embedder.embed(texts) if v is not None]
        with self._schema.connection() as conn:
            report = dense.hnsw_recall(conn, vectors, k=k, ef_search=self.settings.dense.ef_search)
        self._recall = report.as_dict()
        return self._recall

    def describe(self) -> dict[str, Any]:
        with self._schema.connection() as conn:
            counts = conn.execute(
                "SELECT (SELECT count(*) FROM documents WHERE deleted_at IS NULL),"
                " (SELECT count(*) FROM terms),"
                " (SELECT count(*) FROM embeddings)"
            ).fetchone()
        n_docs, n_postings, n_vectors = counts if counts is not None else (0, 0, 0)
        return {
            "engine": "pytest-searcheval reference engine",
            "schema": self.schema_name,
            "server": getattr(self._server.server, "source", "unknown"),
            **self.versions,
            "documents": int(n_docs),
            "tombstones": len(self._tombstones),
            "postings": int(n_postings),
            "embeddings": int(n_vectors),
            "model": self.model_info(),
            "embedding_cache": {
                "dir": str(self.embedder.cache_dir),
                "hits": self.embedder.stats.cache_hits,
                "misses": self.embedder.stats.cache_misses,
                "model_loaded": self.embedder.model_loaded,
            },
            "analyzer": "nfkc+casefold, strip accents, split non-alphanumerics, stop, porter",
            "dense": {
                "mode": "hnsw" if self._hnsw else "exact",
                "hnsw_recall": self._recall,
            },
            "reranker": self.reranker.info(),
            "no_result": self.calibration,
            "profiles": self.profiles(),
            "settings": self.settings.as_dict(),
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
        }

    # -- searching ------------------------------------------------------------------------------

    def search(
        self,
        q: str,
        *,
        profile: str = "hybrid",
        limit: int = 10,
        filters: Mapping[str, Any] | None = None,
        extract: bool = True,
    ) -> dict[str, Any]:
        """The ``/discovery/search`` body; raises ``ProfileUnavailable`` / ``ValueError``."""
        return self._search(q, profile=profile, limit=limit, filters=filters, extract=extract)

    def list_resources(
        self, *, filters: Mapping[str, Any] | None = None, limit: int = 100, offset: int = 0
    ) -> dict[str, Any]:
        """The ``/discovery/resources`` page: live listings that satisfy ``filters``, in id
        order, ``limit`` of them from ``offset``: ``{"total", "items": [{"id", "resource"}]}``.
        Raises ``x402.FilterError`` for an invalid filter value."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit: expected a positive integer, got {limit!r}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset: expected a non-negative integer, got {offset!r}")
        ordered = self._sorted_ids
        if ordered is None:
            ordered = self._sorted_ids = sorted(self._docs)
        gone = self._tombstones
        ids = [i for i in ordered if i not in gone] if gone else ordered
        x402 = _module("x402")
        applied = x402.parse_filters(filters, self.assets) if x402 is not None else None
        if applied:
            allowed = self._satisfying(applied, ids)
            ids = [i for i in ids if i in allowed]
        page = ids[offset : offset + limit]
        return {
            "total": len(ids),
            "items": [{"id": i, "resource": _resource(self._docs[i])} for i in page],
        }

    def _filters(
        self, q: str, filters: Mapping[str, Any] | None, extract: bool
    ) -> tuple[str, Any, dict[str, Any]]:
        """(query text to rank with, applied ``x402.Filters`` or None, extracted filters).

        Explicit filters beat extracted ones key by key; invalid values raise
        ``x402.FilterError`` (a ValueError naming the field).
        """
        x402 = _module("x402")
        if x402 is None:
            return q, None, {}
        explicit = x402.parse_filters(filters, self.assets)
        extracted: dict[str, Any] = {}
        text = q
        _extract = _module("extract") if extract else None
        if _extract is not None:
            found = _extract.extract(q, self.assets)
            found_filters = x402.parse_filters(found.filters, self.assets)
            extracted = found_filters.to_dict()
            explicit = explicit.merged_over(found_filters)
            text = found.text or q
        return text, explicit, extracted

    def _candidates(self, applied: Any) -> tuple[sql.Composable | None, dict[str, Any]]:
        """The hard-filter predicate as a sub-query of candidate ``doc_id``s (None: no filter)."""
        if applied is None or not applied:
            return None, {}
        from psycopg import sql as _sql

        x402 = _module("x402")
        fragment, params = x402.to_sql(applied, doc="d", prefix="xf_")
        query = _sql.SQL("SELECT d.id AS doc_id FROM documents d WHERE ") + _sql.SQL(fragment)
        return query, dict(params)

    def _title_match(
        self, text: str, lex: Sequence[bm25.LexicalHit], sem: Sequence[dense.DenseHit]
    ) -> dict[str, float] | None:
        if not self.settings.fusion.title_weight:
            return None
        if not self._hnsw:
            return self._titles.match(text)
        # HNSW catalogs: only the head of each candidate list (a common title word would
        # otherwise make the index walk most of a large catalog).
        top = self.settings.fusion.title_depth
        return self._titles.match_among(
            text, [h.doc_id for h in lex[:top]] + [h.doc_id for h in sem[:top]]
        )

    def _adversarial(self, ranked: list[tuple[str, float]]) -> list[tuple[str, float]]:
        """Stuffing penalty, then near-duplicate collapse (engine/dedup.py); both pointwise in
        the listing, applied before any restriction so that filters and deletes only remove."""
        weight = self.settings.dedup.stuffing_weight
        if weight > 0:
            ranked = [(d, s * (1.0 - weight * self._stuffing.get(d, 0.0))) for d, s in ranked]
            ranked.sort(key=lambda item: (-item[1], item[0]))
        if self.settings.dedup.collapse:
            ranked = self._groups.collapse(ranked)
        return ranked

    def _satisfying(self, applied: Any, ids: Sequence[str]) -> set[str]:
        """The ids among ``ids`` whose listing satisfies the hard filters ``applied``.

        Exact-scan catalogs evaluate the predicate once over every listing and memoise the set
        per filter combination until the next write; HNSW catalogs check only ``ids``.
        """
        if not ids:
            return set()
        from psycopg import sql as _sql

        x402 = _module("x402")
        fragment, params = x402.to_sql(applied, doc="d", prefix="xf_")
        if not self._hnsw:
            key = tuple(sorted(applied.to_dict().items()))
            found = self._filter_cache.get(key)
            if found is None:
                query = _sql.SQL("SELECT d.id FROM documents d WHERE ") + _sql.SQL(fragment)
                with self._schema.connection() as conn:
                    found = frozenset(str(r[0]) for r in conn.execute(query, params).fetchall())
                if len(self._filter_cache) >= 256:
                    self._filter_cache = {}
                self._filter_cache[key] = found
            return set(found)
        query = _sql.SQL("SELECT d.id FROM documents d WHERE d.id = ANY(%(xf_ids)s) AND ") + (
            _sql.SQL(fragment)
        )
        with self._schema.connection() as conn:
            rows = conn.execute(query, {**params, "xf_ids": list(ids)}).fetchall()
        return {str(r[0]) for r in rows}

    def _search(
        self,
        q: str,
        *,
        profile: str,
        limit: int,
        filters: Mapping[str, Any] | None,
        extract: bool,
        apply_threshold: bool = True,
    ) -> dict[str, Any]:
        started = time.perf_counter()
        if profile not in PROFILES:
            raise ValueError(f"profile: expected one of {', '.join(PROFILES)}, got {profile!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise ValueError(f"limit: expected an integer in [1, {MAX_LIMIT}], got {limit!r}")
        reason = self.profiles()[profile]
        if reason is not None:
            raise ProfileUnavailable(f"profile {profile} is unavailable: {reason}")
        text, applied, extracted = self._filters(q, filters, extract)
        use_lex = profile != "semantic"
        use_dense = profile != "lexical"
        fused = profile in ("hybrid", "hybrid_rerank")
        n_rows = len(self._docs)
        candidates: sql.Composable | None = None
        cand_params: dict[str, Any] = {}
        if fused:
            # Fusion is rank-based, so the lists are ranked over the UNFILTERED catalog and the
            # filters restrict the fused list afterwards (a filter can only remove). Exact scan:
            # every document with any signal; HNSW: the documented candidate depth.
            depth = n_rows if not self._hnsw else self.settings.fusion.candidate_depth
            depth = max(depth, limit, self.settings.rerank_depth, 1)
        else:
            # Pointwise scores (BM25F with collection-wide statistics, cosine) do not depend on
            # the candidate set, so pushing the filter into SQL is already a pure restriction.
            candidates, cand_params = self._candidates(applied)
            depth = limit + len(self._tombstones)

        def lexical() -> tuple[list[bm25.LexicalHit], float]:
            with self._schema.connection() as conn, conn.transaction():
                return bm25.search(
                    conn,
                    index.query_terms(text),
                    self.settings.bm25,
                    n_docs=len(self._docs),
                    limit=depth,
                    candidates=candidates,
                    candidate_params=cand_params,
                    df_cache=self._df_cache,
                )

        lex: list[bm25.LexicalHit] = []
        head_scores: dict[str, float] = {}
        total_idf = 0.0
        sem: list[dense.DenseHit] = []
        pending: Future[tuple[list[bm25.LexicalHit], float]] | None = None
        if use_lex and use_dense:
            # The lexical SQL runs on its own pooled connection while this thread encodes the
            # query (torch releases the GIL), so a cache miss costs max(encode, SQL), not the sum.
            pending = self._executor.submit(lexical)
        elif use_lex:
            lex, total_idf = lexical()
        if use_dense:
            qvec = self.embedder.embed_one(text)
            if qvec is not None:
                with self._schema.connection() as conn, conn.transaction():
                    sem = dense.search(
                        conn,
                        qvec,
                        limit=depth,
                        exact=not self._hnsw,
                        ef_search=min(max(self.settings.dense.ef_search, depth), 1000),
                        candidates=candidates,
                        candidate_params=cand_params,
                    )
        if pending is not None:
            lex, total_idf = pending.result()
        ranked: list[tuple[str, float]]
        if profile == "lexical":
            ranked = [(h.doc_id, h.score) for h in lex]
        elif profile == "semantic":
            ranked = [(h.doc_id, h.score) for h in sem]
        else:
            ranked = fusion.rrf(
                {"lexical": [h.doc_id for h in lex], "semantic": [h.doc_id for h in sem]},
                self.settings.fusion,
                self._priors,
                depth=depth,
                title_match=self._title_match(text, lex, sem),
            )
            ranked = self._adversarial(ranked)
            if profile == "hybrid_rerank":
                ranked, head_scores = self._rerank(text, ranked)
            if applied:
                allowed = self._satisfying(applied, [d for d, _ in ranked])
                ranked = [(d, s) for d, s in ranked if d in allowed]
                lex = [h for h in lex if h.doc_id in allowed]
                sem = [h for h in sem if h.doc_id in allowed]
        if self._tombstones:
            gone = self._tombstones
            ranked = [(d, s) for d, s in ranked if d not in gone]
            lex = [h for h in lex if h.doc_id not in gone]
            sem = [h for h in sem if h.doc_id not in gone]
        # Confidence features are maxima over the candidates that survive the restriction, so
        # a tighter filter can only lower them (never turn a no-result into an answer).
        cos = max((h.score for h in sem), default=None)
        coverage = (
            (max((h.matched_idf for h in lex), default=0.0) / total_idf if total_idf > 0 else 0.0)
            if use_lex
            else None
        )
        # hybrid_rerank: the best head score among the listings that survived (None: none did);
        # other profiles have no head and skip the pass over the ranked list
        rerank = (
            max((head_scores[d] for d, _ in ranked if d in head_scores), default=None)
            if head_scores
            else None
        )
        rule = (self.settings.no_result or {}).get(profile)
        confidence = rule.confidence(cos, coverage, rerank) if rule is not None else None
        no_result = bool(
            apply_threshold and rule is not None and rule.suppress(cos, coverage, rerank)
        )
        if not ranked:
            no_result = True
        results = (
            []
            if no_result
            else [
                {"id": d, "score": round(s, 6), "resource": _resource(self._docs[d])}
                for d, s in ranked[:limit]
                if d in self._docs
            ]
        )
        return {
            "query": q,
            "profile": profile,
            "results": results,
            "filters": {
                "applied": applied.to_dict() if applied is not None else {},
                "extracted": extracted,
            },
            "no_result": no_result,
            "confidence": {
                "cos": None if cos is None else round(cos, 6),
                "coverage": None if coverage is None else round(coverage, 6),
                "rerank": None if rerank is None else round(rerank, 6),
                "value": (
                    None
                    if confidence is None or not math.isfinite(confidence)
                    else round(confidence, 6)
                ),
                "threshold": None if rule is None else rule.tau,
            },
            "model": self.model_info(),
            "latency_ms": round((time.perf_counter() - started) * 1000.0, 3),
        }

    def _rerank(
        self, text: str, ranked: list[tuple[str, float]]
    ) -> tuple[list[tuple[str, float]], dict[str, float]]:
        """(the list with its head reordered by the cross-encoder, head id -> model score)."""
        depth = self.settings.rerank_depth
        head = ranked[:depth]
        docs = [self._docs[d] for d, _ in head if d in self._docs]
        scores = self.reranker.score(text, [rerank_text(d) for d in docs])
        reranked = sorted(
            zip([d.id for d in docs], scores, strict=True), key=lambda x: (-x[1], x[0])
        )
        floor = min(scores, default=0.0)
        # The tail keeps hybrid order strictly below the reranked head.
        tail = [(d, floor - 1.0 - i) for i, (d, _) in enumerate(ranked[depth:])]
        return reranked + tail, dict(reranked)

    # -- calibration --------------------------------------------------------------------------

    def search_uncut(self, text: str, *, profile: str, limit: int = 10) -> dict[str, Any]:
        """The response with the no-result cut not applied, to a query sent as a client sends
        it by default (the text alone, constraints extracted); when an extracted constraint is
        one this registry rejects, the text is ranked unfiltered."""
        try:
            return self._search(
                text,
                profile=profile,
                limit=limit,
                filters=None,
                extract=True,
                apply_threshold=False,
            )
        except ValueError:
            return self._search(
                text,
                profile=profile,
                limit=limit,
                filters=None,
                extract=False,
                apply_threshold=False,
            )

    def threshold_samples(
        self,
        collection: Collection,
        *,
        split: str = "dev",
        profiles: Sequence[str] = ("lexical", "semantic", "hybrid"),
        level: int = 2,
    ) -> dict[str, list[threshold.Sample]]:
        """Confidence features of every no-result and answerable query of ``split``."""
        queries = collection.queries_in(split)
        answerable = threshold.answerable_ids(
            collection.judgments, [q.id for q in queries], level=level
        )
        out: dict[str, list[threshold.Sample]] = {p: [] for p in profiles}
        for query in queries:
            is_nr = query.query_class == "no-result" or bool(query.expect.get("no_result"))
            if not is_nr and query.id not in answerable:
                continue
            for p in profiles:
                if self.profiles()[p] is not None:
                    continue
                body = self.search_uncut(query.text, profile=p)
                conf = body["confidence"]
                relevant = [
                    d for d, g in collection.judgments.get(query.id, {}).items() if g >= level
                ]
                value = threshold.recall_at([r["id"] for r in body["results"]], relevant, 10)
                out[p].append(
                    threshold.Sample(
                        query.id,
                        conf["cos"],
                        conf["coverage"],
                        not is_nr,
                        value,
                        conf.get("rerank"),
                    )
                )
        return {p: s for p, s in out.items() if s}

    def _auto_calibrate(self, collection: Collection) -> None:
        t0 = time.perf_counter()
        try:
            fits = self.calibrate(
                collection, split="dev", max_answerable_loss=self.settings.max_answerable_loss
            )
        except (ValueError, KeyError) as exc:  # no dev split, or a class is missing
            self.settings = self.settings.with_no_result({})
            self.calibration = {"status": "not calibrated", "reason": str(exc)}
            return
        self.calibration = {
            "status": "calibrated on the dev split",
            "collection": collection.hashes,
            "fits": {p: f.as_dict() for p, f in fits.items()},
        }
        self.timings["calibrate_seconds"] = time.perf_counter() - t0

    def calibrate(
        self,
        collection: Collection,
        *,
        split: str = "dev",
        max_answerable_loss: float = 0.02,
        profiles: Sequence[str] = ("lexical", "semantic", "hybrid", "hybrid_rerank"),
    ) -> dict[str, threshold.Fit]:
        """Fit no-result rules on ``split`` and install them in this engine's settings."""
        usable = [p for p in profiles if self.profiles()[p] is None]
        samples = self.threshold_samples(collection, split=split, profiles=usable)
        if not samples:
            raise ValueError(f"split {split!r} has no no-result or answerable judged queries")
        fits = threshold.calibrate(samples, max_answerable_loss=max_answerable_loss)
        self.settings = self.settings.with_no_result({p: f.rule for p, f in fits.items()})
        return fits


def _copy_value(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return value


def iter_profiles() -> Iterator[str]:
    yield from PROFILES
