"""The query test: search every profile, score, check filters and expectations, explain.

``test_query[<qid>-<class>]`` fails on a hard-filter violation (the independent oracle of the
collection's domain), an answer to an unanswerable query, an unmet declared expectation, or a
per-query drop below the baseline. Its message is the whole triage report.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from pytest_searcheval.plugin.items import SearchEvalItem
from pytest_searcheval.plugin.state import EvalState
from pytest_searcheval.reasons import Reason
from pytest_searcheval.targets import SearchResponse, SearchTarget

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Collection, Query

SHOWN_RESULTS = 10


def relevant_count(judged: Mapping[str, int], level: int) -> int:
    """Judged documents with grade >= ``level``: the query is *evaluated* (enters every
    relevance aggregate, nDCG included) exactly when this is > 0 (DESIGN section 6)."""
    return sum(1 for g in judged.values() if g >= level)


def is_unanswerable(query: Query) -> bool:
    return bool(query.expect.get("no_result")) or query.query_class == "no-result"


_PLAIN = (str, int, float, bool, type(None))


def _json_safe(value: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-safe copy (filters may hold Decimals); the JSON round trip only when needed."""
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
    from pytest_searcheval.domain import domain_of

    coll = state.collection
    cfg = state.cfg
    domain = domain_of(coll)
    # A duplicated id would count twice in every measure; keep the first occurrence.
    ids = list(dict.fromkeys(response.ids))
    if cfg.limit and not response.meta.get("whole"):
        ids = ids[: cfg.limit]
    # Full measures are computed once per profile for all queries at session end (one batched
    # metrics.evaluate call); a test computes only what its own verdict needs.
    measures: dict[str, float] = {}
    if profile == cfg.gated:
        base = baseline_query(state, query.id)
        if base is not None and cfg.query_measure in base:
            measures = measure_one(state, query.id, ids, (cfg.query_measure,))
    applied = domain.applied(response.applied_filters) if domain else {}
    violations: list[dict[str, Any]] = []
    breaks = 0
    check_corpus = bool(coll.documents)
    for rank, doc_id in enumerate(ids, start=1):
        doc = coll.documents.get(doc_id)
        if doc is None:
            if check_corpus:
                violations.append(
                    Reason(
                        "unknown-document",
                        f"rank {rank}: {doc_id!r} is not a document of the corpus",
                        doc_id,
                        {"rank": rank},
                    ).as_dict()
                )
            continue
        if domain is None:
            continue
        if applied:
            for why in domain.violations(doc, applied, coll):
                violations.append(
                    Reason(
                        "filter-violation",
                        f"hard-filter violation at rank {rank}: {doc_id}: {why}",
                        doc_id,
                        {"rank": rank},
                    ).as_dict()
                )
        if query.constraints and domain.violations(doc, query.constraints, coll):
            breaks += 1
    return {
        "ids": ids,
        "measures": measures,
        "violations": violations,
        "constraint_breaks": breaks,
        "returned": len(ids),
        "applied": _json_safe(applied),
        "extracted": _json_safe(response.extracted_filters),
        "expectations": [r.as_dict() for r in check_expectations(query, ids)],
        "latency_ms": state.latency_ms.get((query.id, profile)),
        "confidence": _confidence(response.meta.get("confidence")),
    }


def _confidence(value: Any) -> dict[str, float | None] | None:
    """The target's no-result confidence ``{value, threshold}`` as finite floats, or None."""
    if not isinstance(value, Mapping):
        return None
    out: dict[str, float | None] = {}
    for key in ("value", "threshold"):
        v = value.get(key)
        finite = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        out[key] = float(v) if finite and v is not None else None
    return out if out["value"] is not None else None


def measure_one(
    state: EvalState, qid: str, ids: Sequence[str], measures: Sequence[str]
) -> dict[str, float]:
    """Measures of one ranking; undefined values (NaN) and queries without a document at the
    relevance level are left out, as in the aggregates."""
    from pytest_searcheval import metrics

    cfg = state.cfg
    judged = state.collection.judgments.get(qid, {})
    if cfg.trec_compat and qid not in state.collection.judgments:
        return {}
    if relevant_count(judged, cfg.relevance_level or 1) == 0 and not cfg.trec_compat:
        return {}
    per_query = metrics.evaluate(
        {qid: judged},
        {qid: list(ids)},
        measures,
        relevance_level=cfg.relevance_level or 1,
        gain=cfg.gain,
        trec_compat=cfg.trec_compat,
        max_grade=_top_grade(state),
    )
    return {m: float(v) for m, v in per_query.get(qid, {}).items() if math.isfinite(v)}


def _top_grade(state: EvalState) -> int | None:
    # ERR's g_max is the collection's scale, not the largest grade of the queries at hand
    # (one query when a test scores its own ranking)
    return max(state.collection.grades, default=None)


def fill_measures(state: EvalState, rows: Mapping[str, dict[str, Any]]) -> None:
    """Every configured measure for every row and profile, one ``evaluate`` call per profile.

    Only queries with a judged document of grade >= the relevance level are scored, for every
    measure alike (one evaluated query set, hence one denominator, for all relevance
    aggregates); the others keep ``measures == {}`` and are scored by no-result accuracy. In
    trec-compat mode every judged query is scored (trec_eval ``-c``), also when the target
    did not answer it: it counts with an empty ranking."""
    from pytest_searcheval import metrics

    cfg = state.cfg
    judgments = state.collection.judgments
    level = cfg.relevance_level or 1
    for profile in cfg.profiles or ():
        run = {
            qid: row["profiles"][profile]["ids"]
            for qid, row in rows.items()
            if profile in row["profiles"]
            and (
                qid in judgments
                if cfg.trec_compat
                else relevant_count(judgments.get(qid, {}), level) > 0
            )
        }
        if not run:
            continue
        qrels = {qid: judgments.get(qid, {}) for qid in run}
        per_query = metrics.evaluate(
            qrels,
            run,
            cfg.measures,
            relevance_level=level,
            gain=cfg.gain,
            trec_compat=cfg.trec_compat,
            max_grade=_top_grade(state),
        )
        for qid, values in per_query.items():
            rows[qid]["profiles"][profile]["measures"] = {
                m: float(v) for m, v in values.items() if math.isfinite(v)
            }


def check_expectations(query: Query, ids: Sequence[str]) -> list[Reason]:
    """Unmet declared expectations (known_item, max_rank, must_include, no_result)."""
    expect = query.expect
    unmet: list[Reason] = []
    position = {doc_id: rank for rank, doc_id in enumerate(ids, start=1)}
    known = expect.get("known_item")
    max_rank = int(expect.get("max_rank") or 1)
    if known:
        rank = position.get(str(known))
        if rank is None or rank > max_rank:
            found = f"at rank {rank}" if rank else f"not in the top {len(ids)}"
            unmet.append(
                Reason(
                    "known-item",
                    f"known item {known!r} expected at rank <= {max_rank}, found {found}",
                    str(known),
                    {"rank": rank, "max_rank": max_rank},
                )
            )
    for doc_id in expect.get("must_include") or []:
        rank = position.get(str(doc_id))
        limit = max_rank if (expect.get("max_rank") and not known) else len(ids)
        if rank is None or rank > limit:
            unmet.append(
                Reason(
                    "must-include",
                    f"must include {doc_id!r} in the top {limit}, found rank {rank}",
                    str(doc_id),
                    {"rank": rank, "limit": limit},
                )
            )
    if is_unanswerable(query) and ids:
        unmet.append(
            Reason(
                "unanswerable-answered",
                f"unanswerable query returned {len(ids)} results (expected none)",
                params={"returned": len(ids)},
            )
        )
    return unmet


def baseline_query(state: EvalState, qid: str) -> dict[str, Any] | None:
    base = state.baseline or {}
    prof = (base.get("profiles") or {}).get(state.cfg.gated) or {}
    entry = (prof.get("queries") or {}).get(qid)
    return entry if isinstance(entry, dict) else None


def evaluate_query(state: EvalState, target: SearchTarget, query: Query) -> dict[str, Any]:
    """Search every configured profile; return the row with ``reasons`` for the gated one.

    Each profile's ``measures`` holds only the per-query check's measure here (all measures on
    failure, for the message); :func:`fill_measures` completes them at session end.
    """
    state.describe_target(target)
    cfg = state.cfg
    row: dict[str, Any] = {
        "qid": query.id,
        "text": query.text,
        "class": query.query_class,
        "split": query.split,
        "relevant": relevant_count(
            state.collection.judgments.get(query.id, {}), cfg.relevance_level or 1
        ),
        "judged": query.id in state.collection.judgments,
        "evaluated": (
            query.id in state.collection.judgments
            if cfg.trec_compat
            else relevant_count(
                state.collection.judgments.get(query.id, {}), cfg.relevance_level or 1
            )
            > 0
        ),
        "unanswerable": is_unanswerable(query),
        "profiles": {},
        "unavailable": {},
        "reasons": [],
    }
    for profile in cfg.profiles or ():
        response = state.search(target, query, profile)
        if response is None:
            row["unavailable"][profile] = state.unavailable[profile]
            continue
        row["profiles"][profile] = score_profile(state, query, profile, response)
    gated = row["profiles"].get(cfg.gated)
    reasons: list[dict[str, Any]] = row["reasons"]
    if gated is None:
        why = row["unavailable"].get(cfg.gated, "no response")
        reasons.append(
            Reason(
                "profile-unavailable", f"gated profile {cfg.gated!r} unavailable: {why}", cfg.gated
            ).as_dict()
        )
        return row
    reasons += [v for v in gated["violations"]]
    reasons += gated["expectations"]
    base = baseline_query(state, query.id)
    m = cfg.query_measure
    if base is not None and m in base and m in gated["measures"]:
        now, before = gated["measures"][m], float(base[m])
        if now < before - cfg.query_tolerance - 1e-12:
            reasons.append(
                Reason(
                    "query-drop",
                    f"per-query drop: {m} dropped to {now:.4f} from baseline {before:.4f} "
                    f"(per-query tolerance {cfg.query_tolerance:g})",
                    m,
                    {"now": now, "baseline": before},
                ).as_dict()
            )
    if reasons:
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
    gated = row["profiles"].get(cfg.gated)
    query = coll.queries[row["qid"]]
    lines = [
        f"query {row['qid']} [{row['class']}] {row['text']!r} "
        f"(split {row['split']}, profile {cfg.gated})",
        "failed:",
        *[f"  - {r['text']}" for r in row["reasons"]],
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
    level = cfg.relevance_level or 1
    relevant = sorted((d for d, g in judged.items() if g >= level), key=lambda d: -judged[d])
    lines.append(
        f"expected: {json.dumps(expect, sort_keys=True) if expect else '(no declared expectation)'}"
        f"; relevant (grade >= {level}): "
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
    first = cfg.measures[0] if cfg.measures else "nDCG@10"
    others = [
        f"{p} {d['measures'].get(first, float('nan')):.4f}"
        for p, d in row["profiles"].items()
        if p != cfg.gated and d["measures"]
    ]
    if others:
        lines.append(f"other profiles ({first}): " + ", ".join(others))
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


def _query_test(searcheval_target: SearchTarget) -> None:
    """Stands for the generated query tests (their fixtures); :meth:`QueryItem.runtest` runs
    them. Not taking ``request`` spares pytest a fixture definition per test."""


class QueryItem(SearchEvalItem):
    """``test_query[<qid>-<class>]``: one golden query against every profile."""

    kind = "query"
    ledger_kind = "queries"
    function = staticmethod(_query_test)

    def passed_before(self) -> bool:
        from pytest_searcheval.baseline.ledger import ledger

        state = self.state
        return baseline_query(state, self.key) is not None and self.key not in ledger(
            state.baseline, "queries"
        )

    def runtest(self) -> None:
        state = self.state
        target = cast(SearchTarget, self.funcargs["searcheval_target"])
        row = evaluate_query(state, target, self.payload)
        reasons = [Reason.from_dict(r) for r in row["reasons"]]
        verdict = self.verdict(reasons) if reasons else None
        row["ledger"] = self.ledger_status(bool(reasons), verdict)
        state.record("query", row)
        if verdict is not None:
            self.raise_failure(format_failure(state, row), verdict)
