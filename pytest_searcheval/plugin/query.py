"""The query test: search every profile, score, check filters and expectations, explain.

``test_query[<qid>-<class>]`` fails on a hard-filter violation (the independent oracle of the
collection's domain), an answer to an unanswerable query, an unmet declared expectation, or a
per-query drop below the baseline. Its message is the whole triage report. The searching and
scoring are :mod:`pytest_searcheval.evaluation`'s; this module is the pytest Item.
"""

from __future__ import annotations

from typing import cast

from pytest_searcheval.evaluation import evaluate_query, format_failure
from pytest_searcheval.plugin.items import SearchError, SearchEvalItem
from pytest_searcheval.reasons import Reason
from pytest_searcheval.targets import SearchTarget


def _query_test(searcheval_target: SearchTarget) -> None:
    """Stands for the generated query tests (their fixtures); :meth:`QueryItem.runtest` runs
    them. Not taking ``request`` spares pytest a fixture definition per test."""


class QueryItem(SearchEvalItem):
    """``test_query[<qid>-<class>]``: one golden query against every profile."""

    kind = "query"
    ledger_kind = "queries"
    function = staticmethod(_query_test)

    def passed_before(self) -> bool:
        from pytest_searcheval.baseline.ledger import ledger

        state = self.state
        return state.baseline_query(self.key) is not None and self.key not in ledger(
            state.baseline, "queries"
        )

    def runtest(self) -> None:
        state = self.state
        target = cast(SearchTarget, self.funcargs["searcheval_target"])
        row = evaluate_query(state, target, self.payload)
        if state.cfg.gated in (row.get("errors") or {}):
            # The search failed: an error of this query, not a quality verdict the known-
            # failure ledger could excuse.
            row["ledger"] = None
            state.record("query", row)
            state.invariant_context.query_errors.add(self.payload.id)
            raise SearchError(format_failure(state, row))
        state.judged(target, self.payload)
        reasons = [Reason.from_dict(r) for r in row["reasons"]]
        verdict = self.verdict(reasons) if reasons else None
        row["ledger"] = self.ledger_status(bool(reasons), verdict)
        state.record("query", row)
        if verdict is not None:
            self.raise_failure(format_failure(state, row), verdict)
