"""The engine's ``lexical`` profile side by side with standard BM25 implementations from PyPI.

Issue 4 point 4 asks that the lexical profile land where standard toolkits' BM25 lands on the
same collection. No classic test collection is reachable offline, so this compares on the
collections we have, in a separate virtualenv so the peers never enter /work/venv::

    python3 -m venv /work/venv-peers
    /work/venv-peers/bin/pip install torch==2.13.0 -e /work/main
    /work/venv-peers/bin/pip install bm25s==0.3.16 PyStemmer==3.1.0 rank-bm25==0.2.2 pyserini==1.6.0
    JAVA_HOME=/usr/lib/jvm/temurin-25-jdk-amd64 \\
        /work/venv-peers/bin/python benchmarks/compare_bm25.py [--collection PATH] [--synthetic]

pyserini 1.6.0 ships the Anserini 1.7.1 fat jar, compiled for Java 21 (class file version 65):
JAVA_HOME must point at a JDK >= 21 (Java 17 fails to load it; the script then skips pyserini).

Every system sees the same text per document: ``title + "\\n" + text`` (the collection's
generic fields; no tags, provider, URL or tool fields, no x402 record). The engine's own
default ``lexical`` profile indexes more fields (title, text, meta, url, tool) with weights, so
it is also run (a) on the fields title and text only, weight 1.0 each, one ``b`` for both
(still BM25F: per-field length normalisation), and (b) on a copy of the collection whose
documents are reduced to one field ``text = title + "\\n" + text`` with ``weights={"text": 1}``,
which is single-field BM25 over exactly the peers' text. Engine runs are unfiltered and uncut:
``extract=False``, no filters, ``apply_threshold=False`` (as construction/judging/pool.py pools it).

Peers (each skipped with a message when not installed):

- ``bm25s`` (pure numpy/scipy): variants ``lucene``, ``robertson``, ``atire``; its own tokenizer
  (``stopwords="en"``, PyStemmer English Snowball stemmer), and once with the engine's analyzer
  (``engine.index.analyze``: Lucene stop set + query fillers, Porter) to separate the scoring
  function from the analyzer.
- ``rank_bm25`` ``BM25Okapi`` (idf ``ln((N - df + 0.5) / (df + 0.5))`` floored at
  ``epsilon * mean idf``), with the engine's analyzer.
- ``pyserini`` (Anserini/Lucene BM25): indexed with ``python -m pyserini.index.lucene``
  (JsonCollection, DefaultLuceneDocumentGenerator), searched with ``LuceneSearcher`` at
  k1=0.9 b=0.4 (Anserini's default) and k1=1.2 b=0.75; once with Anserini's default analyzer
  over the raw text, once pretokenized with the engine's analyzer.

Queries: every query with at least one judgment of grade >= 2 (all splits). Measures:
nDCG@10, R@20, RR at relevance level 2 (``metrics.evaluate``, ``trec_compat=False``); p is the
two-sided paired randomization test (``stats.paired_randomization_test``, 10,000 sign flips)
of the default engine profile against each system, per query nDCG@10.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_searcheval import metrics, stats
from pytest_searcheval.collection import load
from pytest_searcheval.collection.model import Collection
from pytest_searcheval.engine import index
from pytest_searcheval.engine.bm25 import BM25FParams
from pytest_searcheval.engine.core import Engine, EngineSettings

ROOT = Path(__file__).resolve().parents[1]
MEASURES = ("nDCG@10", "R@20", "RR")
Run = dict[str, list[str]]


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _ranked(ids: Sequence[str], scores: Sequence[float], depth: int) -> list[str]:
    """Ids by score descending, ties by id; documents with no positive score are not retrieved
    (the engine returns only documents that match a query term)."""
    pairs = sorted(
        ((float(s), d) for d, s in zip(ids, scores, strict=True) if s > 0),
        key=lambda p: (-p[0], p[1]),
    )
    return [d for _, d in pairs[:depth]]


# --- the engine -------------------------------------------------------------------------------


def single_field(collection: Collection) -> Collection:
    """The collection with each document reduced to one field, ``text = title + "\\n" + text``
    (empty title, no free fields, no x402 record): the exact text the peers index."""
    documents = {
        d.id: dataclasses.replace(d, title="", text=f"{d.title}\n{d.text}", fields={}, x402=None)
        for d in collection.documents.values()
    }
    return dataclasses.replace(collection, documents=documents)


def engine_runs(collection: Collection, queries: Mapping[str, str], depth: int) -> dict[str, Run]:
    two = {"title": 1.0, "text": 1.0}
    one = single_field(collection)
    configs: dict[str, tuple[Collection, BM25FParams]] = {
        "engine lexical (default BM25F, 5 fields)": (collection, BM25FParams()),
        "engine title+text w=1, k1=1.2 b=0.75": (
            collection,
            BM25FParams(k1=1.2, weights=two, b={"title": 0.75, "text": 0.75}),
        ),
        "engine title+text w=1, k1=0.9 b=0.4": (
            collection,
            BM25FParams(k1=0.9, weights=two, b={"title": 0.4, "text": 0.4}),
        ),
        "engine one field (title+text), k1=1.2 b=0.75": (
            one,
            BM25FParams(k1=1.2, weights={"text": 1.0}, b={"text": 0.75}),
        ),
        "engine one field (title+text), k1=0.9 b=0.4": (
            one,
            BM25FParams(k1=0.9, weights={"text": 1.0}, b={"text": 0.4}),
        ),
    }
    runs: dict[str, Run] = {}
    for name, (coll, params) in configs.items():
        settings = EngineSettings(bm25=params, no_result={})
        with Engine.start(coll, settings=settings) as engine:
            run: Run = {}
            for qid, text in queries.items():
                body = engine.search(
                    text,
                    profile="lexical",
                    limit=depth,
                    filters=None,
                    extract=False,
                    apply_threshold=False,
                )
                run[qid] = [r["id"] for r in body["results"]]
        runs[name] = run
    return runs


# --- peers ------------------------------------------------------------------------------------


def bm25s_runs(
    ids: Sequence[str], texts: Sequence[str], queries: Mapping[str, str], depth: int
) -> dict[str, Run]:
    try:
        import bm25s
        import Stemmer
    except ImportError as exc:
        print(f"bm25s skipped: {exc}", file=sys.stderr)
        return {}
    stemmer = Stemmer.Stemmer("english")
    qids = list(queries)
    out: dict[str, Run] = {}

    def own(texts_: Sequence[str]) -> list[list[str]]:
        tokens: list[list[str]] = bm25s.tokenize(
            list(texts_), stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
        )
        return tokens

    def ours(texts_: Sequence[str]) -> list[list[str]]:
        return [index.analyze(t) for t in texts_]

    variants: list[tuple[str, str, float, float, Callable[[Sequence[str]], list[list[str]]]]] = [
        ("bm25s lucene k1=1.2 b=0.75", "lucene", 1.2, 0.75, own),
        ("bm25s lucene k1=0.9 b=0.4", "lucene", 0.9, 0.4, own),
        ("bm25s robertson k1=1.2 b=0.75", "robertson", 1.2, 0.75, own),
        ("bm25s atire k1=1.2 b=0.75", "atire", 1.2, 0.75, own),
        ("bm25s lucene k1=1.2 b=0.75, engine analyzer", "lucene", 1.2, 0.75, ours),
        ("bm25s lucene k1=0.9 b=0.4, engine analyzer", "lucene", 0.9, 0.4, ours),
    ]
    for name, method, k1, b, tok in variants:
        retriever = bm25s.BM25(method=method, k1=k1, b=b)
        retriever.index(tok(texts), show_progress=False)
        run: Run = {}
        for qid in qids:
            # bm25s scores only terms of its vocabulary; an unknown term matches nothing anyway
            terms = [t for t in tok([queries[qid]])[0] if t in retriever.vocab_dict]
            scores = retriever.get_scores(terms) if terms else [0.0] * len(ids)
            run[qid] = _ranked(ids, scores, depth)
        out[name] = run
    return out


def rank_bm25_runs(
    ids: Sequence[str], texts: Sequence[str], queries: Mapping[str, str], depth: int
) -> dict[str, Run]:
    try:
        from rank_bm25 import BM25Okapi
    except ImportError as exc:
        print(f"rank_bm25 skipped: {exc}", file=sys.stderr)
        return {}
    model = BM25Okapi([index.analyze(t) for t in texts], k1=1.2, b=0.75)
    run: Run = {}
    for qid, text in queries.items():
        terms = index.analyze(text)
        scores = model.get_scores(terms) if terms else [0.0] * len(ids)
        run[qid] = _ranked(ids, scores, depth)
    return {"rank_bm25 Okapi k1=1.2 b=0.75, engine analyzer": run}


def pyserini_runs(
    ids: Sequence[str], texts: Sequence[str], queries: Mapping[str, str], depth: int
) -> dict[str, Run]:
    # pyserini 1.6 builds an OpenAI client when pyserini.encode is imported (pulled in by
    # pyserini.search) and fails without a key; nothing here calls OpenAI, so a placeholder will do.
    os.environ.setdefault("OPENAI_API_KEY", "unused-placeholder")
    try:
        from pyserini.search.lucene import LuceneSearcher
    except Exception as exc:  # a missing or too old JVM raises more than ImportError
        print(f"pyserini skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
        return {}
    from pyserini.analysis import get_lucene_analyzer

    out: dict[str, Run] = {}
    # "": Anserini's default analyzer (Lucene EnglishAnalyzer: Porter, Lucene stop set) over the
    # raw text; "engine analyzer": the engine's terms, pretokenized, searched with stemming and
    # stopping off, which isolates Lucene's scoring (including its lossy one-byte length norms).
    for label, analyzed in (("", False), (", engine analyzer", True)):
        with tempfile.TemporaryDirectory(prefix="compare-bm25-") as tmp:
            docs_dir = Path(tmp) / "docs"
            docs_dir.mkdir()
            with (docs_dir / "docs.jsonl").open("w", encoding="utf-8") as fh:
                for doc_id, text in zip(ids, texts, strict=True):
                    contents = " ".join(index.analyze(text)) if analyzed else text
                    fh.write(json.dumps({"id": doc_id, "contents": contents}) + "\n")
            index_dir = Path(tmp) / "index"
            subprocess.run(
                [
                    sys.executable, "-m", "pyserini.index.lucene",
                    "--collection", "JsonCollection", "--input", str(docs_dir),
                    "--index", str(index_dir), "--generator", "DefaultLuceneDocumentGenerator",
                    "--threads", "1", *(["--pretokenized"] if analyzed else []),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )  # fmt: skip
            searcher = LuceneSearcher(str(index_dir))
            if analyzed:
                searcher.set_analyzer(get_lucene_analyzer(stemming=False, stopwords=False))
            for k1, b in ((0.9, 0.4), (1.2, 0.75)):
                searcher.set_bm25(k1, b)
                run: Run = {}
                for qid, text in queries.items():
                    q = " ".join(index.analyze(text)) if analyzed else text
                    hits = searcher.search(q, k=depth) if q.strip() else []
                    pairs = sorted(((h.score, h.docid) for h in hits), key=lambda p: (-p[0], p[1]))
                    run[qid] = [d for _, d in pairs]
                out[f"pyserini Lucene k1={k1} b={b}{label}"] = run
    return out


# --- report -----------------------------------------------------------------------------------


def compare(collection: Collection, depth: int, permutations: int) -> dict[str, Any]:
    qrels = {
        qid: dict(j)
        for qid, j in sorted(collection.judgments.items())
        if qid in collection.queries and any(g >= 2 for g in j.values())
    }
    queries = {qid: collection.queries[qid].text for qid in qrels}
    ids = sorted(collection.documents)
    texts = [f"{collection.documents[d].title}\n{collection.documents[d].text}" for d in ids]
    runs = engine_runs(collection, queries, depth)
    runs.update(pyserini_runs(ids, texts, queries, depth))
    runs.update(bm25s_runs(ids, texts, queries, depth))
    runs.update(rank_bm25_runs(ids, texts, queries, depth))
    per_system = {
        name: metrics.evaluate(qrels, run, MEASURES, relevance_level=2, trec_compat=False)
        for name, run in runs.items()
    }
    reference = next(iter(per_system))
    qids = list(qrels)
    rows = []
    for name, per_query in per_system.items():
        means = {m: sum(per_query[q][m] for q in qids) / len(qids) for m in MEASURES}
        p = (
            None
            if name == reference
            else stats.paired_randomization_test(
                [per_system[reference][q]["nDCG@10"] for q in qids],
                [per_query[q]["nDCG@10"] for q in qids],
                permutations=permutations,
            )
        )
        rows.append({"system": name, **means, "p_nDCG@10": p})
    # Same scoring function, same analyzer, same text: the rankings themselves should agree.
    same: dict[str, str] = {}
    for k1, b in (("1.2", "0.75"), ("0.9", "0.4")):
        a = runs.get(f"engine one field (title+text), k1={k1} b={b}")
        for peer in (
            f"bm25s lucene k1={k1} b={b}, engine analyzer",
            f"pyserini Lucene k1={k1} b={b}, engine analyzer",
        ):
            z = runs.get(peer)
            if a is not None and z is not None:
                n = sum(a[q][:10] == z[q][:10] for q in qids)
                same[peer] = f"{n}/{len(qids)}"
    return {
        "identical_top10_vs_engine_one_field": same,
        "collection": str(collection.manifest.get("name", "?")) if collection.manifest else "?",
        "documents": len(ids),
        "queries": len(qids),
        "rows": rows,
    }


def print_table(result: Mapping[str, Any]) -> None:
    print(
        f"\n{result['collection']}: {result['documents']} documents, {result['queries']} queries "
        "with a grade >= 2 judgment; relevance level 2"
    )
    width = max(len(r["system"]) for r in result["rows"])
    print(f"| {'system':<{width}} | nDCG@10 | R@20   | RR     | p (nDCG@10 vs engine) |")
    print(f"|{'-' * (width + 2)}|---------|--------|--------|-----------------------|")
    for r in result["rows"]:
        p = "-" if r["p_nDCG@10"] is None else f"{r['p_nDCG@10']:.4f}"
        print(
            f"| {r['system']:<{width}} | {r['nDCG@10']:.4f}  | {r['R@20']:.4f} | {r['RR']:.4f} "
            f"| {p:<21} |"
        )
    for peer, share in result["identical_top10_vs_engine_one_field"].items():
        print(f"identical top-10 (ids and order) to the engine's one-field run: {peer}: {share}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collection", type=Path, default=ROOT)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--permutations", type=int, default=10_000)
    parser.add_argument("--synthetic", action="store_true", help="also a collection_synth one")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus")
    for dist in ("pytest-searcheval", "bm25s", "PyStemmer", "rank-bm25", "pyserini"):
        print(f"  {dist} {_version(dist)}")
    results = [compare(load(args.collection), args.depth, args.permutations)]
    print_table(results[0])
    if args.synthetic:
        from pytest_searcheval.x402.synth import write_synthetic

        with tempfile.TemporaryDirectory(prefix="compare-bm25-synth-") as tmp:
            results.append(compare(load(write_synthetic(tmp)), args.depth, args.permutations))
        print_table(results[-1])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
