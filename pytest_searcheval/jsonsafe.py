"""One JSON-safe copy of the mappings a record keeps (filters may hold Decimals, details
may hold tuples or paths): the query rows and the invariant records both use it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_PLAIN = (str, int, float, bool, type(None))


def json_safe(value: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``value`` that ``json.dumps`` writes and ``json.loads`` reads back equal.

    Values of a type JSON lacks become their ``str``; a mapping of plain values is copied
    without the round trip (the common case of a query row's filters)."""
    if not value:
        return {}
    if all(isinstance(v, _PLAIN) for v in value.values()):
        return dict(value)
    out: dict[str, Any] = json.loads(json.dumps(dict(value), default=str))
    return out
