"""The failure text of a query test: what an IDE shows instead of a traceback."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Collection
    from pytest_searcheval.evaluation.session import Evaluation

SHOWN_RESULTS = 10


def _grade(judged: Mapping[str, int], doc_id: str) -> str:
    return f"grade {judged[doc_id]}" if doc_id in judged else "unjudged"


def format_failure(evaluation: Evaluation, row: Mapping[str, Any]) -> str:
    """The message an IDE shows: query, failures, ranking with grades, expectations, baseline."""
    cfg = evaluation.cfg
    coll = evaluation.collection
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
        returned = gated.get("returned", len(ids))  # a run file's row keeps the top ids only
        lines.append(f"ranked results ({returned} returned, top {SHOWN_RESULTS} shown):")
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
    base = evaluation.baseline_query(row["qid"])
    if base is None:
        lines.append("baseline: none for this query")
    else:
        values = ", ".join(
            f"{k} {float(v):.4f}" for k, v in base.items() if isinstance(v, int | float)
        )
        lines.append(f"baseline ({evaluation.baseline_tag or 'untagged'}): {values}")
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
    for p, error in (row.get("errors") or {}).items():
        where = (
            f" (GET {error['url']})"
            if error.get("url") and error["url"] not in str(error.get("error"))
            else ""
        )
        lines.append(f"search error: {p}: {error.get('error')}{where}")
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
