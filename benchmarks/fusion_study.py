"""Does the lexical list outvote the dense one when the query's words are not the listing's?

A study behind the fusion's lexical credit (docs/engine.md, "Fusion under vocabulary mismatch").
It runs the engine over the shipped corpus once, asks every answerable query of the chosen
collections with each fusion variant (the engine's own ``search``, constraint extraction on,
no no-result cut, so the ranking alone is measured) and reports nDCG@10 and recall@10 per
collection and query class, with the single lists (lexical, semantic) beside the fused ones.

Variants: the plain weighted RRF shipped before this study (``base``), the lexical gate
(``gate:LOW-HIGH``: the lexical weight ramps from 0 at coverage LOW to full at coverage HIGH),
the per-listing credit (``credit:P``: a listing's lexical term times its coverage ** P), the
lexical weight (``wlex:W``), and their combinations (``credit:1+wlex:0.75``).
The choice is made on ``--tune`` collections only; ``--final`` collections are scored once,
for the variant named by ``--choose``, with 95% bootstrap intervals of the per-class paired
difference between the fused profile and its better single list.

    python benchmarks/fusion_study.py --tune . outside/dev outside/final --split dev,all,all
    python benchmarks/fusion_study.py --final . outside/final2 --split test,all \
        --choose credit:1
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_searcheval import metrics  # noqa: E402
from pytest_searcheval.collection import load  # noqa: E402
from pytest_searcheval.engine.core import Engine, EngineSettings  # noqa: E402
from pytest_searcheval.engine.fusion import FusionParams  # noqa: E402

MEASURES = ("nDCG@10", "R@10")


def variant(name: str, base: FusionParams) -> FusionParams:
    """``base`` is the plain weighted RRF (no gate, no credit); the parts change it."""
    params = dataclasses.replace(base, gate_low=0.0, gate_high=0.0, coverage_power=0.0)
    for part in name.split("+"):
        if part == "base":
            continue
        kind, _, value = part.partition(":")
        if kind == "gate":
            low, high = (float(x) for x in value.split("-"))
            params = dataclasses.replace(params, gate_low=low, gate_high=high)
        elif kind == "credit":
            params = dataclasses.replace(params, coverage_power=float(value))
        elif kind == "wlex":
            weights = dict(params.weights, lexical=float(value))
            params = dataclasses.replace(params, weights=weights)
        else:
            raise SystemExit(f"unknown variant part {part!r}")
    return params


GRID = (
    ["base", "wlex:0.25", "wlex:0"]
    + [f"gate:{lo}-{hi}" for lo, hi in ((0.2, 0.5), (0.3, 0.6), (0.4, 0.7), (0.3, 0.8), (0.5, 0.8))]
    + [f"credit:{p}" for p in (1, 2, 3)]
    + [f"gate:{lo}-{hi}+credit:{p}" for lo, hi in ((0.3, 0.6), (0.4, 0.7)) for p in (1, 2)]
)


def answerable(collection: Any, split: str) -> dict[str, dict[str, int]]:
    """qid -> judgments, for the queries of ``split`` with a grade >= 2 ('all': every split)."""
    out = {}
    for q in collection.queries.values():
        if split != "all" and q.split != split:
            continue
        grades = collection.judgments.get(q.id, {})
        if q.query_class == "no-result" or q.expect.get("no_result"):
            continue
        if any(g >= 2 for g in grades.values()):
            out[q.id] = dict(grades)
    return out


def rankings(engine: Engine, collection: Any, qids: list[str], profile: str) -> dict:
    run = {}
    for qid in qids:
        body = engine.search(
            collection.queries[qid].text, profile=profile, limit=10, apply_threshold=False
        )
        run[qid] = [r["id"] for r in body["results"]]
    return run


def per_query(qrels: dict, run: dict) -> dict[str, dict[str, float]]:
    return metrics.evaluate(qrels, run, MEASURES, relevance_level=2)


def classes(collection: Any, qids: list[str]) -> dict[str, list[str]]:
    by: dict[str, list[str]] = defaultdict(list)
    for qid in qids:
        by[collection.queries[qid].query_class or "-"].append(qid)
        by["all"].append(qid)
    return by


def paired_ci(a: np.ndarray, b: np.ndarray, n: int = 2000, seed: int = 7) -> tuple[float, ...]:
    rng = np.random.default_rng(seed)
    d = a - b
    idx = rng.integers(0, len(d), size=(n, len(d)))
    means = d[idx].mean(axis=1)
    return float(d.mean()), float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--tune", nargs="+", type=Path, help="collections to tune on")
    mode.add_argument("--final", nargs="+", type=Path, help="collections scored once")
    ap.add_argument("--split", required=True, help="one split per collection (dev, test, all)")
    ap.add_argument("--choose", default="base", help="--final: the variant chosen on --tune")
    ap.add_argument("--variants", default=None, help="comma-separated (default: the grid)")
    args = ap.parse_args(argv)
    paths = args.tune or args.final
    splits = args.split.split(",")
    if len(splits) != len(paths):
        ap.error("--split: one split per collection")
    names = (
        args.variants.split(",")
        if args.variants
        else (GRID if args.tune else ["base", args.choose])
    )
    shipped = load(ROOT)
    with Engine.start(shipped, settings=EngineSettings(no_result={})) as engine:
        base = engine.settings.fusion
        for path, split in zip(paths, splits, strict=True):
            collection = load(path)
            qrels = answerable(collection, split)
            qids = sorted(qrels)
            groups = classes(collection, qids)
            scores: dict[str, dict[str, dict[str, float]]] = {}
            for profile in ("lexical", "semantic"):
                scores[profile] = per_query(qrels, rankings(engine, collection, qids, profile))
            for name in names:
                engine.settings = dataclasses.replace(engine.settings, fusion=variant(name, base))
                scores[name] = per_query(qrels, rankings(engine, collection, qids, "hybrid"))
            engine.settings = dataclasses.replace(engine.settings, fusion=base)
            print(f"\n## {path} (split {split}, {len(qids)} answerable queries)")
            header = ["system"] + [f"{c} (n={len(v)})" for c, v in groups.items()]
            print("| " + " | ".join(header) + " |")
            print("|" + "---|" * len(header))
            for name, by_q in scores.items():
                cells = []
                for members in groups.values():
                    nd = np.mean([by_q[q]["nDCG@10"] for q in members])
                    rc = np.mean([by_q[q]["R@10"] for q in members])
                    cells.append(f"{nd:.3f} / {rc:.3f}")
                print("| " + " | ".join([name, *cells]) + " |")
            for name in names:
                for cls, members in groups.items():
                    fused = np.array([scores[name][q]["nDCG@10"] for q in members])
                    lex = np.array([scores["lexical"][q]["nDCG@10"] for q in members])
                    sem = np.array([scores["semantic"][q]["nDCG@10"] for q in members])
                    better = sem if sem.mean() >= lex.mean() else lex
                    mean, lo, hi = paired_ci(fused, better)
                    print(
                        f"  {name:28s} {cls:22s} fused - better single list: "
                        f"{mean:+.3f} (95% {lo:+.3f} to {hi:+.3f}), half-width {(hi - lo) / 2:.3f}"
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
