"""A search service over HTTP: a base URL speaking the x402 Bazaar discovery protocol, or a
URL template. httpx is imported when a target is made, not with this module."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_searcheval.targets.protocol import (
    SearchResponse,
    TargetUnavailable,
    response_from_json,
)


def _decode_json(content: bytes, *, fast: bool = False) -> Any:
    """The JSON of a response body, as the standard library reads it.

    ``fast`` (the reference engine's own service, whose bodies this package writes): orjson
    when installed (the ``engine`` extra; a 100-result Bazaar answer of 154 KB decodes in 1.3 ms
    instead of 2.5 ms), with the standard library for what orjson refuses (NaN, UTF-16) and for
    a body with a float result id. orjson reads an integer beyond 64 bits as a float, so a
    service this package did not write is always read by ``json``, which keeps every digit."""
    import json

    if not fast:
        return json.loads(content)
    try:
        import orjson
    except ImportError:
        return json.loads(content)
    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError:
        return json.loads(content)
    items = body
    if isinstance(body, dict):
        items = next(
            (body[k] for k in ("results", "hits", "resources") if isinstance(body.get(k), list)),
            None,
        )
    if isinstance(items, list) and any(
        isinstance(item, dict) and isinstance(item.get("id", item.get("doc_id")), float)
        for item in items
    ):
        return json.loads(content)
    return body


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

    #: decode bodies with orjson (:func:`_decode_json`): only for the reference engine's service
    fast_json = False

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

    def defaults(self) -> Mapping[str, Any]:
        """The gated and gate-over profiles the service advertises in ``/healthz`` under
        ``defaults`` (the reference engine: hybrid over lexical); settings still win. Without
        them the first profile the service lists is gated."""
        advertised = self._health().get("defaults")
        if not isinstance(advertised, Mapping):
            return {}
        return {
            k: v
            for k, v in advertised.items()
            if k in ("gated_profile", "gate_over") and isinstance(v, str) and v
        }

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
            body = _decode_json(resp.content, fast=self.fast_json)
        except ValueError:
            raise TargetUnavailable(f"non-JSON body from GET {resp.request.url}") from None
        if isinstance(body, list):
            body = {"results": body}
        if not isinstance(body, Mapping):
            raise TargetUnavailable(f"unexpected JSON from GET {resp.request.url}")
        return response_from_json(body, latency_ms=elapsed)
