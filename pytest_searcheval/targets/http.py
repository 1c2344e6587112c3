"""A search service over HTTP: a base URL speaking the x402 Bazaar discovery protocol, or a
URL template. httpx is imported when a target is made, not with this module."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_searcheval.targets.protocol import (
    SearchFailed,
    SearchResponse,
    TargetUnreachable,
    response_from_json,
)

#: Statuses worth asking again: the server is overloaded or restarting, not refusing the query.
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})


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
    parameters under their vocabulary names.

    A transient failure (a connection error, a timeout, status 429 or 5xx) is retried
    ``retries`` times, waiting ``backoff`` seconds before the first retry and twice as long
    before each next one. What still fails raises :class:`SearchFailed` with the URL and the
    number of attempts (:class:`TargetUnreachable` when no attempt got an answer at all), as
    does a non-JSON body or another status >= 400: the query's error, not the profile's.
    :meth:`preflight` asks once whether the service answers at all.
    """

    #: decode bodies with orjson (:func:`_decode_json`): only for the reference engine's service
    fast_json = False

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float = 30.0,
        search_path: str = "/discovery/search",
        retries: int = 2,
        backoff: float = 0.5,
    ) -> None:
        import httpx

        if retries < 0 or backoff < 0:
            raise ValueError(f"retries and backoff must be >= 0, got {retries!r}, {backoff!r}")
        self.base_url = base_url.rstrip("/") if "{query}" not in base_url else base_url
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.search_path = search_path
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # One pooled client: keep-alive matters for latency measurements.
        self._client = httpx.Client(timeout=timeout, headers=headers)

    @property
    def is_template(self) -> bool:
        return "{query}" in self.base_url

    def close(self) -> None:
        self._client.close()

    def _get(self, url: str, params: Mapping[str, str] | None = None) -> Any:
        """``GET url``, retrying transient failures: the last attempt's response, the number
        of attempts, and the milliseconds the last one took."""
        import time

        import httpx

        attempts = self.retries + 1
        for attempt in range(1, attempts + 1):
            start = time.perf_counter()
            timed_out = False
            try:
                resp = self._client.get(url, params=params or None)
            except httpx.TimeoutException:
                failure, timed_out = f"timed out after {self.timeout:g} s", True
            except httpx.HTTPError as exc:
                failure = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code not in TRANSIENT_STATUS or attempt == attempts:
                    return resp, attempt, (time.perf_counter() - start) * 1000.0
                failure = ""
            if attempt == attempts:
                shown = _shown_url(url, params)
                where = (
                    f": GET {shown} ({_tries(attempts)})"
                    if timed_out
                    else f" (GET {shown}, {_tries(attempts)})"
                )
                raise TargetUnreachable(failure + where, url=shown, attempts=attempts)
            time.sleep(self.backoff * 2 ** (attempt - 1))
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def preflight(self) -> None:
        """Raise :class:`TargetUnreachable` when the service does not answer at all: one
        request to its origin, retried as a search is. Any HTTP answer, an error status
        included, shows that it answers."""
        from urllib.parse import urlsplit

        parts = urlsplit(self.base_url)
        self._get(f"{parts.scheme}://{parts.netloc}/")

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

    @property
    def one_profile(self) -> bool:
        """A template without ``{profile}``: every profile would send the same request, so
        the target serves one, ``default``."""
        return self.is_template and "{profile}" not in self.base_url

    @staticmethod
    def one_profile_error(template: str, profile: str) -> str:
        """Why ``profile`` cannot be asked of a URL template without ``{profile}``."""
        return (
            f"profile {profile!r}: the URL template {template} has no {{profile}} placeholder, "
            "so it serves one profile, 'default' (add {profile} to the template to send the "
            "profile)"
        )

    def profiles(self) -> Mapping[str, str | None]:
        if self.one_profile:
            return {"default": None}
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
        from urllib.parse import quote

        if self.one_profile and profile != "default":
            raise ValueError(self.one_profile_error(self.base_url, profile))
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
        # The answer's own time: failed attempts and the waits between them are no part of it.
        resp, attempts, elapsed = self._get(url, params)
        shown = str(resp.request.url)
        if resp.status_code >= 400:
            raise SearchFailed(
                f"HTTP {resp.status_code} from GET {shown} ({_tries(attempts)}): {resp.text[:300]}",
                url=shown,
                attempts=attempts,
            )
        try:
            body = _decode_json(resp.content, fast=self.fast_json)
        except ValueError:
            raise SearchFailed(
                f"non-JSON body from GET {shown}", url=shown, attempts=attempts
            ) from None
        if isinstance(body, list):
            body = {"results": body}
        if not isinstance(body, Mapping):
            raise SearchFailed(f"unexpected JSON from GET {shown}", url=shown, attempts=attempts)
        return response_from_json(body, latency_ms=elapsed)


def _tries(attempts: int) -> str:
    return "1 attempt" if attempts == 1 else f"{attempts} attempts"


def _shown_url(url: str, params: Mapping[str, str] | None) -> str:
    if not params:
        return url
    from urllib.parse import urlencode

    return url + ("&" if "?" in url else "?") + urlencode(params)
