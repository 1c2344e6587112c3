"""Plugin overhead and warm end-to-end time of ``pytest --search-eval``.

    python benchmarks/bench_plugin.py [--queries 2000] [--shipped]

1. In-process: time of ``evaluate_query`` (search the cache-free instant target on every
   profile, score with metrics.evaluate, run the oracle, check expectations) per query.
2. Whole pytest runs in subprocesses on a generated collection of N queries with an instant
   target: ``pytest --search-eval`` versus a plain module of N parametrized no-op tests; the
   difference divided by N is the plugin's per-query-test overhead (collection, scoring, rows,
   report, gate included).
3. ``--shipped``: a warm ``pytest --search-eval`` of the collection at the repository root with
   the reference engine (run once first to fill the embedding cache), the whole evaluation
   (query tests, invariants, latency test, report), wall time, beside its peer, the engine's own
   warm run (``python -m pytest_searcheval.engine run --profile hybrid --split test``), the two
   alternated, as a ratio.
4. ``--floor``: what of the evaluation is the engine's own work. One evaluation records every
   search it sends over HTTP (a plugin wrapping ``HttpTarget.search``); this process then starts
   the engine as the default target does and sends the same searches in-process. Printed: the
   searches over HTTP, the same searches in-process, the engine's start, and the engine's own
   warm run, each as a ratio against that run. The invariants that change a catalog work on
   in-process clones in the evaluation too; their time there is added as measured. The floor
   leaves out imports, pytest's own work and the report: it is a lower bound.

Every figure is printed beside a peer measured in the same run (the in-process time against
the marginal cost of a plain no-op test). Prints measured numbers only; nothing is asserted.
Measured numbers (before and after the overhead work) are in docs/report.md, "Cost of the
plugin per query test": plugin overhead 0.453 ms per query test (was 1.910 ms on the same
benchmark).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ("lexical", "semantic", "hybrid", "hybrid_rerank")

# Precomputed answers that differ per query and profile, so the report's statistics (intervals,
# paired tests) work on real differences, as they would on a real system.
CONFTEST = """
import zlib

import pytest
from pytest_searcheval.targets import CallableTarget, Hit, SearchResponse

IDS = [f"d{i}" for i in range(40)]
RESPONSES = [
    SearchResponse(hits=tuple(Hit(d, float(20 - i)) for i, d in enumerate(IDS[o:o + 20])))
    for o in range(20)
]
OFFSET = {"lexical": 0, "semantic": 3, "hybrid": 1, "hybrid_rerank": 2}

def instant(query, *, profile, **kwargs):
    return RESPONSES[(zlib.crc32(query.encode()) + OFFSET[profile]) % 20]

@pytest.fixture(scope="session")
def searcheval_target():
    return CallableTarget(instant)
"""


def make_collection(root: Path, n_queries: int, n_docs: int = 200) -> None:
    (root / "corpus").mkdir(parents=True)
    (root / "qrels").mkdir()
    (root / "collection.yaml").write_text(
        "name: bench\nversion: 1\ngrades: [0, 1, 2, 3]\nsplits: [dev, test]\n"
        "classes: [paraphrase, no-result]\n"
    )
    with open(root / "corpus" / "docs.jsonl", "w") as f:
        for i in range(n_docs):
            f.write(json.dumps({"id": f"d{i}", "title": f"doc {i}", "text": f"text {i}"}) + "\n")
    with open(root / "qrels" / "queries.yaml", "w") as f:
        for i in range(n_queries):
            f.write(f"- id: q{i:05d}\n  text: query {i}\n  class: paraphrase\n  split: test\n")
    with open(root / "qrels" / "judgments.tsv", "w") as f:
        f.write("query_id\tdoc_id\tgrade\n")
        for i in range(n_queries):
            for j in range(5):
                f.write(f"q{i:05d}\td{(i + j * 7) % 40}\t{3 - j % 4}\n")


def in_process(root: Path, repeats: int) -> float:
    sys.path.insert(0, str(root))
    from pytest_searcheval.evaluation import evaluate_query
    from pytest_searcheval.plugin.state import EvalState
    from pytest_searcheval.settings import SearchEvalConfig
    from pytest_searcheval.targets import CallableTarget, Hit, SearchResponse

    response = SearchResponse(hits=tuple(Hit(f"d{i}", float(20 - i)) for i in range(20)))
    target = CallableTarget(lambda q, **kw: response)
    state = EvalState(cfg=SearchEvalConfig(enabled=True, collection=root))
    queries = state.selected_queries()
    per_query = []
    for _ in range(repeats):
        state.cache.clear()
        start = time.perf_counter()
        for q in queries:
            evaluate_query(state, target, q)
        per_query.append((time.perf_counter() - start) / len(queries))
    return min(per_query)


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, cpu: bool = True) -> float:
    """CPU seconds (user + system) of the child, or wall seconds with ``cpu=False``.

    CPU time is the default because the machine may be shared: wall time then measures the
    other processes as much as pytest."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu:
        elapsed = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1):
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout[-3000:]}")
    return elapsed


def timed_runs(n: int, repeats: int) -> tuple[float, float, float]:
    """(in-process seconds per query, plain pytest s, pytest --search-eval s) for n queries."""
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_collection(root, n)
        (root / "conftest.py").write_text(CONFTEST)
        (root / "pytest.ini").write_text(
            '[pytest]\naddopts = -p no:cacheprovider -p no:xdist -m "not searcheval_invariant"\n'
        )
        plain = root / "plain"
        plain.mkdir()
        (plain / "test_plain.py").write_text(
            f"import pytest\n@pytest.mark.parametrize('i', range({n}))\ndef test_x(i):\n    pass\n"
        )
        per = in_process(root, repeats)
        base = min(run([py, "-m", "pytest", "-q", "plain"], root) for _ in range(repeats))
        # Only the generated tests: without the path, the plain module would run here too.
        evals = min(
            run([py, "-m", "pytest", "-q", "--search-eval", "collection.yaml"], root)
            for _ in range(repeats)
        )
    return per, base, evals


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shipped", action="store_true")
    parser.add_argument("--floor", action="store_true")
    parser.add_argument("--skip-overhead", action="store_true")
    args = parser.parse_args()
    if not args.skip_overhead:
        overhead(args.queries, args.repeats)
    if args.shipped:
        shipped(args.repeats)
    if args.floor:
        floor(args.repeats)


def overhead(queries: int, repeats: int) -> None:
    small_n, large_n = max(1, queries // 4), queries
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    per, b1, e1 = timed_runs(small_n, repeats)
    _, b2, e2 = timed_runs(large_n, repeats)
    for n, b, e in ((small_n, b1, e1), (large_n, b2, e2)):
        print(
            f"{n:>6} queries: plain parametrized no-op tests {b:.2f} s, "
            f"pytest --search-eval (instant target) {e:.2f} s, ratio {e / b:.2f}x"
            f"  (CPU time, min of {repeats})"
        )
    plain_slope = (b2 - b1) / (large_n - small_n)
    eval_slope = (e2 - e1) / (large_n - small_n)
    print(
        f"evaluate_query in process ({len(PROFILES)} profiles, 20 results, oracle, "
        f"expectations, row): {per * 1e6:.0f} us per query, {per / plain_slope:.2f}x the "
        "marginal cost of a plain no-op test"
    )
    print(
        f"marginal cost per test: plain {plain_slope * 1e3:.3f} ms, query test "
        f"{eval_slope * 1e3:.3f} ms -> plugin overhead {(eval_slope - plain_slope) * 1e3:.3f} ms "
        "per query test"
    )
    fixed = (e1 - b1) - (eval_slope - plain_slope) * small_n
    print(f"fixed cost of the evaluation (collection load, report, plots, gate): {fixed:.2f} s")


ENGINE_RUN = [
    sys.executable, "-m", "pytest_searcheval.engine", "run", "--collection", ".",
    "--profile", "hybrid", "--split", "test", "--out", os.devnull,
]  # fmt: skip


def evaluation(report_dir: str, *extra: str) -> list[str]:
    """The whole warm evaluation of the shipped collection, as the README runs it."""
    # "=": a separate value that names an existing directory would steer pytest's rootdir.
    return [
        sys.executable, "-m", "pytest", "--search-eval", "collection.yaml", "-q",
        "-p", "no:cacheprovider", "-p", "no:xdist", f"--search-eval-report-dir={report_dir}",
        *extra,
    ]  # fmt: skip


# Loaded into one evaluation with -p: every search sent over HTTP, with its client-side time.
RECORDER = """
import json, os, time
from pytest_searcheval.targets import http

_search = http.HttpTarget.search
_log = open(os.environ["SEARCHEVAL_BENCH_LOG"], "w")

def search(self, query, *, profile, limit=20, filters=None, extract=True):
    start = time.perf_counter()
    try:
        return _search(self, query, profile=profile, limit=limit, filters=filters, extract=extract)
    finally:
        row = dict(query=query, profile=profile, limit=limit, filters=dict(filters or {}),
                   extract=extract, seconds=time.perf_counter() - start)
        _log.write(json.dumps(row) + "\\n")
        _log.flush()

http.HttpTarget.search = search

def pytest_unconfigure(config):
    phases = config.pluginmanager.get_plugin("searcheval-phases")
    if phases is not None:
        with open(os.environ["SEARCHEVAL_BENCH_LOG"] + ".phases", "w") as out:
            json.dump(phases.seconds, out)
"""

#: Invariants that change a catalog: they work on in-process clones of the engine in the
#: evaluation too (their time there is engine work, not HTTP), and send no search over HTTP.
IN_PROCESS_PHASES = (
    "invariant deletion-isolation",
    "invariant duplicate-resistance",
    "invariant filter-conformance",
    "invariant known-item-stability",
)


def floor(repeats: int) -> None:
    import gc

    from pytest_searcheval.collection import load
    from pytest_searcheval.engine.core import Engine

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "searcheval_bench_recorder.py").write_text(RECORDER)
        log = Path(tmp) / "searches.jsonl"
        env = dict(os.environ, SEARCHEVAL_BENCH_LOG=str(log))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [tmp, env.get("PYTHONPATH")]))
        cmd = evaluation(str(Path(tmp) / "report"), "-p", "searcheval_bench_recorder")
        evaluated = run(cmd, ROOT, env, cpu=False)
        rows = [json.loads(line) for line in log.read_text().splitlines()]
        phases = json.loads(Path(str(log) + ".phases").read_text())
    clones = sum(phases.get(name, 0.0) for name in IN_PROCESS_PHASES)
    peer = [run(ENGINE_RUN, ROOT, dict(os.environ), cpu=False) for _ in range(repeats)]
    over_http = sum(r["seconds"] for r in rows)
    start = time.perf_counter()
    engine = Engine.start(load(str(ROOT)))
    started = time.perf_counter() - start
    gc.collect()
    gc.freeze()  # as the default target does once the engine is up
    try:
        replays = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for r in rows:
                engine.search(
                    r["query"],
                    profile=r["profile"],
                    limit=r["limit"],
                    filters=r["filters"] or None,
                    extract=r["extract"],
                )
            replays.append(time.perf_counter() - t0)
    finally:
        engine.close()
        gc.unfreeze()
    own = statistics.median(peer)
    in_process = min(replays)
    print(f"load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"the engine's own warm run: median {own:.2f} s of {repeats} (the peer: 1.00x)")
    print(f"the evaluation (recording its searches): {evaluated:.2f} s, {evaluated / own:.2f}x")
    print(
        f"its {len(rows)} searches over HTTP: {over_http:.2f} s, {over_http / own:.2f}x; the same "
        f"searches in-process: {in_process:.2f} s (best of {repeats}), {in_process / own:.2f}x"
    )
    print(f"the engine's start in-process (what the evaluation's fixture does): {started:.2f} s")
    print(
        f"the invariants on in-process clones (deletion isolation, duplicate resistance, "
        f"filter conformance, known items across a re-index), as timed in the evaluation: "
        f"{clones:.2f} s"
    )
    least = started + in_process + clones
    print(
        f"floor, start + those searches in-process + the clone invariants: {least:.2f} s, "
        f"{least / own:.2f}x the engine's own run (imports, pytest and the report not counted)"
    )


def shipped(repeats: int) -> None:
    env = dict(os.environ)
    cmd = evaluation(str(Path(tempfile.gettempdir()) / "searcheval-bench-report"))
    engine = ENGINE_RUN
    first = run(cmd, ROOT, env, cpu=False)
    warm: list[float] = []
    peer: list[float] = []
    for _ in range(repeats):  # alternated, so both see the same minutes of the machine
        peer.append(run(engine, ROOT, env, cpu=False))
        warm.append(run(cmd, ROOT, env, cpu=False))
    print(f"load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"shipped collection, first run (fills the embedding cache): {first:.1f} s")
    print(
        f"shipped collection, warm run: median {statistics.median(warm):.1f} s; the engine's own"
        f" run: median {statistics.median(peer):.1f} s; ratio"
        f" {statistics.median(warm) / statistics.median(peer):.2f}x ({repeats} of each,"
        " alternated, wall time)"
    )


if __name__ == "__main__":
    main()
