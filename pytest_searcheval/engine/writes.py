"""The engine's writes: seed, upsert, delete, reindex, and the HNSW index that follows the
catalog's size.

Every write commits its rows first, then publishes the next in-memory catalog version
(engine/catalog.py) with one assignment, under the write lock; searches keep reading the
version they started with. ``delete`` tombstones a listing (statistics keep it until
``reindex``). :class:`EngineWrites` is one part of :class:`engine.core.Engine`.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_searcheval.collection.model import Asset, Document
from pytest_searcheval.engine import dense, documents
from pytest_searcheval.engine.documents import document_from_record, embedding_text
from pytest_searcheval.engine.embed import NO_VECTOR

if TYPE_CHECKING:
    import psycopg

    from pytest_searcheval.engine.catalog import Catalog
    from pytest_searcheval.engine.embed import Embedder
    from pytest_searcheval.engine.isolation import IsolatedSchema, RolledBackSchema
    from pytest_searcheval.engine.settings import EngineSettings


class EngineWrites:
    """Writes of :class:`engine.core.Engine`, which sets these attributes."""

    schema: IsolatedSchema | RolledBackSchema
    settings: EngineSettings
    embedder: Embedder
    assets: list[Asset]
    catalog: Catalog
    timings: dict[str, float]
    _write_lock: threading.RLock
    _hnsw: bool
    _recall: dict[str, Any] | None
    _recall_queries: list[str]
    _unembedded: Mapping[str, str]
    embedding_write: dict[str, Any] | None

    def _embed(self, docs: Sequence[Document]) -> tuple[list[Any], dict[str, str]]:
        """The vectors of ``docs`` (``None`` where encoding failed) and, for those that failed,
        listing id -> the reason class (engine/embed.py: an exception's class or "no vector")."""
        texts = [embedding_text(d) for d in docs]
        vectors = self.embedder.embed(texts)
        failed = {
            d.id: self.embedder.failure_reason(text) or NO_VECTOR
            for d, text, vec in zip(docs, texts, vectors, strict=True)
            if vec is None
        }
        return vectors, failed

    def _note_embeddings(
        self, operation: str, docs: Sequence[Document], failed: Mapping[str, str], *, whole: bool
    ) -> None:
        """Record which listings of a committed write have no stored embedding: ``whole`` when
        the write replaced every row (seed, reindex), else only ``docs`` changed."""
        unembedded = {} if whole else dict(self._unembedded)
        for d in docs:
            unembedded.pop(d.id, None)
        unembedded.update(failed)
        self._unembedded = unembedded
        self.embedding_write = {
            "operation": operation,
            "listings": len(docs),
            "embedded": len(docs) - len(failed),
            "failed": len(failed),
            "reasons": dict(sorted(Counter(failed.values()).items())),
        }

    def embedding_counts(self, catalog: Catalog | None = None) -> dict[str, Any]:
        """Embedding completeness of the live catalog (no database round trip): ``listings``
        indexed, ``embedded`` (with a stored embedding), ``failed`` (their encoding failed),
        ``fallback`` (served without an embedding: lexical evidence only), ``reasons`` (reason
        class -> listings) and ``last_write`` (the same for the last write that embedded);
        ``catalog``: of that catalog version instead of the current one."""
        catalog = self.catalog if catalog is None else catalog
        unembedded = self._unembedded
        live = len(catalog.docs) - len(catalog.tombstones)
        missing = [
            why
            for doc_id, why in unembedded.items()
            if doc_id in catalog.docs and doc_id not in catalog.tombstones
        ]
        return {
            "listings": live,
            "embedded": live - len(missing),
            "failed": len(missing),
            "fallback": len(missing),
            "reasons": dict(sorted(Counter(missing).items())),
            "last_write": self.embedding_write,
        }

    def _seed(self, docs: Sequence[Document]) -> None:
        t0 = time.perf_counter()
        vectors, failed = self._embed(docs)
        t1 = time.perf_counter()
        with self._write_lock, self.schema.connection() as conn:
            with conn.transaction():
                written = self._write(conn, docs, vectors)
            t2 = time.perf_counter()
            self._note_embeddings("seed", docs, failed, whole=True)
            self._after_write(conn, docs, written)
        self.timings.update(
            embed_seconds=t1 - t0, write_seconds=t2 - t1, index_seconds=time.perf_counter() - t0
        )

    def _write(
        self, conn: psycopg.Connection[Any], docs: Sequence[Document], vectors: Sequence[Any]
    ) -> list[tuple[str, dict[str, Counter[str]]]]:
        """The rows of ``docs`` and fresh statistics, inside the caller's transaction; returns
        the postings written, for the in-memory copy."""
        written: list[tuple[str, dict[str, Counter[str]]]] = []
        documents.write_rows(
            conn,
            docs,
            vectors,
            assets=self.assets,
            model_id=self.embedder.model_id,
            postings=written,
        )
        documents.refresh_stats(conn)
        return written

    def _after_write(
        self,
        conn: psycopg.Connection[Any],
        docs: Sequence[Document],
        written: Sequence[tuple[str, Mapping[str, Mapping[str, int]]]],
    ) -> None:
        """The in-memory catalog and the dense index follow the committed rows of ``docs``: the
        next catalog version is built beside the one searches read and swapped in whole."""
        self.catalog = self.catalog.upserted(
            docs,
            written,
            self.settings.dedup,
            lambda ids: dense.stored_unit_vectors(conn, ids),
            self.assets,
        )
        self._maybe_hnsw(conn)

    def _maybe_hnsw(self, conn: psycopg.Connection[Any]) -> None:
        if len(self.catalog) < self.settings.dense.exact_below:
            if self._hnsw:
                self._drop_hnsw(conn)
            return
        if not self._hnsw:
            seconds = dense.ensure_hnsw(conn, self.settings.dense)
            conn.commit()
            self._hnsw = True
            self.timings["hnsw_build_seconds"] = seconds
            self._recall = None
            if self.settings.recall_sample > 0:
                self.measure_hnsw_recall(sample=self.settings.recall_sample)

    def _drop_hnsw(self, conn: psycopg.Connection[Any]) -> None:
        """Readers take the exact paths first (the exact dense scan and the filter predicate
        in SQL: both right on the committed rows), then the index goes (its DROP waits for the
        searches using it)."""
        self._hnsw = False
        dense.drop_hnsw(conn)
        conn.commit()
        self._recall = None

    def upsert(self, record: Mapping[str, Any] | Document) -> None:
        """Insert or replace one document (postings, options, embedding, statistics)."""
        self.upsert_many([record])

    def upsert_many(self, records: Sequence[Mapping[str, Any] | Document]) -> None:
        """Insert or replace documents in one transaction, in this order (a repeated id: the
        last record wins), with the statistics refreshed and the in-memory catalog rebuilt
        once instead of once per document.

        The rows, statistics and postings are those of the same upserts one by one; the
        near-duplicate groups are found once over the batch, as a seed finds them, so where
        the batch takes a title token past ``max_postings`` titles they can differ from
        upserts made one at a time (engine/dedup.py)."""
        by_id = {d.id: d for d in map(document_from_record, records)}
        if not by_id:
            return
        docs = list(by_id.values())
        vectors, failed = self._embed(docs)
        with self._write_lock, self.schema.connection() as conn:
            with conn.transaction():
                conn.execute("DELETE FROM documents WHERE id = ANY(%s)", (list(by_id),))
                written = self._write(conn, docs, vectors)
            self._note_embeddings("upsert", docs, failed, whole=False)
            self._after_write(conn, docs, written)

    def delete(self, doc_id: str) -> bool:
        """Tombstone a document: gone from every result at once. True if it was live.

        The row and its postings, lengths and embedding stay, so N, df, average field lengths,
        priors and the candidate ranks of every other listing are unchanged: deleting one
        listing cannot move an unrelated one. ``reindex()`` purges tombstones and recomputes.
        """
        return bool(self.delete_many([doc_id]))

    def delete_many(self, doc_ids: Sequence[str]) -> list[str]:
        """Tombstone documents in one statement (see :meth:`delete`); returns the ids that
        were live."""
        with self._write_lock, self.schema.connection() as conn:
            with conn.transaction():
                rows = conn.execute(
                    "UPDATE documents SET deleted_at = now()"
                    " WHERE id = ANY(%s) AND deleted_at IS NULL RETURNING id",
                    (list(doc_ids),),
                ).fetchall()
            gone = [r[0] for r in rows]
            if gone:
                self.catalog = self.catalog.tombstoned(gone)
        return gone

    def reindex(self) -> None:
        """Rebuild every index table from the live documents: purges tombstones, recomputes
        statistics, priors and (above the size threshold) the HNSW graph.

        Atomic for readers. The rows are replaced in ONE transaction, so every SQL statement a
        search runs sees the catalog before the commit or after it, never an empty or partial
        one; the in-memory catalog is built beside the one searches read and swapped in (one
        reference assignment) after the commit. Between the commit and the swap the old
        version, a superset of the new rows, still filters tombstoned ids. An HNSW
        graph is rebuilt afterwards with REINDEX CONCURRENTLY, which does not block readers.
        """
        with self._write_lock:
            t0 = time.perf_counter()
            docs = self.catalog.live()
            vectors, failed = self._embed(docs)
            with self.schema.connection() as conn:
                with conn.transaction():
                    conn.execute("DELETE FROM documents")
                    written = self._write(conn, docs, vectors)
                    # the first-indexed order survives a rebuild
                    fresh = self.catalog.rebuilt().upserted(
                        docs,
                        written,
                        self.settings.dedup,
                        lambda ids: dense.stored_unit_vectors(conn, ids),
                        self.assets,
                    )
                self._note_embeddings("reindex", docs, failed, whole=True)
                self.catalog = fresh
                if self._hnsw and len(fresh) >= self.settings.dense.exact_below:
                    self._rebuild_hnsw(conn)
                else:
                    self._maybe_hnsw(conn)
            self.timings["reindex_seconds"] = time.perf_counter() - t0

    def _rebuild_hnsw(self, conn: psycopg.Connection[Any]) -> None:
        """A fresh graph for the replaced rows, built while readers keep using the old one."""
        from psycopg import sql

        conn.commit()
        conn.autocommit = True
        try:
            # as long as a build (dense.ensure_hnsw); RESET returns to the session's bound
            conn.execute("SET statement_timeout = 0")
            conn.execute(
                sql.SQL("REINDEX INDEX CONCURRENTLY {}").format(
                    sql.Identifier(self.schema.name, dense.HNSW_INDEX)
                )
            )
        finally:
            if not conn.closed:
                conn.execute("RESET statement_timeout")
            conn.autocommit = False
        self._recall = None
        if self.settings.recall_sample > 0:
            self.measure_hnsw_recall(sample=self.settings.recall_sample)

    def measure_hnsw_recall(self, *, sample: int = 50, k: int = 10) -> dict[str, Any]:
        """HNSW recall@k against exact search; queries = collection queries, else documents."""
        texts = self._recall_queries[:sample]
        if len(texts) < sample:
            docs = list(self.catalog.docs.values())[: sample - len(texts)]
            texts += [embedding_text(d) for d in docs]
        vectors = [v for v in self.embedder.embed(texts) if v is not None]
        with self.schema.connection() as conn:
            report = dense.hnsw_recall(conn, vectors, k=k, ef_search=self.settings.dense.ef_search)
        self._recall = report.as_dict()
        return self._recall
