"""The known-failure ledger: which query tests and invariant cases failed when the baseline was
written, and for which reasons.

Each entry stores the failure's reason *keys* (``code`` or ``code:subject``, see
:mod:`pytest_searcheval.reasons`) and a human summary. A later failure whose keys are all
recorded is a known failure (xfail); a new key, a hard-filter violation (never excused) or a
test that passed in the baseline fails normally. The text of a message is never compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_searcheval.invariants.base import search_errored
from pytest_searcheval.reasons import NOT_RECORDED, Reason
from pytest_searcheval.types import Baseline, Ledger, LedgerEntry, Report

KNOWN_PREFIX = "known failure recorded in the baseline: "


def reasons_of(data: Iterable[Mapping[str, Any]]) -> list[Reason]:
    return [Reason.from_dict(r) for r in data]


def ledger_entry(reasons: Sequence[Reason]) -> LedgerEntry | None:
    """What the baseline records for one failing test (``None`` when nothing is recordable)."""
    kept = [r for r in reasons if r.code not in NOT_RECORDED]
    if not kept:
        return None
    summary = "; ".join(r.text for r in kept)
    return {
        "reasons": sorted({r.key for r in kept}),
        "summary": summary if len(summary) <= 300 else summary[:297] + "...",
    }


@dataclass(frozen=True)
class LedgerVerdict:
    """How one failing test relates to the ledger: ``known`` (xfail) or ``new`` (fails)."""

    status: str  # known | new
    note: str


def judge_failure(
    reasons: Sequence[Reason], recorded: Mapping[str, Any] | None, passed_before: bool
) -> LedgerVerdict:
    """Compare a test's failure reasons now with its ledger entry in the baseline."""
    if recorded is None:
        if passed_before:
            return LedgerVerdict("new", "regression: this test passed in the baseline")
        return LedgerVerdict("new", "")
    known = set(recorded.get("reasons") or [])
    if any(not r.excusable for r in reasons):
        return LedgerVerdict("new", "hard-filter violations are never excused by the baseline")
    fresh = [r for r in reasons if r.code in NOT_RECORDED or r.key not in known]
    if fresh:
        shown = "; ".join(f"{r.text} [{r.key}]" for r in fresh)
        return LedgerVerdict(
            "new",
            f"failing for a reason the baseline does not record: {shown} "
            f"(recorded: {', '.join(sorted(known))})",
        )
    return LedgerVerdict("known", KNOWN_PREFIX + str(recorded.get("summary", "")))


def ledger_profile_differs(baseline: Baseline | None, gated: str) -> str | None:
    """Why the baseline's ledger does not apply to a run gating ``gated``, or None.

    A test's expectations and invariants are judged on the gated profile, so the passes and
    known failures a baseline records are its gated profile's: another profile's failure is
    neither a regression nor a known failure of it (the gate's conventions rule fails such a
    run). A baseline that does not record its gated profile applies as before."""
    run = baseline.get("run") if baseline else None
    measured = run.get("gated_profile") if run else None
    if measured is None or measured == gated:
        return None
    return (
        f"not judged by the baseline's known failures: they were recorded on the gated profile "
        f"{measured!r}, and this run gates {gated!r} (re-baseline to compare)"
    )


def ledger(baseline: Baseline | None, kind: str) -> dict[str, Mapping[str, Any]]:
    """``known_failures[kind]`` of a baseline (``queries`` or ``invariants``), or empty."""
    recorded = baseline.get("known_failures") if baseline else None
    found = recorded.get(kind) if recorded else None
    entries: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    return {str(k): v for k, v in entries.items() if isinstance(v, Mapping)}


def make_ledger(report: Report) -> Ledger:
    """The known failures of a report: failing query tests and failing invariant cases."""
    queries: dict[str, LedgerEntry] = {}
    for qid, q in report["queries"].items():
        entry = ledger_entry(reasons_of(q.get("reasons") or []))
        if entry is not None:
            queries[qid] = entry
    invariants: dict[str, LedgerEntry] = {}
    for cid, rec in (report.get("invariants") or {}).items():
        # A case whose search errored says nothing of the system: never a known failure.
        if rec.get("status") == "failed" and not search_errored(rec):
            reasons = reasons_of(rec.get("reasons") or []) or [
                Reason("invariant-failed", str(rec.get("message") or cid).splitlines()[0])
            ]
            entry = ledger_entry(reasons)
            if entry is not None:
                invariants[cid] = entry
    return {"queries": queries, "invariants": invariants}
