"""The plugin's use of the measures: one query's own score equals its row in the report, and a
measure with parameters is cut at the requested depth like any other."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pytest_searcheval.evaluation import Evaluation, at_depth, fill_measures, measure_one


def _state(measures: tuple[str, ...]) -> Evaluation:
    judgments = {"q1": {"a": 1, "b": 0}, "q2": {"c": 3, "d": 1}}
    cfg = SimpleNamespace(
        relevance_level=1, gain=None, trec_compat=False, profiles=("p",), measures=measures
    )
    collection = SimpleNamespace(judgments=judgments, grades=[0, 1, 2, 3])
    return cast(Evaluation, SimpleNamespace(cfg=cfg, collection=collection))


def test_err_of_one_query_uses_the_collection_scale_as_the_report_does() -> None:
    # q1 holds grade 1 at most; the scale goes to 3, so g_max is 3 for q1 alone as well
    state = _state(("ERR@5", "P(rel=2)@5"))
    ids = {"q1": ["b", "a"], "q2": ["d", "c"]}
    rows: dict[str, dict[str, Any]] = {q: {"profiles": {"p": {"ids": r}}} for q, r in ids.items()}
    fill_measures(state, rows)
    for qid, r in ids.items():
        alone = measure_one(state, qid, r, ("ERR@5", "P(rel=2)@5"))
        assert alone == rows[qid]["profiles"]["p"]["measures"], qid
    # (2^1 - 1) / 2^3 at rank 2
    assert rows["q1"]["profiles"]["p"]["measures"]["ERR@5"] == pytest.approx(1 / 8 / 2)
    assert "P(rel=2)@5" not in rows["q1"]["profiles"]["p"]["measures"]  # no grade 2: undefined
    assert math.isclose(rows["q2"]["profiles"]["p"]["measures"]["P(rel=2)@5"], 1 / 5)


@pytest.mark.parametrize(
    ("measure", "cut"),
    [
        ("AP(rel=2)", "AP(rel=2)@20"),
        ("Bpref", "Bpref@20"),
        ("infAP", "infAP@20"),
        ("RR(rel=2)@5", "RR(rel=2)@5"),
        ("Rprec", "Rprec"),
        ("nDCG", "nDCG@20"),
    ],
)
def test_a_live_target_cuts_every_measure_at_the_limit(measure: str, cut: str) -> None:
    assert at_depth(measure, 20) == cut
    assert at_depth(measure, None) == measure
