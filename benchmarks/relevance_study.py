"""The relevance model in the engine: does ``hybrid_rerank`` rank and decide the empty answer
better than ``hybrid``, on queries written outside the team?

Runs the engine over the shipped corpus once (the packaged relevance model as the reranker, or
``--reranker DIR``), asks every query of the chosen collections with the cut off, and reports:

- ranking: nDCG@10 and recall@10 (grade >= 2) per collection and query class for ``hybrid``
  and ``hybrid_rerank`` at each head mix (``--mix``, engine/rerank.py), with the paired
  difference's 95% bootstrap interval;
- the empty answer: per feature of the response's ``confidence`` (``cos``, ``coverage``,
  ``rerank``), its AUC (answerable above unanswerable) and what a cut does at the 2% recall
  budget: fitted on the ``--tune`` collections and applied unchanged to ``--final`` ones.

Answerable: a query with a judged grade >= 2 and no ``expect.no_result``; unanswerable: class
``no-result`` or ``expect.no_result`` with no grade >= 2.

    python benchmarks/relevance_study.py --tune . outside/dev outside/final outside/final2 \
        --split dev,all,all,all --out /tmp/tune.json
    python benchmarks/relevance_study.py --final . outside/final3 --split test,all \
        --fitted /tmp/tune.json --mix 0.5
"""

from __future__ import annotations

import argparse
import dataclasses
import json
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

BUDGET = 0.02


def split_queries(collection: Any, split: str) -> tuple[dict[str, dict[str, int]], list[str]]:
    """(answerable qid -> judgments, unanswerable qids) of ``split`` ('all': every split)."""
    ans, none = {}, []
    for q in collection.queries.values():
        if split != "all" and q.split != split:
            continue
        grades = collection.judgments.get(q.id, {})
        relevant = any(g >= 2 for g in grades.values())
        if (q.query_class == "no-result" or q.expect.get("no_result")) and not relevant:
            none.append(q.id)
        elif relevant and not q.expect.get("no_result"):
            ans[q.id] = dict(grades)
    return ans, sorted(none)


def ask(engine: Engine, collection: Any, qid: str, profile: str) -> dict[str, Any]:
    # as the plugin and the calibration ask: the text, constraint extraction on
    return engine.search(
        collection.queries[qid].text, profile=profile, limit=10, apply_threshold=False
    )


def paired_ci(d: np.ndarray, n: int = 2000, seed: int = 7) -> tuple[float, float, float]:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(d), size=(n, len(d)))
    means = d[idx].mean(axis=1)
    return float(d.mean()), float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def share_ci(hits: np.ndarray, n: int = 2000, seed: int = 7) -> tuple[float, float, float]:
    return paired_ci(hits.astype(float), n, seed)


def auc(pos: list[float], neg: list[float]) -> float:
    p, q = np.array(pos)[:, None], np.array(neg)[None, :]
    return float(((p > q).sum() + 0.5 * (p == q).sum()) / (p.size * q.size))


def fit_cut(ans: list[float], rec: list[float], none: list[float], budget: float = BUDGET) -> float:
    total = sum(rec)
    best = -np.inf
    for cut in sorted(set(ans) | set(none)):
        if sum(r for a, r in zip(ans, rec, strict=True) if a < cut) <= budget * total:
            best = max(best, cut)
    # the middle of the gap to the next observed value keeps a margin
    above = [v for v in set(ans) | set(none) if v > best]
    return (best + min(above)) / 2 if above and best > -np.inf else best


def feature(body: dict[str, Any], name: str) -> float:
    value = (body.get("confidence") or {}).get(name)
    return float("-inf") if value is None else float(value)


def print_per_query(
    collection: Any,
    qrels: dict[str, dict[str, int]],
    members: list[str],
    runs: dict[str, dict[str, list[str]]],
    scores: dict[str, dict[str, dict[str, float]]],
) -> None:
    """One row per query: text, nDCG@10 per system, and the rank (1-based, '-' past 10) each
    system gives the query's best-graded listing."""
    names = list(runs)
    print("| query | text | best listing | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for q in members:
        best = max(qrels[q], key=lambda d: (qrels[q][d], d))
        cells = []
        for n in names:
            ranked = runs[n][q]
            rank = str(ranked.index(best) + 1) if best in ranked else "-"
            cells.append(f"{scores[n][q]['nDCG@10']:.3f} (rank {rank})")
        text = collection.queries[q].text
        print(f"| {q} | {text} | {best} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--tune", nargs="+", type=Path)
    mode.add_argument("--final", nargs="+", type=Path)
    ap.add_argument("--split", required=True)
    ap.add_argument("--mix", default="1.0,0.5")
    ap.add_argument("--reranker", default=None)
    ap.add_argument("--fitted", type=Path, help="--final: the --tune run's --out")
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--per-query",
        metavar="CLASS",
        help="also print each answerable query of this class: nDCG@10 of both profiles and the "
        "rank each gives the query's best-graded listing",
    )
    args = ap.parse_args(argv)
    paths = args.tune or args.final
    splits = args.split.split(",")
    mixes = [float(m) for m in args.mix.split(",")]
    fitted = json.loads(args.fitted.read_text()) if args.fitted else None
    settings = EngineSettings(no_result={}, reranker_path=args.reranker)
    rows: dict[str, Any] = {"features": defaultdict(lambda: {"ans": [], "rec": [], "none": []})}
    out: dict[str, Any] = {"collections": {}}
    with Engine.start(load(ROOT), settings=settings) as engine:
        print(f"reranker: {engine.reranker.info()}")
        for path, split in zip(paths, splits, strict=True):
            collection = load(path)
            qrels, none = split_queries(collection, split)
            qids = sorted(qrels)
            runs: dict[str, dict[str, list[str]]] = {}
            bodies: dict[str, dict[str, dict[str, Any]]] = {}
            for profile, mix in [("hybrid", None)] + [("hybrid_rerank", m) for m in mixes]:
                name = profile if mix is None else f"{profile}@{mix:g}"
                if mix is not None:
                    engine.settings = dataclasses.replace(engine.settings, rerank_mix=mix)
                bodies[name] = {q: ask(engine, collection, q, profile) for q in qids + none}
                runs[name] = {q: [r["id"] for r in bodies[name][q]["results"]] for q in qids}
            scores = {
                n: metrics.evaluate(qrels, r, ("nDCG@10", "R@10"), relevance_level=2)
                for n, r in runs.items()
            }
            groups: dict[str, list[str]] = defaultdict(list)
            for q in qids:
                groups[collection.queries[q].query_class or "-"].append(q)
                groups["all"].append(q)
            print(f"\n## {path} (split {split}: {len(qids)} answerable, {len(none)} unanswerable)")
            print("| system | " + " | ".join(f"{c} ({len(v)})" for c, v in groups.items()) + " |")
            print("|---|" + "---|" * len(groups))
            table: dict[str, Any] = {}
            for name, by_q in scores.items():
                cells = []
                for cls, members in groups.items():
                    nd = np.array([by_q[q]["nDCG@10"] for q in members])
                    base = np.array([scores["hybrid"][q]["nDCG@10"] for q in members])
                    mean, lo, hi = paired_ci(nd - base)
                    table.setdefault(name, {})[cls] = {
                        "n": len(members),
                        "nDCG@10": float(nd.mean()),
                        "R@10": float(np.mean([by_q[q]["R@10"] for q in members])),
                        "minus_hybrid": [mean, lo, hi],
                    }
                    cells.append(
                        f"{nd.mean():.3f}"
                        + ("" if name == "hybrid" else f" ({mean:+.3f}, {lo:+.3f} to {hi:+.3f})")
                    )
                print(f"| {name} | " + " | ".join(cells) + " |")
            if args.per_query:
                print_per_query(collection, qrels, groups.get(args.per_query, []), runs, scores)
            decision: dict[str, Any] = {}
            for name, answers in bodies.items():
                for feat in ("cos", "coverage", "rerank"):
                    a = [feature(answers[q], feat) for q in qids]
                    if all(v == float("-inf") for v in a):
                        continue
                    n = [feature(answers[q], feat) for q in none]
                    r = [scores[name][q]["R@10"] for q in qids]
                    key = f"{name}:{feat}"
                    rows["features"][key]["ans"] += a
                    rows["features"][key]["rec"] += r
                    rows["features"][key]["none"] += n
                    entry = {"AUC": auc(a, n)}
                    if fitted and key in fitted["cuts"]:
                        cut = fitted["cuts"][key]
                        caught = np.array([v < cut for v in n])
                        silenced = np.array([v < cut for v in a])
                        kept = sum(rr for v, rr in zip(a, r, strict=True) if v >= cut) / sum(r)
                        entry.update(
                            cut=cut,
                            caught=share_ci(caught),
                            silenced=share_ci(silenced),
                            recall_kept=kept,
                            n_none=len(n),
                            n_ans=len(a),
                        )
                    decision[key] = entry
            for key, e in decision.items():
                extra = ""
                if "cut" in e:
                    c, s = e["caught"], e["silenced"]
                    extra = (
                        f"; cut {e['cut']:.4f}: caught {c[0]:.3f} ({c[1]:.3f}-{c[2]:.3f}) of "
                        f"{e['n_none']}, silenced {s[0]:.3f} of {e['n_ans']}, recall kept "
                        f"{e['recall_kept']:.3f}"
                    )
                print(f"  {key:28s} AUC {e['AUC']:.3f}{extra}")
            out["collections"][str(path)] = {"ranking": table, "decision": decision}
    if args.tune:
        out["cuts"] = {}
        for key, v in rows["features"].items():
            cut = fit_cut(v["ans"], v["rec"], v["none"])
            ans, none = np.array(v["ans"]), np.array(v["none"])
            out["cuts"][key] = cut
            print(
                f"pooled {key:28s} AUC {auc(v['ans'], v['none']):.3f} cut {cut:.4f}: caught "
                f"{(none < cut).mean():.3f} of {len(none)}, silenced {(ans < cut).mean():.3f}"
            )
        # the trade-off as the recall budget moves (each cut fitted and applied on the same
        # pooled scores: the best each evidence can do on these sets, not a held-out figure)
        out["curves"] = {}
        for key, v in rows["features"].items():
            ans, rec, none = np.array(v["ans"]), np.array(v["rec"]), np.array(v["none"])
            curve = []
            for budget in (0.0, 0.02, 0.05, 0.10, 0.15, 0.25, 0.50):
                cut = fit_cut(v["ans"], v["rec"], v["none"], budget)
                curve.append(
                    {
                        "budget": budget,
                        "caught": float((none < cut).mean()),
                        "silenced": float((ans < cut).mean()),
                        "recall_kept": float(rec[ans >= cut].sum() / rec.sum()),
                    }
                )
            # what catching 90% of the unanswerable needs costs
            cut90 = float(np.quantile(none, 0.90))
            curve.append(
                {
                    "budget": None,
                    "caught": float((none < cut90).mean()),
                    "silenced": float((ans < cut90).mean()),
                    "recall_kept": float(rec[ans >= cut90].sum() / rec.sum()),
                }
            )
            out["curves"][key] = curve
            print(
                f"curve {key}: "
                + "; ".join(
                    f"{c['budget']}: {c['caught']:.3f}/{c['silenced']:.3f}/{c['recall_kept']:.3f}"
                    for c in curve
                )
            )
    if args.out:
        args.out.write_text(json.dumps(out, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
