"""What the plugin evaluates: the SearchTarget protocol and its standard implementations.

A target answers ``search(query, profile=..., limit=..., filters=...)`` with a ranked
``SearchResponse``. The plugin never trusts a target about filters: every returned hit is
checked against the corpus by :mod:`pytest_searcheval.constraints`.

Targets that can change their catalog (upsert, delete, re-index) implement ``MutableTarget``;
the mutating invariants run only on ``isolated()`` copies, never on the shared index.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

#: Filter keys every layer understands (engine HTTP parameters, the oracle, query constraints).
FILTER_KEYS: tuple[str, ...] = (
    "type",
    "network",
    "scheme",
    "asset",
    "recipient",
    "max_price_usd",
    "extension",
)


class TargetUnavailable(Exception):
    """The target cannot serve a profile (error, timeout, not configured). Never a zero score."""


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
        """Rank the catalog for ``query``; raise ``TargetUnavailable`` when the profile cannot answer."""
        ...

    def describe(self) -> Mapping[str, Any]:
        """Facts for the report: model id/revision/dimensions, server versions, and so on."""
        ...


@runtime_checkable
class MutableTarget(SearchTarget, Protocol):
    """A target whose catalog can be changed; the mutating invariants need one."""

    def upsert(self, document: Mapping[str, Any]) -> None: ...

    def delete(self, doc_id: str) -> None: ...

    def reindex(self) -> None: ...

    def isolated(self) -> AbstractContextManager[MutableTarget]:
        """A private copy of this target's catalog, dropped when the context exits."""
        ...
