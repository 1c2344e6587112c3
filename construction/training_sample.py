"""The judged sample of the training needs: (need, listing) pairs for two blind judges.

The writers' files (training/writers/t*.yaml) label each need with a kind, a capability and a
target: construction-derived labels whose noise the judges measure. This script draws a sample
stratified by writer and kind, and for each sampled need five listings, one per stratum:

  writer-target     the listing the writer had in mind (answerable needs);
  capability        a listing of the need's capability other than the target (for unanswerable
                    needs, where no target exists: two of them);
  bm25              the best BM25 listing not already drawn (construction/judging/pool.py's);
  dense             the best all-MiniLM-L6-v2 listing not already drawn;
  category          a random listing of the same category, another capability.

When a stratum has nothing left (a capability of one listing), the next rank of bm25 fills it,
so every need has five listings. The draw is seeded: the same files give the same sample.

    python construction/training_sample.py              # training/judging/{pool.json,queries.yaml}
    python construction/training_sample.py --check      # exit 1 if they differ

Then the packs, one directory per judge, with the key kept apart:

    python construction/judging/packs.py make --judge A --pool training/judging/pool.json \
        --queries training/judging/queries.yaml --pairs-per-pack 300 --out DIR --key KEY
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "construction" / "judging"))

from pool import bm25_rank, dense_rank, doc_text, load_corpus  # noqa: E402

#: needs drawn per writer and kind
PER_WRITER = {"plain": 7, "far": 7, "agent": 5, "constrained": 5, "unanswerable": 6}
LISTINGS = 5
SEED = 20261202
OUT = ROOT / "training" / "judging"


def needs(root: Path) -> list[dict[str, Any]]:
    """Every writer's needs in writer order; a text two writers typed alike is kept once."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for path in sorted((root / "training/writers").glob("t*.yaml")):
        for need in yaml.safe_load(path.read_text(encoding="utf-8")):
            key = " ".join(need["text"].lower().split())
            if key not in seen:
                seen.add(key)
                out.append(need)
    return out


def draw(root: Path) -> tuple[dict[str, Any], list[dict[str, str]]]:
    rng = random.Random(SEED)
    every = needs(root)
    by_stratum: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for need in every:
        by_stratum.setdefault((need["id"].split("-")[0], need["kind"]), []).append(need)
    sample: list[dict[str, Any]] = []
    for (_writer, kind), group in sorted(by_stratum.items()):
        sample += rng.sample(group, min(PER_WRITER[kind], len(group)))
    docs = load_corpus(root)
    ids = sorted(docs)
    side = {d: docs[d]["sidecar"] for d in ids}
    texts = [doc_text(docs[d]) for d in ids]
    depth = 40
    bm25 = bm25_rank(texts, [n["text"] for n in sample], depth)
    dense = dense_rank(texts, [n["text"] for n in sample], depth)
    pool: dict[str, dict[str, list[str]]] = {}
    for n, need in enumerate(sample):
        chosen: dict[str, list[str]] = {}

        def take(doc: str | None, stratum: str, chosen: dict[str, list[str]] = chosen) -> bool:
            if doc is None or doc in chosen:
                return False
            chosen[doc] = [stratum]
            return True

        if need["target"] is not None:
            take(need["target"], "writer-target")
        same = [d for d in ids if side[d]["capability"] == need["capability"] and d not in chosen]
        rng.shuffle(same)
        for doc in same[: 1 if need["target"] is not None else 2]:
            take(doc, "capability")
        next(True for i in bm25[n] if take(ids[i], "bm25"))
        next((True for i in dense[n] if take(ids[i], "dense")), None)
        category = next(
            side[d]["category"] for d in ids if side[d]["capability"] == need["capability"]
        )
        others = [
            d
            for d in ids
            if side[d]["category"] == category
            and side[d]["capability"] != need["capability"]
            and d not in chosen
        ]
        if others:
            take(rng.choice(others), "category")
        for i in bm25[n]:
            if len(chosen) >= LISTINGS:
                break
            take(ids[i], "bm25")
        pool[need["id"]] = chosen
    recipe = {
        "seed": SEED,
        "per_writer": PER_WRITER,
        "listings_per_need": LISTINGS,
        "strata": ["writer-target", "capability", "bm25", "dense", "category"],
        "writers": sorted({n["id"].split("-")[0] for n in every}),
        "needs": len(sample),
        "pairs": sum(len(v) for v in pool.values()),
    }
    queries = [{"id": n["id"], "text": n["text"]} for n in sample]
    return {"recipe": recipe, "pool": pool}, queries


def files(root: Path) -> dict[Path, str]:
    pool, queries = draw(root)
    return {
        OUT / "pool.json": json.dumps(pool, indent=1, sort_keys=True) + "\n",
        OUT / "queries.yaml": yaml.safe_dump(queries, sort_keys=False, allow_unicode=True),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    out = files(ROOT)
    if args.check:
        stale = [p for p, text in out.items() if not p.is_file() or p.read_text() != text]
        if stale:
            sys.exit(f"differs from what the writers' files give: {[str(p) for p in stale]}")
        print("the judged sample is what the writers' files give")
        return
    OUT.mkdir(parents=True, exist_ok=True)
    for path, text in out.items():
        path.write_text(text, encoding="utf-8")
    print(json.dumps(json.loads(out[OUT / "pool.json"])["recipe"]))


if __name__ == "__main__":
    main()
