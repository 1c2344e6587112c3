"""The engine's in-memory view of its catalog, kept beside the SQL tables.

What ranking needs per listing without a round trip: the documents themselves (tombstoned ones
included: they still count in the statistics), the title index for name matches, stuffing
penalties and near-duplicate groups (engine/dedup.py), the liveness/settlement priors, and two
memos (document frequencies, filter results) that every write invalidates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pytest_searcheval.collection.model import Document
from pytest_searcheval.engine import dedup, fusion, title
from pytest_searcheval.engine.postings import Postings

FilterKey = tuple[tuple[str, str], ...]


class Catalog:
    def __init__(self) -> None:
        #: every indexed row, tombstoned ones included (they still count in the statistics)
        self.docs: dict[str, Document] = {}
        #: deleted ids awaiting ``reindex()``: removed from every result, kept in statistics
        self.tombstones: set[str] = set()
        self.titles = title.TitleIndex()
        self.groups = dedup.DuplicateGroups()
        self.stuffing: dict[str, float] = {}
        #: the listings whose stuffing penalty is above 0 (what fusion has to multiply)
        self.penalized: dict[str, float] = {}
        #: order in which each id was first indexed (kept across reindex): the collapse tie-break
        self.seq: dict[str, int] = {}
        self.priors: dict[str, float] = {}
        self.filter_cache: dict[FilterKey, frozenset[str]] = {}
        self.filter_rows: dict[str, tuple[str | None, tuple[str, ...], list[dict[str, Any]]]] = {}
        #: every indexed id in order (what ``Engine.list_resources`` pages through), until a write
        self.sorted_ids: list[str] | None = None
        #: the postings in memory: what BM25F ranks from (engine/postings.py); replaced,
        #: never changed, by a write
        self.postings = Postings()

    def __len__(self) -> int:
        return len(self.docs)

    def live(self) -> list[Document]:
        return [d for i, d in self.docs.items() if i not in self.tombstones]

    def ordered_live(self) -> list[str]:
        """The live ids in id order (memoised until the next write; tombstones applied now)."""
        if self.sorted_ids is None:
            self.sorted_ids = sorted(self.docs)
        gone = self.tombstones
        return [i for i in self.sorted_ids if i not in gone] if gone else list(self.sorted_ids)

    def add(self, docs: Iterable[Document]) -> None:
        """Record ``docs`` as indexed (an upsert revives a tombstoned id); call :meth:`refresh`
        and :meth:`index_adversarial` after."""
        for doc in docs:
            self.docs[doc.id] = doc
            self.titles.add(doc.id, doc.title)
            self.tombstones.discard(doc.id)

    def filter_facts(
        self, doc_id: str, assets: Sequence[Any]
    ) -> tuple[str | None, tuple[str, ...], list[dict[str, Any]]]:
        """What ``x402.matches`` reads of a listing (its type, extensions and payment option
        rows, as written to SQL), memoised until the next write."""
        facts = self.filter_rows.get(doc_id)
        if facts is None:
            from pytest_searcheval.engine import documents, x402

            doc = self.docs[doc_id]
            doc_type = (doc.x402 or {}).get("type") if doc.x402 is not None else None
            facts = (
                doc_type if isinstance(doc_type, str) else None,
                tuple(documents.extension_names(doc)),
                x402.option_rows(doc, assets),
            )
            self.filter_rows[doc_id] = facts
        return facts

    def index_postings(self, rows: Sequence[tuple[str, Mapping[str, Mapping[str, int]]]]) -> None:
        """Add the postings ``documents.write_rows`` wrote. Searches read the postings without a
        lock, so a write fills a copy and swaps it in (one reference assignment)."""
        fresh = self.postings.copy() if len(self.postings) else Postings()
        fresh.add(rows)
        self.postings = fresh

    def refresh(self) -> None:
        """Recompute the priors and drop the memos. Every write path that changes statistics
        or options ends here (a delete changes neither: tombstones are applied separately)."""
        self.filter_cache = {}
        self.filter_rows = {}
        self.sorted_ids = None
        top = fusion.max_settlements([d.sidecar for d in self.docs.values()])
        self.priors = {i: fusion.prior_signal(d.sidecar, top) for i, d in self.docs.items()}

    def index_adversarial(
        self,
        docs: Sequence[Document],
        params: dedup.DedupParams,
        vectors: Callable[[Sequence[str]], dict[str, Any]],
    ) -> None:
        """Stuffing penalties and near-duplicate groups for ``docs``; ``vectors`` gives the
        unit embeddings of the ids it is asked for."""
        for doc in docs:
            self.seq.setdefault(doc.id, len(self.seq))
            penalty = dedup.stuffing_penalty(doc.title, doc.text, params)
            self.stuffing[doc.id] = penalty
            if penalty > 0:
                self.penalized[doc.id] = penalty
            else:
                self.penalized.pop(doc.id, None)
        if not params.collapse:
            return
        self.groups.update([d.id for d in docs], {d.id: d.title for d in docs}, vectors, params)
        self.groups.assign(self._establishment)

    def _establishment(self, doc_id: str) -> tuple[int, int, float, int, str]:
        doc = self.docs[doc_id]
        resource = (doc.x402 or {}).get("resource")
        provider = doc.fields.get("provider")
        owner = dedup.owns_name(
            doc.title,
            resource if isinstance(resource, str) else None,
            provider if isinstance(provider, str) else None,
        )
        return dedup.establishment(doc.sidecar, self.seq.get(doc_id, 0), doc_id, owner)

    def clear(self) -> None:
        """Forget every listing before a rebuild (the first-indexed order is kept)."""
        self.docs.clear()
        self.tombstones.clear()
        self.titles.clear()
        self.groups.clear()
        self.stuffing.clear()
        self.penalized.clear()
        self.postings = Postings()

    def copy(self) -> Catalog:
        """An independent copy for a cloned engine, with fresh priors and empty memos."""
        other = Catalog()
        other.docs = dict(self.docs)
        other.tombstones = set(self.tombstones)
        other.titles = self.titles.copy()
        other.groups = self.groups.copy()
        other.stuffing = dict(self.stuffing)
        other.penalized = dict(self.penalized)
        other.postings = self.postings.copy() if len(self.postings) else Postings()
        other.seq = dict(self.seq)
        other.refresh()
        return other
