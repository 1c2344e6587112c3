"""The invariant families of x402 collections, registered through the public registry
(:func:`pytest_searcheval.invariants.invariant` with ``domain="x402"``) when the x402 domain
is loaded (:mod:`pytest_searcheval.x402.domain` imports this package), so they run exactly on
the collections of that domain:

``filter-monotonicity`` (:mod:`.monotonicity`)   tighter filters add no result, keep the order
``filter-conformance`` (:mod:`.conformance`)     the conformance set answered without violation
    or miss
``constraint-extraction`` (:mod:`.extraction`)   extracted filters against the labelled ones

They are collected where the built-in families were always collected: filter monotonicity
before threshold compliance, conformance and extraction after deletion isolation.
"""

from __future__ import annotations

from pytest_searcheval.x402.invariants.conformance import (
    check_conformance_case,
    conformance_dir,
    run_conformance,
)
from pytest_searcheval.x402.invariants.extraction import (
    EXTRACTION_FIELDS,
    check_extraction,
    extraction_counts,
)
from pytest_searcheval.x402.invariants.monotonicity import check_filter_monotonicity

__all__ = [
    "EXTRACTION_FIELDS",
    "check_conformance_case",
    "check_extraction",
    "check_filter_monotonicity",
    "conformance_dir",
    "extraction_counts",
    "run_conformance",
]
