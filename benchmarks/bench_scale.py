"""The plugin at the scale users have, beside its peers on the same files, in one run.

    nice -n 10 python benchmarks/bench_scale.py                     # every shape, full size
    python benchmarks/bench_scale.py --queries 500 --only trec      # a quick look

Shapes, generated from ``--seed`` into a temporary directory (removed at the end; ``--keep DIR``
writes there instead and keeps it):

* ``trec``: ``--queries`` (5,000) queries, ``--judged`` (12) judgments each with grades 0-2, two
  run files of ``--depth`` (1,000) results per query (ties in score included, so trec_eval's
  docid-descending tie order matters);
* ``msmarco``: the MS MARCO dev shape, 6,980 queries x 1,000 results, one run, about one
  relevant passage per query (grade 1);
* ``beir``: a BEIR-shaped collection of ``--beir-docs`` (1 M) short documents and 1,000 queries,
  evaluated through a callable target (a conftest fixture) that answers 100 ids per query.

Every child runs with bytecode cached (as an installed package has it; one untimed
``--collect-only`` run warms pytest's rewritten modules) and, unless ``--autoload``, with
pytest's plugin autoload off and the plugin loaded by ``-p pytest_searcheval.plugin``, so
the plugins other packages of the environment install are not timed.
Each tool runs in its own child process; its wall time (spawn to exit) and peak RSS
(``ru_maxrss`` of that child from ``os.wait4``) are printed, with the ratio to pytrec_eval's.
The plugin is ``pytest --search-eval --search-eval-qrels=... --search-eval-topics=...
--search-eval-run=a.run,b.run --search-eval-gated-profile=b --search-eval-trec-compat`` with the
same six measures as the peers; end to end, pytest's start to the report written. Peers:
pytrec_eval (both runs parsed in Python, then ``RelevanceEvaluator.evaluate``), ranx
(``Qrels.from_file`` / ``Run.from_file`` + ``evaluate``), ir_measures (``read_trec_run`` +
``iter_calc``) when it is installed. ``--rounds`` repeats every tool, alternated; medians are
printed. The plugin's per-query values are compared with pytrec_eval's (printed: the largest
difference; the benchmark exits 1 on any difference above 1e-9).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

# Our names -> pytrec_eval's, ranx's, ir_measures'.
MEASURES = {
    "nDCG@10": ("ndcg_cut_10", "ndcg@10", "nDCG@10"),
    "P@5": ("P_5", "precision@5", "P@5"),
    "R@20": ("recall_20", "recall@20", "R@20"),
    "RR": ("recip_rank", "mrr", "RR"),
    "AP": ("map", "map", "AP"),
    "bpref": ("bpref", "bpref", "Bpref"),
}
PYTREC_SET = {"ndcg_cut.10", "P.5", "recall.20", "recip_rank", "map", "bpref"}


# --- data --------------------------------------------------------------------------------------


def write_trec(
    root: Path,
    *,
    queries: int,
    judged: int,
    depth: int,
    runs: Sequence[str],
    seed: int,
    pool: int,
    grades: Sequence[int] = (0, 1, 2),
) -> dict[str, Any]:
    """qrels.txt, topics.tsv and one run file per name under ``root``."""
    rng = np.random.default_rng(seed)
    qids = [str(1000 + i) for i in range(queries)]
    with open(root / "topics.tsv", "w") as fh:
        fh.writelines(f"{q}\tquery {q} words {i % 97}\n" for i, q in enumerate(qids))
    judged_docs = rng.integers(0, pool, size=(queries, judged))
    grade = rng.choice(np.asarray(grades), size=(queries, judged))
    with open(root / "qrels.txt", "w") as fh:
        for i, q in enumerate(qids):
            seen: set[int] = set()
            for d, g in zip(judged_docs[i].tolist(), grade[i].tolist(), strict=True):
                if d not in seen:
                    seen.add(d)
                    fh.write(f"{q} 0 D{d} {g}\n")
    sizes = {}
    for r, name in enumerate(runs):
        path = root / f"{name}.run"
        with open(path, "w") as fh:
            for i, q in enumerate(qids):
                docs = rng.choice(pool, size=depth + judged, replace=False)
                # A share of the judged documents enters the ranking at random depths.
                hit = judged_docs[i][rng.random(judged) < 0.4 + 0.2 * r]
                # A document judged twice for a query (drawn twice) enters the ranking once.
                hit = hit[np.sort(np.unique(hit, return_index=True)[1])]
                docs = np.concatenate([hit, docs[~np.isin(docs, hit)]])[:depth]
                rng.shuffle(docs[: min(depth, 50)])
                # Two decimals: ties in score, resolved by trec_eval's docid order.
                scores = np.round(np.sort(rng.random(depth) * 20)[::-1], 2)
                fh.write(
                    "".join(
                        f"{q} Q0 D{d} {k} {s} {name}\n"
                        for k, (d, s) in enumerate(
                            zip(docs.tolist(), scores.tolist(), strict=True), start=1
                        )
                    )
                )
        sizes[name] = path.stat().st_size
    return {"queries": queries, "depth": depth, "runs": list(runs), "bytes": sizes}


BEIR_CONFTEST = """
import zlib

import pytest
from pytest_searcheval.targets import CallableTarget

DOCS = {docs}
DEPTH = 100


def answer(query, *, profile, limit, **kwargs):
    start = zlib.crc32(query.encode()) % DOCS
    return [(f"c{{(start + 7919 * k) % DOCS}}", float(DEPTH - k)) for k in range(DEPTH)]


@pytest.fixture(scope="session")
def searcheval_target():
    return CallableTarget(answer, profiles=["dense"])
"""


def write_beir(root: Path, *, docs: int, queries: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    coll = root / "beir"
    (coll / "qrels").mkdir(parents=True)
    words = np.array(
        [
            "river",
            "stone",
            "market",
            "light",
            "paper",
            "engine",
            "garden",
            "winter",
            "signal",
            "harbor",
        ]
    )
    with open(coll / "corpus.jsonl", "w") as fh:
        for start in range(0, docs, 100_000):
            n = min(100_000, docs - start)
            picks = rng.integers(0, len(words), size=(n, 12))
            fh.writelines(
                json.dumps({"_id": f"c{start + i}", "title": f"title {start + i}",
                            "text": " ".join(words[picks[i]].tolist())}) + "\n"
                for i in range(n)
            )  # fmt: skip
    with open(coll / "queries.jsonl", "w") as fh:
        fh.writelines(
            json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n" for i in range(queries)
        )
    with open(coll / "qrels" / "test.tsv", "w") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for i in range(queries):
            for d in rng.integers(0, docs, size=3).tolist():
                fh.write(f"q{i}\tc{d}\t{int(rng.integers(1, 3))}\n")
    (coll / "conftest.py").write_text(BEIR_CONFTEST.format(docs=docs))
    return {"docs": docs, "queries": queries, "bytes": (coll / "corpus.jsonl").stat().st_size}


# --- the tools ---------------------------------------------------------------------------------

PYTREC = f"""
import json, sys, pytrec_eval
qrels_path, out, *runs = sys.argv[1:]
qrels = {{}}
with open(qrels_path) as fh:
    for line in fh:
        q, _, d, g = line.split()
        qrels.setdefault(q, {{}})[d] = int(g)
evaluator = pytrec_eval.RelevanceEvaluator(qrels, {PYTREC_SET!r})
result = {{}}
for path in runs:
    run = {{}}
    with open(path) as fh:
        for line in fh:
            q, _, d, _, s, _ = line.split()
            run.setdefault(q, {{}})[d] = float(s)
    for q in qrels:  # trec_eval -c: a judged query without results counts with 0
        run.setdefault(q, {{}})
    result[path] = evaluator.evaluate(run)
json.dump(result, open(out, "w"))
"""

RANX = f"""
import sys
from ranx import Qrels, Run, evaluate
qrels_path, out, *runs = sys.argv[1:]
qrels = Qrels.from_file(qrels_path, kind="trec")
for path in runs:
    run = Run.from_file(path, kind="trec")
    evaluate(qrels, run, {[m[1] for m in MEASURES.values()]!r})
"""

IR_MEASURES = f"""
import sys
import ir_measures
qrels_path, out, *runs = sys.argv[1:]
measures = [ir_measures.parse_measure(m) for m in {[m[2] for m in MEASURES.values()]!r}]
for path in runs:
    qrels = ir_measures.read_trec_qrels(qrels_path)
    run = ir_measures.read_trec_run(path)
    for _ in ir_measures.iter_calc(measures, qrels, run):
        pass
"""


def measure(
    cmd: list[str], cwd: Path, env: dict[str, str] | None = None
) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in MB and the tail of the output of one child process."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        tail = log.read()[-4000:]
    return wall, usage.ru_maxrss / 1024.0, tail if proc.returncode not in (0, 1) else ""


def child_env(autoload: bool) -> dict[str, str]:
    """The children's environment: this tree first on the path, bytecode cached as an
    installed package has it (PYTHONDONTWRITEBYTECODE dropped), and, unless ``autoload``,
    pytest without the plugins other packages of this environment register (hypothesis,
    pytest-benchmark, ...: about 2 s of imports at every start that no user of this plugin
    needs); the plugin then loads with ``-p``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def plugin_cmd(root: Path, runs: Sequence[str], extra: Sequence[str]) -> list[str]:
    return [
        sys.executable, "-m", "pytest", "-q", "-p", "pytest_searcheval.plugin",
        "-p", "no:cacheprovider", "--search-eval",
        f"--search-eval-qrels={root / 'qrels.txt'}", f"--search-eval-topics={root / 'topics.tsv'}",
        "--search-eval-run=" + ",".join(str(root / f"{r}.run") for r in runs),
        f"--search-eval-gated-profile={runs[-1]}", "--search-eval-trec-compat",
        "--search-eval-measures=" + ",".join(MEASURES),
        f"--search-eval-report-dir={root / 'report'}", "--search-eval-history=off",
        *extra,
    ]  # fmt: skip


def peers() -> dict[str, str]:
    out = {"pytrec_eval": PYTREC, "ranx": RANX}
    try:
        import ir_measures  # noqa: F401
    except ImportError:
        pass
    else:
        out["ir_measures"] = IR_MEASURES
    return out


def compare(report: dict[str, Any], peer: dict[str, Any], root: Path, runs: Sequence[str]) -> float:
    """The largest |plugin - pytrec_eval| over every query, measure and run."""
    worst = 0.0
    for name in runs:
        theirs = peer[str(root / f"{name}.run")]
        for qid, values in theirs.items():
            ours = report["queries"][qid]["profiles"][name]["measures"]
            for m, (t, _, _) in MEASURES.items():
                worst = max(worst, abs(ours.get(m, 0.0) - values[t]))
    return worst


def run_shape(
    label: str,
    root: Path,
    runs: Sequence[str],
    rounds: int,
    extra: Sequence[str],
    env: dict[str, str],
    only_peers: Sequence[str] | None = None,
) -> dict[str, Any]:
    tools = {k: v for k, v in peers().items() if only_peers is None or k in only_peers}
    tools.setdefault("pytrec_eval", PYTREC)  # the reference of every ratio
    times: dict[str, list[float]] = {"plugin": [], **{t: [] for t in tools}}
    rss: dict[str, list[float]] = {k: [] for k in times}
    run_paths = [str(root / f"{r}.run") for r in runs]
    peer_out = root / "pytrec.json"
    # Warm the bytecode caches (pytest's rewritten modules included), untimed.
    measure([*plugin_cmd(root, runs, extra), "--collect-only"], root, env)
    for _ in range(rounds):
        for tool in times:
            if tool == "plugin":
                cmd = plugin_cmd(root, runs, extra)
            else:
                cmd = [sys.executable, "-c", tools[tool], str(root / "qrels.txt"), str(peer_out),
                       *run_paths]  # fmt: skip
            wall, peak, failure = measure(cmd, root, env)
            if failure:
                print(f"{label}: {tool} failed:\n{failure}", file=sys.stderr)
                sys.exit(2)
            times[tool].append(wall)
            rss[tool].append(peak)
            print(f"  {label} {tool}: {wall:.1f} s, {peak:.0f} MB", flush=True)
    report = json.loads((root / "report" / "report.json").read_text())
    sizes = {n: (root / "report" / n).stat().st_size for n in ("report.json", "report.html")}
    diff = compare(report, json.loads(peer_out.read_text()), root, runs)
    return {"times": times, "rss": rss, "sizes": sizes, "max_diff": diff}


def run_beir(root: Path, rounds: int, env: dict[str, str]) -> dict[str, Any]:
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-p", "pytest_searcheval.plugin",
        "-p", "no:cacheprovider", "--search-eval",
        f"--search-eval-collection={root / 'beir'}", "--search-eval-target=auto",
        f"--search-eval-report-dir={root / 'beir-report'}", "--search-eval-history=off",
        "--search-eval-split=test",
    ]  # fmt: skip
    out: dict[str, list[float]] = {"wall": [], "rss": []}
    for _ in range(rounds):
        wall, peak, failure = measure(cmd, root / "beir", env)
        if failure:
            print(f"beir: the plugin failed:\n{failure}", file=sys.stderr)
            sys.exit(2)
        out["wall"].append(wall)
        out["rss"].append(peak)
        print(f"  beir plugin: {wall:.1f} s, {peak:.0f} MB", flush=True)
    return out


def med(values: Sequence[float]) -> float:
    return statistics.median(values)


def table(label: str, shape: dict[str, Any], result: dict[str, Any]) -> list[str]:
    t, r = result["times"], result["rss"]
    ref_t, ref_r = med(t["pytrec_eval"]), med(r["pytrec_eval"])
    lines = [
        f"{label}: {shape['queries']:,} queries x {shape['depth']:,} results x "
        f"{len(shape['runs'])} run(s), {sum(shape['bytes'].values()) / 1e6:.0f} MB of run files",
        "| tool | wall (median) | peak RSS (median) | wall / pytrec_eval | RSS / pytrec_eval |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for tool in t:
        lines.append(
            f"| {tool} | {med(t[tool]):.1f} s | {med(r[tool]):.0f} MB | "
            f"{med(t[tool]) / ref_t:.2f}x | {med(r[tool]) / ref_r:.2f}x |"
        )
    js, hs = result["sizes"]["report.json"], result["sizes"]["report.html"]
    lines.append(
        f"report.json {js / 1e6:.2f} MB, report.html {hs / 1e6:.2f} MB; "
        f"largest per-query difference from pytrec_eval: {result['max_diff']:.3g}"
    )
    met = [
        ("wall <= pytrec_eval", med(t["plugin"]) <= ref_t),
        ("peak RSS <= 1.5x pytrec_eval", med(r["plugin"]) <= 1.5 * ref_r),
        ("report.json <= 15 MB", js <= 15e6),
        ("report.html <= 5 MB", hs <= 5e6),
        ("values equal pytrec_eval", result["max_diff"] <= 1e-9),
    ]
    lines.append("targets: " + "; ".join(f"{n}: {'met' if ok else 'NOT met'}" for n, ok in met))
    return lines


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} (5 min {five:.1f})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--depth", type=int, default=1000)
    ap.add_argument("--judged", type=int, default=12)
    ap.add_argument("--msmarco-queries", type=int, default=6980)
    ap.add_argument("--beir-docs", type=int, default=1_000_000)
    ap.add_argument("--beir-queries", type=int, default=1000)
    ap.add_argument("--only", choices=("trec", "msmarco", "beir"), action="append")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--keep", type=Path, help="write the data here and keep it")
    ap.add_argument(
        "--peers",
        help="comma-separated peers to run (pytrec_eval always runs: the ratios' reference); "
        "ranx needs about 0.44 GB per 1,000 queries x 1,000 x 2 runs",
    )
    ap.add_argument(
        "--autoload",
        action="store_true",
        help="let pytest load every plugin installed in this environment (default: this one)",
    )
    ap.add_argument("plugin_args", nargs="*", help="extra pytest arguments for the plugin runs")
    args = ap.parse_args(argv)
    shapes = args.only or ["trec", "msmarco", "beir"]
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"bench_scale {dt.date.today().isoformat()} {dt.datetime.now(dt.UTC):%H:%M} UTC, "
          f"{os.cpu_count()} cpus, {load()}, seed {args.seed}, data in {root}, "
          f"pytest plugins: {'all installed' if args.autoload else 'pytest-searcheval only'}, "
          "bytecode cached")  # fmt: skip
    env = child_env(args.autoload)
    out: list[str] = []
    failed = False
    try:
        for shape in shapes:
            if shape == "beir":
                t0 = time.perf_counter()
                info = write_beir(root, docs=args.beir_docs, queries=args.beir_queries,
                                  seed=args.seed)  # fmt: skip
                print(f"  generated beir in {time.perf_counter() - t0:.0f} s", flush=True)
                res = run_beir(root, args.rounds, env)
                out += [
                    f"beir: {info['docs']:,} documents ({info['bytes'] / 1e6:.0f} MB corpus.jsonl)"
                    f", {info['queries']:,} queries, callable target, 100 results per query",
                    f"| plugin | {med(res['wall']):.1f} s | {med(res['rss']):.0f} MB |",
                ]
                continue
            sub = root / shape
            sub.mkdir(exist_ok=True)
            t0 = time.perf_counter()
            if shape == "trec":
                info = write_trec(sub, queries=args.queries, judged=args.judged, depth=args.depth,
                                  runs=("a", "b"), seed=args.seed, pool=1_000_000)  # fmt: skip
            else:
                # MS MARCO passage: 8,841,823 passages, about one relevant passage per query.
                info = write_trec(sub, queries=args.msmarco_queries, judged=1, depth=args.depth,
                                  runs=("dev",), seed=args.seed, pool=8_841_823,
                                  grades=(1,))  # fmt: skip
            print(f"  generated {shape} in {time.perf_counter() - t0:.0f} s", flush=True)
            res = run_shape(
                shape,
                sub,
                info["runs"],
                args.rounds,
                args.plugin_args,
                env,
                args.peers.split(",") if args.peers else None,
            )
            failed |= res["max_diff"] > 1e-9
            out += table(shape, info, res)
            shutil.rmtree(sub)  # the next shape's disk space
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\nbench_scale {dt.date.today().isoformat()}, {load()}, {args.rounds} round(s)")
    print("\n".join(out))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
