"""The invariant test: one case of a registered invariant family against the target."""

from __future__ import annotations

from typing import Any, cast

import pytest

from pytest_searcheval.invariants.base import NOT_MUTABLE, InvariantOutcome
from pytest_searcheval.plugin.items import RUN_FILES, SearchEvalItem
from pytest_searcheval.reasons import Reason
from pytest_searcheval.targets import MutableTarget, SearchTarget


def _invariant_test(searcheval_target: SearchTarget) -> None:
    """Stands for the generated invariant tests; :meth:`InvariantItem.runtest` runs them."""


def cannot_run(case: Any, target: SearchTarget) -> tuple[str, bool] | None:
    """Why ``case`` cannot run on ``target`` (and whether that holds for its family's mutating
    cases only), known once a conftest's target is built; ``None`` when it can run."""
    if getattr(target, "whole", False):
        return RUN_FILES, False
    if case.mutates and not isinstance(target, MutableTarget):
        return NOT_MUTABLE, True
    return None


def drops(state: Any, item: pytest.Item) -> bool:
    """Whether ``item`` is a case its family's one skip stands for (not run, not reported)."""
    if not isinstance(item, InvariantItem):
        return False
    left = state.not_run.get(item.payload.invariant)
    return left is not None and (item.payload.mutates or not left[1])


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
        state = self.state
        cannot = cannot_run(case, target)
        if cannot is not None:
            reason, mutating_only = cannot
            if mutating_only:  # the report lists the case as skipped, as its check would
                skipped = InvariantOutcome(
                    str(case.id), case.invariant, "skipped", f"{case.id}: {reason}", {}
                )
                state.record("invariant", dict(skipped.record()))
            if case.invariant in state.not_run:
                return  # stands for no check: the family's first such case skipped for it
            left = [
                i
                for i in self.session.items
                if isinstance(i, InvariantItem)
                and i.payload.invariant == case.invariant
                and (i.payload.mutates or not mutating_only)
            ]
            state.not_run[case.invariant] = (reason, mutating_only, len(left) - 1)
            more = f"; its {len(left) - 1} other such case(s) are not run" if len(left) > 1 else ""
            pytest.skip(f"{case.invariant}: {reason}{more}")
        state.describe_target(target)
        state.invariant_context.gated = state.cfg.gated
        with state.invariant_context.active():
            outcome = case.outcome(target)
        record: dict[str, Any] = dict(outcome.record())
        record.setdefault("id", str(case.id))
        if outcome.status == "errored":
            # Neither a failure nor a regression: the gate's "no search errors" rule counts it.
            record["ledger"] = None
            self.state.record("invariant", record)
            pytest.skip(f"{outcome.message} (a search error: the gate's no search errors rule)")
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
