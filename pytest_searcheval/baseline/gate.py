"""The baseline gate (DESIGN section 7): rules -> passed / failed / skipped / unverified.

Each :class:`Rule` carries the numbers it compared, so the terminal, the reports and CI logs say
why the gate opened or closed. A rule that cannot be evaluated (no baseline, partial run,
profile not configured) is ``skipped`` with the reason, never silently passed. ``unverified``
(no git, no tag) fails the gate only with ``strict_baseline``.

Baseline file (``baselines/baseline.json``, ``schema_version`` 2)::

    {"schema_version": 2, "tool": {"name", "version"}, "tag": "searcheval-<collection>-<hash>",
     "collection": {"name", "version", "hashes": {"corpus", "queries", "judgments"}},
     "model": {"id", "revision", ...} | null,
     "run": {"split", "gain", "relevance_level", "limit", "measures", "trec_compat",
             "gated_profile"},
     "profiles": {name: {"aggregates": {measure: mean}, "no_result_accuracy": float | null,
                         "hard_filter_violations": int,
                         "queries": {qid: {measure: value, ..., "ids": [top 10]}}}},
     "invariants": {case id: true | false},
     "known_failures": {"queries": {qid: {"reasons": [...], "summary": str}},
                        "invariants": {case id: {"reasons": [...], "summary": str}}}}

It holds no timestamp, so regenerating it from an unchanged system gives an identical file.

Known-failure ledger: ``known_failures`` records which query tests and invariant cases failed
when the baseline was written, each with its *reasons*: the failure lines cut before the
evidence they list (the first ``": "`` outside quotes and brackets) with every free-standing
number replaced by ``#`` (``known item 'x' expected at rank <= #, found at rank #``), so a known
item that slips from rank 2 to rank 4 keeps its reason while a different missing item is a new
one. A later failure whose reasons are all recorded is a known failure (xfail); a new reason, a
hard-filter violation (never excused) or a test that passed in the baseline fails normally.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pytest_searcheval import __version__
from pytest_searcheval.baseline.ledger import ledger_profile_differs, make_ledger
from pytest_searcheval.settings import GATED_MEASURES, SearchEvalConfig
from pytest_searcheval.types import (
    Baseline,
    BaselineProfile,
    BaselineQuery,
    Conventions,
    ProfileEntry,
    Report,
    RuleRecord,
    RuleStatus,
)

BASELINE_SCHEMA_VERSION = 2
HASH_KEYS: tuple[str, ...] = ("corpus", "queries", "judgments")
MODEL_KEYS: tuple[str, ...] = ("id", "revision")


@dataclass(frozen=True)
class Rule:
    """One gate rule's verdict, with the numbers it compared (``detail``)."""

    name: str
    status: RuleStatus
    detail: str

    def as_dict(self) -> RuleRecord:
        return {"name": self.name, "status": self.status, "detail": self.detail}


@dataclass(frozen=True)
class GateContext:
    """What every gate rule reads: the run's report, the baseline (``None`` when there is
    none), the settings, and the baseline's integrity check."""

    report: Report
    baseline: Baseline | None
    cfg: SearchEvalConfig
    integrity: Rule
    baseline_error: str | None = None

    @property
    def gated(self) -> str:
        return self.cfg.gated

    @property
    def partial(self) -> str:
        """Why aggregate comparisons cannot be judged on this run, or ``""``."""
        return "" if self.report["run"]["complete"] else PARTIAL

    @property
    def no_baseline(self) -> str:
        return "no baseline" if self.baseline is None else ""

    @property
    def entry(self) -> ProfileEntry:
        """The gated profile's entry in the report (unavailable, with no reason, when it is not
        configured)."""
        return self.report["profiles"].get(self.gated) or {"available": False, "reason": None}

    def mean(self, profile: str, measure: str) -> float | None:
        """The mean of ``measure`` on ``profile`` in this run (None: not measured)."""
        entry = self.report["profiles"].get(profile)
        if not entry or not entry.get("available"):
            return None
        cell = (entry.get("measures") or {}).get(measure)
        value = cell.get("mean") if cell else None
        return None if value is None else float(value)

    def base_mean(self, profile: str, measure: str) -> float | None:
        """The baseline's mean of ``measure`` on ``profile`` (None: no baseline, or none)."""
        if self.baseline is None:
            return None
        prof = (self.baseline.get("profiles") or {}).get(profile)
        value = (prof.get("aggregates") or {}).get(measure) if prof else None
        return None if value is None else float(value)

    def errored(self, profile: str) -> list[str]:
        """The queries whose search errored on ``profile`` (not scored there)."""
        return errored_queries(self.report).get(profile, [])

    def base_mean_on(self, profile: str, measure: str, left_out: Sequence[str]) -> float | None:
        """The baseline's mean of ``measure`` over its per-query values without the
        ``left_out`` queries: the queries this run scored (None: no such values)."""
        if self.baseline is None:
            return None
        prof: Mapping[str, Any] = (self.baseline.get("profiles") or {}).get(profile) or {}
        per_query: Mapping[str, Any] = prof.get("queries") or {}
        values = [
            float(v[measure])
            for q, v in per_query.items()
            if q not in left_out and isinstance(v, Mapping) and v.get(measure) is not None
        ]
        return sum(values) / len(values) if values else None

    def per_query(self, profile: str, measure: str) -> dict[str, float]:
        """This run's value of ``measure`` on ``profile`` per query that scored it."""
        out: dict[str, float] = {}
        for qid, q in (self.report.get("queries") or {}).items():
            result: Mapping[str, Any] = (q.get("profiles") or {}).get(profile) or {}
            value = (result.get("measures") or {}).get(measure)
            if value is not None:
                out[str(qid)] = float(value)
        return out


#: The reason a rule comparing aggregates skips on a partial run (``-k``, ``--lf``, ``-x``).
PARTIAL = "partial run (selected queries only)"

#: A gate rule: a function of the context returning its verdicts (none when it does not apply).
GateRule = Callable[[GateContext], Iterable[Rule]]


def rule_gated_available(ctx: GateContext) -> list[Rule]:
    if ctx.entry.get("available"):
        return [Rule("gated profile available", "passed", f"{ctx.gated} answered")]
    return [Rule("gated profile available", "failed", f"{ctx.gated}: {ctx.entry.get('reason')}")]


def errored_queries(report: Report) -> dict[str, list[str]]:
    """Per profile, the queries whose search errored there (sorted by id)."""
    errored: dict[str, list[str]] = {}
    for qid, q in sorted((report.get("queries") or {}).items()):
        for profile in q.get("errors") or {}:
            errored.setdefault(str(profile), []).append(str(qid))
    return errored


def listed(ids: Sequence[str], most: int = 10) -> str:
    """``a, b, c and 4 more``: the first ``most`` ids, for a rule's detail."""
    extra = len(ids) - most
    return ", ".join(ids[:most]) + (f" and {extra} more" if extra > 0 else "")


def errors_by_profile(errored: Mapping[str, Sequence[str]]) -> str:
    """``hybrid 1 (q05); lexical 1 (q05)``."""
    return "; ".join(f"{p} {len(q)} ({listed(q)})" for p, q in sorted(errored.items()))


def rule_search_errors(ctx: GateContext) -> list[Rule]:
    """Queries whose search errored, per profile, within ``max_errors`` each."""
    errored = errored_queries(ctx.report)
    queries = ctx.report.get("queries") or {}
    # An invariant case whose search errored searched the gated profile: its query counts
    # there once, with the query test's own error of it (a case whose query is not known
    # counts by its id).
    by_text = {str(q.get("text")): str(qid) for qid, q in queries.items()}
    for cid, rec in sorted((ctx.report.get("invariants") or {}).items()):
        if rec.get("status") != "errored":
            continue
        searched = (rec.get("details") or {}).get("query")
        subject = by_text.get(str(searched), str(cid)) if searched else str(cid)
        seen = errored.setdefault(ctx.gated, [])
        if subject not in seen:
            seen.append(subject)
    tolerance = ctx.cfg.max_errors
    if not errored:
        return [Rule("no search errors", "passed", "every search answered")]
    over = {p: qids for p, qids in errored.items() if len(qids) > tolerance}
    detail = f"errored queries: {errors_by_profile(errored)} (tolerance {tolerance} per profile)"
    return [Rule("no search errors", "failed" if over else "passed", detail)]


def rule_baseline_readable(ctx: GateContext) -> list[Rule]:
    if ctx.baseline_error:
        return [Rule("baseline readable", "failed", ctx.baseline_error)]
    return []


def rule_conventions(ctx: GateContext) -> list[Rule]:
    if ctx.baseline is None:
        return []
    return [_conventions(ctx.report, ctx.baseline)]


def rule_measures_vs_baseline(ctx: GateContext) -> list[Rule]:
    """Each gated measure's mean, at most ``tolerance`` below the baseline's."""
    out = []
    tolerance = ctx.cfg.tolerance
    for m in GATED_MEASURES:
        name = f"{ctx.gated} {m} vs baseline"
        why = ctx.no_baseline or ctx.partial
        now = ctx.mean(ctx.gated, m)
        before = ctx.base_mean(ctx.gated, m)
        errored = ctx.errored(ctx.gated)
        on = ""
        if errored and not why and before is not None:
            # This run's mean leaves the errored queries out: the baseline's is taken over
            # the same queries, so the comparison is of like with like.
            whole = before
            before = ctx.base_mean_on(ctx.gated, m, errored)
            on = (
                f"; on the queries that answered: {len(errored)} errored, not scored "
                f"({listed(errored)}), baseline over every query {whole:.4f}"
            )
        if why:
            out.append(Rule(name, "skipped", why))
        elif now is None or before is None:
            out.append(Rule(name, "skipped", f"not measured (now {now}, baseline {before})"))
        else:
            floor = before - tolerance
            ok = now >= floor - 1e-12
            out.append(
                Rule(
                    name,
                    "passed" if ok else "failed",
                    f"{now:.4f} vs baseline {before:.4f} (floor {floor:.4f}, "
                    f"tolerance {tolerance:g}, change {now - before:+.4f}){on}",
                )
            )
    return out


def rule_gate_over(ctx: GateContext) -> list[Rule]:
    """The gated profile at least as good as the gate-over profile, now and in the baseline."""
    gated, over = ctx.gated, ctx.cfg.gate_over
    if not over or over == gated or over not in (ctx.cfg.profiles or ()):
        return []
    out = []
    for m in GATED_MEASURES:
        name = f"{gated} >= {over} on {m}"
        if ctx.partial:
            out.append(Rule(name, "skipped", ctx.partial))
            continue
        h, lx = ctx.mean(gated, m), ctx.mean(over, m)
        if h is None or lx is None:
            out.append(Rule(name, "skipped", f"not measured now ({gated} {h}, {over} {lx})"))
            continue
        errored = {p: ctx.errored(p) for p in (gated, over) if ctx.errored(p)}
        on = ""
        if errored:
            # Each mean leaves out the queries that errored on its own profile: both are
            # taken over the queries both profiles answered, so like is compared with like.
            mine, theirs = ctx.per_query(gated, m), ctx.per_query(over, m)
            both = sorted(set(mine) & set(theirs))
            left_out = f"errored on {errors_by_profile(errored)}"
            if not both:
                out.append(Rule(name, "skipped", f"no query scored on both profiles ({left_out})"))
                continue
            whole = f"{h:.4f} vs {lx:.4f}"
            h = sum(mine[q] for q in both) / len(both)
            lx = sum(theirs[q] for q in both) / len(both)
            on = (
                f" on the {len(both)} queries both answered ({left_out}, left out; "
                f"over every query each answered {whole})"
            )
        ok = h >= lx
        parts = [f"now {h:.4f} vs {lx:.4f}{on}"]
        bh, bl = ctx.base_mean(gated, m), ctx.base_mean(over, m)
        if ctx.baseline and bh is not None and bl is not None:
            ok = ok and bh >= bl
            parts.append(f"baseline {bh:.4f} vs {bl:.4f}")
        out.append(Rule(name, "passed" if ok else "failed", "; ".join(parts)))
    return out


def rule_hard_filters(ctx: GateContext) -> list[Rule]:
    """No returned result of any available profile breaks an applied filter (the oracle)."""
    report = ctx.report
    total = 0
    checked = 0
    per_profile = []
    for p, e in report["profiles"].items():
        if e.get("available"):
            total += int(e["hard_filter_violations"])
            checked += int(e["results_checked"])
            if e["hard_filter_violations"]:
                per_profile.append(f"{p} {e['hard_filter_violations']}")
    detail = f"{total} violations in {checked} returned results (independent oracle)"
    filtered = sum(
        1
        for q in (report.get("queries") or {}).values()
        for e in (q.get("profiles") or {}).values()
        if e.get("applied_filters")
    )
    nothing = False
    if checked and not filtered:
        # No answer came under a hard filter: the oracle could only check corpus membership,
        # and without a corpus (TREC qrels and topics alone) not even that: not applicable.
        if (report.get("collection") or {}).get("documents") == 0:
            nothing = True
            detail += "; no query applied a hard filter and there is no corpus: nothing checked"
        else:
            detail += (
                "; no query applied a hard filter: checked only that each is a corpus document"
            )
    if per_profile:
        detail += ": " + ", ".join(per_profile)
    unknown = sum(
        int(e.get("unknown_documents") or 0)
        for e in report["profiles"].values()
        if e.get("available")
    )
    if unknown:
        detail += (
            f"; {unknown} results are no document of the corpus (not a filter violation: "
            "their query tests fail with unknown-document, which the baseline's ledger can excuse)"
        )
    status: RuleStatus = "failed" if total else "skipped" if nothing else "passed"
    return [Rule("hard filters respected", status, detail)]


#: The invariant family whose cases the filter-conformance rule judges.
CONFORMANCE_FAMILY = "filter-conformance"


def family(case_id: str, record: Mapping[str, Any]) -> str:
    """The invariant family of a case: its record's ``invariant``, else its id's prefix."""
    name = record.get("invariant")
    if name:
        return str(name)
    return CONFORMANCE_FAMILY if case_id.startswith(CONFORMANCE_FAMILY + "-") else case_id


def _failed(record: Mapping[str, Any]) -> bool:
    return record.get("status") == "failed" or ("status" not in record and not record.get("passed"))


def rule_conformance(ctx: GateContext) -> list[Rule]:
    """Every case of the filter-conformance family passes."""
    conformance = {
        k: v
        for k, v in (ctx.report.get("invariants") or {}).items()
        if family(k, v) == CONFORMANCE_FAMILY
    }
    if not conformance:
        return []
    bad = sorted(k for k, v in conformance.items() if _failed(v))
    # A case whose search errored judged nothing: it is counted apart, never as passed (the
    # "no search errors" rule counts its error).
    errored = sorted(k for k, v in conformance.items() if v.get("status") == "errored")
    ran = [k for k, v in conformance.items() if v.get("status") not in ("skipped", "errored")]
    unjudged = f"{len(errored)} not judged (search errors: {listed(errored)})" if errored else ""
    if not ran:
        why = f"no case judged: {unjudged}" if errored else "every conformance case skipped"
        return [Rule("filter conformance", "skipped", why)]
    return [
        Rule(
            "filter conformance",
            "failed" if bad else "passed",
            f"{len(ran) - len(bad)}/{len(ran)} cases"
            + (f", {unjudged}" if unjudged else "")
            + (f"; failing: {', '.join(bad[:10])}" if bad else ""),
        )
    ]


def rule_no_result_accuracy(ctx: GateContext) -> list[Rule]:
    entry = ctx.entry
    no_result = entry.get("no_result") if entry.get("available") else None
    nra_now = no_result.get("accuracy") if no_result else None
    base = (ctx.baseline.get("profiles") or {}).get(ctx.gated) if ctx.baseline else None
    nra_base = base.get("no_result_accuracy") if base else None
    name = f"{ctx.gated} no-result accuracy vs baseline"
    if ctx.no_baseline or ctx.partial:
        return [Rule(name, "skipped", ctx.no_baseline or ctx.partial)]
    if nra_now is None or nra_base is None:
        return [Rule(name, "skipped", f"not measured (now {nra_now}, baseline {nra_base})")]
    on = ""
    queries = ctx.report.get("queries") or {}
    unanswerable = sorted(str(q) for q, v in queries.items() if v.get("unanswerable"))
    errored = [q for q in ctx.errored(ctx.gated) if q in unanswerable]
    if errored:
        # This run's accuracy leaves out the unanswerable queries whose search errored: the
        # baseline's is taken over the same queries, from the results it recorded per query.
        whole = float(nra_base)
        recorded: Mapping[str, Any] = (base.get("queries") if base else None) or {}
        same = [q for q in unanswerable if q not in errored]
        lacking = [q for q in same if not isinstance((recorded.get(q) or {}).get("ids"), list)]
        left_out = f"{len(errored)} unanswerable errored, not scored ({listed(errored)})"
        if lacking or not same:
            why = (
                f"the baseline records no results of {listed(lacking)}"
                if lacking
                else "no unanswerable query answered"
            )
            return [
                Rule(
                    name,
                    "skipped",
                    f"cannot compare on the same queries: {left_out}, and {why} "
                    f"(now {float(nra_now):.4f}, baseline over every query {whole:.4f})",
                )
            ]
        nra_base = sum(1 for q in same if not recorded[q]["ids"]) / len(same)
        on = (
            f" on the queries that answered: {left_out}, baseline over every "
            f"unanswerable query {whole:.4f}"
        )
    ok = float(nra_now) >= float(nra_base) - 1e-12
    return [Rule(name, "passed" if ok else "failed", f"{nra_now:.4f} vs {float(nra_base):.4f}{on}")]


def rule_invariants(ctx: GateContext) -> list[Rule]:
    """No invariant case fails that passed in the baseline."""
    invariants = ctx.report.get("invariants") or {}
    if not invariants:
        return []
    name = "invariants not below baseline"
    base_inv = (ctx.baseline.get("invariants") or {}) if ctx.baseline else {}
    # A skipped case (target cannot be changed, nothing to check) is not a failure.
    failed = {k for k, v in invariants.items() if _failed(v)}
    # Below its baseline = failing now, passing in the baseline. A case the baseline does
    # not know fails its own test but cannot regress.
    regressed = sorted(k for k in failed if base_inv.get(k) is True)
    skipped = sum(1 for v in invariants.values() if v.get("status") == "skipped")
    # A case whose search errored judged nothing: the "no search errors" rule counts it.
    errored = sum(1 for v in invariants.values() if v.get("status") == "errored")
    checked = len(invariants) - skipped - errored
    counts = f"{checked - len(failed)}/{checked} pass" + (f", {skipped} skipped" if skipped else "")
    counts += f", {errored} not judged (search errors)" if errored else ""
    other = ledger_profile_differs(ctx.baseline, str(ctx.report["run"].get("gated_profile")))
    if ctx.baseline is None:
        return [Rule(name, "skipped", f"no baseline; {counts}")]
    if other is not None:
        return [Rule(name, "skipped", f"{counts}; {other}")]
    newly = f"; newly failing: {', '.join(regressed[:10])}" if regressed else ""
    return [Rule(name, "failed" if regressed else "passed", counts + newly)]


def rule_dataset_and_model(ctx: GateContext) -> list[Rule]:
    """The collection's hashes and the model's id and revision are the baseline's."""
    name = "dataset and model unchanged"
    report, baseline = ctx.report, ctx.baseline
    if baseline is None:
        return [Rule(name, "skipped", "no baseline")]
    changed = []
    now_hashes = report["collection"]["hashes"]
    base_hashes = (baseline.get("collection") or {}).get("hashes") or {}
    for key in HASH_KEYS:
        if base_hashes.get(key) != now_hashes.get(key):
            changed.append(f"{key} {base_hashes.get(key)} -> {now_hashes.get(key)}")
    now_model = report.get("model")
    base_model = baseline.get("model") or {}
    unseen = now_model is None and not report["queries"]
    for key in MODEL_KEYS if not unseen else ():
        if base_model.get(key) != (now_model or {}).get(key):
            changed.append(f"model {key} {base_model.get(key)} -> {(now_model or {}).get(key)}")
    if changed:
        return [Rule(name, "failed", "; ".join(changed) + " (re-baseline deliberately)")]
    detail = "hashes match" + ("; model not seen (no query test ran)" if unseen else "")
    return [Rule(name, "passed", detail)]


def rule_latency(ctx: GateContext) -> list[Rule]:
    return [_latency_rule(ctx.report, ctx.cfg)]


def rule_hand_written(ctx: GateContext) -> list[Rule]:
    """Hand-written search tests marked ``searcheval_gated`` passed (no rule without one)."""
    section = ctx.report.get("hand_written")
    gated = section.get("gated") if section else None
    if not gated or not gated.get("tests"):
        return []
    name = "hand-written gated tests pass"
    bad = gated["not_passed"]
    if bad:
        return [
            Rule(name, "failed", f"{len(bad)} of {gated['tests']} did not pass: " + ", ".join(bad))
        ]
    return [Rule(name, "passed", f"{gated['tests']} passed")]


def rule_integrity(ctx: GateContext) -> list[Rule]:
    """The baseline equals its tagged copy; ``unverified`` fails only with strict_baseline."""
    integrity = ctx.integrity
    if integrity.status == "unverified" and ctx.cfg.strict_baseline:
        return [Rule(integrity.name, "failed", integrity.detail + " (strict)")]
    return [integrity]


def rule_embedding_fallback(ctx: GateContext) -> list[Rule]:
    """No listing's embedding failed and none is served without it, within
    ``embedding_fallback_tolerance`` (0); judged on the target's counts
    (``quality.embeddings``, docs/report.md), skipped as not measured without them."""
    name = "no embedding fallback"
    quality = ctx.report.get("quality") or {}
    counts = quality.get("embeddings")
    if not counts:
        why = (quality.get("not_measured") or {}).get(
            "embeddings", "the target reports no embedding counts"
        )
        return [Rule(name, "skipped", f"not measured: {why}")]
    judged: dict[str, int] = {}
    for key in ("failed", "fallback"):
        value = counts.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return [Rule(name, "failed", f"embeddings.{key} is {value!r}, expected a count >= 0")]
        judged[key] = value
    if not judged:
        return [
            Rule(
                name,
                "skipped",
                "not measured: the target's embedding counts name no failed or fallback listings",
            )
        ]
    tolerance = ctx.cfg.embedding_fallback_tolerance
    said = []
    if isinstance(counts.get("embedded"), int) and isinstance(counts.get("listings"), int):
        said.append(f"{counts['embedded']} of {counts['listings']} listings embedded")
    if "failed" in judged:
        reasons = counts.get("reasons")
        why = (
            " (" + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) + ")"
            if isinstance(reasons, Mapping) and reasons and judged["failed"]
            else ""
        )
        said.append(f"{judged['failed']} failed{why}")
    if "fallback" in judged:
        said.append(f"{judged['fallback']} served without their embedding")
    over = any(v > tolerance for v in judged.values())
    return [
        Rule(name, "failed" if over else "passed", ", ".join(said) + f"; tolerance {tolerance}")
    ]


def rule_rerank_lift(ctx: GateContext) -> list[Rule]:
    """The reranked profile's mean nDCG@10 is not below its base profile's by more than
    ``rerank_tolerance`` (by default ``tolerance``, the drop the baseline comparisons allow),
    over the queries both scored (the report's reranker lift); skipped when no reranked
    profile ran beside its base."""
    quality = ctx.report.get("quality") or {}
    lift = quality.get("reranker_lift")
    if not lift:
        why = (quality.get("not_measured") or {}).get("reranker_lift", "no reranked profile ran")
        return [Rule("reranking matches or improves hybrid", "skipped", f"not measured: {why}")]
    base, profile = str(lift["over"]), str(lift["profile"])
    name = f"reranking matches or improves {base}"
    if ctx.partial:
        return [Rule(name, "skipped", ctx.partial)]
    value = float(lift["nDCG@10"])
    tolerance = (
        ctx.cfg.rerank_tolerance if ctx.cfg.rerank_tolerance is not None else ctx.cfg.tolerance
    )
    ok = value >= -tolerance - 1e-12
    detail = (
        f"{profile} - {base} nDCG@10 {value:+.4f} over {lift['n']} queries; tolerance {tolerance:g}"
    )
    return [Rule(name, "passed" if ok else "failed", detail)]


#: The built-in rules, in the order the gate reports them (docs/report.md, "Gate rules").
RULES: tuple[GateRule, ...] = (
    rule_gated_available,
    rule_search_errors,
    rule_baseline_readable,
    rule_conventions,
    rule_measures_vs_baseline,
    rule_gate_over,
    rule_hard_filters,
    rule_conformance,
    rule_no_result_accuracy,
    rule_rerank_lift,
    rule_invariants,
    rule_dataset_and_model,
    rule_latency,
    rule_embedding_fallback,
    rule_hand_written,
    rule_integrity,
)

#: A project's own rules (name -> rule), judged after the built-in ones; see :func:`gate_rule`.
USER_RULES: dict[str, GateRule] = {}


def gate_rule(name: str) -> Callable[[Callable[[GateContext], Any]], Callable[[GateContext], Any]]:
    """Register a gate rule of the project's own, e.g. from a conftest::

        from pytest_searcheval.baseline.gate import GateContext, Rule, gate_rule

        @gate_rule("p95 under 50 ms")
        def fast_enough(ctx: GateContext) -> Rule:
            p95 = ctx.report["profiles"][ctx.gated]["latency_ms"]["p95"]
            if p95 is None:
                return Rule("p95 under 50 ms", "skipped", "no latency measured")
            return Rule("p95 under 50 ms", "passed" if p95 < 50 else "failed", f"{p95:.1f} ms")

    The function receives a :class:`GateContext` and returns a :class:`Rule`, several, or
    ``None`` (it does not apply). A rule that cannot judge returns ``skipped`` with why, never
    ``passed``. Registering a name again replaces the rule; :func:`remove_gate_rule` drops it.
    """

    def register(fn: Callable[[GateContext], Any]) -> Callable[[GateContext], Any]:
        USER_RULES[name] = _as_rule_list(name, fn)
        return fn

    return register


def remove_gate_rule(name: str) -> None:
    USER_RULES.pop(name, None)


def _as_rule_list(name: str, fn: Callable[[GateContext], Any]) -> GateRule:
    def run(ctx: GateContext) -> list[Rule]:
        try:
            got = fn(ctx)
        except Exception as exc:  # a broken project rule fails the gate, with why
            return [Rule(name, "failed", f"the rule raised {type(exc).__name__}: {exc}")]
        rules = [] if got is None else [got] if isinstance(got, Rule) else list(got)
        bad = [r for r in rules if not isinstance(r, Rule) or r.status not in RULE_STATUSES]
        if bad:
            return [Rule(name, "failed", f"the rule returned {bad[0]!r}, not a Rule")]
        return rules

    return run


RULE_STATUSES: frozenset[str] = frozenset(get_args(RuleStatus))


def evaluate(
    report: Report,
    baseline: Baseline | None,
    cfg: SearchEvalConfig,
    *,
    integrity: Rule,
    baseline_error: str | None = None,
) -> list[Rule]:
    """Every gate rule for this run, in a fixed order: :data:`RULES`, then the project's."""
    ctx = GateContext(report, baseline, cfg, integrity, baseline_error)
    return [r for rule in (*RULES, *USER_RULES.values()) for r in rule(ctx)]


#: The conventions a baseline's numbers were measured under; a run under others is not
#: comparable with it (DESIGN section 7).
CONVENTIONS: tuple[str, ...] = (
    "split",
    "limit",
    "gain",
    "relevance_level",
    "measures",
    "trec_compat",
)


def conventions(cfg: SearchEvalConfig) -> Conventions:
    return {
        "split": cfg.split,
        "limit": cfg.limit,
        "gain": cfg.gain,
        "relevance_level": cfg.relevance_level,
        "measures": list(cfg.measures),
        "trec_compat": cfg.trec_compat,
    }


def _conventions(report: Report, baseline: Baseline) -> Rule:
    now = report["run"].get("conventions") or {}
    before = dict(baseline.get("run") or {})
    before.setdefault("trec_compat", False)
    diffs = [
        f"{key} {before.get(key)!r} in the baseline, {now.get(key)!r} now"
        for key in CONVENTIONS
        if before.get(key) != now.get(key)
    ]
    # The invariant outcomes and known failures a baseline holds are the gated profile's; a
    # baseline written before it recorded that profile is compared as before.
    recorded = before.get("gated_profile")
    gated = report["run"].get("gated_profile")
    if ledger_profile_differs(baseline, str(gated)) is not None:
        diffs.append(
            f"gated profile {recorded!r} in the baseline (its invariant outcomes and known "
            f"failures are that profile's), {gated!r} now"
        )
    if diffs:
        return Rule(
            "conventions match the baseline",
            "failed",
            "; ".join(diffs) + " (re-baseline deliberately to change them)",
        )
    same = "split, limit, gain, relevance level, measures and trec mode"
    if recorded is None:
        detail = f"{same} as in the baseline (it does not record its gated profile)"
    else:
        detail = f"{same}, and the gated profile {gated!r}, as in the baseline"
    return Rule("conventions match the baseline", "passed", detail)


def _latency_rule(report: Report, cfg: SearchEvalConfig) -> Rule:
    name = "latency budgets"
    if not cfg.latency_enabled:
        return Rule(name, "skipped", "no budget set")
    every = report.get("latency_tests") or {}
    tests = {p: lat for p, lat in every.items() if "not_measured" not in lat}
    if not tests:
        why = next(
            (str(lat["not_measured"]) for lat in every.values() if "not_measured" in lat),
            "no latency test ran (deselected, or pytest-benchmark is not installed: "
            "pip install pytest-searcheval[latency])",
        )
        status: RuleStatus = "failed" if cfg.strict_baseline else "skipped"
        return Rule(
            name, status, f"not measured: {why}" + (" (strict)" if status == "failed" else "")
        )
    over = []
    parts = []
    judged = 0
    for profile, lat in sorted(tests.items()):
        budgets = cfg.latency_budget(profile)
        if all(b is None for b in budgets.values()):
            parts.append(f"{profile} p95 {float(lat['p95_ms']):.2f} ms (no budget)")
            continue
        for pct, budget in budgets.items():
            value = float(lat["p95_ms"] if pct == "p95" else lat["p99_ms"])
            if budget is None:
                continue
            judged += 1
            parts.append(f"{profile} {pct} {value:.2f} ms (budget {budget:g})")
            if value > budget:
                over.append(f"{profile} {pct}")
    if not judged:
        return Rule(name, "skipped", "no budget applies to the timed profiles: " + "; ".join(parts))
    return Rule(name, "failed" if over else "passed", "; ".join(parts))


def passed(rules: list[Rule]) -> bool:
    return not any(r.status == "failed" for r in rules)


def unjudged(rules: Iterable[RuleRecord]) -> list[str]:
    """The rules a partial run could not judge (skipped because only some queries ran)."""
    return [str(r["name"]) for r in rules if r["status"] == "skipped" and r["detail"] == PARTIAL]


def verdict(report: Report) -> tuple[Literal["PASSED", "FAILED", "NOT JUDGED"], str]:
    """The gate's one-word verdict and its sentence. A partial run (``-k``, ``-x``, ``--lf``)
    that failed no rule is ``NOT JUDGED``, never ``PASSED``: it names the rules it could not
    judge."""
    gate = report.get("gate")
    rules = list(gate.get("rules") or []) if gate else []
    failed = [str(r["name"]) for r in rules if r["status"] == "failed"]
    if failed:
        return "FAILED", f"{len(failed)} of {len(rules)} rules failed: {', '.join(failed)}"
    if not report["run"]["complete"]:
        names = unjudged(rules)
        could_not = f"could not judge {', '.join(names)}" if names else "judged only what ran"
        return "NOT JUDGED", f"partial run (selected tests only): {could_not}; no rule failed"
    return "PASSED", f"{len(rules)} rules, none failed"


# --- baseline integrity (tamper check) -------------------------------------------------------


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False, timeout=30)


def _baseline_tags(root: Path, rel: str) -> str:
    """Which tags of the repository at ``root`` are baseline tags (``searcheval-*``, or
    any tag holding a copy of ``rel``), for people; empty when there is none."""
    listed = _git(root, "tag", "--list")
    tags = listed.stdout.decode().split() if listed.returncode == 0 else []
    named = [t for t in tags if t.startswith("searcheval-")]
    if named:
        shown = ", ".join(named[:3]) + (" ..." if len(named) > 3 else "")
        return f"the repository has searcheval tags ({shown})"
    for t in tags[:200]:
        if _git(root, "cat-file", "-e", f"{t}:{rel}").returncode == 0:
            return f"tag {t} holds a copy of {rel}"
    return ""


def verify_baseline(path: Path, baseline: Baseline | None) -> Rule:
    """The baseline must equal, byte for byte, ``git show TAG:path`` for the tag it names."""
    name = "baseline matches its git tag"
    if baseline is None:
        return Rule(name, "skipped", f"no baseline at {path}")
    tag = baseline.get("tag")
    if shutil.which("git") is None:
        return Rule(name, "unverified", "git is not installed")
    top = _git(path.parent, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        return Rule(name, "unverified", f"{path} is not in a git repository")
    root = Path(top.stdout.decode().strip())
    rel = path.resolve().relative_to(root.resolve()).as_posix()
    if not tag or _git(root, "rev-parse", "-q", "--verify", f"refs/tags/{tag}").returncode != 0:
        missing = f"tag {tag} not found in {root}" if tag else "the baseline names no tag"
        # A clone without tags cannot check (unverified); a repository that holds baseline
        # tags can, and a tag name that does not exist there is how an edit would hide.
        tagged = _baseline_tags(root, rel)
        if tagged:
            return Rule(
                name,
                "failed",
                f"{missing}, though {tagged}: tag the commit that holds this baseline "
                f"(`git tag {tag or '<name>'}`), or restore the tagged copy",
            )
        return Rule(name, "unverified", missing)
    shown = _git(root, "show", f"{tag}:{rel}")
    if shown.returncode != 0:
        return Rule(name, "failed", f"{rel} does not exist at tag {tag}")
    if shown.stdout != path.read_bytes():
        return Rule(
            name,
            "failed",
            f"{rel} differs from the copy at tag {tag} (git diff {tag} -- {rel}); "
            "a baseline change needs --search-eval-update-baseline and a new tag",
        )
    return Rule(name, "passed", f"{rel} equals the copy at tag {tag}")


def make_baseline(report: Report, cfg: SearchEvalConfig, tag: str | None) -> Baseline:
    """The baseline that this run's report implies (aggregates, per-query values, hashes)."""
    profiles: dict[str, BaselineProfile] = {}
    for p, e in report["profiles"].items():
        if not e.get("available"):
            continue
        queries: dict[str, BaselineQuery] = {}
        for qid, q in report["queries"].items():
            d = q["profiles"].get(p)
            if d is None:
                continue
            entry: BaselineQuery = {m: v for m, v in d["measures"].items() if v is not None}
            entry["ids"] = list(d["ids"][:10])
            queries[qid] = entry
        profiles[p] = {
            "aggregates": {m: c["mean"] for m, c in e["measures"].items() if c["mean"] is not None},
            "no_result_accuracy": e["no_result"]["accuracy"],
            "hard_filter_violations": e["hard_filter_violations"],
            "queries": queries,
        }
    return {
        "schema_version": BASELINE_SCHEMA_VERSION,
        "tool": {"name": "pytest-searcheval", "version": __version__},
        "tag": tag,
        "collection": {
            "name": report["collection"]["name"],
            "version": report["collection"]["version"],
            "hashes": report["collection"]["hashes"],
        },
        "model": report.get("model"),
        # The invariants' outcomes and the ledger were measured on the gated profile.
        "run": {**conventions(cfg), "gated_profile": cfg.gated},
        "profiles": profiles,
        # A skipped case checked nothing: it is left out, as a case the baseline lacks is read.
        "invariants": {
            k: bool(v.get("passed"))
            for k, v in report.get("invariants", {}).items()
            if v.get("status") not in ("skipped", "errored")
        },
        "known_failures": make_ledger(report),
    }


def suggested_tag(baseline: Mapping[str, Any]) -> str:
    """The git tag an updated baseline names when ``baseline_tag`` is not set:
    ``searcheval-<collection>-<12 hex digits of the file's content hash>``.

    The hash is over the baseline's text with no tag in it, so every re-baseline that changes
    a number gets a tag of its own (two re-baselines never collide on one name), while
    re-baselining an unchanged system names the same tag, whose copy equals the file."""
    import hashlib
    import re

    untagged = baseline_text({**baseline, "tag": None})
    digest = hashlib.sha256(untagged.encode("utf-8")).hexdigest()[:12]
    name = str((baseline.get("collection") or {}).get("name") or "collection")
    # what git accepts in a tag name, kept readable
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip(".-") or "collection"
    return f"searcheval-{slug}-{digest}"


def baseline_text(baseline: Mapping[str, Any]) -> str:
    return json.dumps(baseline, indent=2, sort_keys=True, allow_nan=False) + "\n"
