"""``test_gate``: the gate's verdict as a test result that JUnit XML, pytest-xdist, IDEs and the
terminal's last line see.

The gate can only be judged once every other test has run (on the controller, under
pytest-xdist after the workers finished), so no collected item can carry it. At session finish
the controller builds one item, ``<anchor>::test_gate``, and runs it through pytest's own
``pytest_runtest_protocol``: every plugin that listens to test reports (junitxml, the terminal's
counts, the ``--lf`` cache, an IDE's reporter) records it like any test. It is reported when
the gate failed (a passing gate adds no test, so the counts are those of the tests that ran; a
partial run's verdict line names the rules it could not judge). Run from the plugin's
``pytest_sessionfinish`` (tryfirst), before junitxml writes its file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr, TracebackStyle

    from pytest_searcheval.types import Report

GATE_TEST = "test_gate"


class GateFailed(AssertionError):
    """The gate failed; the message lists its rules (no traceback)."""


class _Crash:
    """What reporters read as a failure's one-line message (``longrepr.reprcrash``)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.lineno = 0
        self.message = message


class _GateRepr:
    """The failure text of ``test_gate``: its rules, with a one-line message for summaries."""

    def __init__(self, text: str, path: str) -> None:
        self.text = text
        self.reprcrash = _Crash(path, text.splitlines()[0] if text else "gate failed")
        self.sections: list[tuple[str, str, str]] = []

    def toterminal(self, tw: Any) -> None:
        for line in self.text.splitlines():
            tw.line(line)

    def __str__(self) -> str:
        return self.text


class GateItem(pytest.Item):
    """The gate's verdict, run once on the controller after every other test."""

    outcome: Literal["passed", "failed", "skipped"] = "passed"
    message: str = ""

    def runtest(self) -> None:
        if self.outcome == "failed":
            raise GateFailed(self.message)
        if self.outcome == "skipped":
            pytest.skip(self.message)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: TracebackStyle | None = None,
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, GateFailed):
            return _GateRepr(str(excinfo.value), str(self.path))  # type: ignore[return-value]
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, GATE_TEST


def outcome_of(report: Report | None, error: str | None) -> tuple[str, str]:
    """``(outcome, message)`` of ``test_gate`` for a finished report (or the error that
    stopped the report from being built)."""
    from pytest_searcheval.baseline.gate import verdict

    if error is not None:
        return "failed", f"gate: not judged: {error}"
    assert report is not None
    word, why = verdict(report)
    gate = report.get("gate")
    rules = (gate.get("rules") or []) if gate else []
    if word == "FAILED":
        lines = [f"gate: FAILED: {why}"]
        lines += [f"  [{r['status']}] {r['name']}: {r['detail']}" for r in rules]
        return "failed", "\n".join(lines)
    if word == "NOT JUDGED":
        return "skipped", f"gate: NOT JUDGED: {why}"
    return "passed", ""


def run_gate_item(session: pytest.Session, anchor: Path, outcome: str, message: str) -> None:
    """Build ``test_gate`` under the collection's anchor file and run it like any test."""
    from pytest_searcheval.plugin.items import SearchEvalFile

    parent = SearchEvalFile.from_parent(session, path=anchor)
    item = GateItem.from_parent(parent, name=GATE_TEST)
    item.outcome = outcome  # type: ignore[assignment]
    item.message = message
    item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
