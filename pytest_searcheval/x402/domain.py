"""The x402 domain: hard filters over payment options (type, network, scheme, asset, recipient,
USD price, extension), judged by the independent oracle in :mod:`pytest_searcheval.x402.oracle`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_searcheval.x402 import oracle
from pytest_searcheval.x402.vocabulary import FILTER_KEYS

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Collection, Document


class X402:
    name = "x402"
    filter_keys: tuple[str, ...] = tuple(FILTER_KEYS)

    def violations(
        self, document: Document, filters: Mapping[str, Any], collection: Collection
    ) -> list[str]:
        return list(oracle.violations(document, filters, collection.assets))

    def applied(self, filters: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in filters.items() if k in FILTER_KEYS and v is not None}
