"""Where the time of a ``pytest --search-eval`` run goes, printed with ``-v``.

Phases: start (from the plugin's import to the first test), the session fixtures' setup (for
the reference engine: server, schema, model load, embedding, writing, calibration, from the
engine's own timings), the query tests (with the time spent in each profile's searches), each
invariant family, the latency tests, teardown (stopping the target), and the report (session
finish: merge, gate, files). Test phases come from pytest's own reports, so under xdist they
add up the workers' time rather than wall time.
"""

from __future__ import annotations

import re
import time
from collections.abc import Generator, Mapping
from typing import Any

import pytest

from pytest_searcheval.invariants.registry import family_of

LOADED = time.perf_counter()
_NODE = re.compile(r"::test_(query|invariant|latency)\[(.*)\]$")
#: engine timings shown under the fixture setup, in the order the engine spends them
ENGINE_PHASES: tuple[tuple[str, str], ...] = (
    ("server_seconds", "server"),
    ("migrate_seconds", "schema"),
    ("model_load_seconds", "model load"),
    ("embed_seconds", "embed"),
    ("write_seconds", "write"),
    ("hnsw_build_seconds", "hnsw"),
    ("calibrate_seconds", "calibrate"),
)


def phase_of(nodeid: str, when: str) -> str:
    """The phase a test report's duration belongs to."""
    if when == "setup":
        return "fixtures (target start)"
    if when == "teardown":
        return "teardown (target stop)"
    match = _NODE.search(nodeid)
    if match is None:
        return "other tests"
    kind, param = match.groups()
    if kind == "query":
        return "query tests"
    if kind == "latency":
        return f"latency {param}"
    return f"invariant {family_of(param) or param}"


class PhaseRecorder:
    """Sums durations per phase; a hook object registered on the controller only."""

    def __init__(self, searches: Mapping[tuple[str, str], float], facts: Any) -> None:
        #: (query id, profile) -> client-side milliseconds, filled by the query tests
        self.searches = searches
        #: a callable returning the target's facts (its describe()), or None
        self.facts = facts
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.first_test: float | None = None
        self.report_seconds: float | None = None

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds
        self.counts[phase] = self.counts.get(phase, 0) + 1

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        if self.first_test is None:
            self.first_test = time.perf_counter()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.duration > 0.0005 or report.when == "call":
            self.add(phase_of(report.nodeid, report.when), report.duration)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_sessionfinish(self) -> Generator[None, None, None]:
        started = time.perf_counter()
        yield
        self.report_seconds = time.perf_counter() - started

    def lines(self) -> list[str]:
        out: list[str] = []
        if self.first_test is not None:
            out.append(
                f"  {'start (plugin load to first test)':<40}{self.first_test - LOADED:8.2f} s"
            )
        for phase in sorted(self.seconds, key=_order):
            n = self.counts[phase]
            out.append(f"  {phase:<40}{self.seconds[phase]:8.2f} s  ({n} reports)")
            if phase.startswith("fixtures"):
                out += [f"    {name:<38}{s:8.2f} s" for name, s in self._engine()]
            if phase == "query tests":
                out += [
                    f"    {name:<38}{s:8.2f} s  ({n} searches)" for name, s, n in self._profiles()
                ]
        if self.report_seconds is not None:
            out.append(f"  {'report (merge, gate, files)':<40}{self.report_seconds:8.2f} s")
        out.append(f"  {'total since plugin load':<40}{time.perf_counter() - LOADED:8.2f} s")
        return out

    def _engine(self) -> list[tuple[str, float]]:
        facts = self.facts() if self.facts is not None else None
        if not isinstance(facts, Mapping):
            return []
        engine = facts.get("engine", facts)
        timings = engine.get("timings") if isinstance(engine, Mapping) else None
        if not isinstance(timings, Mapping):
            return []
        return [
            (f"engine {name}", float(timings[key]))
            for key, name in ENGINE_PHASES
            if isinstance(timings.get(key), (int, float))
        ]

    def _profiles(self) -> list[tuple[str, float, int]]:
        total: dict[str, float] = {}
        count: dict[str, int] = {}
        for (_, profile), ms in self.searches.items():
            total[profile] = total.get(profile, 0.0) + ms / 1000.0
            count[profile] = count.get(profile, 0) + 1
        return [(f"searches {p}", total[p], count[p]) for p in total]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if terminalreporter.config.option.verbose < 1:
            return
        terminalreporter.section("search evaluation: time by phase")
        for line in self.lines():
            terminalreporter.write_line(line)


def _order(phase: str) -> tuple[int, str]:
    for rank, prefix in enumerate(
        ("fixtures", "query", "invariant", "latency", "other", "teardown")
    ):
        if phase.startswith(prefix):
            return rank, phase
    return 9, phase
