"""The reference engine as a target, in-process or behind its HTTP service.

These wrap an engine object handed in by the caller (``targets/default.py`` builds one); this
module imports no engine code itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from pytest_searcheval.targets.http import HttpTarget
from pytest_searcheval.targets.protocol import (
    MutableTarget,
    SearchResponse,
    TargetUnavailable,
    response_from_json,
    write_in_bulk,
)


class _EngineCatalog:
    """Catalog changes and private copies through an in-process reference engine."""

    engine: Any

    def defaults(self) -> Mapping[str, Any]:
        """The reference engine's gate: hybrid is gated and must not fall below lexical."""
        return {"gated_profile": "hybrid", "gate_over": "lexical"}

    def upsert(self, document: Mapping[str, Any]) -> None:
        self.engine.upsert(dict(document))

    def delete(self, doc_id: str) -> None:
        self.engine.delete(doc_id)

    def upsert_many(self, documents: Sequence[Mapping[str, Any]]) -> None:
        """In one write when the engine has ``upsert_many``, else one upsert per document."""
        write_in_bulk(self.engine, "upsert", [dict(d) for d in documents])

    def delete_many(self, doc_ids: Sequence[str]) -> None:
        """In one write when the engine has ``delete_many``, else one delete per id."""
        write_in_bulk(self.engine, "delete", list(doc_ids))

    def reindex(self) -> None:
        self.engine.reindex()

    @contextmanager
    def isolated(self) -> Iterator[MutableTarget]:
        # The reference engine's scratch() is a rolled-back view of its own schema: the same
        # answers as a copied schema without copying the index tables. Other engines: clone().
        clone = getattr(self.engine, "scratch", self.engine.clone)()
        try:
            yield EngineTarget(clone, owns=True)
        finally:
            clone.close()


class EngineTarget(_EngineCatalog):
    """The reference engine in-process (no HTTP). Mutable: ``isolated()`` is ``engine.clone()``."""

    def __init__(self, engine: Any, *, owns: bool = False) -> None:
        self.engine = engine
        self._owns = owns

    def profiles(self) -> Mapping[str, str | None]:
        return dict(self.engine.profiles())

    def describe(self) -> Mapping[str, Any]:
        return {"target": "engine"} | dict(self.engine.describe())

    def search(
        self,
        query: str,
        *,
        profile: str,
        limit: int = 20,
        filters: Mapping[str, Any] | None = None,
        extract: bool = True,
    ) -> SearchResponse:
        import time

        start = time.perf_counter()
        try:
            body = self.engine.search(
                query, profile=profile, limit=limit, filters=filters, extract=extract
            )
        except TargetUnavailable:
            raise
        except Exception as exc:
            raise TargetUnavailable(f"{type(exc).__name__}: {exc}") from exc
        return response_from_json(body, latency_ms=(time.perf_counter() - start) * 1000.0)

    def close(self) -> None:
        if self._owns:
            self.engine.close()


class ServedEngineTarget(_EngineCatalog, HttpTarget):
    """The reference engine behind its real HTTP service: searches go over HTTP (what users
    deploy is what gets measured); catalog changes and ``isolated()`` copies use the engine
    in-process, so the mutating invariants never touch the served index."""

    fast_json = True  # its bodies are this package's own (targets/http.py: _decode_json)

    def __init__(self, engine: Any, base_url: str, *, timeout: float = 30.0) -> None:
        super().__init__(base_url, timeout=timeout)
        self.engine = engine

    def describe(self) -> Mapping[str, Any]:
        facts = dict(super().describe())
        try:
            facts["engine"] = dict(self.engine.describe())
        except Exception as exc:  # the served facts still stand
            facts["engine"] = {"error": f"{type(exc).__name__}: {exc}"}
        return facts
