"""Targets for proving the invariants: a correct in-memory target and deliberately broken ones.

:class:`MemoryTarget` is a small, correct, mutable search system: every invariant of
:mod:`pytest_searcheval.invariants` holds on it for a sensible collection, so a failure there is
a bug in the invariant. :class:`BrokenTarget` wraps any mutable target and adds one flaw that
exactly one family of invariants must catch. Users can run their own invariant settings against
both to see that a check can fail before trusting that it passes.

MemoryTarget scoring (document-local, so that deleting or filtering a listing cannot move the
others)::

    score(d, q) = sum over distinct query terms t present in d of
                  2 * 1 / (1 + 1.2 * (0.25 + 0.75 * |title(d)| / 5))    if t in title(d)
                  + 1 / (1 + 1.2 * (0.25 + 0.75 * |text(d)| / 40))      if t in text(d)
                  + 0.001 * log(1 + settlements(d))      (only when some term matched)
                  times 0.1 when a term occurs more than 5 times in d (keyword stuffing)

Terms are lowercase alphanumeric runs; presence, not frequency, counts. Ties break by id.
Documents matching no query term are not returned (so an unrelated query gets no answer).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

from pytest_searcheval.collection.model import Asset, Document
from pytest_searcheval.targets import Hit, MutableTarget, SearchResponse, TargetUnavailable
from pytest_searcheval.x402.oracle import satisfies

__all__ = [
    "FLAWS",
    "BrokenTarget",
    "Forwarding",
    "ForwardingMutable",
    "MemoryTarget",
    "simple_extract",
]

_TERM = re.compile(r"[a-z0-9]+")
_PRICE = re.compile(r"(?:under|below|at most|less than)\s+\$?\s*([0-9]+(?:\.[0-9]+)?)")


def terms(text: str) -> list[str]:
    return _TERM.findall(text.lower())


def simple_extract(text: str, assets: Sequence[Asset]) -> dict[str, str]:
    """A small rule-based constraint extractor: network, type, scheme, asset, price ceiling."""
    low = text.lower()
    words = set(terms(low))
    out: dict[str, str] = {}
    if "testnet" in words:
        out["network"] = "stellar:testnet"
    elif "mainnet" in words or "pubnet" in words:
        out["network"] = "stellar:pubnet"
    if "mcp" in words:
        out["type"] = "mcp"
    if "upto" in words:
        out["scheme"] = "upto"
    for code in sorted({a.code for a in assets}):
        if code.lower() in words:
            out["asset"] = code
            break
    match = _PRICE.search(low)
    if match:
        out["max_price_usd"] = format(Decimal(match.group(1)).normalize(), "f")
    return out


def _from_record(record: Mapping[str, Any] | Document) -> Document:
    if isinstance(record, Document):
        return record
    return Document(
        id=str(record["id"]),
        title=str(record.get("title") or ""),
        text=str(record.get("text") or ""),
        fields=dict(record.get("fields") or {}),
        x402=dict(record["x402"]) if record.get("x402") is not None else None,
        sidecar=dict(record.get("sidecar") or {}),
    )


class MemoryTarget:
    """A correct, mutable, in-memory target (see the module docstring for its scoring)."""

    PROFILES: tuple[str, ...] = ("lexical", "hybrid")

    def __init__(
        self,
        documents: Mapping[str, Document] | Sequence[Document],
        assets: Sequence[Asset] = (),
        *,
        extract: bool = True,
    ) -> None:
        docs = documents.values() if isinstance(documents, Mapping) else documents
        self.documents: dict[str, Document] = {d.id: d for d in docs}
        self.assets = list(assets)
        self.extracts = extract
        self.reindexed = 0

    # -- SearchTarget -------------------------------------------------------------------------

    def profiles(self) -> Mapping[str, str | None]:
        return {p: None for p in self.PROFILES}

    def describe(self) -> Mapping[str, Any]:
        return {"target": "memory", "documents": len(self.documents)}

    def score(self, doc: Document, query_terms: set[str]) -> float:
        title, text = terms(doc.title), terms(doc.text)
        in_title, in_text = set(title), set(text)
        t_norm = 1.0 / (1.0 + 1.2 * (0.25 + 0.75 * len(title) / 5.0))
        x_norm = 1.0 / (1.0 + 1.2 * (0.25 + 0.75 * len(text) / 40.0))
        score = 0.0
        for t in query_terms:
            if t in in_title:
                score += 2.0 * t_norm
            if t in in_text:
                score += x_norm
        if score <= 0.0:
            return 0.0
        settlements = doc.sidecar.get("settlements")
        if isinstance(settlements, int | float) and settlements > 0:
            score += 0.001 * math.log1p(float(settlements))
        counts = Counter(title + text)
        if counts and max(counts.values()) > 5:
            score *= 0.1
        return score

    def search(
        self,
        query: str,
        *,
        profile: str,
        limit: int = 20,
        filters: Mapping[str, Any] | None = None,
        extract: bool = True,
    ) -> SearchResponse:
        if profile not in self.PROFILES:
            raise TargetUnavailable(f"memory target has no profile {profile!r}")
        explicit = {k: v for k, v in (filters or {}).items() if v is not None}
        extracted = simple_extract(query, self.assets) if (extract and self.extracts) else {}
        applied = extracted | explicit
        query_terms = set(terms(query))
        scored = []
        for doc in self.documents.values():
            if applied and not satisfies(doc, applied, self.assets):
                continue
            s = self.score(doc, query_terms)
            if s > 0.0:
                scored.append((s, doc.id))
        scored.sort(key=lambda sd: (-sd[0], sd[1]))
        hits = tuple(Hit(id=d, score=round(s, 9)) for s, d in scored[:limit])
        return SearchResponse(
            hits=hits,
            applied_filters=applied,
            extracted_filters=extracted,
            meta={"no_result": not hits},
        )

    # -- MutableTarget ------------------------------------------------------------------------

    def upsert(self, document: Mapping[str, Any]) -> None:
        doc = _from_record(document)
        self.documents[doc.id] = doc

    def delete(self, doc_id: str) -> None:
        self.documents.pop(doc_id, None)

    def reindex(self) -> None:
        self.reindexed += 1

    @contextmanager
    def isolated(self) -> Iterator[MutableTarget]:
        yield MemoryTarget(dict(self.documents), self.assets, extract=self.extracts)


class Forwarding:
    """A read-only target that forwards every call to ``inner``: subclass it and override the
    one behaviour a test double should change."""

    def __init__(self, inner: Any) -> None:
        # Duck-typed on purpose: the doubles wrap a MemoryTarget (and read its documents) as
        # well as engine targets, so their answers are as typed as the inner target's (Any).
        self.inner = inner

    def profiles(self) -> Mapping[str, str | None]:
        return self.inner.profiles()  # type: ignore[no-any-return]

    def describe(self) -> Mapping[str, Any]:
        return self.inner.describe()  # type: ignore[no-any-return]

    def search(
        self,
        query: str,
        *,
        profile: str,
        limit: int = 20,
        filters: Mapping[str, Any] | None = None,
        extract: bool = True,
    ) -> SearchResponse:
        return self.inner.search(  # type: ignore[no-any-return]
            query, profile=profile, limit=limit, filters=filters, extract=extract
        )


class ForwardingMutable(Forwarding):
    """:class:`Forwarding` for a mutable ``inner``; ``isolated()`` wraps the inner clone with
    :meth:`wrap` (by default the same class around it)."""

    def upsert(self, document: Mapping[str, Any]) -> None:
        self.inner.upsert(document)

    def delete(self, doc_id: str) -> None:
        self.inner.delete(doc_id)

    def reindex(self) -> None:
        self.inner.reindex()

    def wrap(self, clone: Any) -> MutableTarget:
        return type(self)(clone)

    @contextmanager
    def isolated(self) -> Iterator[MutableTarget]:
        with self.inner.isolated() as clone:
            yield self.wrap(clone)


#: flaw -> what the broken target does (and which invariant must catch it).
FLAWS: dict[str, str] = {
    "leak-filtered": "with filters, puts the best listing that breaks them at rank 1",
    "ignore-delete": "delete() does nothing",
    "stuffing-wins": "moves listings that repeat a term more than 5 times to the top",
    "reorder-filtered": "with filters, reverses the ranking (scores still non-increasing)",
    "answer-unanswerable": "an empty answer is replaced by the first listings of the catalog",
    "drift-after-reindex": "after reindex(), rank 1 moves to the end of every answer",
    "drop-last-filtered": "with filters, drops the last result (a miss)",
    "churn": "every second search answers with the listings the real answer left out",
    "spurious-extract": "extraction also reports scheme=exact for every query",
}


class BrokenTarget(ForwardingMutable):
    """Wraps a mutable target and adds one flaw from :data:`FLAWS`."""

    inner: MemoryTarget

    def __init__(self, inner: MemoryTarget, flaw: str) -> None:
        if flaw not in FLAWS:
            raise ValueError(f"flaw: expected one of {', '.join(FLAWS)}, got {flaw!r}")
        super().__init__(inner)
        self.flaw = flaw
        self.drifted = False
        self.calls = 0

    def describe(self) -> Mapping[str, Any]:
        return {**self.inner.describe(), "flaw": self.flaw}

    def search(
        self,
        query: str,
        *,
        profile: str,
        limit: int = 20,
        filters: Mapping[str, Any] | None = None,
        extract: bool = True,
    ) -> SearchResponse:
        response = self.inner.search(
            query, profile=profile, limit=limit, filters=filters, extract=extract
        )
        hits = list(response.hits)
        extracted = dict(response.extracted_filters)
        flaw = self.flaw
        if flaw == "leak-filtered" and response.applied_filters:
            everything = self.inner.search(query, profile=profile, limit=limit, extract=False)
            leaked = [
                h
                for h in everything.hits
                if not satisfies(
                    self.inner.documents[h.id], response.applied_filters, self.inner.assets
                )
            ]
            if leaked:
                top = hits[0].score + 1.0 if hits else leaked[0].score
                hits = [Hit(leaked[0].id, top), *hits][:limit]
        elif flaw == "stuffing-wins":
            stuffed = [h for h in hits if self._stuffed(h.id)]
            rest = [h for h in hits if not self._stuffed(h.id)]
            hits = stuffed + rest
            hits = _rescore(hits)
        elif flaw == "reorder-filtered" and response.applied_filters:
            hits = _rescore(list(reversed(hits)))
        elif flaw == "answer-unanswerable" and not hits:
            hits = [Hit(d, 0.0) for d in sorted(self.inner.documents)[: min(3, limit)]]
        elif flaw == "drift-after-reindex" and self.drifted and len(hits) > 1:
            hits = _rescore(hits[1:] + hits[:1])
        elif flaw == "drop-last-filtered" and response.applied_filters and hits:
            hits = hits[:-1]
        elif flaw == "churn":
            self.calls += 1
            if self.calls % 2 == 0:
                shown = {h.id for h in hits}
                left_out = [d for d in sorted(self.inner.documents) if d not in shown]
                hits = _rescore([Hit(d, 0.0) for d in left_out[:limit]])
        elif flaw == "spurious-extract" and extract:
            extracted["scheme"] = "exact"
        return SearchResponse(
            hits=tuple(hits),
            applied_filters=response.applied_filters,
            extracted_filters=extracted,
            meta={"no_result": not hits},
        )

    def _stuffed(self, doc_id: str) -> bool:
        doc = self.inner.documents.get(doc_id)
        if doc is None:
            return False
        counts = Counter(terms(doc.title) + terms(doc.text))
        return bool(counts) and max(counts.values()) > 5

    def delete(self, doc_id: str) -> None:
        if self.flaw != "ignore-delete":
            self.inner.delete(doc_id)

    def reindex(self) -> None:
        self.inner.reindex()
        self.drifted = True

    def wrap(self, clone: Any) -> MutableTarget:
        assert isinstance(clone, MemoryTarget)
        return BrokenTarget(clone, self.flaw)


def _rescore(hits: list[Hit]) -> list[Hit]:
    """Same order, scores made strictly decreasing (so only the order is wrong, not scores)."""
    n = len(hits)
    return [Hit(h.id, float(n - i)) for i, h in enumerate(hits)]
