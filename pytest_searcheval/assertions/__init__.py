"""Search assertions for ordinary pytest tests, without pytest in them.

:class:`~pytest_searcheval.assertions.result.SearchResult` is what the ``searcheval`` fixture's
``search()`` returns, :class:`~pytest_searcheval.assertions.result.Measures` what its
``measure()`` returns, :mod:`~pytest_searcheval.assertions.snapshot` the ranking snapshots of
the ``ranking_snapshot`` fixture. The helpers of :mod:`~pytest_searcheval.assertions.checks`
(``assert_rank``, ``assert_in_top``, ``assert_not_in_top``, ``assert_measure``) are imported on
first use, after the plugin has registered that module for pytest's assertion rewriting.
"""

from __future__ import annotations

from typing import Any

from pytest_searcheval.assertions.result import (
    Context,
    Measures,
    MeasureUndefined,
    Rank,
    SearchResult,
    Top,
)
from pytest_searcheval.assertions.snapshot import Tolerance

_CHECKS = ("assert_rank", "assert_in_top", "assert_not_in_top", "assert_measure")

__all__ = [
    "Context",
    "MeasureUndefined",
    "Measures",
    "Rank",
    "SearchResult",
    "Tolerance",
    "Top",
    *_CHECKS,
]


def __getattr__(name: str) -> Any:
    # Imported late: a module imported before pytest's rewrite hook knows it keeps bare asserts.
    if name in _CHECKS:
        from pytest_searcheval.assertions import checks

        return getattr(checks, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
