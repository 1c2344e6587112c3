"""Time pytest_searcheval.metrics.evaluate against pytrec_eval and ranx on one input.

    python benchmarks/bench_metrics.py [--queries 10000 --depth 1000 --judged 50 --seed 7]

Every tool starts from the same Python dicts ({qid: {doc: grade}} and {qid: {doc: score}}), and
each timing includes that tool's own conversion of them. ranx compiles its kernels with numba on
first use: its first call in this process is reported as "cold" and a second call on fresh
Qrels/Run objects as "warm". Unless --numba-cache-dir is given, numba's cache is pointed at a
fresh temporary directory, so the cold call really compiles. Imports happen before any timing.
The per-query values are compared with pytrec_eval before the timings are printed (ours in
trec_compat mode).
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_searcheval.metrics import evaluate

OURS = ["nDCG@10", "RR", "R@20", "P@5", "bpref", "AP"]
TREC = {"ndcg_cut.10", "recip_rank", "recall.20", "P.5", "bpref", "map"}
TREC_KEYS = dict(
    zip(OURS, ["ndcg_cut_10", "recip_rank", "recall_20", "P_5", "bpref", "map"], strict=True)
)
RANX = ["ndcg@10", "mrr", "recall@20", "precision@5", "bpref", "map"]
RANX_KEYS = dict(zip(OURS, RANX, strict=True))


def make_input(
    queries: int, depth: int, judged: int, seed: int
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """Graded qrels (0-3, some judged pairs not retrieved) and a scored run of ``depth`` docs."""
    rng = np.random.default_rng(seed)
    pool = [f"doc{i:07d}" for i in range(max(depth * 20, 100_000))]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    bias = _top_bias(depth)
    for q in range(queries):
        qid = f"q{q:06d}"
        docs = rng.choice(len(pool), size=depth + judged // 2, replace=False)
        retrieved = docs[:depth]
        scores = np.round(rng.random(depth) * 1000.0, 3)  # coarse scores give some ties
        run[qid] = dict(zip([pool[i] for i in retrieved], scores.tolist(), strict=True))
        # half the judged docs are retrieved (biased to the top), half are not
        top = rng.choice(depth, size=judged - judged // 2, replace=False, p=bias)
        jd = [pool[i] for i in retrieved[top]] + [pool[i] for i in docs[depth:]]
        grades = rng.choice(4, size=len(jd), p=[0.5, 0.25, 0.15, 0.1])
        qrels[qid] = dict(zip(jd, grades.tolist(), strict=True))
    return qrels, run


def _top_bias(depth: int) -> np.ndarray[Any, np.dtype[np.float64]]:
    w = 1.0 / np.sqrt(np.arange(1, depth + 1, dtype=np.float64))
    return np.asarray(w / w.sum(), dtype=np.float64)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def run_ours(qrels: Any, run: Any) -> Any:
    return evaluate(qrels, run, OURS, trec_compat=True)


def run_pytrec(qrels: Any, run: Any) -> Any:
    import pytrec_eval

    return pytrec_eval.RelevanceEvaluator(qrels, TREC).evaluate(run)


def run_ranx(qrels: Any, run: Any) -> Any:
    from ranx import Qrels, Run
    from ranx import evaluate as ranx_evaluate

    return ranx_evaluate(Qrels(qrels), Run(run), RANX, return_mean=False, make_comparable=True)


def max_diff(ours: dict[str, dict[str, float]], other: Callable[[str, str], float]) -> float:
    worst = 0.0
    for qid, row in ours.items():
        for m, v in row.items():
            worst = max(worst, abs(v - other(qid, m)))
    return worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--depth", type=int, default=1_000)
    ap.add_argument("--judged", type=int, default=50, help="judged documents per query")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--skip-ranx", action="store_true")
    ap.add_argument(
        "--numba-cache-dir",
        help="reuse this numba cache for ranx (default: a fresh temporary directory, truly cold)",
    )
    args = ap.parse_args(argv)
    # must be set before numba is imported (by ranx)
    os.environ["NUMBA_CACHE_DIR"] = args.numba_cache_dir or tempfile.mkdtemp(prefix="numba-")
    import pytrec_eval  # noqa: F401  (imports are not timed)

    if not args.skip_ranx:
        import ranx  # noqa: F401

    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(
        f"machine: {_cpu_model()}, {os.cpu_count()} cpus, "
        f"Python {platform.python_version()}, numpy {np.__version__}"
    )
    print(f"input: {args.queries} queries x {args.depth} results, {args.judged} judged/query")
    t, (qrels, run) = timed(lambda: make_input(args.queries, args.depth, args.judged, args.seed))
    print(f"  (generated in {t:.1f} s, not timed below)")
    print(f"measures: {', '.join(OURS)}")

    times: dict[str, float] = {}
    times["pytest-searcheval"], ours = timed(lambda: run_ours(qrels, run))
    times["pytest-searcheval (2nd call)"], _ = timed(lambda: run_ours(qrels, run))
    times["pytrec_eval"], trec = timed(lambda: run_pytrec(qrels, run))
    d = max_diff(ours, lambda q, m: trec[q][TREC_KEYS[m]])
    print(f"max |ours - pytrec_eval| over all queries and measures: {d:.3g}")
    if not d <= 1e-9:
        print("MISMATCH with pytrec_eval: timings are not comparable", file=sys.stderr)
        return 1
    if not args.skip_ranx:
        times["ranx (cold: first call, numba JIT)"], rx = timed(lambda: run_ranx(qrels, run))
        times["ranx (warm)"], rx = timed(lambda: run_ranx(qrels, run))
        d = max_diff(ours, lambda q, m: float(rx[RANX_KEYS[m]][list(ours).index(q)]))
        # ranx ranks ties in its own order, so it can differ from trec_eval on tied scores
        print(f"max |ours - ranx| over all queries and measures: {d:.3g}")

    base = times["pytest-searcheval"]
    print()
    print(f"{'tool':40} {'seconds':>9} {'x ours':>8}")
    for name, t in times.items():
        print(f"{name:40} {t:9.3f} {t / base:8.2f}")
    if not math.isfinite(base):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
