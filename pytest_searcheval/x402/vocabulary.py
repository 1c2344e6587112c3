"""The hard-filter vocabulary shared by every layer: HTTP parameters, the engine's filter SQL,
the independent oracle and the queries' labelled constraints.

Only names live here, no logic, so the oracle and the engine stay independent implementations of
the same contract (docs/formats.md gives the semantics of each key).
"""

from __future__ import annotations

FILTER_KEYS: tuple[str, ...] = (
    "type",
    "network",
    "scheme",
    "asset",
    "recipient",
    "max_price_usd",
    "extension",
)

#: The x402 Bazaar discovery query parameter (the official SDK's name) of each filter key the
#: protocol has; the others (``asset``, ``max_price_usd``) have no protocol parameter.
BAZAAR_PARAMS: dict[str, str] = {
    "type": "type",
    "network": "network",
    "scheme": "scheme",
    "recipient": "payTo",
    "extension": "extensions",
}
