"""The invariant test: one case of a registered invariant family against the target."""

from __future__ import annotations

from typing import Any, cast

import pytest

from pytest_searcheval.plugin.items import SearchEvalItem
from pytest_searcheval.reasons import Reason
from pytest_searcheval.targets import SearchTarget


def _invariant_test(searcheval_target: SearchTarget) -> None:
    """Stands for the generated invariant tests; :meth:`InvariantItem.runtest` runs them."""


class InvariantItem(SearchEvalItem):
    """``test_invariant[<case id>]``: the outcome's reasons go to the ledger, its record to the
    report."""

    kind = "invariant"
    ledger_kind = "invariants"
    function = staticmethod(_invariant_test)

    def passed_before(self) -> bool:
        base = self.state.baseline
        return base is not None and (base.get("invariants") or {}).get(self.key) is True

    def runtest(self) -> None:
        target = cast(SearchTarget, self.funcargs["searcheval_target"])
        case = self.payload
        if getattr(target, "whole", False):
            pytest.skip(
                f"{case.id}: run files are fixed rankings; this invariant needs a live system"
            )
        state = self.state
        state.describe_target(target)
        state.invariant_context.gated = state.cfg.gated
        with state.invariant_context.active():
            outcome = case.outcome(target)
        record: dict[str, Any] = dict(outcome.record())
        record.setdefault("id", str(case.id))
        failed = outcome.status == "failed"
        reasons = [Reason.from_dict(r) for r in record.get("reasons") or []]
        if failed and not reasons:
            first = str(outcome.message).splitlines()[0] if outcome.message else str(case.id)
            reasons = [Reason("invariant-failed", first)]
            record["reasons"] = [r.as_dict() for r in reasons]
        verdict = self.verdict(reasons) if failed else None
        if outcome.status != "skipped":
            record["ledger"] = self.ledger_status(failed, verdict)
        self.state.record("invariant", record)
        if verdict is not None:
            self.raise_failure(str(outcome.message), verdict)
        if outcome.status == "skipped":
            pytest.skip(str(outcome.message))
