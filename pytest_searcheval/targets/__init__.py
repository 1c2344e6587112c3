"""What the plugin evaluates: the SearchTarget protocol and its standard implementations.

A target answers ``search(query, profile=..., limit=..., filters=...)`` with a ranked
``SearchResponse``. The plugin never trusts a target about filters: every returned hit is
checked against the corpus by the collection's domain (:mod:`pytest_searcheval.domain`).

Targets that can change their catalog (upsert, delete, re-index) implement ``MutableTarget``;
the mutating invariants run only on ``isolated()`` copies, never on the shared index.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "CallableTarget",
    "EngineTarget",
    "FilterUnsupported",
    "Hit",
    "HttpTarget",
    "MutableTarget",
    "SearchResponse",
    "SearchTarget",
    "ServedEngineTarget",
    "TargetUnavailable",
]


class TargetUnavailable(Exception):
    """The target cannot serve a profile (error, timeout, not configured). Never a zero score."""


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
    """A target whose catalog can be changed; the mutating invariants need one."""

    def upsert(self, document: Mapping[str, Any]) -> None: ...

    def delete(self, doc_id: str) -> None: ...

    def reindex(self) -> None: ...

    def isolated(self) -> AbstractContextManager[MutableTarget]:
        """A private copy of this target's catalog, dropped when the context exits."""
        ...


# --------------------------------------------------------------------------------------------
# Standard implementations. Heavy or optional imports (httpx, the engine) happen inside them.


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
    ``server_latency_ms``.
    """
    raw = body.get("results", body.get("hits"))
    discovered = raw is None and isinstance(body.get("resources"), list)
    if discovered:
        raw = body["resources"]
    if not isinstance(raw, list):
        raise TargetUnavailable("response has no 'results' list")
    hits: list[Hit] = []
    for rank, item in enumerate(raw):
        if isinstance(item, str):
            hits.append(Hit(id=item, score=float(-rank)))
            continue
        if not isinstance(item, Mapping):
            raise TargetUnavailable(f"result {rank} is not an object: {item!r}")
        doc_id = item.get("id", item.get("doc_id"))
        if doc_id is None:
            raise TargetUnavailable(f"result {rank} has no 'id'")
        score = item.get("score")
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


class HttpTarget:
    """A search service over HTTP.

    ``base_url`` is either a base (``http://host:port``; requests go to ``/discovery/search``
    in the x402 Bazaar protocol with the reference engine's extra parameters: ``query``,
    ``limit``, the filters under their protocol names (``payTo``, ``extensions``; ``asset`` and
    ``max_price_usd`` as extras), ``profile`` and ``extract``; ``/healthz`` describes it), or a
    template containing ``{query}`` (and optionally ``{profile}``, ``{limit}``), e.g.
    ``http://host/search?q={query}&mode={profile}``; filters are then appended as query
    parameters under their vocabulary names. Any transport error, timeout, non-JSON body or
    status >= 400 raises :class:`TargetUnavailable` with the reason, so the profile is reported
    unavailable.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float = 30.0,
        search_path: str = "/discovery/search",
    ) -> None:
        import httpx

        self.base_url = base_url.rstrip("/") if "{query}" not in base_url else base_url
        self.token = token
        self.timeout = timeout
        self.search_path = search_path
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # One pooled client: keep-alive matters for latency measurements.
        self._client = httpx.Client(timeout=timeout, headers=headers)

    @property
    def is_template(self) -> bool:
        return "{query}" in self.base_url

    def close(self) -> None:
        self._client.close()

    def _health(self) -> Mapping[str, Any]:
        if self.is_template:
            return {}
        import httpx

        try:
            resp = self._client.get(self.base_url + "/healthz")
        except httpx.HTTPError as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}
        if resp.status_code != 200:
            return {"error": f"GET /healthz: HTTP {resp.status_code}"}
        try:
            body = resp.json()
        except ValueError:
            return {"error": "GET /healthz: body is not JSON"}
        return body if isinstance(body, Mapping) else {}

    def profiles(self) -> Mapping[str, str | None]:
        health = self._health()
        profiles = health.get("profiles")
        if isinstance(profiles, Mapping):
            return {str(k): (None if v is None else str(v)) for k, v in profiles.items()}
        return {}

    def describe(self) -> Mapping[str, Any]:
        health = dict(self._health())
        health["url"] = self.base_url
        health["target"] = "http"
        return health

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
        from urllib.parse import quote

        import httpx

        params: dict[str, str] = {k: str(v) for k, v in (filters or {}).items() if v is not None}
        if not self.is_template:
            from pytest_searcheval.x402.vocabulary import BAZAAR_PARAMS

            params = {BAZAAR_PARAMS.get(k, k): v for k, v in params.items()}
        if self.is_template:
            url = self.base_url.format(
                query=quote(query, safe=""), profile=quote(profile, safe=""), limit=limit
            )
        else:
            url = self.base_url + self.search_path
            params.update(
                query=query,
                profile=profile,
                limit=str(limit),
                extract="true" if extract else "false",
            )
        if self.is_template and params:
            # Appended by hand: httpx replaces (not extends) a URL's query when given params.
            from urllib.parse import urlencode

            url += ("&" if "?" in url else "?") + urlencode(params)
            params = {}
        start = time.perf_counter()
        try:
            resp = self._client.get(url, params=params or None)
        except httpx.TimeoutException:
            raise TargetUnavailable(f"timed out after {self.timeout:g} s: GET {url}") from None
        except httpx.HTTPError as exc:
            raise TargetUnavailable(f"{type(exc).__name__}: {exc} (GET {url})") from None
        elapsed = (time.perf_counter() - start) * 1000.0
        if resp.status_code >= 400:
            raise TargetUnavailable(
                f"HTTP {resp.status_code} from GET {resp.request.url}: {resp.text[:300]}"
            )
        try:
            body = resp.json()
        except ValueError:
            raise TargetUnavailable(f"non-JSON body from GET {resp.request.url}") from None
        if isinstance(body, list):
            body = {"results": body}
        if not isinstance(body, Mapping):
            raise TargetUnavailable(f"unexpected JSON from GET {resp.request.url}")
        return response_from_json(body, latency_ms=elapsed)


def _coerce(result: Any) -> SearchResponse:
    if isinstance(result, SearchResponse):
        return result
    if isinstance(result, Mapping):
        return response_from_json(result)
    hits: list[Hit] = []
    for rank, item in enumerate(result):
        if isinstance(item, Hit):
            hits.append(item)
        elif isinstance(item, str):
            hits.append(Hit(id=item, score=float(-rank)))
        else:
            doc_id, score = item
            hits.append(Hit(id=str(doc_id), score=float(score)))
    return SearchResponse(hits=tuple(hits))


class CallableTarget:
    """Wrap a Python function as a target.

    ``fn(query, *, profile, limit, filters, extract)`` returns a :class:`SearchResponse`, a JSON
    body like the reference engine's, a sequence of doc ids (best first), or of ``(id, score)``
    pairs. ``profiles``: names it serves (``None``: every configured profile is tried). Raise
    :class:`TargetUnavailable` for a profile it cannot serve; any other exception is turned into
    unavailability with the exception as the reason.
    """

    def __init__(
        self,
        fn: Any,
        *,
        profiles: Iterable[str] | None = None,
        description: Mapping[str, Any] | None = None,
    ) -> None:
        self.fn = fn
        self._profiles = tuple(profiles) if profiles is not None else None
        self._description = dict(description or {})

    def profiles(self) -> Mapping[str, str | None]:
        return {p: None for p in self._profiles} if self._profiles is not None else {}

    def describe(self) -> Mapping[str, Any]:
        return {
            "target": "callable",
            "callable": getattr(self.fn, "__qualname__", repr(self.fn)),
        } | (self._description)

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
        result = self.fn(query, profile=profile, limit=limit, filters=filters, extract=extract)
        elapsed = (time.perf_counter() - start) * 1000.0
        response = _coerce(result)
        if response.latency_ms is None:
            response = replace(response, latency_ms=elapsed)
        return response


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
