"""Query and path parameters, checked by hand so that every bad value is a 4xx naming it.

Each check returns the value the handler uses or raises :class:`ClientError` with the HTTP
status, the parameter at fault and what was expected; the error handler (:mod:`.errors`)
turns it into the service's error body.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote_to_bytes

from pytest_searcheval.engine import bazaar
from pytest_searcheval.engine.x402 import (
    FILTER_KEYS,
    AssetLike,
    FilterError,
    Filters,
    parse_filters,
)

__all__ = [
    "LIST_LIMIT_DEFAULT",
    "MAX_BODY_BYTES",
    "MAX_ID_CHARS",
    "MAX_LIMIT",
    "MAX_OFFSET",
    "MAX_QUERY_CHARS",
    "PROFILES_DEFAULT",
    "SEARCH_PARAMS",
    "ClientError",
    "discovery_filters",
    "flag",
    "limit",
    "offset",
    "path_id",
    "profile",
    "query",
    "single",
]

MAX_QUERY_CHARS = 512
MAX_LIMIT = 1000
MAX_ID_CHARS = 256
MAX_BODY_BYTES = 1_000_000
MAX_OFFSET = 10**9
LIST_LIMIT_DEFAULT = 100
PROFILES_DEFAULT = "hybrid"
SEARCH_PARAMS = ("q", "profile", "limit", "extract", *FILTER_KEYS)
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


class ClientError(Exception):
    """A request the service refuses: HTTP ``status``, the ``field`` at fault, what was wrong."""

    def __init__(
        self, status: int, field: str | None, message: str, extra: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.field = field
        self.message = message
        self.extra = dict(extra or {})


def single(
    params: Sequence[tuple[str, str]], allowed: Sequence[str] = SEARCH_PARAMS
) -> dict[str, str]:
    """Query parameters as a dict; unknown, repeated or NUL-carrying ones are client errors."""
    out: dict[str, str] = {}
    for key, value in params:
        if key not in allowed:
            shown = key if len(key) <= 40 and "\x00" not in key else repr(key[:40])
            raise ClientError(
                400,
                shown,
                f"unknown parameter {shown!r}: expected one of {', '.join(allowed)}",
            )
        if key in out:
            raise ClientError(400, key, f"parameter {key!r} given more than once")
        if "\x00" in value:
            raise ClientError(400, key, "contains a NUL byte")
        out[key] = value
    return out


def limit(raw: str | None, default: int = 10) -> int:
    if raw is None:
        return default
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 7:
        raise ClientError(
            400, "limit", f"expected an integer in [1, {MAX_LIMIT}], got {raw[:20]!r}"
        )
    value = int(text)
    if not 1 <= value <= MAX_LIMIT:
        raise ClientError(400, "limit", f"expected an integer in [1, {MAX_LIMIT}], got {value}")
    return value


def offset(raw: str | None) -> int:
    if raw is None:
        return 0
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 10 or int(text) >= MAX_OFFSET:
        raise ClientError(
            400, "offset", f"expected an integer in [0, {MAX_OFFSET}), got {raw[:20]!r}"
        )
    return int(text)


def flag(raw: str | None, name: str, default: bool) -> bool:
    if raw is None:
        return default
    low = raw.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ClientError(400, name, f"expected true or false, got {raw[:20]!r}")


def query(raw: str | None, cap: int, name: str = "q") -> str:
    if raw is None:
        raise ClientError(400, name, "missing: the query text is required")
    if len(raw) > cap:
        raise ClientError(400, name, f"longer than {cap} characters ({len(raw)} given)")
    if not raw.strip():
        raise ClientError(400, name, "empty: the query text is required")
    if "\ufffd" in raw:
        raise ClientError(400, name, "not valid UTF-8 (percent-encoded bytes must decode)")
    return raw


def discovery_filters(params: Mapping[str, str], assets: Sequence[AssetLike]) -> Filters:
    """Filters from Bazaar parameters; an invalid value is reported under its parameter name."""
    raw: dict[str, str] = {}
    for name, value in params.items():
        key = bazaar.filter_key(name)
        if key is not None:
            raw[key] = value
    try:
        return parse_filters(raw, assets)
    except FilterError as exc:
        raise ClientError(400, bazaar.filter_param(exc.field), exc.message) from None


def profile(raw: str | None, profiles: Mapping[str, str | None]) -> str:
    name = PROFILES_DEFAULT if raw is None else raw
    if name not in profiles:
        shown = name if len(name) <= 40 else name[:40] + "..."
        raise ClientError(
            400, "profile", f"unknown profile {shown!r}: expected one of {', '.join(profiles)}"
        )
    reason = profiles[name]
    if reason is not None:
        raise ClientError(
            503,
            "profile",
            f"profile {name!r} is unavailable: {reason}",
            {"profile": name, "reason": reason},
        )
    return name


def path_id(doc_id: str, raw_path: bytes | None = None) -> str:
    """The document id of an admin path; ``raw_path`` is the path as sent (``scope["raw_path"]``).

    The server decodes percent-escapes with replacement, so ``%FF`` and ``%FE`` would both
    arrive as U+FFFD and name one document: an id whose escapes are not UTF-8 is refused,
    checked on the bytes as sent (a U+FFFD sent as ``%EF%BF%BD`` is a character like any)."""
    if raw_path is not None:
        try:
            unquote_to_bytes(raw_path).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ClientError(
                400,
                "id",
                f"not valid UTF-8: percent-encoded bytes must decode as UTF-8 ({exc.reason})",
            ) from None
    if not doc_id or len(doc_id) > MAX_ID_CHARS:
        raise ClientError(400, "id", f"expected 1 to {MAX_ID_CHARS} characters")
    if "\x00" in doc_id:
        raise ClientError(400, "id", "contains a NUL byte")
    return doc_id
