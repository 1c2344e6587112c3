"""Blind judging packs and their collection.

``make``: for one judge, writes task packs (Markdown) where each query's pooled listings appear in
an order shuffled for that judge, under opaque handles. A pack shows the query and the listing's
own text: never a rank, a score, or which system found it. The handle -> (query, document) key is
written apart, for ``collect`` only.

``collect``: reads a judge's answer files (``handle<TAB>grade`` lines) and writes the judge's raw
grades as ``query_id<TAB>doc_id<TAB>grade`` (qrels/raw/<judge>.tsv), refusing missing, duplicate or
out-of-scale answers.

``--pool`` and ``--queries`` make packs for another pooled query set (an outside set); ``make``
copies the rubric and the answer instructions into the pack directory, so the directory is all
a judge is given. The key belongs outside that directory.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml
from pool import load_corpus, mcp_tool_name

ROOT = Path(__file__).resolve().parents[2]
RUBRIC = ROOT / "construction/judging/rubric.md"


def _assets(root: Path) -> dict[str, dict[str, Any]]:
    manifest = yaml.safe_load((root / "collection.yaml").read_text())
    return {a["address"]: a for a in manifest.get("assets", [])}


def _price(option: dict[str, Any], assets: dict[str, dict[str, Any]]) -> str:
    asset = assets.get(option.get("asset", ""))
    if asset is None:
        return f"{option.get('amount')} base units of an unlisted asset"
    usd = (
        Decimal(option["amount"]) / (Decimal(10) ** int(asset["decimals"])) * Decimal(asset["usd"])
    )
    return f"{asset['code']} (about ${float(usd):.4g})"


def card(record: dict[str, Any], assets: dict[str, dict[str, Any]]) -> str:
    x402 = record.get("x402") or {}
    fields = record.get("fields") or {}
    lines = [f"**{record.get('title', '')}**  (type: {x402.get('type', 'n/a')})"]
    if x402.get("resource"):
        lines.append(f"resource: {x402['resource']}")
    tool = mcp_tool_name(x402)
    if tool:
        lines.append(f"MCP tool: {tool}")
    lines.append(f"description: {record.get('text', '').strip()}")
    if fields.get("tags"):
        lines.append(f"tags: {', '.join(map(str, fields['tags']))}")
    options = [
        f"{o.get('network')} / {o.get('scheme')} / {_price(o, assets)}"
        for o in x402.get("accepts", [])
    ]
    if options:
        lines.append("payment options: " + "; ".join(options))
    if x402.get("extensions"):
        lines.append("extensions: " + ", ".join(sorted(x402["extensions"])))
    return "\n".join("    " + line for line in lines)


INSTRUCTIONS = """# Judging packs for judge {judge}

Grade every listing under every query of every `pack-NN.md` in this directory by the rubric in
`rubric.md`. Judge each listing on its own: the order means nothing, and nothing here says how
a listing came to be shown.

Answer in `answers/pack-NN.tsv` (one file per pack, any number of files is fine), one line per
listing: its handle, a space or tab, and the grade 0-3. Lines starting with `#` are ignored.

    3f9a01bc 2
    77e0d4a1 0

Every handle must be graded exactly once; {pairs} handles in {packs} packs.
"""


def make(args: argparse.Namespace) -> None:
    root: Path = args.root
    pool_path: Path = args.pool or root / "construction/judging/pool.json"
    queries_path: Path = args.queries or root / "qrels/queries.yaml"
    pool = json.loads(pool_path.read_text(encoding="utf-8"))["pool"]
    queries = {q["id"]: q for q in yaml.safe_load(queries_path.read_text(encoding="utf-8"))}
    if args.key.resolve().is_relative_to(args.out.resolve()):
        sys.exit(f"--key {args.key} is inside --out {args.out}: the judge would see the key")
    docs = load_corpus(root)
    assets = _assets(root)
    seed = int(hashlib.sha256(args.judge.encode()).hexdigest()[:8], 16)
    rng = random.Random(seed)
    qids = [q for q in queries if q in pool]
    rng.shuffle(qids)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    key: dict[str, list[str]] = {}
    batch: list[str] = []
    batches: list[list[str]] = []
    size = 0
    for qid in qids:
        batch.append(qid)
        size += len(pool[qid])
        if size >= args.pairs_per_pack:
            batches.append(batch)
            batch, size = [], 0
    if batch:
        batches.append(batch)
    for n, batch in enumerate(batches, 1):
        parts = [f"# Pack {n:02d} for judge {args.judge}\n"]
        for qid in batch:
            opaque = hashlib.sha256(f"{args.judge}:{qid}".encode()).hexdigest()[:6]
            parts.append(f"\n## Query {opaque}: {queries[qid]['text']!r}\n")
            doc_ids = list(pool[qid])
            rng.shuffle(doc_ids)
            for doc_id in doc_ids:
                handle = hashlib.sha256(f"{args.judge}:{qid}:{doc_id}".encode()).hexdigest()[:8]
                key[handle] = [qid, doc_id]
                parts.append(f"- `{handle}`\n{card(docs[doc_id], assets)}\n")
        (out / f"pack-{n:02d}.md").write_text("".join(parts), encoding="utf-8")
    (out / "rubric.md").write_text(RUBRIC.read_text(encoding="utf-8"), encoding="utf-8")
    (out / "README.md").write_text(
        INSTRUCTIONS.format(judge=args.judge, pairs=len(key), packs=len(batches)),
        encoding="utf-8",
    )
    (out / "answers").mkdir(exist_ok=True)
    args.key.parent.mkdir(parents=True, exist_ok=True)
    args.key.write_text(json.dumps(key, indent=0, sort_keys=True))
    print(f"{len(batches)} packs, {len(key)} pairs -> {out}")


def collect(args: argparse.Namespace) -> None:
    key = json.loads(args.key.read_text())
    grades: dict[str, int] = {}
    problems: list[str] = []
    for path in sorted(args.answers.glob("*.tsv")):
        for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 2 or parts[0] not in key or parts[1] not in {"0", "1", "2", "3"}:
                problems.append(f"{path}:{lineno}: expected '<handle> <grade 0-3>', got {raw!r}")
                continue
            if parts[0] in grades and grades[parts[0]] != int(parts[1]):
                problems.append(f"{path}:{lineno}: handle {parts[0]} graded twice differently")
            grades[parts[0]] = int(parts[1])
    missing = sorted(set(key) - set(grades))
    if missing:
        problems.append(f"{len(missing)} pairs not graded, e.g. {missing[:5]}")
    if problems:
        sys.exit("\n".join(problems))
    rows = sorted((key[h][0], key[h][1], g) for h, g in grades.items())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        "query_id\tdoc_id\tgrade\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in rows)
    )
    print(f"{len(rows)} grades -> {args.out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--root", type=Path, default=ROOT)
    m.add_argument("--judge", required=True)
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--key", type=Path, required=True)
    m.add_argument("--pairs-per-pack", type=int, default=250)
    m.add_argument("--pool", type=Path, help="default: ROOT/construction/judging/pool.json")
    m.add_argument("--queries", type=Path, help="default: ROOT/qrels/queries.yaml")
    m.set_defaults(func=make)
    c = sub.add_parser("collect")
    c.add_argument("--key", type=Path, required=True)
    c.add_argument("--answers", type=Path, required=True)
    c.add_argument("--out", type=Path, required=True)
    c.set_defaults(func=collect)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
