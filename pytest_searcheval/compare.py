"""Compare two saved reports query by query: ``searcheval compare A.json B.json``.

For one profile of each report (by default the gated profile of B, in both), every measure the
two runs share is compared over the queries where both have a value: mean of A, mean of B, the
mean difference B - A, a two-sided paired randomization test (:mod:`pytest_searcheval.stats`,
the same test and seed as the session report) with Holm's correction over the measures, and the
queries B wins, ties and loses. The biggest movers are the queries whose value of one measure
changed most, with the top results of each run. Differences between the runs' conventions or
data (split, gain, relevance level, limit, trec mode, content hashes) are listed first: numbers
of runs judged against different judgments do not compare.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_searcheval.baseline.gate import CONVENTIONS as GATE_CONVENTIONS
from pytest_searcheval.stats import DEFAULT_SEED, holm, paired_randomization_tests

#: Two values closer than this are a tie (floating-point noise of the same ranking).
TIE = 1e-9
#: The conventions the gate compares with the baseline, except the measure list (shared
#: measures are compared, the others left out); a report's ``run.conventions`` when it has one.
CONVENTIONS: tuple[str, ...] = tuple(c for c in GATE_CONVENTIONS if c != "measures")


class CompareError(ValueError):
    """Two reports that cannot be compared (the message says which file and why)."""


@dataclass(frozen=True)
class MeasureComparison:
    measure: str
    n: int
    mean_a: float
    mean_b: float
    wins: int
    ties: int
    losses: int
    p: float
    p_holm: float = math.nan

    @property
    def mean_diff(self) -> float:
        return self.mean_b - self.mean_a


@dataclass(frozen=True)
class Mover:
    query: str
    query_class: str
    text: str
    a: float
    b: float
    top_a: tuple[str, ...]
    top_b: tuple[str, ...]

    @property
    def delta(self) -> float:
        return self.b - self.a


@dataclass
class Comparison:
    profile_a: str
    profile_b: str
    differences: list[str] = field(default_factory=list)
    measures: list[MeasureComparison] = field(default_factory=list)
    only_a: dict[str, int] = field(default_factory=dict)
    only_b: dict[str, int] = field(default_factory=dict)
    mover_measure: str = ""
    losses: list[Mover] = field(default_factory=list)
    gains: list[Mover] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        def mover(m: Mover) -> dict[str, Any]:
            return {
                "query": m.query,
                "class": m.query_class,
                "text": m.text,
                "a": m.a,
                "b": m.b,
                "delta": m.delta,
                "top_a": list(m.top_a),
                "top_b": list(m.top_b),
            }

        return {
            "profile_a": self.profile_a,
            "profile_b": self.profile_b,
            "differences": list(self.differences),
            "measures": [
                {
                    "measure": c.measure,
                    "n": c.n,
                    "mean_a": c.mean_a,
                    "mean_b": c.mean_b,
                    "mean_diff": c.mean_diff,
                    "wins": c.wins,
                    "ties": c.ties,
                    "losses": c.losses,
                    "p": c.p,
                    "p_holm": c.p_holm,
                }
                for c in self.measures
            ],
            "only_a": dict(self.only_a),
            "only_b": dict(self.only_b),
            "movers": {
                "measure": self.mover_measure,
                "losses": [mover(m) for m in self.losses],
                "gains": [mover(m) for m in self.gains],
            },
        }


def _profile(report: Mapping[str, Any], name: str, which: str) -> None:
    entry = (report.get("profiles") or {}).get(name)
    if entry is None:
        known = ", ".join(report.get("profiles") or {}) or "none"
        raise CompareError(f"{which}: no profile {name!r} in the report (profiles: {known})")
    if not entry.get("available"):
        raise CompareError(f"{which}: profile {name!r} was unavailable: {entry.get('reason')}")


def _values(report: Mapping[str, Any], profile: str, measure: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for qid, q in (report.get("queries") or {}).items():
        v = ((q.get("profiles") or {}).get(profile) or {}).get("measures", {}).get(measure)
        if isinstance(v, int | float) and math.isfinite(v):
            out[qid] = float(v)
    return out


def _conventions(run: Mapping[str, Any]) -> dict[str, Any]:
    """The run's conventions (``run.conventions`` where the report has it), without the
    measure list: shared measures are compared, the others left out."""
    recorded = run.get("conventions")
    if isinstance(recorded, Mapping):
        return {k: v for k, v in recorded.items() if k != "measures"}
    return {k: run.get(k) for k in CONVENTIONS}


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """One line per convention, data hash or model that differs between the two runs."""
    out: list[str] = []
    run_a, run_b = a.get("run") or {}, b.get("run") or {}
    conv_a, conv_b = _conventions(run_a), _conventions(run_b)
    for key in [k for k in CONVENTIONS if k in conv_a or k in conv_b] + sorted(
        (set(conv_a) | set(conv_b)) - set(CONVENTIONS)
    ):
        if conv_a.get(key) != conv_b.get(key):
            out.append(f"run.{key}: A {conv_a.get(key)!r}, B {conv_b.get(key)!r}")
    hashes_a = (a.get("collection") or {}).get("hashes") or {}
    hashes_b = (b.get("collection") or {}).get("hashes") or {}
    for key in sorted(set(hashes_a) | set(hashes_b)):
        if hashes_a.get(key) != hashes_b.get(key):
            out.append(f"collection.hashes.{key}: A {hashes_a.get(key)}, B {hashes_b.get(key)}")
    return out


def compare(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    *,
    profile_a: str | None = None,
    profile_b: str | None = None,
    measures: Sequence[str] | None = None,
    mover_measure: str | None = None,
    movers: int = 10,
    permutations: int | None = None,
    seed: int = DEFAULT_SEED,
) -> Comparison:
    """Compare profile ``profile_a`` of report ``a`` with ``profile_b`` of report ``b``."""
    run_a, run_b = a.get("run") or {}, b.get("run") or {}
    pb = profile_b or profile_a or str(run_b.get("gated_profile") or "")
    pa = profile_a or pb
    _profile(a, pa, "A")
    _profile(b, pb, "B")
    shared = [m for m in run_a.get("measures") or [] if m in set(run_b.get("measures") or [])]
    if measures:
        unknown = [m for m in measures if m not in shared]
        if unknown:
            raise CompareError(
                f"measure {unknown[0]!r} is not in both reports (shared: {', '.join(shared)})"
            )
        shared = list(measures)
    if not shared:
        raise CompareError("the two reports have no measure in common")
    perms = permutations or int((run_b.get("randomization") or {}).get("permutations") or 10_000)
    out = Comparison(profile_a=pa, profile_b=pb, differences=differences(a, b))
    columns: dict[str, tuple[list[str], list[float], list[float]]] = {}
    for m in shared:
        va, vb = _values(a, pa, m), _values(b, pb, m)
        common = sorted(set(va) & set(vb))
        out.only_a[m] = len(set(va) - set(vb))
        out.only_b[m] = len(set(vb) - set(va))
        columns[m] = (common, [va[q] for q in common], [vb[q] for q in common])
    if not any(len(c[0]) for c in columns.values()):
        raise CompareError(
            f"no query has a value of {', '.join(shared)} in both reports (profile A {pa!r}, "
            f"B {pb!r}): are they runs of the same collection?"
        )
    # Measures over the same queries share one sign matrix, as in the session report.
    groups: dict[tuple[str, ...], list[str]] = {}
    for m, (common, _, _) in columns.items():
        if common:
            groups.setdefault(tuple(common), []).append(m)
    pvalues: dict[str, float] = {}
    for _common, names in groups.items():
        xs = [list(row) for row in zip(*(columns[m][2] for m in names), strict=True)]
        ys = [list(row) for row in zip(*(columns[m][1] for m in names), strict=True)]
        ps = paired_randomization_tests(xs, ys, permutations=perms, seed=seed)
        pvalues.update(zip(names, (float(p) for p in ps), strict=True))
    adjusted = holm(pvalues) if pvalues else {}
    for m in shared:
        common, xa, xb = columns[m]
        if not common:
            continue
        diffs = [y - x for x, y in zip(xa, xb, strict=True)]
        out.measures.append(
            MeasureComparison(
                measure=m,
                n=len(common),
                mean_a=sum(xa) / len(xa),
                mean_b=sum(xb) / len(xb),
                wins=sum(1 for d in diffs if d > TIE),
                ties=sum(1 for d in diffs if abs(d) <= TIE),
                losses=sum(1 for d in diffs if d < -TIE),
                p=pvalues[m],
                p_holm=adjusted[m],
            )
        )
    chosen = mover_measure or str(run_b.get("query_measure") or shared[0])
    if chosen not in columns:
        raise CompareError(f"mover measure {chosen!r} is not compared ({', '.join(shared)})")
    out.mover_measure = chosen
    moved = [
        _mover(a, b, pa, pb, q, x, y)
        for q, x, y in zip(*columns[chosen], strict=True)
        if abs(y - x) > TIE
    ]
    out.losses = sorted((m for m in moved if m.delta < 0), key=lambda m: (m.delta, m.query))
    out.gains = sorted((m for m in moved if m.delta > 0), key=lambda m: (-m.delta, m.query))
    out.losses, out.gains = out.losses[:movers], out.gains[:movers]
    return out


def _mover(
    a: Mapping[str, Any], b: Mapping[str, Any], pa: str, pb: str, qid: str, x: float, y: float
) -> Mover:
    qa, qb = a["queries"][qid], b["queries"][qid]
    return Mover(
        query=qid,
        query_class=str(qb.get("class", "")),
        text=str(qb.get("text", "")),
        a=x,
        b=y,
        top_a=tuple(qa["profiles"][pa].get("ids", [])[:3]),
        top_b=tuple(qb["profiles"][pb].get("ids", [])[:3]),
    )


def lines(c: Comparison, *, name_a: str = "A", name_b: str = "B") -> list[str]:
    """The comparison for the terminal."""
    out = [f"A = {name_a} ({c.profile_a}), B = {name_b} ({c.profile_b})"]
    if c.differences:
        out.append("the runs differ in (their numbers may not compare):")
        out += [f"  {d}" for d in c.differences]
    out.append("")
    header = ["measure", "n", "A", "B", "B - A", "wins", "ties", "losses", "p", "p (Holm)"]
    body = [
        [
            m.measure,
            str(m.n),
            f"{m.mean_a:.4f}",
            f"{m.mean_b:.4f}",
            f"{m.mean_diff:+.4f}",
            str(m.wins),
            str(m.ties),
            str(m.losses),
            f"{m.p:.4f}",
            f"{m.p_holm:.4f}",
        ]
        for m in c.measures
    ]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    out += [fmt.format(*header), "  ".join("-" * w for w in widths)]
    out += [fmt.format(*r) for r in body]
    out.append(
        "wins/ties/losses: queries where B is above/equal to/below A; p: two-sided paired "
        "randomization test, Holm-corrected over the measures"
    )
    skipped = {m: (c.only_a.get(m, 0), c.only_b.get(m, 0)) for m in c.only_a}
    uneven = {m: v for m, v in skipped.items() if v != (0, 0)}
    for name, (na, nb) in uneven.items():
        out.append(f"{name}: {na} queries have a value only in A, {nb} only in B (left out)")
    for title, movers in (("losses", c.losses), ("gains", c.gains)):
        if not movers:
            continue
        out.append("")
        out.append(f"biggest {title} on {c.mover_measure}:")
        for m in movers:
            out.append(
                f"  {m.query} [{m.query_class}] {m.a:.3f} -> {m.b:.3f} ({m.delta:+.3f}) "
                f"{m.text!r}: top A {', '.join(m.top_a) or '-'} | top B {', '.join(m.top_b) or '-'}"
            )
    return out


def worse(c: Comparison, alpha: float) -> list[MeasureComparison]:
    """Measures on which B is below A with a Holm-corrected p-value at most ``alpha``."""
    return [m for m in c.measures if m.mean_diff < 0 and m.p_holm <= alpha]
