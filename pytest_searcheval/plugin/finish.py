"""Controller-side end of a session: merge, report, gate, baseline update, files.

Called from ``pytest_sessionfinish`` (tryfirst) on the controller only; the hook catches any
exception so that the test outcomes are never hidden.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_searcheval.baseline.gate import (
    Rule,
    baseline_text,
    errored_queries,
    errors_by_profile,
    evaluate,
    listed,
    make_baseline,
    passed,
    suggested_tag,
    verify_baseline,
)
from pytest_searcheval.evaluation import fill_measures
from pytest_searcheval.files import write_atomic
from pytest_searcheval.invariants.base import search_errored
from pytest_searcheval.plugin.state import EvalState
from pytest_searcheval.report import build, hand_written, markdown, terminal_lines, to_json
from pytest_searcheval.types import GateRecord, HandWrittenSection, Report


@dataclass
class Outcome:
    lines: list[str] = field(default_factory=list)
    report: Report | None = None
    failed: bool = False


def merged_facts(state: EvalState) -> dict[str, Any] | None:
    """This process's facts, else the first worker's (sorted by worker id, so runs agree)."""
    if state.facts is not None:
        return state.facts
    for worker in sorted(state.worker_payloads):
        facts = state.worker_payloads[worker].get("facts")
        if facts:
            return dict(facts)
    return None


def finish(state: EvalState, session: pytest.Session) -> Outcome:
    state.merge(state.records)
    for worker in sorted(state.worker_payloads):
        payload = state.worker_payloads[worker]
        state.merge(payload.get("records") or {})
        if state.resolved is None and payload.get("resolved"):
            state.apply_resolution(payload["resolved"])
    if state.resolved is None:
        state.resolve({}, {})
    hand = _hand_written(session)
    if not state.rows and not state.invariants and not state.latency_tests:
        nothing = "searcheval: no generated test ran; no report written"
        return Outcome(lines=[*hand_written.lines(hand), nothing])
    expected = [q.id for q in state.selected_queries()]
    cfg = state.cfg
    fill_measures(state, state.rows)
    report = build(
        cfg=cfg,
        partial=state.partial,
        rows=state.rows,
        expected=expected,
        facts=merged_facts(state),
        collection=state.collection,
        baseline=state.baseline,
        invariants=state.invariants,
        latency_tests=state.latency_tests,
        workers=len(state.worker_payloads),
    )
    if hand is not None:
        report["hand_written"] = hand
    outcome = Outcome(report=report)
    written: list[Path] = []
    if cfg.update_baseline:
        if not report["run"]["complete"]:
            integrity = Rule(
                "baseline update",
                "failed",
                f"refused: partial run ({report['run']['queries_run']} of "
                f"{report['run']['queries_expected']} queries)",
            )
        elif errored := errored_searches(report):
            # Means over the queries that answered, and a ledger excusing what could not be
            # asked, would make a target's outage the next run's standard.
            integrity = Rule(
                "baseline update",
                "failed",
                f"refused: search errors ({errored}); a baseline is written from a run in "
                "which every search answered",
            )
        else:
            fresh = make_baseline(report, cfg, None)
            tag = cfg.baseline_tag or suggested_tag(fresh)
            fresh["tag"] = tag
            write_atomic(cfg.baseline, baseline_text(fresh))
            written.append(cfg.baseline)
            integrity = Rule(
                "baseline update",
                "passed",
                f"rewrote {cfg.baseline}; commit it, then `git tag {tag}` on that commit",
            )
        rules = evaluate(report, None, cfg, integrity=integrity)
    else:
        integrity = verify_baseline(cfg.baseline, state.baseline)
        rules = evaluate(
            report, state.baseline, cfg, integrity=integrity, baseline_error=state.baseline_error
        )
    gate: GateRecord = {
        "passed": passed(rules),
        "rules": [r.as_dict() for r in rules],
        "baseline": {
            "path": str(cfg.baseline),
            "tag": state.baseline_tag,
            "integrity": integrity.status,
        },
    }
    report["gate"] = gate
    outcome.failed = not gate["passed"]

    from pytest_searcheval.report import history
    from pytest_searcheval.report.html import html

    hist = None
    appended = False
    history_path = cfg.history_path
    if history_path is not None:
        if report["run"]["complete"]:  # a partial run's means describe a subset: not a trend
            git = history.git_commit(session.config.rootpath)
            history.append(history_path, history.entry(report, git=git))
            appended = True
        hist = history.read(history_path)
    out_dir = cfg.report_dir
    # A partial run never overwrites the full report: it writes beside it, marked partial.
    stem = "report" if report["run"]["complete"] else "report-partial"
    for name, text in (
        (f"{stem}.json", to_json(report)),
        (f"{stem}.md", markdown(report)),
        (f"{stem}.html", html(report, hist)),
    ):
        write_atomic(out_dir / name, text)
        written.append(out_dir / name)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as handle:
            handle.write(markdown(report))
    outcome.lines = terminal_lines(report)
    outcome.lines += [f"searcheval: wrote {_show(p, session)}" for p in written]
    if appended and history_path is not None:
        outcome.lines.append(f"searcheval: appended this run to {_show(history_path, session)}")
    if summary:
        outcome.lines.append(f"searcheval: appended the summary to {summary}")
    return outcome


def errored_searches(report: Report) -> str:
    """The queries (per profile) and invariant cases whose search errored, for people; empty
    when every search answered."""
    by_profile = errored_queries(report)
    parts = [errors_by_profile(by_profile)] if by_profile else []
    cases = sorted(str(k) for k, v in (report.get("invariants") or {}).items() if search_errored(v))
    if cases:
        parts.append(f"invariant cases {len(cases)} ({listed(cases)})")
    return "; ".join(parts)


def _hand_written(session: pytest.Session) -> HandWrittenSection | None:
    from pytest_searcheval.plugin.fixtures import RECORDER_KEY

    recorder = session.config.stash.get(RECORDER_KEY, None)
    return hand_written.section(recorder.outcomes) if recorder is not None else None


def _show(path: Path, session: pytest.Session) -> str:
    try:
        return str(path.relative_to(session.config.rootpath))
    except ValueError:
        return str(path)
