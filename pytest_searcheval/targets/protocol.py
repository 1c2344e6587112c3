"""The SearchTarget protocol, what a target answers, and the JSON shape of that answer.

A target answers ``search(query, profile=..., limit=..., filters=...)`` with a ranked
``SearchResponse``. The plugin never trusts a target about filters: every returned hit is
checked against the corpus by the collection's domain (:mod:`pytest_searcheval.domain`).

Targets that can change their catalog (upsert, delete, re-index) implement ``MutableTarget``;
the mutating invariants run only on ``isolated()`` copies, never on the shared index.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


class TargetUnavailable(Exception):
    """The target cannot serve a profile (error, timeout, not configured). Never a zero score."""


class SearchFailed(TargetUnavailable):
    """One search failed after every attempt (a transport error, a timeout, an HTTP error
    status, a body that is no search answer): the error of that query, never of its profile.

    ``url`` is the request that failed last, ``attempts`` how many were sent."""

    def __init__(self, message: str, *, url: str | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.url = url
        self.attempts = attempts


class TargetUnreachable(SearchFailed):
    """The target did not answer at all: no connection, or a timeout on every attempt."""


class FilterUnsupported(TargetUnavailable):
    """The target cannot be asked for a filter at all (its protocol has no such parameter):
    a check that needs the filter cannot run on it, which says nothing about its quality."""


@dataclass(frozen=True)
class Hit:
    """One ranked result. ``resource`` is the record as the service returned it, if it did."""

    id: str
    score: float
    resource: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class SearchResponse:
    """A ranked answer to one query under one profile."""

    hits: tuple[Hit, ...]
    applied_filters: Mapping[str, Any] = field(default_factory=dict)
    extracted_filters: Mapping[str, Any] = field(default_factory=dict)
    latency_ms: float | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ids(self) -> list[str]:
        return [hit.id for hit in self.hits]

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)


@runtime_checkable
class SearchTarget(Protocol):
    """A search system under evaluation."""

    def profiles(self) -> Mapping[str, str | None]:
        """Profile name -> ``None`` when available, else the reason it is unavailable."""
        ...

    def search(
        self,
        query: str,
        *,
        profile: str,
        limit: int = 20,
        filters: Mapping[str, Any] | None = None,
        extract: bool = True,
    ) -> SearchResponse:
        """Rank the catalog for ``query``; ``TargetUnavailable`` if the profile cannot answer."""
        ...

    def describe(self) -> Mapping[str, Any]:
        """Facts for the report: model id/revision/dimensions, server versions, and so on."""
        ...


@runtime_checkable
class MutableTarget(SearchTarget, Protocol):
    """A target whose catalog can be changed; the mutating invariants need one.

    Optional, for targets that write in bulk: ``upsert_many(documents)`` and
    ``delete_many(doc_ids)``, each the same change as calling ``upsert`` / ``delete`` for every
    item in order. The invariants that change many listings at once (filter conformance
    empties a private copy and fills it) use them when present."""

    def upsert(self, document: Mapping[str, Any]) -> None: ...

    def delete(self, doc_id: str) -> None: ...

    def reindex(self) -> None: ...

    def isolated(self) -> AbstractContextManager[MutableTarget]:
        """A private copy of this target's catalog, dropped when the context exits."""
        ...


def write_in_bulk(target: Any, write: str, items: Sequence[Any]) -> None:
    """``target.<write>_many(items)`` when the target offers it (the optional bulk writes of
    :class:`MutableTarget`), else ``target.<write>(item)`` for each item in order: the same
    change. ``write``: ``"upsert"`` or ``"delete"``."""
    many = getattr(target, f"{write}_many", None)
    if many is not None:
        many(items)
        return
    one = getattr(target, write)
    for item in items:
        one(item)


def response_from_json(
    body: Mapping[str, Any], *, latency_ms: float | None = None
) -> SearchResponse:
    """Parse the reference engine's search body (also accepts ``hits``/``doc_id``).

    Shape: ``{"results": [{"id", "score", "resource"}], "filters": {"applied", "extracted"},
    "no_result", "confidence": {"value", "threshold", ...}, "score_threshold", "model",
    "latency_ms"}`` (``GET /search``), or the x402 Bazaar shape of ``GET /discovery/search``,
    ``{"resources": [{<discovered resource>, "id", "score"}], ...}`` with the same extra fields,
    where each item is its own ``resource``. A missing score counts as rank-implied (``-rank``).

    ``meta`` keeps ``model``, ``no_result``, ``profile``, ``confidence`` (the no-result
    decision's inputs: the reference engine sends ``{cos, coverage, rerank, value, threshold}``) and
    ``score_threshold`` when present, so the threshold-compliance invariant can check that no
    result is returned under the no-result threshold; ``latency_ms`` becomes
    ``server_latency_ms``; ``scores`` is ``"rank"`` when a result came without a score.
    """
    raw = body.get("results", body.get("hits"))
    discovered = raw is None and isinstance(body.get("resources"), list)
    if discovered:
        raw = body["resources"]
    if not isinstance(raw, list):
        raise TargetUnavailable("response has no 'results' list")
    hits: list[Hit] = []
    implied = False
    for rank, item in enumerate(raw):
        if isinstance(item, str):
            hits.append(Hit(id=item, score=float(-rank)))
            implied = True
            continue
        if not isinstance(item, Mapping):
            raise TargetUnavailable(f"result {rank} is not an object: {item!r}")
        doc_id = item.get("id", item.get("doc_id"))
        if doc_id is None:
            raise TargetUnavailable(f"result {rank} has no 'id'")
        score = item.get("score")
        implied = implied or score is None
        resource = item if discovered else item.get("resource")
        hits.append(
            Hit(
                id=str(doc_id),
                score=float(score) if score is not None else float(-rank),
                resource=resource if isinstance(resource, Mapping) else None,
            )
        )
    filters = body.get("filters")
    filters = filters if isinstance(filters, Mapping) else {}
    applied = filters.get("applied") or {}
    extracted = filters.get("extracted") or {}
    meta: dict[str, Any] = {
        k: body[k] for k in ("model", "no_result", "profile", "score_threshold") if k in body
    }
    confidence = body.get("confidence")
    if isinstance(confidence, Mapping):
        meta["confidence"] = dict(confidence)
    if implied:
        meta["scores"] = "rank"
    server_latency = body.get("latency_ms")
    if server_latency is not None:
        meta["server_latency_ms"] = server_latency
    return SearchResponse(
        hits=tuple(hits),
        applied_filters=dict(applied),
        extracted_filters=dict(extracted),
        latency_ms=latency_ms,
        meta=meta,
    )
