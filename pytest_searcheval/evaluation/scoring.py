"""Scoring one query: search every profile, measure, check the oracle and the declared
expectations, compare with the baseline; and every measure of every row at the end.

A row (:class:`pytest_searcheval.types.QueryRow`) is JSON-safe: it travels from xdist workers
and goes into the report as it is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pytest_searcheval.collection.model import BeirDocuments
from pytest_searcheval.evaluation.expectations import check_expectations
from pytest_searcheval.jsonsafe import json_safe
from pytest_searcheval.reasons import Reason
from pytest_searcheval.targets import SearchResponse, SearchTarget

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Query
    from pytest_searcheval.evaluation.session import Evaluation
    from pytest_searcheval.types import QueryRow


def relevant_count(judged: Mapping[str, int], level: int) -> int:
    """Judged documents with grade >= ``level``: the query is *evaluated* (enters every
    relevance aggregate, nDCG included) exactly when this is > 0 (DESIGN section 6)."""
    return sum(1 for g in judged.values() if g >= level)


def score_profile(
    evaluation: Evaluation, query: Query, profile: str, response: SearchResponse
) -> dict[str, Any]:
    """Measures, oracle checks and expectations of one response, as a JSON-safe dict."""
    from pytest_searcheval.domain import domain_of

    coll = evaluation.collection
    cfg = evaluation.cfg
    domain = domain_of(coll)
    # A run file's answer: its ids decoded only where read (the row keeps the report's depth).
    ranking: Sequence[str] | None = (
        getattr(response, "ranking", None) if response.meta.get("whole") else None
    )
    ids: Sequence[str]
    if ranking is not None:
        ids, order = ranking, ("trec_eval" if cfg.trec_compat else None)
    else:
        ids, order = ranked_ids(response, trec_compat=cfg.trec_compat)
    if cfg.limit and not response.meta.get("whole"):
        ids = ids[: cfg.limit]
    # Full measures are computed once per profile for all queries: at first use for a target
    # holding every answer (batch_measures), else at session end (fill_measures); a test then
    # computes only what its own verdict needs.
    batch = evaluation.batched.get(profile)
    measures: dict[str, float] = {}
    if batch is not None:
        measures = dict(batch.get(query.id, {}))
    elif profile == cfg.gated:
        base = evaluation.baseline_query(query.id)
        if base is not None and cfg.query_measure in base:
            measures = measure_one(evaluation, query.id, ids, (cfg.query_measure,))
    applied = domain.applied(response.applied_filters) if domain else {}
    violations: list[dict[str, Any]] = []
    breaks = 0
    check_corpus = bool(coll.documents)
    for rank, doc_id in enumerate(ids if check_corpus or domain is not None else (), start=1):
        if doc_id not in coll.documents:
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
        if domain is None:  # only membership matters: no document is read
            continue
        doc = coll.documents[doc_id]
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
    depth = row_depth(evaluation) if ranking is not None else None
    return (
        {
            "ids": list(ids) if depth is None else ids[:depth],
            "measures": measures,
            "violations": violations,
            "constraint_breaks": breaks,
            "returned": len(ids),
            "applied": json_safe(applied),
            "extracted": json_safe(response.extracted_filters),
            "expectations": [r.as_dict() for r in check_expectations(query, ids)],
            "latency_ms": evaluation.latency_ms.get((query.id, profile)),
            "confidence": _confidence(response.meta.get("confidence")),
        }
        | ({"order": order} if order is not None else {})
        | ({"measures_complete": True} if batch is not None else {})
    )


class _Located(Sequence[str]):
    """A ranking whose judged documents' ranks are known already (``positions``), all that
    :func:`pytest_searcheval.metrics.evaluate` reads of it."""

    def __init__(self, found: Any) -> None:
        self._found = found

    def positions(self, docs: Sequence[str]) -> Any:
        assert len(docs) == len(self._found)
        return self._found

    def __len__(self) -> int:
        raise TypeError("a located ranking has only its judged documents' ranks")

    def __getitem__(self, index: Any) -> Any:
        raise TypeError("a located ranking has only its judged documents' ranks")


def row_depth(evaluation: Evaluation) -> int | None:
    """How many ids of a run file's ranking a row keeps: the report's depth
    (:func:`pytest_searcheval.report.model.ranking_depth`), or all of them (``None``) when the
    report keeps every id or when the corpus flags copies of listings (the adversarial
    resistance rate reads whole rankings). Measures are computed over the whole ranking
    either way (:func:`batch_measures`)."""
    if evaluation.row_depth is None:
        from pytest_searcheval.report.model import ranking_depth

        depth = ranking_depth(evaluation.cfg)
        documents = evaluation.collection.documents
        # BEIR documents carry no sidecar: nothing to read.
        if not isinstance(documents, BeirDocuments) and any(
            (d.sidecar or {}).get("duplicate_of") for d in documents.values()
        ):
            depth = None
        evaluation.row_depth = (depth,)
    return evaluation.row_depth[0]


def batch_measures(
    evaluation: Evaluation, target: SearchTarget, profile: str
) -> Mapping[str, dict[str, float]] | None:
    """Every measure of every query on ``profile`` for a target that holds all its answers (a
    run file, ``target.whole``): one ``evaluate`` call at first use, on the rankings as arrays,
    so that each query test looks its values up. Which queries are scored, and how, is
    :func:`fill_measures`'s rule; a query's values do not depend on the other queries scored
    beside it. ``None`` for any other target (scored at session end)."""
    if not getattr(target, "whole", False):
        return None
    done = evaluation.batched.get(profile)
    if done is not None:
        return done

    cfg = evaluation.cfg
    run: dict[str, Sequence[str]] = {}
    for query in evaluation.selected_queries():
        qid = query.id
        if not _scored(evaluation, qid):
            continue
        response = evaluation.search(target, query, profile)
        if response is None:
            continue
        ranking = getattr(response, "ranking", None) if response.meta.get("whole") else None
        run[qid] = (
            ranking if ranking is not None else ranked_ids(response, trec_compat=cfg.trec_compat)[0]
        )
    locate = getattr(target, "locate", None)
    if callable(locate) and run and all(hasattr(r, "positions") for r in run.values()):
        # every query's judged documents found in one pass over the run's arrays
        judgments = evaluation.collection.judgments
        found = locate(profile, {qid: list(judgments.get(qid, {})) for qid in run})
        run = {qid: _Located(found[qid]) for qid in run}
    try:
        per_query = _evaluate(evaluation, run, cfg.measures) if run else {}
    except ValueError:
        return None  # scored query by query then, and the error raised where it always was
    done = {
        qid: {m: float(v) for m, v in values.items() if math.isfinite(v)}
        for qid, values in per_query.items()
    }
    evaluation.batched[profile] = done
    return done


def ranked_ids(
    response: SearchResponse, *, trec_compat: bool
) -> tuple[list[str], Literal["trec_eval", "service"] | None]:
    """The ids scored, and in trec-compat mode which order they are scored in.

    A duplicated id would count twice in every measure: the first occurrence is kept. In
    trec-compat mode a ranking whose every result carries a score is put in trec_eval's order
    (score descending as a 32-bit float, then document id descending, as trec_eval sorts a run
    file), whatever order the target sent it in: the same results then score as trec_eval
    scores them. Without scores (ids only, the scores implied by rank) the target's order is
    the ranking, and the row says so (``"order": "service"``)."""
    if not trec_compat:
        return list(dict.fromkeys(response.ids)), None
    if response.meta.get("whole"):  # a run file, ranked as trec_eval ranks it already
        return list(dict.fromkeys(response.ids)), "trec_eval"
    if response.meta.get("scores") == "rank":
        return list(dict.fromkeys(response.ids)), "service"
    first: dict[str, float] = {}
    for hit in response.hits:
        first.setdefault(hit.id, hit.score)
    import numpy as np

    # trec_eval holds scores in a C float: scores that differ only beyond it tie.
    ranked = sorted(
        first.items(), key=lambda pair: (float(np.float32(pair[1])), pair[0]), reverse=True
    )
    return [doc_id for doc_id, _ in ranked], "trec_eval"


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
    evaluation: Evaluation, qid: str, ids: Sequence[str], measures: Sequence[str]
) -> dict[str, float]:
    """Measures of one ranking; undefined values (NaN) and queries without a document at the
    relevance level are left out, as in the aggregates."""

    if not _scored(evaluation, qid):
        return {}
    per_query = _evaluate(evaluation, {qid: list(ids)}, measures)
    return {m: float(v) for m, v in per_query.get(qid, {}).items() if math.isfinite(v)}


def _top_grade(evaluation: Evaluation) -> int | None:
    # ERR's g_max is the collection's scale, not the largest grade of the queries at hand
    # (one query when a test scores its own ranking)
    return max(evaluation.collection.grades, default=None)


def _scored(evaluation: Evaluation, qid: str) -> bool:
    """Whether relevance measures score ``qid``: in trec-compat mode every judged query
    (trec_eval ``-c``), else a query with a judged document at the relevance level."""
    judgments = evaluation.collection.judgments
    if evaluation.cfg.trec_compat:
        return qid in judgments
    return relevant_count(judgments.get(qid, {}), evaluation.cfg.relevance_level or 1) > 0


def _evaluate(
    evaluation: Evaluation, run: Mapping[str, Sequence[str]], measures: Sequence[str]
) -> Any:
    """``metrics.evaluate`` of ``run`` against the collection's judgments under the run's
    conventions (relevance level, gain, trec-compat, the scale's top grade for ERR)."""
    from pytest_searcheval import metrics

    cfg = evaluation.cfg
    judgments = evaluation.collection.judgments
    return metrics.evaluate(
        {qid: judgments.get(qid, {}) for qid in run},
        run,
        measures,
        relevance_level=cfg.relevance_level or 1,
        gain=cfg.gain,
        trec_compat=cfg.trec_compat,
        max_grade=_top_grade(evaluation),
    )


def fill_measures(evaluation: Evaluation, rows: Mapping[str, QueryRow]) -> None:
    """Every configured measure for every row and profile, one ``evaluate`` call per profile.

    Only queries with a judged document of grade >= the relevance level are scored, for every
    measure alike (one evaluated query set, hence one denominator, for all relevance
    aggregates); the others keep ``measures == {}`` and are scored by no-result accuracy. In
    trec-compat mode every judged query is scored (trec_eval ``-c``), also when the target
    did not answer it: it counts with an empty ranking."""

    cfg = evaluation.cfg
    for profile in cfg.profiles or ():
        run = {
            qid: row["profiles"][profile]["ids"]
            for qid, row in rows.items()
            if profile in row["profiles"]
            # measured in the query test already (batch_measures): its ids may be cut
            and not row["profiles"][profile].get("measures_complete")
            and _scored(evaluation, qid)
        }
        if not run:
            continue
        per_query = _evaluate(evaluation, run, cfg.measures)
        for qid, values in per_query.items():
            rows[qid]["profiles"][profile]["measures"] = {
                m: float(v) for m, v in values.items() if math.isfinite(v)
            }


def search_error_reason(profile: str, error: Mapping[str, Any]) -> Reason:
    """The reason a query test fails when its search on the gated profile failed."""
    attempts = int(error.get("attempts") or 1)
    tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
    text = str(error.get("error"))
    # An HTTP target's message names its attempts already: said once.
    after = "" if re.search(rf"\b{tries}\b", text) else f" after {tries}"
    return Reason(
        "search-error",
        f"search error on profile {profile!r}{after}: {text}",
        profile,
        {"url": error.get("url"), "attempts": attempts},
    )


def evaluate_query(evaluation: Evaluation, target: SearchTarget, query: Query) -> dict[str, Any]:
    """Search every configured profile; return the row with ``reasons`` for the gated one.

    Each profile's ``measures`` holds only the per-query check's measure here (all measures on
    failure, for the message); :func:`fill_measures` completes them at session end.
    """
    evaluation.describe_target(target)
    cfg = evaluation.cfg
    row: dict[str, Any] = {
        "qid": query.id,
        "text": query.text,
        "class": query.query_class,
        "split": query.split,
        "relevant": relevant_count(
            evaluation.collection.judgments.get(query.id, {}), cfg.relevance_level or 1
        ),
        "judged": query.id in evaluation.collection.judgments,
        "evaluated": (
            query.id in evaluation.collection.judgments
            if cfg.trec_compat
            else relevant_count(
                evaluation.collection.judgments.get(query.id, {}), cfg.relevance_level or 1
            )
            > 0
        ),
        "unanswerable": query.unanswerable,
        "profiles": {},
        "unavailable": {},
        "reasons": [],
    }
    for profile in cfg.profiles or ():
        batch_measures(evaluation, target, profile)
        response = evaluation.search(target, query, profile)
        if response is None:
            error = evaluation.errors.get((query.id, profile))
            if error is not None:
                row.setdefault("errors", {})[profile] = dict(error)
            else:
                row["unavailable"][profile] = evaluation.unavailable[profile]
            continue
        row["profiles"][profile] = score_profile(evaluation, query, profile, response)
    gated = row["profiles"].get(cfg.gated)
    reasons: list[dict[str, Any]] = row["reasons"]
    error = (row.get("errors") or {}).get(cfg.gated)
    if error is not None:
        reasons.append(search_error_reason(cfg.gated, error).as_dict())
        return row
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
    base = evaluation.baseline_query(query.id)
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
            if not data.get("measures_complete"):
                data["measures"] = measure_one(evaluation, query.id, data["ids"], cfg.measures)
    return row
