"""The latency tests: per-request latency of the gated profile (or of each of
``latency_profiles``) through pytest-benchmark, gated on the p95/p99 budgets."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

import pytest

from pytest_searcheval.plugin.items import SearchEvalFailure, SearchEvalItem
from pytest_searcheval.stats import nearest_rank
from pytest_searcheval.targets import SearchTarget, TargetUnavailable


class _Samples(Protocol):
    data: Sequence[float]  # one duration per round, in seconds


class _Metadata(Protocol):
    stats: _Samples


class _Benchmark(Protocol):
    """What the latency test uses of pytest-benchmark's ``benchmark`` fixture (described here,
    so that the plugin does not import the optional pytest-benchmark to type it)."""

    disabled: bool
    stats: _Metadata

    def pedantic(
        self,
        target: Callable[[], object],
        *,
        rounds: int,
        iterations: int,
        warmup_rounds: int,
    ) -> object: ...


def _latency_test(searcheval_target: SearchTarget, benchmark: Any) -> None:
    """Stands for the generated latency test; :meth:`LatencyItem.runtest` runs it."""


#: Requests before the measured rounds (connection set-up, caches), as pytest-benchmark's
#: ``warmup_rounds``.
WARMUP = 3


def timed_rounds(fn: Callable[[], object], *, rounds: int, warmup_rounds: int) -> list[float]:
    """What ``benchmark.pedantic(fn, rounds=, iterations=1, warmup_rounds=)`` measures: the
    seconds of each round after the warm-up, by ``time.perf_counter`` (its default timer)."""
    import time

    for _ in range(warmup_rounds):
        fn()
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


class LatencyItem(SearchEvalItem):
    """``test_latency[<profile>]``: ``latency_rounds`` requests, one iteration per round."""

    kind = "latency"
    ledger_kind = "latency"
    function = staticmethod(_latency_test)

    def _user_disabled(self) -> bool:
        off = self.config.getoption("benchmark_disable", default=False)
        return bool(off) and not self.config.getoption("benchmark_enable", default=False)

    def runtest(self) -> None:
        state = self.state
        target = cast(SearchTarget, self.funcargs["searcheval_target"])
        benchmark = cast(_Benchmark, self.funcargs["benchmark"])
        state.describe_target(target)
        cfg = state.cfg
        # the gated profile unless the item names one (``latency_profiles``)
        profile = str(self.payload) if self.payload else cfg.gated
        # pytest-benchmark disables itself on pytest-xdist workers; the plugin then times the
        # same rounds itself, so a parallel run gates latency as a serial one does. Only a
        # benchmark the user switched off leaves the budgets unmeasured.
        own_timer = getattr(benchmark, "disabled", False) and not self._user_disabled()
        if getattr(benchmark, "disabled", False) and not own_timer:
            why = "pytest-benchmark is disabled (--benchmark-disable)"
            state.record("latency", {"profile": profile, "not_measured": why})
            pytest.skip(why)
        queries = [q.text for q in state.selected_queries()] or ["search"]
        position = iter(range(10**9))

        def one() -> None:
            text = queries[next(position) % len(queries)]
            target.search(text, profile=profile, limit=cfg.limit, filters=None, extract=True)

        try:
            if own_timer:
                samples = timed_rounds(one, rounds=cfg.latency_rounds, warmup_rounds=WARMUP)
            else:
                benchmark.pedantic(
                    one, rounds=cfg.latency_rounds, iterations=1, warmup_rounds=WARMUP
                )
                samples = list(benchmark.stats.stats.data)
        except TargetUnavailable as exc:
            pytest.fail(f"profile {profile!r} unavailable during the latency test: {exc}")
        samples_ms = [s * 1000.0 for s in samples]
        budget = cfg.latency_budget(profile)
        result = {
            "profile": profile,
            "n": len(samples_ms),
            "p50_ms": nearest_rank(samples_ms, 50),
            "p95_ms": nearest_rank(samples_ms, 95),
            "p99_ms": nearest_rank(samples_ms, 99),
            "budget_p95_ms": budget["p95"],
            "budget_p99_ms": budget["p99"],
            "samples_ms": [round(s, 3) for s in samples_ms],
        }
        state.record("latency", result)
        over = []
        for pct, limit in budget.items():
            value = float(str(result[f"{pct}_ms"]))
            if limit is not None and value > limit:
                over.append(f"{pct} {value:.2f} ms > budget {limit:g} ms")
        if over:
            raise SearchEvalFailure(
                f"latency of profile {profile!r} over budget ({len(samples_ms)} requests, "
                f"one iteration per round): " + "; ".join(over)
            )
