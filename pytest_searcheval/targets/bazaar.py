"""Any x402 Bazaar facilitator as a target, through the official ``x402`` SDK's own client.

``--search-eval-url bazaar+https://facilitator.example/base`` selects it: the part after the
``bazaar+`` prefix is the facilitator's base URL as ``FacilitatorConfig(url=...)`` takes it (the
SDK appends ``/discovery/search``). Each search is the SDK's
``with_bazaar(HTTPFacilitatorClientSync(...)).extensions.bazaar.search(...)``, following
``pagination.cursor`` until ``limit`` results or the last page.

What the protocol can and cannot carry:

* filters: ``type``, ``network``, ``scheme``, ``recipient`` (``payTo``) and ``extension``
  (``extensions``) are sent as the protocol's parameters and reported as applied, so the plugin's
  oracle checks every result against them. ``asset`` and ``max_price_usd`` have no protocol
  parameter: a search that needs them raises :class:`FilterUnsupported` saying so (an invariant
  case that needs one is skipped with that reason, never answered without its filter);
* profiles: a facilitator has one ranking, served under the one profile name the target is given
  (the plugin gives the gated profile); every other profile is unavailable with that reason;
* ``extract``: the protocol has no such switch; the facilitator does what it does with the query
  text, and the target reports no extracted filters (the extraction invariant then skips);
* results are discovered resources without ids or scores: a result's id is the corpus document
  whose ``x402.resource`` it names (a resource outside the corpus keeps its URL, which the
  plugin reports as not a document of the corpus), its score the negated rank.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_searcheval.targets.protocol import (
    FilterUnsupported,
    Hit,
    SearchResponse,
    TargetUnavailable,
)
from pytest_searcheval.x402.vocabulary import BAZAAR_PARAMS, FILTER_KEYS

__all__ = ["URL_PREFIX", "BazaarTarget", "is_bazaar_url", "resource_ids"]

#: ``--search-eval-url`` prefix that selects this target.
URL_PREFIX = "bazaar+"
#: Pages followed for one search before giving up on a facilitator that keeps paging.
MAX_PAGES = 100

#: Filter key -> the SDK's ``SearchDiscoveryResourcesParams`` field.
_SDK_FIELD: dict[str, str] = {
    "type": "type",
    "network": "network",
    "scheme": "scheme",
    "recipient": "pay_to",
    "extension": "extensions",
}
#: Filters the protocol cannot carry.
UNSUPPORTED: tuple[str, ...] = tuple(k for k in FILTER_KEYS if k not in BAZAAR_PARAMS)


def is_bazaar_url(url: str) -> bool:
    """True for a ``bazaar+http(s)://...`` target URL."""
    return url.lower().startswith(URL_PREFIX)


def resource_ids(documents: Iterable[Any]) -> dict[str, str]:
    """``x402.resource`` -> document id over ``documents`` (the first id wins a shared URL)."""
    out: dict[str, str] = {}
    for doc in sorted(documents, key=lambda d: d.id):
        resource = (doc.x402 or {}).get("resource")
        if isinstance(resource, str) and resource not in out:
            out[resource] = doc.id
    return out


class BazaarTarget:
    """An x402 Bazaar facilitator's discovery search, asked through the official SDK.

    ``url``: the facilitator's base URL (with or without the ``bazaar+`` prefix); ``resources``:
    resource URL -> document id (:func:`resource_ids`); ``profile``: the name its one ranking
    is reported under; ``page_size``: the ``limit`` asked per page (default: the whole request
    in one page, which a facilitator may still split).
    """

    def __init__(
        self,
        url: str,
        *,
        resources: Mapping[str, str],
        profile: str = "hybrid",
        timeout: float = 30.0,
        page_size: int | None = None,
    ) -> None:
        from pytest_searcheval.x402.bazaar import require_sdk

        require_sdk()
        import httpx
        from x402.extensions.bazaar import with_bazaar
        from x402.http import FacilitatorConfig, HTTPFacilitatorClientSync

        base = url[len(URL_PREFIX) :] if is_bazaar_url(url) else url
        if not base.lower().startswith(("http://", "https://")):
            raise ValueError(
                f"Bazaar facilitator URL: expected bazaar+http(s)://host[/base], got {url!r}"
            )
        if page_size is not None and page_size < 1:
            raise ValueError(f"page_size: expected a positive integer, got {page_size}")
        self.url = base.rstrip("/")
        self.profile = profile
        self.timeout = timeout
        self.page_size = page_size
        self._resources = dict(resources)
        # One pooled connection for every page and query: keep-alive matters for latency.
        self._http = httpx.Client(timeout=timeout, follow_redirects=True)
        sync = HTTPFacilitatorClientSync(
            FacilitatorConfig(url=self.url, timeout=timeout, http_client=self._http)
        )
        # with_bazaar is annotated for the async client; its sync path is what it documents
        # for HTTPFacilitatorClientSync and what it calls (_get_client().get).
        self._client = with_bazaar(sync)  # type: ignore[arg-type]

    def close(self) -> None:
        self._http.close()

    def profiles(self) -> Mapping[str, str | None]:
        return {self.profile: None}

    def describe(self) -> Mapping[str, Any]:
        from importlib.metadata import PackageNotFoundError, version

        try:
            sdk = version("x402")
        except PackageNotFoundError:  # pragma: no cover - require_sdk() found it
            sdk = None
        return {
            "target": "bazaar",
            "url": self.url,
            "protocol": "x402 Bazaar discovery (GET /discovery/search)",
            "x402_sdk": sdk,
            "profile": self.profile,
            "filters": {
                "sent": {k: BAZAAR_PARAMS[k] for k in _SDK_FIELD},
                "unsupported": list(UNSUPPORTED),
            },
            "extract": "not a protocol parameter; no extracted filters are reported",
            "corpus_resources": len(self._resources),
        }

    def search(
        self,
        query: str,
        *,
        profile: str,
        limit: int = 20,
        filters: Mapping[str, Any] | None = None,
        extract: bool = True,
    ) -> SearchResponse:
        from x402.extensions.bazaar import SearchDiscoveryResourcesParams

        if profile != self.profile:
            raise TargetUnavailable(
                f"a Bazaar facilitator serves one ranking, measured as profile {self.profile!r}"
            )
        given = {k: v for k, v in (filters or {}).items() if v is not None and v != ""}
        unknown = sorted(k for k in given if k not in FILTER_KEYS)
        if unknown:
            raise TargetUnavailable(f"unknown filter(s) {', '.join(unknown)}")
        lacking = [k for k in UNSUPPORTED if k in given]
        if lacking:
            raise FilterUnsupported(
                "the x402 Bazaar discovery protocol has no parameter for "
                + ", ".join(lacking)
                + " (it filters by type, network, scheme, payTo and extensions only)"
            )
        sent = {_SDK_FIELD[k]: str(v) for k, v in given.items()}
        hits: list[Hit] = []
        cursor: str | None = None
        seen: set[str] = set()
        partial = False
        pages = 0
        start = time.perf_counter()
        while len(hits) < limit and pages < MAX_PAGES:
            want = limit - len(hits)
            params = SearchDiscoveryResourcesParams(
                query=query,
                limit=min(want, self.page_size) if self.page_size else want,
                cursor=cursor,
                **sent,
            )
            page = self._page(params)
            pages += 1
            partial = partial or bool(page.partial_results)
            for item in page.resources[:want]:
                rank = len(hits)
                hits.append(
                    Hit(
                        id=self._resources.get(item.resource, item.resource),
                        score=float(-rank),
                        resource=item.to_dict(),
                    )
                )
            cursor = page.pagination.cursor if page.pagination is not None else None
            if not cursor or cursor in seen or not page.resources:
                break
            seen.add(cursor)
        elapsed = (time.perf_counter() - start) * 1000.0
        return SearchResponse(
            hits=tuple(hits),
            applied_filters=dict(given),
            extracted_filters={},
            latency_ms=elapsed,
            meta={"pages": pages, "partial_results": partial},
        )

    def _page(self, params: Any) -> Any:
        import httpx

        try:
            return self._client.extensions.bazaar.search(params)
        except httpx.TimeoutException:
            raise TargetUnavailable(
                f"timed out after {self.timeout:g} s: {self.url}/discovery/search"
            ) from None
        except httpx.HTTPError as exc:
            raise TargetUnavailable(f"{type(exc).__name__}: {exc} ({self.url})") from None
        except ValueError as exc:  # the SDK's error for a non-200 answer, or a non-JSON body
            raise TargetUnavailable(str(exc)[:400]) from None
        except (AttributeError, TypeError, KeyError) as exc:  # JSON, but not a search response
            raise TargetUnavailable(
                f"{self.url}/discovery/search answered JSON that is not a discovery search"
                f" response ({type(exc).__name__}: {exc})"
            ) from None
