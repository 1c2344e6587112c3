"""Per-process evaluation state, the collector of the generated tests, and the query check.

``plugin.py`` holds the hooks; this module holds what they wire together. Everything a query test
learns travels as a JSON string in ``item.user_properties`` (key ``searcheval_row``), so the
controller sees the same rows whether the tests ran serially or on pytest-xdist workers.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_searcheval.settings import SearchEvalConfig
from pytest_searcheval.baseline.gate import DROP_PREFIX, LedgerVerdict, invariant_reasons, judge_failure, ledger
from pytest_searcheval.targets import FILTER_KEYS, SearchResponse, SearchTarget, TargetUnavailable

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Collection, Query

ROW_KEY = "searcheval_row"
INVARIANT_KEY = "searcheval_invariant"
LATENCY_KEY = "searcheval_latency"
SHOWN_RESULTS = 10


class SearchEvalFailure(AssertionError):
    """A query or latency test failed; the message is the whole triage report (no traceback)."""


class KnownFailure(SearchEvalFailure):
    """A failure whose reasons the baseline's known-failure ledger records: the test's
    ``xfail(raises=KnownFailure, strict=False)`` marker turns it into an xfail; any other
    exception still fails the test."""


@dataclass
class EvalState:
    """What one pytest process knows about the evaluation (controller or xdist worker)."""

    cfg: SearchEvalConfig
    baseline: dict[str, Any] | None = None
    baseline_error: str | None = None
    _collection: Collection | None = None
    collected: bool = False
    #: profile -> reason; a profile that failed once is not asked again in this process.
    unavailable: dict[str, str] = field(default_factory=dict)
    offered: Mapping[str, str | None] | None = None
    facts: dict[str, Any] | None = None
    cache: dict[tuple[str, str], SearchResponse] = field(default_factory=dict)
    latency_ms: dict[tuple[str, str], float] = field(default_factory=dict)
    # Controller side: merged results.
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Row JSON as the reports brought it, in arrival order; :meth:`merge_rows` parses it.
    raw_rows: list[str] = field(default_factory=list)
    invariants: dict[str, dict[str, Any]] = field(default_factory=dict)
    latency_tests: dict[str, dict[str, Any]] = field(default_factory=dict)
    worker_payloads: dict[str, dict[str, Any]] = field(default_factory=dict)
    query_lines: dict[str, int] = field(default_factory=dict)

    def merge_rows(self) -> dict[str, dict[str, Any]]:
        """Parse the rows received so far into ``rows`` (a later row of a query wins)."""
        for raw in self.raw_rows:
            row = json.loads(raw)
            self.rows[row["qid"]] = row
        self.raw_rows.clear()
        return self.rows

    @property
    def collection(self) -> Collection:
        if self._collection is None:
            from pytest_searcheval.collection import load

            self._collection = load(self.cfg.collection)
        return self._collection

    def anchor(self) -> Path:
        """The file the generated tests belong to (their node ids start with it)."""
        root = self.cfg.collection
        for name in ("collection.yaml", "qrels/queries.yaml"):
            if (root / name).is_file():
                return root / name
        return root / "collection.yaml"

    def queries_file(self) -> Path:
        return self.cfg.collection / "qrels" / "queries.yaml"

    def selected_queries(self) -> list[Query]:
        return list(self.collection.queries_in(self.cfg.split))

    # --- searching -------------------------------------------------------------------------

    def describe_target(self, target: SearchTarget) -> None:
        if self.facts is not None:
            return
        try:
            self.facts = json.loads(json.dumps(dict(target.describe()), default=str))
        except Exception as exc:  # a broken describe() must not hide the measurements
            self.facts = {"describe_error": f"{type(exc).__name__}: {exc}"}
        try:
            self.offered = dict(target.profiles())
        except Exception as exc:
            self.offered = {}
            self.facts["profiles_error"] = f"{type(exc).__name__}: {exc}"

    def availability(self, profile: str) -> str | None:
        if profile in self.unavailable:
            return self.unavailable[profile]
        offered = self.offered or {}
        if offered:
            if profile not in offered:
                return f"the target does not offer profile {profile!r}"
            reason = offered[profile]
            if reason is not None:
                return reason
        return None

    def search(self, target: SearchTarget, query: Query, profile: str) -> SearchResponse | None:
        """The target's answer (cached per process), or ``None`` with the profile unavailable."""
        key = (query.id, profile)
        if key in self.cache:
            return self.cache[key]
        self.describe_target(target)
        reason = self.availability(profile)
        if reason is not None:
            self.unavailable[profile] = reason
            return None
        start = time.perf_counter()
        try:
            response = target.search(
                query.text, profile=profile, limit=self.cfg.limit, filters=None, extract=True
            )
        except TargetUnavailable as exc:
            self.unavailable[profile] = str(exc) or "target unavailable"
            return None
        except Exception as exc:
            self.unavailable[profile] = f"{type(exc).__name__}: {exc}"
            return None
        elapsed = (time.perf_counter() - start) * 1000.0
        if elapsed > self.cfg.timeout_s * 1000.0:
            self.unavailable[profile] = (
                f"query {query.id} took {elapsed / 1000:.1f} s > timeout {self.cfg.timeout_s:g} s"
            )
            return None
        self.cache[key] = response
        self.latency_ms[key] = elapsed
        return response


# --- scoring and checking one query --------------------------------------------------------


def relevant_count(judged: Mapping[str, int], level: int) -> int:
    """Judged documents with grade >= ``level``: the query is *evaluated* (enters every
    relevance aggregate, nDCG included) exactly when this is > 0 (DESIGN section 6)."""
    return sum(1 for g in judged.values() if g >= level)


def is_unanswerable(query: Query) -> bool:
    return bool(query.expect.get("no_result")) or query.query_class == "no-result"


def _applied(response: SearchResponse) -> dict[str, Any]:
    return {k: v for k, v in response.applied_filters.items() if k in FILTER_KEYS and v is not None}


_PLAIN = (str, int, float, bool, type(None))


def _json_safe(value: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-safe copy (filters may hold Decimals); the JSON round trip only when needed, since
    most responses carry no or plain filters and this runs for every query and profile."""
    if not value:
        return {}
    if all(isinstance(v, _PLAIN) for v in value.values()):
        return dict(value)
    out: dict[str, Any] = json.loads(json.dumps(dict(value), default=str))
    return out


def score_profile(
    state: EvalState, query: Query, profile: str, response: SearchResponse
) -> dict[str, Any]:
    """Measures, oracle checks and expectations of one response, as a JSON-safe dict."""
    from pytest_searcheval.x402 import oracle as constraints

    coll = state.collection
    cfg = state.cfg
    # A duplicated id would count twice in every measure; keep the first occurrence.
    ids = list(dict.fromkeys(response.ids))[: cfg.limit]
    # Full measures are computed once per profile for all queries at session end (one batched
    # metrics.evaluate call); a test computes only what its own verdict needs.
    measures: dict[str, float] = {}
    if profile == cfg.gated_profile:
        base = baseline_query(state, query.id)
        if base is not None and cfg.query_measure in base:
            measures = measure_one(state, query.id, ids, (cfg.query_measure,))
    applied = _applied(response)
    violations: list[str] = []
    breaks = 0
    for rank, doc_id in enumerate(ids, start=1):
        doc = coll.documents.get(doc_id)
        if doc is None:
            violations.append(f"rank {rank}: {doc_id!r} is not a document of the corpus")
            continue
        if applied:
            for reason in constraints.violations(doc, applied, coll.assets):
                violations.append(f"rank {rank}: {doc_id}: {reason}")
        if query.constraints and constraints.violations(doc, query.constraints, coll.assets):
            breaks += 1
    return {
        "ids": ids,
        "measures": measures,
        "violations": violations,
        "constraint_breaks": breaks,
        "returned": len(ids),
        "applied": _json_safe(applied),
        "extracted": _json_safe(response.extracted_filters),
        "expectations": check_expectations(query, ids),
        "latency_ms": state.latency_ms.get((query.id, profile)),
    }


def measure_one(
    state: EvalState, qid: str, ids: Sequence[str], measures: Sequence[str]
) -> dict[str, float]:
    """Measures of one ranking; undefined values (NaN) and queries without a document at the
    relevance level are left out, as in the aggregates."""
    from pytest_searcheval import metrics

    cfg = state.cfg
    judged = state.collection.judgments.get(qid, {})
    if relevant_count(judged, cfg.relevance_level) == 0:
        return {}
    per_query = metrics.evaluate(
        {qid: judged},
        {qid: list(ids)},
        measures,
        relevance_level=cfg.relevance_level,
        gain=cfg.gain,
    )
    return {m: float(v) for m, v in per_query.get(qid, {}).items() if math.isfinite(v)}


def fill_measures(state: EvalState, rows: Mapping[str, dict[str, Any]]) -> None:
    """Every configured measure for every row and profile, one ``evaluate`` call per profile.

    Only queries with a judged document of grade >= the relevance level are scored, for every
    measure alike (nDCG's ideal ranking alone would accept grade 1): one evaluated query set,
    hence one denominator, for all relevance aggregates. The others keep ``measures == {}``
    and are scored by no-result accuracy."""
    from pytest_searcheval import metrics

    cfg = state.cfg
    judgments = state.collection.judgments
    level = cfg.relevance_level
    for profile in cfg.profiles:
        run = {
            qid: row["profiles"][profile]["ids"]
            for qid, row in rows.items()
            if profile in row["profiles"] and relevant_count(judgments.get(qid, {}), level) > 0
        }
        if not run:
            continue
        qrels = {qid: judgments[qid] for qid in run}
        per_query = metrics.evaluate(
            qrels, run, cfg.measures, relevance_level=cfg.relevance_level, gain=cfg.gain
        )
        for qid, values in per_query.items():
            rows[qid]["profiles"][profile]["measures"] = {
                m: float(v) for m, v in values.items() if math.isfinite(v)
            }


def check_expectations(query: Query, ids: Sequence[str]) -> list[str]:
    """Unmet declared expectations (known_item, max_rank, must_include, no_result)."""
    expect = query.expect
    unmet: list[str] = []
    position = {doc_id: rank for rank, doc_id in enumerate(ids, start=1)}
    known = expect.get("known_item")
    max_rank = int(expect.get("max_rank") or 1)
    if known:
        rank = position.get(str(known))
        if rank is None or rank > max_rank:
            found = f"at rank {rank}" if rank else f"not in the top {len(ids)}"
            unmet.append(f"known item {known!r} expected at rank <= {max_rank}, found {found}")
    for doc_id in expect.get("must_include") or []:
        rank = position.get(str(doc_id))
        limit = max_rank if (expect.get("max_rank") and not known) else len(ids)
        if rank is None or rank > limit:
            unmet.append(f"must include {doc_id!r} in the top {limit}, found rank {rank}")
    if is_unanswerable(query) and ids:
        unmet.append(f"unanswerable query returned {len(ids)} results (expected none)")
    return unmet


def passed_before(state: EvalState, kind: str, key: str) -> bool:
    """Whether the baseline records this test as passing (present and not in the ledger)."""
    if state.baseline is None:
        return False
    if kind == "query":
        return baseline_query(state, key) is not None and key not in ledger(
            state.baseline, "queries"
        )
    return (state.baseline.get("invariants") or {}).get(key) is True


def known_failure_marker(state: EvalState, kind: str, key: str) -> pytest.MarkDecorator | None:
    """``xfail(raises=KnownFailure, strict=False)`` for a test the ledger records as failing:
    a failure for recorded reasons becomes an xfail, a pass an XPASS, anything else fails."""
    entry = ledger(state.baseline, "queries" if kind == "query" else "invariants").get(key)
    if entry is None:
        return None
    return pytest.mark.xfail(
        reason=f"known failure recorded in the baseline: {entry.get('summary', '')}",
        raises=KnownFailure,
        strict=False,
    )


def baseline_query(state: EvalState, qid: str) -> dict[str, Any] | None:
    base = state.baseline or {}
    prof = (base.get("profiles") or {}).get(state.cfg.gated_profile) or {}
    entry = (prof.get("queries") or {}).get(qid)
    return entry if isinstance(entry, dict) else None


def evaluate_query(state: EvalState, target: SearchTarget, query: Query) -> dict[str, Any]:
    """Search every configured profile; return the row with ``failures`` for the gated one.

    Each profile's ``measures`` holds only the per-query check's measure here (all measures on
    failure, for the message); :func:`fill_measures` completes them at session end.
    """
    cfg = state.cfg
    row: dict[str, Any] = {
        "qid": query.id,
        "text": query.text,
        "class": query.query_class,
        "split": query.split,
        "relevant": relevant_count(
            state.collection.judgments.get(query.id, {}), cfg.relevance_level
        ),
        "unanswerable": is_unanswerable(query),
        "profiles": {},
        "unavailable": {},
        "failures": [],
    }
    for profile in cfg.profiles:
        response = state.search(target, query, profile)
        if response is None:
            row["unavailable"][profile] = state.unavailable[profile]
            continue
        row["profiles"][profile] = score_profile(state, query, profile, response)
    gated = row["profiles"].get(cfg.gated_profile)
    failures: list[str] = row["failures"]
    if gated is None:
        reason = row["unavailable"].get(cfg.gated_profile, "no response")
        failures.append(f"gated profile {cfg.gated_profile!r} unavailable: {reason}")
        return row
    failures += [f"hard-filter violation at {v}" for v in gated["violations"]]
    failures += gated["expectations"]
    base = baseline_query(state, query.id)
    m = cfg.query_measure
    if base is not None and m in base and m in gated["measures"]:
        now, before = gated["measures"][m], float(base[m])
        if now < before - cfg.query_tolerance - 1e-12:
            failures.append(
                f"{DROP_PREFIX}{m} dropped to {now:.4f} from baseline {before:.4f} "
                f"(per-query tolerance {cfg.query_tolerance:g})"
            )
    if failures:
        for data in row["profiles"].values():
            data["measures"] = measure_one(state, query.id, data["ids"], cfg.measures)
    return row


def _grade(judged: Mapping[str, int], doc_id: str) -> str:
    return f"grade {judged[doc_id]}" if doc_id in judged else "unjudged"


def format_failure(state: EvalState, row: Mapping[str, Any]) -> str:
    """The message an IDE shows: query, failures, ranking with grades, expectations, baseline."""
    cfg = state.cfg
    coll = state.collection
    judged = coll.judgments.get(row["qid"], {})
    gated = row["profiles"].get(cfg.gated_profile)
    query = coll.queries[row["qid"]]
    lines = [
        f"query {row['qid']} [{row['class']}] {row['text']!r} "
        f"(split {row['split']}, profile {cfg.gated_profile})",
        "failed:",
        *[f"  - {f}" for f in row["failures"]],
    ]
    if gated is not None:
        ids = gated["ids"]
        lines.append(f"ranked results ({len(ids)} returned, top {SHOWN_RESULTS} shown):")
        lines += _ranking(coll, judged, ids[:SHOWN_RESULTS])
        if gated["applied"]:
            lines.append(f"applied filters: {json.dumps(gated['applied'], sort_keys=True)}")
        if gated["measures"]:
            shown = ", ".join(f"{k} {v:.4f}" for k, v in gated["measures"].items())
            lines.append(f"measures: {shown}")
    expect = {k: v for k, v in query.expect.items() if v not in (None, [], {})}
    relevant = sorted(
        (d for d, g in judged.items() if g >= cfg.relevance_level), key=lambda d: -judged[d]
    )
    lines.append(
        f"expected: {json.dumps(expect, sort_keys=True) if expect else '(no declared expectation)'}"
        f"; relevant (grade >= {cfg.relevance_level}): "
        + (", ".join(f"{d} ({judged[d]})" for d in relevant[:SHOWN_RESULTS]) or "none")
    )
    if query.constraints:
        lines.append(f"labelled constraints: {json.dumps(query.constraints, sort_keys=True)}")
    base = baseline_query(state, row["qid"])
    if base is None:
        lines.append("baseline: none for this query")
    else:
        values = ", ".join(
            f"{k} {float(v):.4f}" for k, v in base.items() if isinstance(v, int | float)
        )
        lines.append(f"baseline ({(state.baseline or {}).get('tag') or 'untagged'}): {values}")
        lines += _ranking(coll, judged, list(base.get("ids", []))[:SHOWN_RESULTS])
    others = [
        f"{p} {d['measures'].get('nDCG@10', float('nan')):.4f}"
        for p, d in row["profiles"].items()
        if p != cfg.gated_profile and d["measures"]
    ]
    if others:
        lines.append("other profiles (nDCG@10): " + ", ".join(others))
    for p, reason in row["unavailable"].items():
        lines.append(f"unavailable: {p}: {reason}")
    return "\n".join(lines)


def _ranking(coll: Collection, judged: Mapping[str, int], ids: Sequence[str]) -> list[str]:
    if not ids:
        return ["    (no results)"]
    width = max(len(d) for d in ids)
    out = []
    for rank, doc_id in enumerate(ids, start=1):
        doc = coll.documents.get(doc_id)
        title = doc.title if doc is not None else "(not in corpus)"
        out.append(f"  {rank:>3}  {doc_id:<{width}}  {_grade(judged, doc_id):<9}  {title}")
    return out


# --- pytest items ---------------------------------------------------------------------------


def _query_test(searcheval_target: SearchTarget) -> None:
    """Stands for the generated query tests (their fixtures); :meth:`SearchEvalItem.runtest`
    runs them. Not taking ``request`` spares pytest a fixture definition per test."""


def _invariant_test(searcheval_target: SearchTarget) -> None:
    """Stands for the generated invariant tests; see :func:`_query_test`."""


def _latency_test(searcheval_target: SearchTarget, benchmark: Any) -> None:
    """Stands for the generated latency test; see :func:`_query_test`."""


def nearest_rank(samples: Sequence[float], p: float) -> float:
    """Nearest-rank percentile: the ceil(p/100 * n)-th smallest sample (no interpolation)."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(p / 100.0 * len(ordered)) - 1)]


def _kind_mark(kind: str) -> pytest.MarkDecorator:
    mark: pytest.MarkDecorator = getattr(pytest.mark, f"searcheval_{kind}")
    return mark


_KIND_MARKS: dict[str, pytest.MarkDecorator] = {}


class SearchEvalItem(pytest.Function):
    """A generated test; ``kind`` is query, invariant or latency."""

    kind: str = "query"
    key: str = ""
    payload: Any = None
    line: int = 0
    file: Path | None = None

    @classmethod
    def build(
        cls,
        parent: pytest.Collector,
        *,
        kind: str,
        key: str,
        name: str,
        fn: Callable[..., None],
        payload: Any,
        file: Path,
        line: int,
        marks: Sequence[pytest.MarkDecorator] = (),
    ) -> SearchEvalItem:
        # Every item of a kind shares one function and parent, hence one fixture closure:
        # resolving it once instead of per item is most of the collection cost.
        cache: dict[Any, Any] = parent.__dict__.setdefault("_searcheval_fixtureinfo", {})
        info = cache.get(fn)
        item: SearchEvalItem = cls.from_parent(parent, name=name, callobj=fn, fixtureinfo=info)
        if info is None:
            cache[fn] = item._fixtureinfo
        item.kind, item.key, item.payload, item.file, item.line = kind, key, payload, file, line
        item.add_marker(_KIND_MARKS.get(kind) or _KIND_MARKS.setdefault(kind, _kind_mark(kind)))
        for mark in marks:
            item.add_marker(mark)
        return item

    @property
    def state(self) -> EvalState:
        from pytest_searcheval.plugin import STATE_KEY

        return self.config.stash[STATE_KEY]

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return (self.file or self.path), self.line, self.name

    def runtest(self) -> None:
        target = cast(SearchTarget, self.funcargs["searcheval_target"])
        if self.kind == "query":
            self.run_query(target)
        elif self.kind == "invariant":
            self.run_invariant(target)
        else:
            self.run_latency(target, self.funcargs["benchmark"])

    def repr_failure(  # type: ignore[override]
        self, excinfo: pytest.ExceptionInfo[BaseException]
    ) -> Any:
        if isinstance(excinfo.value, SearchEvalFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def _verdict(self, lines: Sequence[str]) -> LedgerVerdict:
        state = self.state
        kind = "queries" if self.kind == "query" else "invariants"
        recorded = ledger(state.baseline, kind).get(self.key)
        return judge_failure(lines, recorded, passed_before(state, self.kind, self.key))

    def _raise(self, message: str, verdict: LedgerVerdict) -> None:
        if verdict.status == "known":
            raise KnownFailure(f"{message}\n{verdict.note}")
        raise SearchEvalFailure(f"{message}\n{verdict.note}" if verdict.note else message)

    def _ledger_status(self, failed: bool, verdict: LedgerVerdict | None) -> str | None:
        if verdict is not None:
            return verdict.status
        kind = "queries" if self.kind == "query" else "invariants"
        if not failed and self.key in ledger(self.state.baseline, kind):
            return "fixed"
        return None

    def run_query(self, target: SearchTarget) -> None:
        state = self.state
        row = evaluate_query(state, target, self.payload)
        verdict = self._verdict(row["failures"]) if row["failures"] else None
        row["ledger"] = self._ledger_status(bool(row["failures"]), verdict)
        self.user_properties.append((ROW_KEY, json.dumps(row)))
        if verdict is not None:
            self._raise(format_failure(state, row), verdict)

    def run_invariant(self, target: SearchTarget) -> None:
        """Run one case of ``invariants.cases``; its record travels like a query row.

        Cases with ``outcome(target)`` (returning an object with ``status``, ``message`` and
        ``record()``) report skips and details; plain cases just ``run(target)`` and raise
        ``AssertionError`` on failure.
        """
        case = self.payload
        record: dict[str, Any]
        outcome_fn = getattr(case, "outcome", None)
        if outcome_fn is not None:
            outcome = outcome_fn(target)
            record = dict(outcome.record()) if hasattr(outcome, "record") else {}
            record.setdefault("id", str(case.id))
            record["status"] = str(outcome.status)
            record["passed"] = outcome.status == "passed"
            record.setdefault("message", str(outcome.message))
            failed = outcome.status == "failed"
            message = str(outcome.message)
            verdict = self._verdict(invariant_reasons(message)) if failed else None
            if outcome.status != "skipped":
                record["ledger"] = self._ledger_status(failed, verdict)
            self.user_properties.append((INVARIANT_KEY, json.dumps(record, default=str)))
            if verdict is not None:
                self._raise(message, verdict)
            if outcome.status == "skipped":
                pytest.skip(message)
            return
        record = {"id": str(case.id), "name": str(getattr(case, "name", ""))}
        try:
            case.run(target)
        except AssertionError as exc:
            verdict = self._verdict(invariant_reasons(str(exc)))
            record.update(
                status="failed",
                passed=False,
                message=str(exc),
                ledger=self._ledger_status(True, verdict),
            )
            self.user_properties.append((INVARIANT_KEY, json.dumps(record, sort_keys=True)))
            self._raise(str(exc), verdict)
        record.update(status="passed", passed=True, message="")
        record["ledger"] = self._ledger_status(False, None)
        self.user_properties.append((INVARIANT_KEY, json.dumps(record, sort_keys=True)))

    def run_latency(self, target: SearchTarget, benchmark: Any) -> None:
        state = self.state
        cfg = state.cfg
        if hasattr(self.config, "workerinput"):
            pytest.skip(
                "latency tests run serially only: pytest-benchmark is disabled under "
                "pytest-xdist; rerun them with -p no:xdist (or -n 0)"
            )
        if getattr(benchmark, "disabled", False):
            pytest.skip("pytest-benchmark is disabled (--benchmark-disable); no latency measured")
        profile: str = self.payload
        queries = [q.text for q in state.selected_queries()] or ["search"]
        position = iter(range(10**9))

        def one() -> None:
            text = queries[next(position) % len(queries)]
            target.search(text, profile=profile, limit=cfg.limit, filters=None, extract=True)

        try:
            benchmark.pedantic(one, rounds=cfg.latency_rounds, iterations=1, warmup_rounds=3)
        except TargetUnavailable as exc:
            pytest.fail(f"profile {profile!r} unavailable during the latency test: {exc}")
        samples_ms = [s * 1000.0 for s in benchmark.stats.stats.data]
        result = {
            "profile": profile,
            "n": len(samples_ms),
            "p50_ms": nearest_rank(samples_ms, 50),
            "p95_ms": nearest_rank(samples_ms, 95),
            "p99_ms": nearest_rank(samples_ms, 99),
            "budget_p95_ms": cfg.latency_p95_ms,
            "budget_p99_ms": cfg.latency_p99_ms,
            "samples_ms": [round(s, 3) for s in samples_ms],
        }
        self.user_properties.append((LATENCY_KEY, json.dumps(result, sort_keys=True)))
        over = []
        for pct, budget in (("p95", cfg.latency_p95_ms), ("p99", cfg.latency_p99_ms)):
            value = float(str(result[f"{pct}_ms"]))
            if budget is not None and value > budget:
                over.append(f"{pct} {value:.2f} ms > budget {budget:g} ms")
        if over:
            raise SearchEvalFailure(
                f"latency of profile {profile!r} over budget ({len(samples_ms)} requests, "
                f"one iteration per round): " + "; ".join(over)
            )


class SearchEvalFile(pytest.File):
    """The collection's anchor file; its children are the generated tests."""

    def collect(self) -> Iterator[pytest.Item]:
        from pytest_searcheval.collection.model import CollectionError
        from pytest_searcheval.plugin import STATE_KEY

        state = self.config.stash[STATE_KEY]
        state.collected = True
        try:
            state.selected_queries()
        except (CollectionError, KeyError) as exc:
            # The problems name file, line and field; a traceback would only hide them.
            raise self.CollectError(str(exc)) from None
        lines = query_lines(state.queries_file())
        qfile = state.queries_file() if state.queries_file().is_file() else self.path
        for query in state.selected_queries():
            yield SearchEvalItem.build(
                self,
                kind="query",
                key=query.id,
                name=f"test_query[{query.id}-{query.query_class}]",
                fn=_query_test,
                payload=query,
                file=qfile,
                line=lines.get(query.id, 0),
                marks=_marks(known_failure_marker(state, "query", query.id)),
            )
        for case in invariant_cases(state):
            yield SearchEvalItem.build(
                self,
                kind="invariant",
                key=str(case.id),
                name=f"test_invariant[{case.id}]",
                fn=_invariant_test,
                payload=case,
                file=self.path,
                line=0,
                marks=_marks(known_failure_marker(state, "invariant", str(case.id))),
            )
        cfg = state.cfg
        if cfg.latency_p95_ms is not None or cfg.latency_p99_ms is not None:
            yield SearchEvalItem.build(
                self,
                kind="latency",
                key=cfg.gated_profile,
                name=f"test_latency[{cfg.gated_profile}]",
                fn=_latency_test,
                payload=cfg.gated_profile,
                file=self.path,
                line=0,
            )


def _marks(mark: pytest.MarkDecorator | None) -> tuple[pytest.MarkDecorator, ...]:
    return () if mark is None else (mark,)


def invariant_cases(state: EvalState) -> list[Any]:
    """Cases from ``invariants.cases(collection, config)`` when that module provides them."""
    import importlib

    try:
        invariants = importlib.import_module("pytest_searcheval.invariants")
    except ModuleNotFoundError:
        return []
    cases = getattr(invariants, "cases", None)
    if cases is None:
        return []
    return list(cases(state.collection, state.cfg))


_ID_LINE = re.compile(r"^\s*-?\s*id:\s*['\"]?([^'\"\s#]+)")


def query_lines(path: Path) -> dict[str, int]:
    """Line of each ``id:`` in queries.yaml, so IDEs and reports point at the query."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return {}
    out: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = _ID_LINE.match(line)
        if match and match.group(1) not in out:
            out[match.group(1)] = number - 1  # reportinfo lines are 0-based
    return out
