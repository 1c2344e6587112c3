"""x402 Bazaar discovery, as the official ``x402`` SDK's client speaks it, over the engine.

The protocol (``x402.extensions.bazaar.facilitator_client`` in the SDK, version 2.25):

* ``GET /discovery/search`` with ``query`` (required), ``type``, ``payTo``, ``scheme``,
  ``network``, ``extensions``, ``limit``, ``cursor`` answers ``{x402Version, resources: [...],
  partialResults, pagination: {limit, cursor}}``;
* ``GET /discovery/resources`` with ``type``, ``payTo``, ``scheme``, ``network``, ``extensions``,
  ``limit``, ``offset`` answers ``{x402Version, items: [...], pagination: {limit, offset,
  total}}``;

each item a discovered resource (``resource, type, x402Version, accepts, lastUpdated,
description, mimeType, serviceName, tags, iconUrl, extensions``).

The engine's additions are extra parameters (``profile``, ``asset``, ``max_price_usd``,
``extract``, ``explain``) and extra fields (each item's ``id`` and ``score``, ``explanation``
on request; the response's ``query``, ``profile``, ``filters``, ``no_result``, ``confidence``,
``model``, ``latency_ms``). The SDK's client neither sends the extra parameters nor reads the
extra fields, so it works unchanged.

Cursors are stateless: the offset of the next page in the ranked list and a fingerprint of the
search they continue (query, profile, filters, extract), so a cursor given to another search is
refused instead of paging through the wrong list. Pages are cut from a fresh ranking, so a
catalog change between two requests can move a listing across the page boundary.

Nothing here imports the SDK: the engine serves the protocol by its shape, and the project's
tests check it with the SDK's own client.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_searcheval.x402.vocabulary import BAZAAR_PARAMS, FILTER_KEYS

__all__ = [
    "LIST_PARAMS",
    "SEARCH_PARAMS",
    "X402_VERSION",
    "CursorError",
    "decode_cursor",
    "discovery_item",
    "encode_cursor",
    "filter_key",
    "filter_param",
    "fingerprint",
]

#: The x402 protocol version of the responses (``x402Version``).
X402_VERSION = 2

#: Filter key (shared vocabulary) -> query parameter: the SDK's name where the protocol has one,
#: else the key itself (an extra parameter).
_PARAM_OF: dict[str, str] = {key: BAZAAR_PARAMS.get(key, key) for key in FILTER_KEYS}
_KEY_OF: dict[str, str] = {param: key for key, param in _PARAM_OF.items()}

#: The SDK's filter parameters, shared by search and list.
_PROTOCOL_FILTERS: tuple[str, ...] = tuple(BAZAAR_PARAMS.values())
#: The engine's filters without a protocol parameter.
_EXTRA_FILTERS: tuple[str, ...] = tuple(k for k in FILTER_KEYS if k not in BAZAAR_PARAMS)

#: ``GET /discovery/search``: the SDK's parameters, then the engine's additions.
SEARCH_PARAMS: tuple[str, ...] = (
    "query",
    *_PROTOCOL_FILTERS,
    "limit",
    "cursor",
    "profile",
    *_EXTRA_FILTERS,
    "extract",
    "explain",
)
#: ``GET /discovery/resources``: the SDK's parameters, then the engine's additions.
LIST_PARAMS: tuple[str, ...] = (*_PROTOCOL_FILTERS, "limit", "offset", *_EXTRA_FILTERS)

_CURSOR_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def filter_param(key: str) -> str:
    """The query parameter that carries filter ``key`` (``recipient`` -> ``payTo``)."""
    return _PARAM_OF.get(key, key)


def filter_key(param: str) -> str | None:
    """The filter key a query parameter carries, or None when it carries no filter."""
    return _KEY_OF.get(param)


class CursorError(ValueError):
    """A cursor this service did not issue, or one issued for another search."""


def fingerprint(query: str, profile: str, filters: Mapping[str, Any], extract: bool) -> str:
    """12 hex digits identifying one search (what a cursor may continue)."""
    canonical = json.dumps(
        [query, profile, sorted((str(k), str(v)) for k, v in filters.items()), extract],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]


def encode_cursor(offset: int, search: str) -> str:
    """An opaque token: ``offset`` of the next page and the ``fingerprint`` of its search."""
    raw = f"{offset}.{search}".encode("ascii")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(token: str, search: str, max_offset: int) -> int:
    """The offset a cursor carries; :class:`CursorError` unless this service issued it for the
    search ``search`` (a fingerprint) and its offset lies in ``[1, max_offset]``."""
    foreign = "not a cursor from this service (expected the pagination.cursor of a response)"
    if not _CURSOR_RE.fullmatch(token):
        raise CursorError(foreign)
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise CursorError(foreign) from None
    offset_text, dot, issued_for = text.partition(".")
    if not dot or not offset_text.isascii() or not offset_text.isdigit() or len(offset_text) > 9:
        raise CursorError(foreign)
    if issued_for != search:
        raise CursorError(
            "issued for another search: query, profile, filters and extract must stay the same"
            " while paging"
        )
    offset = int(offset_text)
    if not 1 <= offset <= max_offset:
        raise CursorError(f"offset {offset} outside [1, {max_offset}]")
    return offset


@dataclass(frozen=True)
class Page:
    """One page cut from a ranked list: the rows, the next cursor, whether matches were cut."""

    rows: Sequence[Mapping[str, Any]]
    cursor: str | None
    partial: bool


def cut_page(
    ranked: Sequence[Mapping[str, Any]], offset: int, limit: int, depth: int, search: str
) -> Page:
    """The page ``[offset, offset + limit)`` of ``ranked`` (the engine's answer to a request for
    ``min(offset + limit + 1, depth)`` results). A next cursor exists when a result lies past the
    page; ``partial`` is true when the ranking may go on beyond ``depth``, the deepest result a
    cursor can reach."""
    end = offset + limit
    rows = ranked[offset:end]
    more = len(ranked) > end
    partial = not more and len(ranked) >= depth
    return Page(rows, encode_cursor(end, search) if more else None, partial)


def discovery_item(doc_id: str, resource: Mapping[str, Any] | None, **extra: Any) -> dict[str, Any]:
    """A discovered-resource item: the stored wire object with the protocol's required keys
    filled in when a record lacks them, then the engine's extra fields (``id`` first).

    A generic document (no ``x402`` object) is served with its id as ``resource``, an empty
    ``type`` and no payment options, so the SDK's parser still reads it.
    """
    item: dict[str, Any] = {
        "resource": doc_id,
        "type": "",
        "x402Version": X402_VERSION,
        "accepts": [],
        "lastUpdated": "",
    }
    if resource:
        item.update(resource)
    item["id"] = doc_id
    item.update(extra)
    return item


#: Fields of the engine's own body that a ``/discovery/search`` response carries beside the
#: protocol's (the SDK's client ignores them).
SEARCH_EXTRA_FIELDS: tuple[str, ...] = (
    "query",
    "profile",
    "filters",
    "no_result",
    "why_empty",
    "confidence",
    "model",
    "latency_ms",
)
