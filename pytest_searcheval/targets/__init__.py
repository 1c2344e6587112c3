"""What the plugin evaluates: the SearchTarget protocol and its standard implementations.

One module per concern: the protocol and the result types (``protocol``), HTTP services
(``http``), Python callables (``callable``), the reference engine (``engine``), run files
(``run``), an x402 Bazaar facilitator (``bazaar``), and the default fixture's choice
(``default``). The public names are re-exported here; ``run``, ``bazaar`` and ``default`` are
imported by whoever needs them (``bazaar`` is x402 by nature).
"""

from __future__ import annotations

from pytest_searcheval.targets.callable import CallableTarget
from pytest_searcheval.targets.engine import EngineTarget, ServedEngineTarget
from pytest_searcheval.targets.http import HttpTarget
from pytest_searcheval.targets.protocol import (
    FilterUnsupported,
    Hit,
    MutableTarget,
    SearchFailed,
    SearchResponse,
    SearchTarget,
    TargetUnavailable,
    TargetUnreachable,
    response_from_json,
    write_in_bulk,
)

__all__ = [
    "CallableTarget",
    "EngineTarget",
    "FilterUnsupported",
    "Hit",
    "HttpTarget",
    "MutableTarget",
    "SearchFailed",
    "SearchResponse",
    "SearchTarget",
    "ServedEngineTarget",
    "TargetUnavailable",
    "TargetUnreachable",
    "response_from_json",
    "write_in_bulk",
]
