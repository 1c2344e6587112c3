"""Agreement of the two blind judges on the training sample, and the noise of the writers' labels.

Reads the two judges' grades (training/judging/A.tsv, B.tsv, written by
``construction/judging/packs.py collect``), an adjudication file for pairs two or more grades
apart (training/judging/adjudication.tsv, optional), the sample's strata (pool.json) and the
writers' files, and writes training/judging/agreement.md:

- agreement of A and B: exact, within one grade, quadratic weighted kappa, and Cohen's kappa on
  "relevant" (grade >= 2), each with a 95% bootstrap interval over needs (a need's five pairs are
  resampled together, as they were judged together);
- the merged grade (equal grades kept, one apart the lower, two or more apart adjudicated)
  per stratum;
- how often the writers' construction labels hold under the merged grades: a writer's target
  graded relevant; an unanswerable need with no drawn listing relevant; a listing of the need's
  own capability relevant.

    python construction/training_agreement.py           # rewrite agreement.md
    python construction/training_agreement.py --check   # exit 1 if it differs
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
DIR = ROOT / "training" / "judging"
RELEVANT = 2
SAMPLES = 1000
SEED = 20261202


def read_grades(path: Path) -> dict[tuple[str, str], int]:
    with path.open(encoding="utf-8", newline="") as f:
        return {
            (r["query_id"], r["doc_id"]): int(r["grade"]) for r in csv.DictReader(f, delimiter="\t")
        }


def read_adjudication(path: Path) -> dict[tuple[str, str], int]:
    if not path.is_file():
        return {}
    with path.open(encoding="utf-8", newline="") as f:
        return {
            (r["query_id"], r["doc_id"]): int(r["grade"])
            for r in csv.DictReader(f, delimiter="\t")
            if r["grade"].strip()
        }


def qwk(a: np.ndarray, b: np.ndarray, labels: Sequence[int]) -> float:
    from pytest_searcheval.stats import agreement

    return agreement(a.tolist(), b.tolist(), labels=labels).qwk


def _interval(
    needs: list[str],
    rows: dict[str, list[int]],
    a: np.ndarray,
    b: np.ndarray,
    stat: Callable[[np.ndarray, np.ndarray], float],
) -> tuple[float, float, float]:
    """The statistic and its percentile bootstrap interval, resampling needs."""
    rng = np.random.default_rng(SEED)
    value = stat(a, b)
    draws = []
    for _ in range(SAMPLES):
        pick = rng.integers(0, len(needs), len(needs))
        idx = np.concatenate([rows[needs[i]] for i in pick])
        draws.append(stat(a[idx], b[idx]))
    lo, hi = np.nanquantile(np.asarray(draws), [0.025, 0.975])
    return value, float(lo), float(hi)


def _share(values: list[bool]) -> tuple[float, float, float, int]:
    arr = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(SEED)
    means = arr[rng.integers(0, arr.size, (SAMPLES, arr.size))].mean(axis=1)
    lo, hi = np.quantile(means, [0.025, 0.975])
    return float(arr.mean()), float(lo), float(hi), int(arr.size)


def report(root: Path = ROOT) -> str:
    pool: dict[str, dict[str, list[str]]] = json.loads((DIR / "pool.json").read_text())["pool"]
    ga, gb = read_grades(DIR / "A.tsv"), read_grades(DIR / "B.tsv")
    adjudicated = read_adjudication(DIR / "adjudication.tsv")
    pairs = sorted((q, d) for q, docs in pool.items() for d in docs)
    if set(ga) != set(pairs) or set(gb) != set(pairs):
        sys.exit("A.tsv and B.tsv must grade exactly the pairs of pool.json")
    writers: dict[str, dict[str, Any]] = {}
    for path in sorted((root / "training/writers").glob("t*.yaml")):
        for need in yaml.safe_load(path.read_text(encoding="utf-8")):
            writers[need["id"]] = need
    a = np.array([ga[p] for p in pairs])
    b = np.array([gb[p] for p in pairs])
    needs = sorted(pool)
    rows: dict[str, list[int]] = {}
    for i, (q, _) in enumerate(pairs):
        rows.setdefault(q, []).append(i)
    scale = [0, 1, 2, 3]

    def exact(x: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(x == y))

    def within(x: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(np.abs(x - y) <= 1))

    def kappa(x: np.ndarray, y: np.ndarray) -> float:
        return qwk(x, y, scale)

    def binary(x: np.ndarray, y: np.ndarray) -> float:
        return qwk((x >= RELEVANT).astype(int), (y >= RELEVANT).astype(int), [0, 1])

    merged: dict[tuple[str, str], int] = {}
    pending = []
    for (q, d), x, y in zip(pairs, a.tolist(), b.tolist(), strict=True):
        if abs(x - y) <= 1:
            merged[(q, d)] = min(x, y)
        elif (q, d) in adjudicated:
            merged[(q, d)] = adjudicated[(q, d)]
        else:
            pending.append((q, d))
    severe = int(np.count_nonzero(np.abs(a - b) >= 2))
    lines = [
        "# Agreement of the judges on the training sample",
        "",
        "Generated by `construction/training_agreement.py` from A.tsv, B.tsv, adjudication.tsv,",
        "pool.json and the writers' files; do not edit. 95% intervals: percentile bootstrap over",
        f"needs ({SAMPLES} resamples, seed {SEED}); relevant means grade >= {RELEVANT}.",
        "",
        f"{len(pairs)} pairs of {len(needs)} needs, each graded by judge A and judge B (0-3).",
        "",
        "| agreement | value [95% CI] |",
        "| --- | --- |",
    ]
    for name, stat in (
        ("exact", exact),
        ("within one grade", within),
        ("quadratic weighted kappa", kappa),
        ("Cohen's kappa, relevant or not", binary),
    ):
        v, lo, hi = _interval(needs, rows, a, b, stat)
        lines.append(f"| {name} | {v:.3f} [{lo:.3f}, {hi:.3f}] |")
    lines += [
        "",
        f"Two or more grades apart: {severe} pairs ({severe / len(pairs):.1%}); adjudicated by a",
        f"third blind judge: {len(adjudicated)}; still pending: {len(pending)} (left out below).",
        "",
        "## Merged grade per stratum",
        "",
        "| stratum | pairs | grade 0 | 1 | 2 | 3 | relevant |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    strata = ["writer-target", "capability", "bm25", "dense", "category"]
    for stratum in strata:
        got = [
            merged[(q, d)]
            for q in needs
            for d, s in pool[q].items()
            if stratum in s and (q, d) in merged
        ]
        counts = [got.count(g) for g in scale]
        rel = sum(g >= RELEVANT for g in got)
        lines.append(
            f"| {stratum} | {len(got)} | "
            + " | ".join(str(c) for c in counts)
            + f" | {rel / max(len(got), 1):.1%} |"
        )
    lines += [
        "",
        "## How often the writers' labels hold",
        "",
        "| claim | holds [95% CI] | n |",
        "| --- | --- | ---: |",
    ]
    target_holds = [
        merged[(q, writers[q]["target"])] >= RELEVANT
        for q in needs
        if writers[q]["target"] is not None and (q, writers[q]["target"]) in merged
    ]
    unanswerable_holds = [
        all(merged[(q, d)] < RELEVANT for d in pool[q] if (q, d) in merged)
        for q in needs
        if writers[q]["kind"] == "unanswerable"
    ]
    sibling = [
        merged[(q, d)] >= RELEVANT
        for q in needs
        if writers[q]["kind"] != "unanswerable"
        for d, s in pool[q].items()
        if "capability" in s and (q, d) in merged
    ]
    for name, values in (
        ("the writer's target is relevant", target_holds),
        ("an unanswerable need has no relevant listing among the five drawn", unanswerable_holds),
        ("another listing of an answerable need's capability is relevant", sibling),
    ):
        v, lo, hi, n = _share(values)
        lines.append(f"| {name} | {v:.1%} [{lo:.1%}, {hi:.1%}] | {n} |")
    per_kind = []
    for kind in ("plain", "far", "agent", "constrained"):
        values = [
            merged[(q, writers[q]["target"])] >= RELEVANT
            for q in needs
            if writers[q]["kind"] == kind and (q, writers[q]["target"]) in merged
        ]
        v, lo, hi, n = _share(values)
        per_kind.append(f"| {kind} | {v:.1%} [{lo:.1%}, {hi:.1%}] | {n} |")
    lines += [
        "",
        "The writer's target is relevant, per kind:",
        "",
        "| kind | holds [95% CI] | n |",
        "| --- | --- | ---: |",
        *per_kind,
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = report()
    out = DIR / "agreement.md"
    if args.check:
        if not out.is_file() or out.read_text(encoding="utf-8") != text:
            sys.exit(f"{out} differs from what the judges' files give")
        print(f"{out} is what the judges' files give")
        return
    out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
