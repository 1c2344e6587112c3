"""The engine's in-memory view of its catalog, kept beside the SQL tables.

What ranking needs per listing without a round trip: the documents themselves (tombstoned ones
included: they still count in the statistics), the title index for name matches, stuffing
penalties and near-duplicate groups (engine/dedup.py), the liveness/settlement priors, the
postings (engine/postings.py), and memos (document frequencies, hard-filter sets).

A :class:`Catalog` is one version of all of it. Once the engine publishes a version (assigns
``engine.catalog``) nothing changes it again: a write builds the next version with
:meth:`Catalog.upserted` or :meth:`Catalog.tombstoned`, sharing what the write leaves alone
(as the postings share their unchanged terms) and copying what it changes, and the engine
swaps it in with one reference assignment after the commit. A search reads ``engine.catalog``
once and serves every step from that version: the body served for a result is the one its
hard filters were checked against and its postings were ranked from. Only the memos fill in
while searches read a version; each is a function of the version alone.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pytest_searcheval.collection.model import Document
from pytest_searcheval.engine import dedup, fusion, title, x402
from pytest_searcheval.engine.postings import Postings

#: distinct filter combinations memoised per catalog version before the memo starts over
FILTER_MEMO_SIZE = 256

FilterFacts = tuple[str | None, tuple[str, ...], list[dict[str, Any]]]


class Catalog:
    """See the module docstring. ``Catalog()`` is the empty version."""

    def __init__(self) -> None:
        #: every indexed row, tombstoned ones included (they still count in the statistics)
        self.docs: dict[str, Document] = {}
        #: deleted ids awaiting ``reindex()``: removed from every result, kept in statistics
        self.tombstones: frozenset[str] = frozenset()
        self.titles = title.TitleIndex()
        self.groups = dedup.DuplicateGroups()
        self.stuffing: dict[str, float] = {}
        #: the listings whose stuffing penalty is above 0 (what fusion has to multiply)
        self.penalized: dict[str, float] = {}
        #: order in which each id was first indexed (kept across reindex): the collapse tie-break
        self.seq: dict[str, int] = {}
        self.priors: dict[str, float] = {}
        #: memo: hard filters -> every indexed id whose listing satisfies them
        self.filter_cache: dict[x402.Filters, frozenset[str]] = {}
        #: memo: id -> what ``x402.matches`` reads of its listing
        self.filter_rows: dict[str, FilterFacts] = {}
        #: every indexed id in order (what ``Engine.list_resources`` pages through)
        self.sorted_ids: list[str] | None = None
        self.postings = Postings()

    def __len__(self) -> int:
        return len(self.docs)

    def live(self) -> list[Document]:
        return [d for i, d in self.docs.items() if i not in self.tombstones]

    def ordered_live(self) -> list[str]:
        """The live ids in id order (memoised for this version)."""
        if self.sorted_ids is None:
            self.sorted_ids = sorted(self.docs)
        gone = self.tombstones
        return [i for i in self.sorted_ids if i not in gone] if gone else list(self.sorted_ids)

    # -- hard filters, against this version's bodies ------------------------------------------

    def filter_facts(self, doc_id: str, assets: Sequence[Any]) -> FilterFacts:
        """What ``x402.matches`` reads of a listing: its type, extensions and payment option
        rows, as written to SQL (``x402.option_rows`` of the same document)."""
        facts = self.filter_rows.get(doc_id)
        if facts is None:
            from pytest_searcheval.engine import documents

            doc = self.docs[doc_id]
            doc_type = (doc.x402 or {}).get("type") if doc.x402 is not None else None
            facts = (
                doc_type if isinstance(doc_type, str) else None,
                tuple(documents.extension_names(doc)),
                x402.option_rows(doc, assets),
            )
            self.filter_rows[doc_id] = facts
        return facts

    def satisfies(self, doc_id: str, applied: x402.Filters, assets: Sequence[Any]) -> bool:
        """Whether this version's body of ``doc_id`` satisfies ``applied`` (False for an id
        this version does not hold)."""
        if doc_id not in self.docs:
            return False
        doc_type, extensions, options = self.filter_facts(doc_id, assets)
        return x402.matches(applied, doc_type=doc_type, extensions=extensions, options=options)

    def satisfying_all(self, applied: x402.Filters, assets: Sequence[Any]) -> frozenset[str]:
        """Every indexed id (tombstoned ones included) whose listing satisfies ``applied``,
        memoised per filter combination for this version."""
        memo = self.filter_cache
        found = memo.get(applied)
        if found is None:
            found = frozenset(i for i in self.docs if self.satisfies(i, applied, assets))
            if len(memo) >= FILTER_MEMO_SIZE:
                memo.clear()
            memo[applied] = found
        return found

    # -- the next version ---------------------------------------------------------------------

    def tombstoned(self, doc_ids: Iterable[str]) -> Catalog:
        """The next version with ``doc_ids`` tombstoned. Nothing else changes (statistics,
        options and memos are those of this version and are shared with it)."""
        fresh = copy.copy(self)
        fresh.tombstones = self.tombstones | frozenset(doc_ids)
        return fresh

    def upserted(
        self,
        docs: Sequence[Document],
        written: Sequence[tuple[str, Mapping[str, Mapping[str, int]]]],
        params: dedup.DedupParams,
        vectors: Callable[[Sequence[str]], dict[str, Any]],
        assets: Sequence[Any],
    ) -> Catalog:
        """The next version with ``docs`` inserted or replaced (an upsert revives a tombstoned
        id): ``written`` are their postings as ``documents.write_rows`` wrote them, ``vectors``
        gives the unit embeddings of the ids it is asked for.

        Costs copies of the per-listing dictionaries (the priors are recomputed over every
        listing anyway); the title index, duplicate groups and postings copy only what the
        write changes."""
        fresh = Catalog()
        fresh.seq = dict(self.seq)
        changed = {d.id for d in docs}
        fresh.docs = {**self.docs, **{d.id: d for d in docs}}
        fresh.tombstones = self.tombstones - changed
        fresh.titles = self.titles.copy()
        for doc in docs:
            fresh.titles.add(doc.id, doc.title)
        fresh.postings = self.postings.copy() if len(self.postings) else Postings()
        fresh.postings.add(written)
        top = fusion.max_settlements([d.sidecar for d in fresh.docs.values()])
        fresh.priors = {i: fusion.prior_signal(d.sidecar, top) for i, d in fresh.docs.items()}
        fresh.filter_rows = {i: f for i, f in self.filter_rows.items() if i not in changed}
        # The filter sets this version knows, carried over: only the changed listings are
        # checked again.
        for applied, found in list(self.filter_cache.items()):
            fresh.filter_cache[applied] = (found - changed) | {
                i for i in changed if fresh.satisfies(i, applied, assets)
            }
        fresh.stuffing = dict(self.stuffing)
        fresh.penalized = dict(self.penalized)
        fresh.groups = self.groups.copy()
        fresh._index_adversarial(docs, params, vectors)
        return fresh

    def _index_adversarial(
        self,
        docs: Sequence[Document],
        params: dedup.DedupParams,
        vectors: Callable[[Sequence[str]], dict[str, Any]],
    ) -> None:
        """Stuffing penalties and near-duplicate groups for ``docs`` (unpublished versions
        only)."""
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

    def rebuilt(self) -> Catalog:
        """An empty version that keeps this one's first-indexed order (a reindex fills it with
        :meth:`upserted`)."""
        fresh = Catalog()
        fresh.seq = dict(self.seq)
        return fresh
