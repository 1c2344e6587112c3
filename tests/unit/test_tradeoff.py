"""The no-result trade-off curve of the report (pytest_searcheval/report/tradeoff.py)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_searcheval.report import tradeoff


def _row(unanswerable: bool, value: Any, threshold: Any = 0.5, relevant: int = 1) -> dict:
    conf = None if value is None else {"value": value, "threshold": threshold}
    return {
        "unanswerable": unanswerable,
        "relevant": 0 if unanswerable else relevant,
        "profiles": {"hybrid": {"confidence": conf}},
    }


def test_curve_counts_caught_and_silenced_at_every_threshold() -> None:
    queries = {
        "u1": _row(True, 0.1),
        "u2": _row(True, 0.4),
        "u3": _row(True, 0.7),
        "a1": _row(False, 0.3),
        "a2": _row(False, 0.8),
        "a3": _row(False, 0.9),
        "a4": _row(False, 0.95),
        "none": _row(False, 0.2, relevant=0),  # no relevant document: neither kind
        "nan": _row(False, None),
    }
    curve = tradeoff.curves(queries, ["hybrid", "lexical"])
    assert list(curve) == ["hybrid"]  # lexical answered nothing here
    c = curve["hybrid"]
    assert (c["n_unanswerable"], c["n_answerable"], c["missing"]) == (3, 4, 1)
    assert c["at_threshold"] == {
        "threshold": 0.5,
        "caught": 2,
        "silenced": 1,
        "caught_rate": pytest.approx(2 / 3, abs=1e-6),
        "silenced_rate": 0.25,
    }
    points = c["points"]
    assert (points[0]["caught"], points[0]["silenced"]) == (0, 0)
    assert (points[-1]["caught"], points[-1]["silenced"]) == (3, 4)
    caught = [p["caught"] for p in points]
    silenced = [p["silenced"] for p in points]
    assert caught == sorted(caught) and silenced == sorted(silenced)
    best = tradeoff.cheapest(points, 0.9)
    assert best is not None and (best["caught"], best["silenced"]) == (3, 1)
    (line,) = tradeoff.lines(curve)
    assert line == (
        "no-result trade-off (hybrid, 3 unanswerable, 4 answerable): at threshold 0.5 catches "
        f"2/3, silences 1/4; catching 90% would silence 1/4 (threshold {best['threshold']:g})"
    )


def test_no_curve_without_both_kinds_or_with_non_finite_values() -> None:
    only_answerable = {"a": _row(False, 0.3), "b": _row(False, 0.4)}
    assert tradeoff.curves(only_answerable, ["hybrid"]) == {}
    odd = {"u": _row(True, float("nan")), "a": _row(False, True)}
    assert tradeoff.curves(odd, ["hybrid"]) == {}


def test_thresholds_that_differ_between_queries_are_not_marked() -> None:
    queries = {"u": _row(True, 0.1, threshold=0.2), "a": _row(False, 0.5, threshold=0.3)}
    c = tradeoff.curves(queries, ["hybrid"])["hybrid"]
    assert c["threshold"] is None and c["at_threshold"] is None
    assert tradeoff.lines({"hybrid": c})[0].endswith(
        "no single threshold reported; catching 90% would silence 0/1 (threshold 0.3)"
    )
