"""Assertion helpers for hand-written search tests.

The plugin registers this module for pytest's assertion rewriting
(``pytest.register_assert_rewrite``), so the plain ``assert`` statements below fail with
pytest's explanation and the plugin's ``pytest_assertrepr_compare`` adds the ranking that was
returned, with grades and the baseline's ranking. Outside pytest they are ordinary asserts.
"""

from __future__ import annotations

from pytest_searcheval.assertions.result import Measures, SearchResult


def assert_rank(result: SearchResult, doc_id: str, *, at_most: int = 1) -> None:
    """``doc_id`` is returned at rank ``at_most`` or better."""
    __tracebackhide__ = True
    rank = result.rank(doc_id)
    assert rank is not None, "\n".join(
        [f"{doc_id!r} was not returned", *result.explain(mark=[doc_id])]
    )
    assert rank <= at_most


def assert_in_top(result: SearchResult, doc_id: str, k: int) -> None:
    """``doc_id`` is among the first ``k`` results."""
    __tracebackhide__ = True
    assert doc_id in result.top(k)


def assert_not_in_top(result: SearchResult, doc_id: str, k: int) -> None:
    """``doc_id`` is not among the first ``k`` results."""
    __tracebackhide__ = True
    assert doc_id not in result.top(k)


def assert_measure(measures: Measures, name: str, *, at_least: float) -> None:
    """Measure ``name`` of a golden query reaches ``at_least``."""
    __tracebackhide__ = True
    assert measures[name] >= at_least, measures.explain()
