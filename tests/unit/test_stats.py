"""Known-answer tests for bootstrap intervals, the paired randomization test, Holm and QWK."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_searcheval.stats import (
    agreement,
    bootstrap_ci,
    holm,
    manifest,
    paired_randomization_test,
)


def test_bootstrap_is_deterministic_and_brackets_the_mean() -> None:
    values = np.random.default_rng(1).random(200)
    ci = bootstrap_ci(values)
    assert ci == bootstrap_ci(list(values))
    assert ci.low < ci.mean < ci.high
    assert ci.mean == pytest.approx(values.mean())
    # the percentile interval of the mean is close to mean +- 1.96 standard errors
    se = values.std(ddof=1) / math.sqrt(values.size)
    assert ci.high - ci.low == pytest.approx(2 * 1.96 * se, rel=0.15)
    assert bootstrap_ci(values, seed=2) != ci


def test_bootstrap_known_answer_two_values() -> None:
    # resample means of [0, 1] are k/2 with k ~ Binomial(2, 1/2): {0, 0.5, 1}
    ci = bootstrap_ci([0.0, 1.0], samples=4000)
    assert (ci.mean, ci.low, ci.high) == (0.5, 0.0, 1.0)
    one = bootstrap_ci([0.3])
    assert one.low == pytest.approx(0.3)
    assert one.high == pytest.approx(0.3)


def test_bootstrap_rejects_nan() -> None:
    with pytest.raises(ValueError, match="index 1 is not finite"):
        bootstrap_ci([0.1, math.nan])
    with pytest.raises(ValueError, match="at least one"):
        bootstrap_ci([])


def test_randomization_exact_enumeration() -> None:
    # d = (1, 2, 3): |sum| = 6 only for all-plus or all-minus signs: p = 2/8
    assert paired_randomization_test([1, 2, 3], [0, 0, 0]) == 0.25
    # d = (1, 1): sums +-2 (2 of 4) and 0 (2 of 4): p = 2/4
    assert paired_randomization_test([1, 1], [0, 0]) == 0.5
    assert paired_randomization_test([1, 2], [1, 2]) == 1.0


def test_randomization_sampled_agrees_with_normal_approximation() -> None:
    rng = np.random.default_rng(5)
    b = rng.random(300)
    a = b + rng.normal(0.02, 0.1, 300)
    p = paired_randomization_test(a, b)
    assert p == paired_randomization_test(a, b)  # seeded
    d = a - b
    z = abs(d.mean()) / (np.sqrt((d**2).mean()) / math.sqrt(d.size))
    from scipy.stats import norm

    assert p == pytest.approx(2 * norm.sf(z), abs=0.02)
    strong = paired_randomization_test(b + 0.5, b)
    assert strong == 1 / 10_001  # never 0


def test_randomization_needs_pairs() -> None:
    with pytest.raises(ValueError, match="one pair per query"):
        paired_randomization_test([1.0, 2.0], [1.0])


def test_holm_known_answer() -> None:
    adj = holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.5})
    # sorted 0.01, 0.03, 0.04, 0.5 -> 0.04, 0.09, 0.09 (monotone), 0.5
    assert adj == {
        "a": pytest.approx(0.04),
        "b": pytest.approx(0.09),
        "c": pytest.approx(0.09),
        "d": pytest.approx(0.5),
    }
    assert list(adj) == ["a", "b", "c", "d"]
    assert holm({"x": 0.6, "y": 0.7}) == {"x": 1.0, "y": 1.0}
    with pytest.raises(ValueError, match="'x'"):
        holm({"x": 1.5})


def test_agreement_hand_example() -> None:
    a = [0, 1, 2, 3, 3]
    b = [0, 2, 2, 1, 3]
    ag = agreement(a, b)
    assert (ag.n, ag.exact, ag.within_one, ag.severe, ag.severe_rate) == (5, 0.6, 0.8, 1, 0.2)
    # O: (0,0) (1,2) (2,2) (3,1) (3,3); weighted observed = 1 + 4 = 5
    # marginals r = [1,1,1,2], c = [1,1,2,1]; E = outer(r, c) / 5
    # sum_i r_i sum_j w_ij c_j = 18 + 7 + 6 + 2 * 15 = 61
    assert ag.qwk == pytest.approx(1 - 5 / (61 / 5))


def test_agreement_matches_scikit_learn() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(11)
    for _ in range(20):
        a = rng.integers(0, 4, 60)
        b = np.clip(a + rng.integers(-2, 3, 60), 0, 3)
        ours = agreement(a.tolist(), b.tolist()).qwk
        labels = list(range(min(a.min(), b.min()), max(a.max(), b.max()) + 1))
        theirs = metrics.cohen_kappa_score(a, b, weights="quadratic", labels=labels)
        assert ours == pytest.approx(theirs, abs=1e-12)


def test_agreement_edge_cases() -> None:
    assert math.isnan(agreement([2, 2], [2, 2]).qwk)
    assert agreement([0, 3], [3, 0]).qwk == pytest.approx(-1.0)
    with pytest.raises(ValueError, match=r"a\[1\] = 1.5"):
        agreement([1, 1.5], [1, 1])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="b has 3"):
        agreement([1, 2], [1, 2, 3])


def test_manifest_reports_the_parameters() -> None:
    m = manifest(samples=500, seed=3)
    assert (m["samples"], m["seed"], m["permutations"]) == (500, 3, 10_000)
    assert "500 resamples" in str(m["interval"]) and "seed 3" in str(m["interval"])
