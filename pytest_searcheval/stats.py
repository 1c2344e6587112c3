"""Deterministic statistics for evaluation reports: intervals, paired tests, grader agreement.

Everything is seeded so that two runs on the same numbers print the same intervals and p-values
(serial and pytest-xdist runs must produce identical reports).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral

import numpy as np
import numpy.typing as npt

__all__ = [
    "DEFAULT_SEED",
    "Agreement",
    "Interval",
    "agreement",
    "bootstrap_ci",
    "bootstrap_cis",
    "holm",
    "manifest",
    "nearest_rank",
    "paired_randomization_test",
    "paired_randomization_tests",
]

DEFAULT_SEED = 20261130
FloatArray = npt.NDArray[np.float64]


def nearest_rank(samples: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile: the ceil(p/100 * n)-th smallest sample, no interpolation;
    None when there are no samples."""
    if not samples:
        return None
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(p / 100.0 * len(ordered)) - 1)]


@dataclass(frozen=True)
class Interval:
    """A sample mean with a two-sided confidence interval [low, high]."""

    mean: float
    low: float
    high: float


def _values(values: Sequence[float] | FloatArray, what: str) -> FloatArray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{what}: expected a flat sequence of numbers, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{what}: expected at least one value")
    if not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(
            f"{what}: value {float(arr[bad])!r} at index {bad} is not finite "
            "(leave out queries where the measure is undefined)"
        )
    return arr


def bootstrap_ci(
    values: Sequence[float] | FloatArray,
    *,
    samples: int = 1000,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> Interval:
    """Percentile bootstrap interval of the mean.

    Draws ``samples`` resamples of size n with replacement (numpy PCG64 seeded with ``seed``),
    takes each resample's mean, and returns the (1-c)/2 and (1+c)/2 quantiles of those means
    (numpy's default linear interpolation). ``mean`` is the plain sample mean. Deterministic for
    a given input, seed and sample count. A single value gives a zero-width interval.
    Equals ``bootstrap_cis`` on a one-column matrix.
    """
    arr = _values(values, "bootstrap_ci")
    return bootstrap_cis(arr[:, None], samples=samples, seed=seed, confidence=confidence)[0]


def bootstrap_cis(
    values: Sequence[Sequence[float]] | FloatArray,
    *,
    samples: int = 1000,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> list[Interval]:
    """:func:`bootstrap_ci` of every column of an (n queries x m measures) matrix at once.

    One resample index matrix (``samples`` x n, PCG64 seeded with ``seed``) is drawn and shared
    by every column: the m intervals come from the same resampled query sets (common random
    numbers), and the draws, the costly part, happen once instead of m times. Each resample is
    turned into per-query multiplicities c (a row of counts summing to n), so the resample
    means of all columns are one matrix product ``c @ values / n``. Column j's interval is the
    one :func:`bootstrap_ci` gives for column j alone with the same seed (up to float rounding
    in the order of summation).
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"bootstrap_cis: expected an (n, m) matrix, got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"bootstrap_cis: expected at least one value, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        row, col = (int(i) for i in np.argwhere(~np.isfinite(arr))[0])
        raise ValueError(
            f"bootstrap_cis: value {float(arr[row, col])!r} at row {row}, column {col} is not "
            "finite (leave out queries where the measure is undefined)"
        )
    if samples < 1:
        raise ValueError(f"bootstrap_ci: samples must be positive, got {samples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"bootstrap_ci: confidence must be in (0, 1), got {confidence}")
    rng = np.random.default_rng(seed)
    n = arr.shape[0]
    sums = np.empty((samples, arr.shape[1]))
    # Chunked so that 1000 resamples of a large query set stay within a few hundred MB; the
    # chunking also fixes the draw sequence, so it must not depend on the number of columns.
    step = max(1, 2_000_000 // n)
    for lo in range(0, samples, step):
        hi = min(samples, lo + step)
        rows = hi - lo
        idx = rng.integers(0, n, size=(rows, n))
        idx += np.arange(rows)[:, None] * n
        counts = np.bincount(idx.ravel(), minlength=rows * n).reshape(rows, n)
        sums[lo:hi] = counts.astype(np.float64) @ arr
    means = sums / n
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2], axis=0)
    centre = arr.mean(axis=0)
    return [Interval(float(centre[j]), float(low[j]), float(high[j])) for j in range(arr.shape[1])]


def paired_randomization_test(
    a: Sequence[float] | FloatArray,
    b: Sequence[float] | FloatArray,
    *,
    permutations: int = 10_000,
    seed: int = DEFAULT_SEED,
) -> float:
    """Two-sided paired randomization (sign-flip) test of mean(a - b) = 0; returns the p-value.

    With d_i = a_i - b_i and T = |mean(d)|, each permutation flips the sign of every d_i with
    probability 1/2. When 2^n <= ``permutations`` every sign vector is enumerated and
    p = #{|mean(s d)| >= T} / 2^n exactly; otherwise ``permutations`` random sign vectors are
    drawn (PCG64 seeded with ``seed``; each sign is one bit of the generator's byte stream) and
    p = (#{|mean(s d)| >= T} + 1) / (permutations + 1), which never returns 0
    (Phipson and Smyth, 2010). A small tolerance counts statistics equal to T up to rounding.
    All differences zero gives p = 1. Equals ``paired_randomization_tests`` on one column.
    """
    x = _values(a, "paired_randomization_test: a")
    y = _values(b, "paired_randomization_test: b")
    if x.size != y.size:
        raise ValueError(
            f"paired_randomization_test: a has {x.size} values and b has {y.size}; "
            "the test needs one pair per query"
        )
    return paired_randomization_tests(x[:, None], y[:, None], permutations=permutations, seed=seed)[
        0
    ]


def paired_randomization_tests(
    a: Sequence[Sequence[float]] | FloatArray,
    b: Sequence[Sequence[float]] | FloatArray,
    *,
    permutations: int = 10_000,
    seed: int = DEFAULT_SEED,
) -> list[float]:
    """:func:`paired_randomization_test` of every column pair of two (n x k) matrices at once.

    The k comparisons (profile pairs, measures) over the same n queries share one sign matrix
    (``permutations`` x n, or the 2^n enumeration): the draws happen once and every column's
    statistic comes from one matrix product. Each p-value is the one the single-column test
    gives with the same seed (the draw sequence does not depend on k).
    """
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.ndim != 2 or x.shape != y.shape or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(
            f"paired_randomization_tests: expected two (n, k) matrices of one shape, got "
            f"{x.shape} and {y.shape}"
        )
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("paired_randomization_tests: every value must be finite")
    if permutations < 1:
        raise ValueError("paired_randomization_test: permutations must be positive")
    d = x - y
    n, k = d.shape
    observed = np.abs(d.sum(axis=0))
    tol = 1e-12 * np.maximum(1.0, np.abs(d).sum(axis=0))
    trivial = observed <= tol
    if trivial.all():
        return [1.0] * k
    if n <= 20 and 2**n <= permutations:
        codes = np.arange(2**n, dtype=np.int64)[:, None]
        signs = 1.0 - 2.0 * ((codes >> np.arange(n)) & 1)
        hits = np.count_nonzero(np.abs(signs @ d) >= observed - tol, axis=0)
        exact = hits / 2**n
        return [1.0 if trivial[j] else float(exact[j]) for j in range(k)]
    rng = np.random.default_rng(seed)
    hits = np.zeros(k, dtype=np.int64)
    total = d.sum(axis=0)
    step = max(1, 4_000_000 // n)
    for lo in range(0, permutations, step):
        m = min(step, permutations - lo)
        # One random bit per sign, unpacked from the seeded byte stream (8 signs per byte
        # drawn); with s = 2b - 1, s.d = 2 b.d - sum(d), so the bits enter the product as is.
        raw = np.frombuffer(rng.bytes((m * n + 7) // 8), dtype=np.uint8)
        bits = np.unpackbits(raw)[: m * n].reshape(m, n)
        stats = np.abs(2.0 * (bits.astype(np.float64) @ d) - total)
        hits += np.count_nonzero(stats >= observed - tol, axis=0)
    sampled = (hits + 1) / (permutations + 1)
    return [1.0 if trivial[j] else float(sampled[j]) for j in range(k)]


def holm(pvalues: Mapping[str, float]) -> dict[str, float]:
    """Holm-Bonferroni adjusted p-values, keyed like the input.

    Sorting the m p-values ascending, p_(i) (i = 1..m) becomes
    max_{j <= i} min(1, (m - j + 1) p_(j)). Reject at level alpha where adjusted <= alpha.
    Ties keep input order.
    """
    for name, p in pvalues.items():
        if not (isinstance(p, int | float) and 0.0 <= float(p) <= 1.0):
            raise ValueError(f"holm: p-value of {name!r} is {p!r}, expected a number in [0, 1]")
    items = sorted(pvalues.items(), key=lambda kv: kv[1])
    m = len(items)
    out: dict[str, float] = {}
    running = 0.0
    for i, (name, p) in enumerate(items):
        running = max(running, min(1.0, (m - i) * float(p)))
        out[name] = running
    return {name: out[name] for name in pvalues}


def manifest(
    *,
    samples: int = 1000,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    permutations: int = 10_000,
) -> dict[str, object]:
    """The statistical conventions behind a report's intervals and p-values, as JSON-safe data."""
    return {
        "interval": f"percentile bootstrap of the mean, {samples} resamples, "
        f"{confidence:.0%} two-sided, numpy PCG64 seed {seed}",
        "paired_test": f"two-sided paired randomization (sign flip) test on per-query differences, "
        f"{permutations} seeded permutations, p = (hits + 1) / (permutations + 1); exact "
        f"enumeration when 2^n <= {permutations}",
        "multiple_comparisons": "Holm-Bonferroni step-down adjustment",
        "agreement": "exact, within-one, quadratic weighted kappa over the grade range seen, "
        "severe = 2 or more grades apart",
        "samples": samples,
        "seed": seed,
        "confidence": confidence,
        "permutations": permutations,
    }


@dataclass(frozen=True)
class Agreement:
    """Agreement between two graders over the same n items.

    ``exact`` and ``within_one`` are shares of items with |a - b| = 0 and <= 1; ``qwk`` is
    Cohen's quadratic weighted kappa; ``severe`` counts items with |a - b| >= 2 and
    ``severe_rate`` = severe / n.
    """

    n: int
    exact: float
    within_one: float
    qwk: float
    severe: int
    severe_rate: float


def _grades(values: Sequence[int], what: str) -> npt.NDArray[np.int64]:
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, Integral):
            raise ValueError(f"agreement: {what}[{i}] = {v!r} is not an integer grade")
    return np.asarray(values, dtype=np.int64)


def agreement(
    a: Sequence[int], b: Sequence[int], *, labels: Sequence[int] | None = None
) -> Agreement:
    """Exact, within-one, quadratic weighted kappa and severe (2+ apart) disagreement.

    QWK = 1 - sum_ij w_ij O_ij / sum_ij w_ij E_ij with O the observed confusion matrix, E the
    outer product of the two graders' marginals divided by n, and w_ij = (i - j)^2 over the
    grade scale ``labels`` (default: every integer from the smallest to the largest grade seen,
    so the weights are the squared grade difference even when a grade is never used). Equals
    scikit-learn's cohen_kappa_score(a, b, weights="quadratic", labels=labels). NaN when the
    expected disagreement is 0 (both graders gave one and the same grade to every item).
    """
    x = _grades(a, "a")
    y = _grades(b, "b")
    if x.size != y.size:
        raise ValueError(f"agreement: a has {x.size} grades and b has {y.size}")
    if x.size == 0:
        raise ValueError("agreement: no items to compare")
    scale = (
        np.arange(min(x.min(), y.min()), max(x.max(), y.max()) + 1)
        if labels is None
        else np.asarray(labels, dtype=np.int64)
    )
    index = {int(v): i for i, v in enumerate(scale)}
    for what, arr in (("a", x), ("b", y)):
        unknown = sorted(set(arr.tolist()) - set(index))
        if unknown:
            raise ValueError(f"agreement: {what} has grade {unknown[0]} outside labels")
    k = len(scale)
    xi = np.array([index[v] for v in x.tolist()], dtype=np.int64)
    yi = np.array([index[v] for v in y.tolist()], dtype=np.int64)
    observed = np.zeros((k, k))
    np.add.at(observed, (xi, yi), 1.0)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / x.size
    idx = np.arange(k)
    weights = (idx[:, None] - idx[None, :]) ** 2
    denom = float((weights * expected).sum())
    qwk = 1.0 - float((weights * observed).sum()) / denom if denom > 0 else math.nan
    gap = np.abs(x - y)
    severe = int(np.count_nonzero(gap >= 2))
    n = int(x.size)
    return Agreement(
        n=n,
        exact=float(np.mean(gap == 0)),
        within_one=float(np.mean(gap <= 1)),
        qwk=qwk,
        severe=severe,
        severe_rate=severe / n,
    )
