"""The x402 domain: hard filters over payment options (type, network, scheme, asset, recipient,
USD price, extension), judged by the independent oracle in :mod:`pytest_searcheval.x402.oracle`,
and the checks of x402 listing records and payment assets the generic loader asks for.
Loading it registers the x402 invariant families (:mod:`pytest_searcheval.x402.invariants`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_searcheval.x402 import invariants as _families  # noqa: F401  (registers them)
from pytest_searcheval.x402 import oracle, records
from pytest_searcheval.x402.vocabulary import FILTER_KEYS

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Asset, Collection, Document


class X402:
    name = "x402"
    filter_keys: tuple[str, ...] = tuple(FILTER_KEYS)
    record_key: str | None = "x402"

    def violations(
        self, document: Document, filters: Mapping[str, Any], collection: Collection
    ) -> list[str]:
        return list(oracle.violations(document, filters, collection.assets))

    def applied(self, filters: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in filters.items() if k in FILTER_KEYS and v is not None}

    def record_problems(self, record: Mapping[str, Any]) -> list[tuple[str, str]]:
        return records.record_problems(record)

    def asset_problems(self, asset: Mapping[str, Any]) -> list[tuple[str, str]]:
        return records.asset_problems(asset)

    def filter_problems(
        self, filters: Mapping[str, Any], assets: Sequence[Asset]
    ) -> list[tuple[str, str]]:
        return oracle.check_filters(filters, assets)

    def normalize_filters(self, filters: Mapping[str, Any]) -> dict[str, Any]:
        return oracle.normalize_filters(filters)

    def collection_checks(self, collection: Collection, root: Path | None) -> list[str]:
        """The filter-conformance suite beside the collection (``conformance/``), loaded and
        checked against the oracle."""
        conf = Path(root) / "conformance" if root is not None else None
        if conf is None or not conf.is_dir():
            return []
        from pytest_searcheval.x402.conformance import load_conformance

        cs = load_conformance(conf, collection.assets)
        return [f"conformance: {len(cs.documents)} listings, {len(cs.cases)} cases, oracle agrees"]
