"""``searcheval compare``: paired per-query comparison of two saved reports."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_searcheval.cli import main
from pytest_searcheval.compare import CompareError, compare, differences, lines, worse
from pytest_searcheval.report import SCHEMA_VERSION


def _report(values: dict[str, dict[str, float | None]], **run: Any) -> dict[str, Any]:
    """A report with one profile ``hybrid`` whose per-query measures are ``values``."""
    queries = {
        qid: {
            "class": "generic",
            "text": f"text of {qid}",
            "profiles": {
                "hybrid": {
                    "ids": [f"{qid}-d{i}" for i in range(4)],
                    "measures": {m: v for m, v in ms.items() if v is not None},
                }
            },
        }
        for qid, ms in values.items()
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "run": {
            "split": "test",
            "gain": "exp",
            "relevance_level": 1,
            "limit": 20,
            "measures": ["nDCG@10", "R@20"],
            "query_measure": "nDCG@10",
            "gated_profile": "hybrid",
            "randomization": {"permutations": 1000},
        }
        | run,
        "collection": {"hashes": {"corpus": "sha256:1", "judgments": "sha256:2"}},
        "profiles": {"hybrid": {"available": True}, "broken": {"available": False, "reason": "x"}},
        "queries": queries,
    }


A_VALUES = {
    "q1": {"nDCG@10": 0.5, "R@20": 1.0},
    "q2": {"nDCG@10": 0.2, "R@20": 0.5},
    "q3": {"nDCG@10": 0.9, "R@20": 1.0},
    "q4": {"nDCG@10": 0.4, "R@20": 0.0},
    "q5": {"nDCG@10": 0.7, "R@20": 0.5},
    "q6": {"nDCG@10": 0.1, "R@20": None},
}
B_VALUES = {
    "q1": {"nDCG@10": 0.8, "R@20": 1.0},
    "q2": {"nDCG@10": 0.6, "R@20": 1.0},
    "q3": {"nDCG@10": 0.9, "R@20": 1.0},
    "q4": {"nDCG@10": 0.3, "R@20": 0.5},
    "q5": {"nDCG@10": 0.95, "R@20": 1.0},
    "q6": {"nDCG@10": 0.6, "R@20": 1.0},
    "q7": {"nDCG@10": 1.0, "R@20": 1.0},
}


def _exact_p(a: list[float], b: list[float]) -> float:
    """Two-sided sign-flip p-value by enumerating every sign vector (independent of stats.py)."""
    d = [y - x for x, y in zip(a, b, strict=True)]
    observed = abs(sum(d))
    hits = sum(
        1
        for signs in itertools.product((1, -1), repeat=len(d))
        if abs(sum(s * v for s, v in zip(signs, d, strict=True))) >= observed - 1e-12
    )
    return hits / 2 ** len(d)


def test_measures_wins_ties_losses_and_exact_p_values() -> None:
    c = compare(_report(A_VALUES), _report(B_VALUES))
    ndcg, r20 = c.measures
    assert (ndcg.measure, ndcg.n) == ("nDCG@10", 6)  # q7 is only in B
    assert (ndcg.wins, ndcg.ties, ndcg.losses) == (4, 1, 1)
    assert ndcg.mean_a == pytest.approx(2.8 / 6) and ndcg.mean_b == pytest.approx(4.15 / 6)
    assert (r20.n, r20.wins, r20.ties, r20.losses) == (5, 3, 2, 0)  # q6: no R@20 in A
    qa = ["q1", "q2", "q3", "q4", "q5", "q6"]
    p_ndcg = _exact_p([A_VALUES[q]["nDCG@10"] for q in qa], [B_VALUES[q]["nDCG@10"] for q in qa])
    qr = qa[:5]
    p_r20 = _exact_p([A_VALUES[q]["R@20"] for q in qr], [B_VALUES[q]["R@20"] for q in qr])
    # 2^6 and 2^5 <= 1000 permutations: the test enumerates, so the p-values are exact
    assert ndcg.p == pytest.approx(p_ndcg) and r20.p == pytest.approx(p_r20)
    low, high = sorted([p_ndcg, p_r20])
    holm = {low: min(1.0, 2 * low), high: max(min(1.0, 2 * low), high)}
    assert ndcg.p_holm == pytest.approx(holm[p_ndcg])
    assert r20.p_holm == pytest.approx(holm[p_r20])
    assert c.only_a == {"nDCG@10": 0, "R@20": 0} and c.only_b == {"nDCG@10": 1, "R@20": 2}


def test_movers_are_the_largest_changes_each_way() -> None:
    c = compare(_report(A_VALUES), _report(B_VALUES), movers=2)
    assert c.mover_measure == "nDCG@10"
    assert [(m.query, round(m.delta, 3)) for m in c.gains] == [("q6", 0.5), ("q2", 0.4)]
    assert [(m.query, round(m.delta, 3)) for m in c.losses] == [("q4", -0.1)]
    assert c.gains[0].top_a == ("q6-d0", "q6-d1", "q6-d2")
    text = "\n".join(lines(c))
    assert "biggest gains on nDCG@10:" in text and "q6 [generic] 0.100 -> 0.600 (+0.500)" in text
    assert "R@20: 0 queries have a value only in A, 2 only in B (left out)" in text


def test_differences_of_conventions_and_data_are_named() -> None:
    a = _report(A_VALUES)
    b = _report(B_VALUES, relevance_level=2, split="dev")
    b["collection"]["hashes"]["judgments"] = "sha256:3"
    assert differences(a, b) == [
        "run.split: A 'test', B 'dev'",
        "run.relevance_level: A 1, B 2",
        "collection.hashes.judgments: A sha256:2, B sha256:3",
    ]
    assert differences(a, _report(B_VALUES)) == []
    # reports that record run.conventions are compared on those (the measure list aside)
    conv = {"split": "test", "limit": 20, "gain": "exp", "relevance_level": 1, "measures": ["x"]}
    c_a = _report(A_VALUES, conventions=conv | {"trec_compat": False})
    c_b = _report(B_VALUES, conventions=conv | {"trec_compat": True, "measures": ["y"]})
    assert differences(c_a, c_b) == ["run.trec_compat: A False, B True"]
    assert "the runs differ in" in "\n".join(lines(compare(a, b)))


def test_worse_needs_a_significant_drop() -> None:
    a = {f"q{i}": {"nDCG@10": 0.9, "R@20": 1.0} for i in range(12)}
    b = {f"q{i}": {"nDCG@10": 0.5, "R@20": 1.0} for i in range(12)}
    c = compare(_report(a), _report(b))
    assert [m.measure for m in worse(c, 0.05)] == ["nDCG@10"]
    assert worse(compare(_report(b), _report(a)), 0.05) == []  # B better: not worse


def test_bad_requests_say_what_is_wrong() -> None:
    a, b = _report(A_VALUES), _report(B_VALUES)
    with pytest.raises(CompareError, match=r"A: no profile 'nope' in the report \(profiles: hy"):
        compare(a, b, profile_a="nope", profile_b="hybrid")
    with pytest.raises(CompareError, match="profile 'broken' was unavailable: x"):
        compare(a, b, profile_a="broken")
    with pytest.raises(CompareError, match="measure 'AP' is not in both reports"):
        compare(a, b, measures=["AP"])
    other = _report({"x1": {"nDCG@10": 0.5, "R@20": 0.5}})
    with pytest.raises(CompareError, match="no query has a value of nDCG@10, R@20 in both"):
        compare(a, other)


def test_cli_prints_writes_json_and_gates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = {f"q{i}": {"nDCG@10": 0.9, "R@20": 1.0} for i in range(12)}
    b = {f"q{i}": {"nDCG@10": 0.5, "R@20": 1.0} for i in range(12)}
    pa, pb, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "cmp.json"
    pa.write_text(json.dumps(_report(a)))
    pb.write_text(json.dumps(_report(b)))
    assert main(["compare", str(pa), str(pb), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "nDCG@10  12" in text and "-0.4000" in text
    saved = json.loads(out.read_text())
    assert saved["measures"][0]["losses"] == 12 and saved["movers"]["measure"] == "nDCG@10"
    assert main(["compare", str(pa), str(pb), "--fail-if-worse", "0.05"]) == 1
    assert "B is worse than A at alpha 0.05: nDCG@10 -0.4000" in capsys.readouterr().out
    assert main(["compare", str(pb), str(pa), "--fail-if-worse", "0.05"]) == 0
    capsys.readouterr()
    assert main(["compare", str(pa), str(pb), "--profile", "nope"]) == 2
    assert "searcheval compare: A: no profile 'nope'" in capsys.readouterr().err
    pb.write_text(json.dumps({"schema_version": 99}))
    assert main(["compare", str(pa), str(pb)]) == 2
    assert f"{pb}: field schema_version: expected 1, got 99" in capsys.readouterr().err
