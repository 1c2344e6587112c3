"""The report's model: ``build`` turns the merged per-query rows into one JSON-safe dict
(schema in docs/report.md): aggregates with deterministic bootstrap intervals, per-class tables,
paired randomization tests between profiles (Holm-corrected), the comparison with the baseline,
result quality, the no-result trade-off, latency percentiles, limitations and the environment.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any, Final

from pytest_searcheval import __version__
from pytest_searcheval.collection.model import BeirDocuments
from pytest_searcheval.report import tradeoff
from pytest_searcheval.settings import GATED_MEASURES, SearchEvalConfig
from pytest_searcheval.stats import DEFAULT_SEED, nearest_rank
from pytest_searcheval.types import (
    Baseline,
    BaselineComparison,
    BaselineQuery,
    ClassEntry,
    Comparison,
    Conventions,
    Interval,
    InvariantRecord,
    KnownFailures,
    LatencyRecord,
    LedgerLists,
    ProfileEntry,
    ProfileResult,
    Quality,
    QueryEntry,
    QueryProfileEntry,
    QueryRow,
    Report,
)

SCHEMA_VERSION = 1
#: Measures shown in the terminal table (the JSON has every configured measure).
CLASS_MEASURE: Final = "nDCG@10"
#: the seed of every interval and test in a report (one for all, as the manifest says)
SEED = DEFAULT_SEED


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def _intervals(
    columns: Mapping[Any, Mapping[str, float]], cfg: SearchEvalConfig
) -> dict[Any, Interval]:
    """Bootstrap interval cells of several columns (query id -> value each).

    Columns over the same query set share one resample index matrix
    (:func:`stats.bootstrap_cis`): the measures of a profile, and the profiles that answered the
    same queries, are resampled together, so their intervals come from the same resamples.
    """
    from pytest_searcheval.stats import bootstrap_cis

    out: dict[Any, Interval] = {}
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for key, col in columns.items():
        if not col:
            out[key] = {"mean": None, "low": None, "high": None, "n": 0}
        else:
            groups.setdefault(tuple(sorted(col)), []).append(key)
    for qids, keys in groups.items():
        matrix = [[columns[k][q] for k in keys] for q in qids]
        cis = bootstrap_cis(matrix, samples=cfg.bootstrap_samples, seed=SEED, confidence=0.95)
        for key, ci in zip(keys, cis, strict=True):
            out[key] = {"mean": ci.mean, "low": ci.low, "high": ci.high, "n": len(qids)}
    return out


#: The rule that picks the queries of every relevance aggregate (written into the manifest).
EVALUATED_RULE = (
    "a query enters every relevance aggregate (nDCG, P, R, RR, AP, bpref, Judged alike, per "
    "profile and per class) exactly when it has a judged document with grade >= the relevance "
    "level; queries without one are excluded from all of them and scored by no-result accuracy"
)


#: The same rule under ``--search-eval-trec-compat`` (trec_eval ``-c``).
EVALUATED_RULE_TREC = (
    "a query enters every relevance aggregate (nDCG, P, R, RR, AP, bpref, Judged alike, per "
    "profile and per class) exactly when it is judged (it has a line in the qrels), with or "
    "without a judged document with grade >= the relevance level: queries without one score 0 "
    "and count, as trec_eval -c averages them; queries absent from the qrels are excluded"
)


def result_order(rows: Sequence[QueryRow]) -> str:
    """The order each profile's results were scored in (trec-compat): trec_eval's, or the
    service's own where it sent results without scores."""
    service: dict[str, int] = {}
    for row in rows:
        for p, d in row["profiles"].items():
            service[p] = service.get(p, 0) + (d.get("order") == "service")
    trec = "trec_eval's (score descending, then docid descending)"
    if not any(service.values()):
        return f"{trec} for every profile"
    return "; ".join(
        f"{p}: the service's order on {n} queries (results without scores), {trec} on the rest"
        if n
        else f"{p}: {trec}"
        for p, n in sorted(service.items())
    )


def evaluated_rule(trec_compat: bool, level: int) -> str:
    """The evaluated-query rule of a mode, with the run's relevance level written in."""
    rule = EVALUATED_RULE_TREC if trec_compat else EVALUATED_RULE
    return rule.replace("the relevance level", f"the relevance level ({level})")


def evaluated(row: QueryRow | Mapping[str, Any]) -> bool:
    """Whether a row belongs to the relevance aggregates (see :data:`EVALUATED_RULE`); in
    trec-compat mode every judged query does (trec_eval ``-c``)."""
    if "evaluated" in row:
        return bool(row["evaluated"])
    return int(row.get("relevant", 0)) > 0


def _columns(
    rows: Sequence[QueryRow], profiles: Sequence[str], measures: Sequence[str]
) -> dict[tuple[str, str], dict[str, float]]:
    """``{(profile, measure): {qid: value}}`` over the evaluated rows, in one pass."""
    out: dict[tuple[str, str], dict[str, float]] = {(p, m): {} for p in profiles for m in measures}
    for row in rows:
        if not evaluated(row):
            continue
        qid = row["qid"]
        for p in profiles:
            data = row["profiles"].get(p)
            if data is None:
                continue
            values = data["measures"]
            for m in measures:
                v = values.get(m)
                if v is not None and math.isfinite(v):
                    out[(p, m)][qid] = float(v)
    return out


#: Results a person reads per ranking: the query table's and a failing test's top ten.
READ_RESULTS = 10


def ranking_depth(cfg: SearchEvalConfig) -> int | None:
    """How much of each ranking the report keeps: ``None`` (all) with ``report_rankings =
    full``, else the deepest cut-off among the measures, at least :data:`READ_RESULTS`. A
    5,000-query run of two 1,000-deep run files wrote 149 MB of report.json with every id."""
    if cfg.report_rankings == "full":
        return None
    cuts = [int(m.rsplit("@", 1)[1]) for m in cfg.measures if m.rsplit("@", 1)[-1].isdigit()]
    return max([READ_RESULTS, *cuts])


def build(
    *,
    cfg: SearchEvalConfig,
    rows: Mapping[str, QueryRow],
    expected: Sequence[str],
    facts: Mapping[str, Any] | None,
    collection: Any,
    baseline: Baseline | None,
    invariants: Mapping[str, InvariantRecord] | None = None,
    latency_tests: Mapping[str, LatencyRecord] | None = None,
    workers: int = 0,
    partial: bool = False,
) -> Report:
    """Everything the gate and the renderings need, in a stable order (rows sorted by id)."""
    from pytest_searcheval import metrics

    level = cfg.relevance_level
    if level is None:
        raise ValueError(
            "report.build needs the run's relevance level resolved "
            "(pytest_searcheval.evaluation.resolve_relevance)"
        )
    ordered = [rows[q] for q in sorted(rows)]
    facts = dict(facts or {})
    unavailable: dict[str, str] = {}
    for row in ordered:
        for p, reason in row["unavailable"].items():
            unavailable.setdefault(p, reason)
    available = [p for p in cfg.profiles or () if p not in unavailable]

    columns = _columns(ordered, available, cfg.measures)
    cells = _intervals(columns, cfg)
    classes_seen = sorted({r["class"] for r in ordered})
    class_of = {r["qid"]: r["class"] for r in ordered}
    class_columns: dict[tuple[str, str], dict[str, float]] = {
        (p, cls): {} for p in available for cls in classes_seen
    }
    for p in available:
        for qid, v in columns.get((p, CLASS_MEASURE), {}).items():
            class_columns[(p, class_of[qid])][qid] = v
    class_cells = _intervals(class_columns, cfg)
    # (profile, class) -> evaluated queries; class "" counts every class.
    n_evaluated: dict[tuple[str, str], int] = {}
    for r in ordered:
        if evaluated(r):
            for p in r["profiles"]:
                for key in ((p, ""), (p, r["class"])):
                    n_evaluated[key] = n_evaluated.get(key, 0) + 1
    profiles: dict[str, ProfileEntry] = {}
    for p in cfg.profiles or ():
        entry: ProfileEntry = {"available": p in available, "reason": unavailable.get(p)}
        if p in available:
            # queries whose search on this profile errored (named in each query's "errors")
            entry["errored"] = sum(1 for r in ordered if p in (r.get("errors") or {}))
            entry["measures"] = {m: cells[(p, m)] for m in cfg.measures}
            entry["evaluated"] = n_evaluated.get((p, ""), 0)
            answered = {r["qid"]: r["profiles"][p]["ids"] for r in ordered if p in r["profiles"]}
            nra = metrics.no_result_accuracy(
                answered, [r["qid"] for r in ordered if r["unanswerable"] and r["qid"] in answered]
            )
            entry["no_result"] = {
                "unanswerable": nra.unanswerable,
                "correct_empty": nra.correct_empty,
                "accuracy": _finite(nra.accuracy),
                "answerable": nra.answerable,
                "false_empty": nra.false_empty,
                "false_empty_rate": _finite(nra.false_empty_rate),
            }
            # A result the corpus does not hold (a live index ahead of the frozen corpus) is
            # its own count: the query test reports it and the ledger can excuse it, while a
            # broken hard filter never is.
            codes = [
                v.get("code")
                for r in ordered
                if p in r["profiles"]
                for v in r["profiles"][p]["violations"]
            ]
            entry["hard_filter_violations"] = sum(1 for c in codes if c != "unknown-document")
            entry["unknown_documents"] = sum(1 for c in codes if c == "unknown-document")
            entry["results_checked"] = sum(
                r["profiles"][p]["returned"] for r in ordered if p in r["profiles"]
            )
            entry["constraint_breaks"] = sum(
                r["profiles"][p]["constraint_breaks"] for r in ordered if p in r["profiles"]
            )
            lat = [
                float(ms)
                for r in ordered
                if p in r["profiles"] and (ms := r["profiles"][p].get("latency_ms")) is not None
            ]
            entry["latency_ms"] = {
                "n": len(lat),
                "p50": nearest_rank(lat, 50),
                "p95": nearest_rank(lat, 95),
                "p99": nearest_rank(lat, 99),
            }
        profiles[p] = entry

    classes: dict[str, dict[str, ClassEntry]] = {}
    for p in available:
        per_class: dict[str, ClassEntry] = {}
        for cls in classes_seen:
            members = [r for r in ordered if r["class"] == cls]
            empty_ok = [
                len(r["profiles"][p]["ids"]) == 0
                for r in members
                if r["unanswerable"] and p in r["profiles"]
            ]
            per_class[cls] = {
                "queries": len(members),
                "evaluated": n_evaluated.get((p, cls), 0),
                CLASS_MEASURE: class_cells[(p, cls)],
                "no_result_accuracy": (sum(empty_ok) / len(empty_ok)) if empty_ok else None,
            }
        classes[p] = per_class

    comparisons = _comparisons(columns, available, cfg)
    vs_baseline = against_baseline(columns, baseline, cfg)

    queries: dict[str, QueryEntry] = {}
    depth = ranking_depth(cfg)
    base_queries = _baseline_queries(baseline, cfg.gated)
    all_judgments = getattr(collection, "judgments", {}) or {}
    for row in ordered:
        judged = all_judgments.get(row["qid"], {})
        queries[row["qid"]] = {
            "class": row["class"],
            "split": row["split"],
            "text": row["text"],
            "unanswerable": row["unanswerable"],
            "failures": [r["text"] for r in row["reasons"]],
            "reasons": row["reasons"],
            "relevant": row.get("relevant", 0),
            "judged": row.get("judged", True),
            "evaluated": evaluated(row),
            "unavailable": row["unavailable"],
            "errors": dict(row.get("errors") or {}),
            "profiles": {p: _query_profile(d, judged, depth) for p, d in row["profiles"].items()},
            "baseline": base_queries.get(row["qid"]),
            "ledger": row.get("ledger"),
        }

    # The conventions of the mode the numbers were computed in (fill_measures scores every
    # judged query in trec-compat mode, only those with a relevant document otherwise).
    manifest_ = metrics.manifest(
        measures=cfg.measures,
        relevance_level=level,
        gain=cfg.gain,
        max_grade=max(getattr(collection, "grades", None) or [], default=None),
        trec_compat=cfg.trec_compat,
    )
    manifest_["evaluated_queries"] = evaluated_rule(cfg.trec_compat, level)
    if cfg.trec_compat:
        manifest_["result_order"] = result_order(ordered)
    coll_manifest = dict(getattr(collection, "manifest", {}) or {})
    model = facts.get("model") if isinstance(facts.get("model"), Mapping) else None
    report: Report = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "pytest-searcheval", "version": __version__},
        "created": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
        "run": {
            "split": cfg.split,
            "profiles": list(cfg.profiles or ()),
            "gated_profile": cfg.gated,
            "gate_over": cfg.gate_over,
            "trec_compat": cfg.trec_compat,
            "conventions": _conventions(cfg),
            "relevance_level": level,
            "gain": cfg.gain,
            "limit": cfg.limit,
            "measures": list(cfg.measures),
            "tolerance": cfg.tolerance,
            "query_tolerance": cfg.query_tolerance,
            "query_measure": cfg.query_measure,
            "queries_expected": len(expected),
            "queries_run": len(ordered),
            "complete": set(expected) <= set(rows) and not partial,
            "partial": partial or not set(expected) <= set(rows),
            "xdist_workers": workers,
            "bootstrap": {"samples": cfg.bootstrap_samples, "seed": SEED, "confidence": 0.95},
            "randomization": {"permutations": cfg.permutations, "seed": SEED, "correction": "holm"},
        },
        "environment": {
            "host": platform.node(),
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "pytest": _version("pytest"),
            "postgres": facts.get("postgres"),
            "pgvector": facts.get("pgvector"),
            "target": facts,
        },
        "collection": {
            "name": coll_manifest.get("name"),
            "version": coll_manifest.get("version"),
            "path": str(cfg.collection),
            "documents": len(getattr(collection, "documents", {}) or {}),
            "queries": len(getattr(collection, "queries", {}) or {}),
            "hashes": dict(getattr(collection, "hashes", {}) or {}),
            "price_snapshot": coll_manifest.get("price_snapshot"),
        },
        "model": model,
        "metric_manifest": manifest_,
        "profiles": profiles,
        "unavailable": unavailable,
        "classes": classes,
        "comparisons": comparisons,
        "vs_baseline": vs_baseline,
        "queries": queries,
        "invariants": {k: v.copy() for k, v in sorted((invariants or {}).items())},
        "latency_tests": {k: v.copy() for k, v in sorted((latency_tests or {}).items())},
        "invariant_summary": _invariant_summary(invariants or {}),
        "quality": quality(ordered, available, collection, cfg, facts),
        "no_result_tradeoff": tradeoff.curves(queries, available),
        "known_failures": _known_failures(queries, invariants or {}, baseline),
        "limitations": _limitations(
            collection, coll_manifest, unavailable, ordered, expected, level, cfg.trec_compat
        )
        + missing_rankings(ordered, available, facts),
        "gate": None,
    }
    return report


#: What a note on a run file's missing queries says (the terminal shows these notes).
NO_RANKING = " has no ranking for "


def missing_rankings(
    ordered: Sequence[QueryRow], available: Sequence[str], facts: Mapping[str, Any]
) -> list[str]:
    """Per run file, the evaluated queries it holds no line for: each is scored as an empty
    ranking (0 where it has relevant documents, as trec_eval does), which a person should not
    have to find in the per-query table."""
    if facts.get("target") != "run":
        return []
    given = facts.get("runs")
    runs: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    notes = []
    for p in available:
        missing = [
            r["qid"] for r in ordered if p in r["profiles"] and r["profiles"][p]["returned"] == 0
        ]
        if missing:
            shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
            notes.append(
                f"run {runs.get(p, p)}{NO_RANKING}{len(missing)} "
                f"quer{'y' if len(missing) == 1 else 'ies'}: {shown} (each an empty ranking: "
                "0 where the query is scored)"
            )
    return notes


def _baseline_queries(baseline: Baseline | None, profile: str) -> dict[str, BaselineQuery]:
    """The baseline's per-query values of ``profile`` (empty without them)."""
    if baseline is None:
        return {}
    entry = (baseline.get("profiles") or {}).get(profile)
    return (entry.get("queries") or {}) if entry else {}


def _query_profile(
    d: ProfileResult, judged: Mapping[str, int], depth: int | None
) -> QueryProfileEntry:
    """One profile's answer to one query as the report keeps it."""
    out: QueryProfileEntry = {
        "ids": d["ids"][:depth],
        # the grade of each kept document, null where unjudged
        "grades": [judged.get(doc_id) for doc_id in d["ids"][:depth]],
        "returned": d.get("returned", len(d["ids"])),
        # finite floats already (fill_measures leaves undefined values out)
        "measures": d["measures"],
        "violations": [v["text"] for v in d["violations"]],
        "constraint_breaks": d["constraint_breaks"],
        "applied_filters": d["applied"],
        "extracted_filters": d["extracted"],
        "expectations_unmet": [e["text"] for e in d["expectations"]],
        "latency_ms": d.get("latency_ms"),
        "confidence": d.get("confidence"),
    }
    if "order" in d:
        out["order"] = d["order"]
    return out


QUALITY_K = 10


def quality(
    rows: Sequence[QueryRow],
    profiles: Sequence[str],
    collection: Any,
    cfg: SearchEvalConfig,
    facts: Mapping[str, Any],
) -> Quality:
    """The seeds' remaining measures, per profile, each where the collection has what it needs
    and with the reason where it does not: grade-0 rate@10 (judged useless among the shown),
    adversarial top-1 and resistance rates, provider concentration of the top 10, the share of
    warm results (listings with settlements), and the reranker's lift; embedding completeness
    as the target reports it."""
    from pytest_searcheval import metrics

    docs = getattr(collection, "documents", {}) or {}
    judgments = getattr(collection, "judgments", {}) or {}
    level = cfg.relevance_level or 1
    # BEIR documents carry no sidecar, and metadata that names no provider is not read.
    beir = isinstance(docs, BeirDocuments)
    unread = isinstance(docs, BeirDocuments) and "provider" not in docs.field_keys
    sidecar = {} if beir else {d: (doc.sidecar or {}) for d, doc in docs.items()}
    adversarial = {d for d, s in sidecar.items() if s.get("adversarial")}
    copies = [(s["duplicate_of"], d) for d, s in sidecar.items() if s.get("duplicate_of")]
    pairs = {
        r["qid"]: [(g, a) for g, a in copies if judgments.get(r["qid"], {}).get(g, -1) >= level]
        for r in rows
    }
    pairs = {q: v for q, v in pairs.items() if v}
    provider_of = {
        d: str((doc.fields or {}).get("provider") or sidecar.get(d, {}).get("provider") or "")
        for d, doc in (() if unread else docs.items())
    }
    has_provider = any(provider_of.values())
    settled = {d: s.get("settlements") for d, s in sidecar.items() if "settlements" in s}
    why: dict[str, str] = {}
    if not adversarial:
        why["adversarial"] = "the corpus flags no adversarial listing (sidecar.adversarial)"
    if not pairs:
        why["resistance"] = "no judged relevant listing has a flagged copy (sidecar.duplicate_of)"
    if not has_provider:
        why["provider"] = "the corpus names no provider (fields.provider)"
    if not settled:
        why["warm_share"] = "the corpus records no settlements (sidecar.settlements)"
    out: dict[str, Any] = {}
    for p in profiles:
        results = {r["qid"]: r["profiles"][p]["ids"] for r in rows if p in r["profiles"]}
        top = {q: ids[:QUALITY_K] for q, ids in results.items()}
        shown = [d for ids in top.values() for d in ids]
        entry: dict[str, Any] = {
            "grade0_rate_at_10": _finite(metrics.grade0_rate_at_k(judgments, top, QUALITY_K))
        }
        if "adversarial" not in why:
            entry["adversarial_top1_rate"] = _finite(
                metrics.adversarial_top1_rate(results, adversarial)
            )
        if "resistance" not in why:
            entry["adversarial_resistance_rate"] = _finite(
                metrics.adversarial_resistance_rate(results, pairs)
            )
        if "provider" not in why:
            known = {d: provider_of.get(d) or d for d in shown}
            conc = metrics.provider_concentration(top, known, QUALITY_K)
            entry["provider_top_share"] = _finite(conc.top_share)
            entry["provider_hhi"] = _finite(conc.hhi)
        if "warm_share" not in why:
            counted = [d for d in shown if d in settled]
            entry["warm_share"] = (
                sum(1 for d in counted if (settled[d] or 0) > 0) / len(counted) if counted else None
            )
        out[p] = entry
    lift = None
    reranked = [p for p in profiles if p.endswith("_rerank")]
    if reranked and reranked[0].removesuffix("_rerank") in profiles:
        base = reranked[0].removesuffix("_rerank")
        a = {
            r["qid"]: v
            for r in rows
            if base in r["profiles"]
            and (v := r["profiles"][base]["measures"].get("nDCG@10")) is not None
        }
        b = {
            r["qid"]: v
            for r in rows
            if reranked[0] in r["profiles"]
            and (v := r["profiles"][reranked[0]]["measures"].get("nDCG@10")) is not None
        }
        both = [q for q in a if q in b]
        if both:
            lift = {
                "profile": reranked[0],
                "over": base,
                "nDCG@10": sum(b[q] - a[q] for q in both) / len(both),
                "n": len(both),
            }
    if lift is None:
        why["reranker_lift"] = "no reranked profile answered beside its base profile"
    embeddings = facts.get("embeddings") if isinstance(facts.get("embeddings"), Mapping) else None
    if embeddings is None:
        why["embeddings"] = "the target reports no embedding counts"
    return {
        "k": QUALITY_K,
        "profiles": out,
        "reranker_lift": lift,
        "embeddings": dict(embeddings) if embeddings else None,
        "not_measured": why,
    }


def _conventions(cfg: SearchEvalConfig) -> Conventions:
    from pytest_searcheval.baseline.gate import conventions

    return conventions(cfg)


def _invariant_summary(invariants: Mapping[str, InvariantRecord]) -> dict[str, Any] | None:
    """``invariants.summarize()`` of the case records: per-invariant counts, filter-conformance
    totals, constraint-extraction accuracy per field (``None`` when no case ran)."""
    if not invariants:
        return None
    from pytest_searcheval.invariants import summarize

    return summarize([invariants[k] for k in sorted(invariants)])


def _known_failures(
    queries: Mapping[str, QueryEntry],
    invariants: Mapping[str, InvariantRecord],
    baseline: Baseline | None,
) -> KnownFailures:
    """The known-failure ledger's verdicts: ``known`` (failed for recorded reasons: xfail),
    ``new`` (failed otherwise: the test failed), ``fixed`` (recorded failing, passes: XPASS)."""

    def lists(items: Mapping[str, QueryEntry] | Mapping[str, InvariantRecord]) -> LedgerLists:
        by: dict[str, list[str]] = {"known": [], "new": [], "fixed": []}
        for key, entry in items.items():
            status = entry.get("ledger")
            if status in by:
                by[str(status)].append(key)
        return {
            "known": sorted(by["known"]),
            "new": sorted(by["new"]),
            "fixed": sorted(by["fixed"]),
        }

    return {
        "baseline_ledger": bool(baseline.get("known_failures")) if baseline else False,
        "queries": lists(queries),
        "invariants": lists(invariants),
    }


def against_baseline(
    columns: Mapping[tuple[str, str], Mapping[str, float]],
    baseline: Baseline | None,
    cfg: SearchEvalConfig,
) -> list[BaselineComparison]:
    """Paired randomization tests of the gated profile now against its per-query values in
    the baseline, on the gated measures, over the queries both scored (Holm-corrected)."""
    from pytest_searcheval.stats import holm, paired_randomization_test

    base = _baseline_queries(baseline, cfg.gated)
    tests: list[tuple[str, list[float], list[float], float]] = []
    for m in GATED_MEASURES:
        now = columns.get((cfg.gated, m), {})
        before: dict[str, float] = {}
        for q in now:
            value = (base.get(q) or {}).get(m)
            if isinstance(value, int | float):
                before[q] = float(value)
        common = sorted(before)
        if len(common) < 2:
            continue
        xs = [now[q] for q in common]
        ys = [before[q] for q in common]
        p = paired_randomization_test(xs, ys, permutations=cfg.permutations, seed=SEED)
        tests.append((m, xs, ys, p))
    adjusted = holm({str(i): p for i, (_, _, _, p) in enumerate(tests)})
    return [
        {
            "profile": cfg.gated,
            "measure": m,
            "n": len(xs),
            "mean_now": sum(xs) / len(xs),
            "mean_baseline": sum(ys) / len(ys),
            "mean_diff": (sum(xs) - sum(ys)) / len(xs),
            "wins": sum(1 for x, y in zip(xs, ys, strict=True) if x > y + 1e-12),
            "losses": sum(1 for x, y in zip(xs, ys, strict=True) if x < y - 1e-12),
            "p": p,
            "p_holm": adjusted[str(i)],
        }
        for i, (m, xs, ys, p) in enumerate(tests)
    ]


def _comparisons(
    columns: Mapping[tuple[str, str], Mapping[str, float]],
    available: Sequence[str],
    cfg: SearchEvalConfig,
) -> list[Comparison]:
    """Paired randomization tests of every profile pair on the gated measures. Comparisons
    over the same queries share one sign matrix (:func:`stats.paired_randomization_tests`)."""
    from pytest_searcheval.stats import holm, paired_randomization_tests

    # (a, b, measure, xs, ys) of every comparison, in report order
    pending: list[tuple[str, str, str, list[float], list[float]]] = []
    groups: dict[tuple[str, ...], list[int]] = {}
    for a, b in combinations(available, 2):
        for m in GATED_MEASURES:
            va, vb = columns.get((a, m), {}), columns.get((b, m), {})
            common = tuple(sorted(set(va) & set(vb)))
            if len(common) < 2:
                continue
            groups.setdefault(common, []).append(len(pending))
            pending.append((a, b, m, [va[q] for q in common], [vb[q] for q in common]))
    p_of: dict[int, float] = {}
    for members in groups.values():
        xs_cols = [pending[i][3] for i in members]
        ys_cols = [pending[i][4] for i in members]
        ps = paired_randomization_tests(
            [list(r) for r in zip(*xs_cols, strict=True)],
            [list(r) for r in zip(*ys_cols, strict=True)],
            permutations=cfg.permutations,
            seed=SEED,
        )
        for i, p in zip(members, ps, strict=True):
            p_of[i] = float(p)
    raw = {f"{a} vs {b} {m}": p_of[i] for i, (a, b, m, _, _) in enumerate(pending)}
    adjusted = holm(raw) if raw else {}
    return [
        {
            "a": a,
            "b": b,
            "measure": m,
            "n": len(xs),
            "mean_a": sum(xs) / len(xs),
            "mean_b": sum(ys) / len(ys),
            "mean_diff": (sum(xs) - sum(ys)) / len(xs),
            "p": p_of[i],
            "p_holm": float(adjusted[f"{a} vs {b} {m}"]),
        }
        for i, (a, b, m, xs, ys) in enumerate(pending)
    ]


def _limitations(
    collection: Any,
    manifest: Mapping[str, Any],
    unavailable: Mapping[str, str],
    ordered: Sequence[QueryRow],
    expected: Sequence[str],
    relevance_level: int,
    trec_compat: bool = False,
) -> list[str]:
    notes: list[str] = []
    excluded = [r for r in ordered if not evaluated(r)]
    if excluded and trec_compat:
        notes.append(
            f"{len(ordered) - len(excluded)} of {len(ordered)} queries enter the relevance "
            f"measures (nDCG, P, R, RR, AP, bpref, Judged alike; trec_eval -c: a judged query "
            f"without a relevant document scores 0): the other {len(excluded)} have no line "
            "in the qrels."
        )
    elif excluded:
        unanswerable = sum(1 for r in excluded if r["unanswerable"])
        notes.append(
            f"{len(ordered) - len(excluded)} of {len(ordered)} queries enter the relevance "
            f"measures (nDCG, P, R, RR, AP, bpref, Judged alike): the other {len(excluded)} "
            f"({unanswerable} declared unanswerable) have no judged document with grade >= "
            f"{relevance_level} and are scored by no-result accuracy only."
        )
    errored = [r["qid"] for r in ordered if evaluated(r) and r.get("errors")]
    if errored:
        shown = ", ".join(errored[:10]) + (" ..." if len(errored) > 10 else "")
        notes.append(
            f"{len(errored)} of the queries that enter the relevance measures errored and are "
            f"not scored on the profiles where their search errored ({shown}): those "
            "profiles' means are over the queries that answered (queries[q].errors)."
        )
    provenance = getattr(collection, "provenance", {}) or {}
    documents = getattr(collection, "documents", {}) or {}
    sources = {
        str((d.sidecar or {}).get("source"))
        for d in (() if isinstance(documents, BeirDocuments) else documents.values())
        if getattr(d, "sidecar", None)
    }
    if "sample" in sources or provenance.get("synthetic"):
        notes.append(
            "The corpus is synthetic (sidecar source 'sample'): absolute numbers describe this "
            "catalog, not production traffic."
        )
    judges = provenance.get("judges") if isinstance(provenance, Mapping) else None
    if judges:
        notes.append(f"Judgments by: {json.dumps(judges, sort_keys=True, default=str)}.")
    if manifest.get("price_snapshot"):
        notes.append(f"USD prices use the fixed snapshot of {manifest['price_snapshot']}.")
    for p, reason in unavailable.items():
        notes.append(f"Profile {p} was unavailable ({reason}); it has no scores, not zero scores.")
    if len(ordered) < len(expected):
        notes.append(
            f"Partial run: {len(ordered)} of {len(expected)} queries; aggregate gate rules skipped."
        )
    n = len(ordered)
    if n and n < 50:
        notes.append(f"Only {n} queries: intervals are wide; small differences are noise.")
    notes.append(
        "Latency percentiles in the profile table come from one request per query during the "
        "evaluation (cold caches included); gated latency comes from the latency tests."
    )
    return notes


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None
