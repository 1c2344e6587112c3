"""Training needs for the relevance model: the writers' view of the catalog, and the check of
what they wrote.

Independent writers write needs (search queries) over the shipped catalog, each alone, each with
a persona and a slice of the taxonomy's categories given in training/writers/writers.yaml, from
the one brief training/writers/BRIEF.md. A writer sees only the catalog view this script writes
(no qrels/, no taxonomy ``absent:`` list, no outside set, no other writer's file); the files they
deliver are committed as delivered in training/writers/<writer>.yaml.

    python construction/training_needs.py view DIR   # catalog-view.jsonl + slice-<writer>.jsonl
    python construction/training_needs.py check      # validate every delivered writer's file

``check`` reports every problem at once (file, entry, field, what was expected): the keys, the
kind, the id prefix, filters only on constrained needs and in the engine's vocabulary, a target
that is a listing of the corpus (or null for unanswerable needs), a capability of the taxonomy
inside the writer's slice, the per-kind counts of the brief, and no text twice in one file. A
text two writers typed alike (working alone, two people may both type "weather api") is listed,
not refused: the training data keeps it once, under the first writer's id.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
WRITERS = ROOT / "training" / "writers"
KINDS = {"plain": 60, "far": 60, "agent": 40, "constrained": 40, "unanswerable": 50}
PREFIX = {"plain": "p", "far": "f", "agent": "a", "constrained": "c", "unanswerable": "u"}
KEYS = {"id", "kind", "text", "capability", "target", "filters", "note"}
FILTERS = {
    "type": {"http", "mcp"},
    "network": {"stellar:pubnet", "stellar:testnet"},
    "extension": {"bazaar", "rate-limit", "attestation"},
}


def catalog_view(root: Path = ROOT) -> list[dict[str, Any]]:
    """One line per listing: what a reader of the catalog sees, with the taxonomy labels."""
    out = []
    for line in (root / "corpus" / "catalog.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        x402, side = record["x402"], record["sidecar"]
        out.append(
            {
                "id": record["id"],
                "title": record["title"],
                "text": x402.get("description") or record["text"],
                "type": x402["type"],
                "provider": side["provider"],
                "category": side["category"],
                "capability": side["capability"],
                "price_usd": side["price_usd"],
                "networks": sorted({a["network"] for a in x402["accepts"]}),
                "extensions": sorted(x402.get("extensions") or {}),
            }
        )
    return out


def plan(root: Path = ROOT) -> dict[str, dict[str, Any]]:
    data = yaml.safe_load((root / "training/writers/writers.yaml").read_text(encoding="utf-8"))
    return {w["writer"]: w for w in data["writers"]}


def write_view(out: Path, root: Path = ROOT) -> None:
    out.mkdir(parents=True, exist_ok=True)
    view = catalog_view(root)
    lines = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in view)
    (out / "catalog-view.jsonl").write_text(lines, encoding="utf-8")
    for name, writer in plan(root).items():
        mine = [v for v in view if v["category"] in writer["categories"]]
        body = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in mine)
        (out / f"slice-{name}.jsonl").write_text(body, encoding="utf-8")
    digest = hashlib.sha256(lines.encode()).hexdigest()
    print(f"{out}/catalog-view.jsonl: {len(view)} listings, sha256 {digest}")


def check_writer(
    path: Path, writer: dict[str, Any], listings: dict[str, dict[str, Any]], capabilities: set[str]
) -> tuple[list[str], list[dict[str, Any]]]:
    problems: list[str] = []
    try:
        entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        return [f"{path}: not YAML: {exc}"], []
    if not isinstance(entries, list):
        return [f"{path}: expected a YAML list of needs"], []
    slice_caps = {
        v["capability"] for v in listings.values() if v["category"] in writer["categories"]
    }
    kinds: Counter[str] = Counter()
    ids: set[str] = set()
    for i, e in enumerate(entries, 1):
        where = f"{path}: entry {i}"
        before = len(problems)
        if not isinstance(e, dict) or set(e) != KEYS:
            problems.append(f"{where}: expected exactly the keys {sorted(KEYS)}")
            continue
        kind, target, filters = e["kind"], e["target"], e["filters"]
        if kind not in KINDS:
            problems.append(f"{where} [kind]: expected one of {sorted(KINDS)}, got {kind!r}")
            continue
        kinds[kind] += 1
        want = f"{path.stem}-{PREFIX[kind]}"
        if not isinstance(e["id"], str) or not e["id"].startswith(want) or e["id"] in ids:
            problems.append(f"{where} [id]: expected a new id starting {want}, got {e['id']!r}")
        ids.add(str(e["id"]))
        if not isinstance(e["text"], str) or not e["text"].strip():
            problems.append(f"{where} [text]: expected the need as text")
        if e["capability"] not in capabilities:
            problems.append(
                f"{where} [capability]: {e['capability']!r} is not a catalog capability"
            )
        elif e["capability"] not in slice_caps:
            problems.append(f"{where} [capability]: {e['capability']!r} is outside the slice")
        if kind == "unanswerable":
            if target is not None:
                problems.append(f"{where} [target]: an unanswerable need has target null")
        elif target not in listings:
            problems.append(
                f"{where} [target]: expected a listing id of the corpus, got {target!r}"
            )
        if not isinstance(filters, dict):
            problems.append(f"{where} [filters]: expected a mapping")
            continue
        if filters and kind != "constrained":
            problems.append(f"{where} [filters]: only constrained needs state filters")
        if kind == "constrained" and not filters:
            problems.append(f"{where} [filters]: a constrained need states at least one")
        for key, value in filters.items():
            if key == "max_price_usd":
                try:
                    ok = Decimal(str(value)) > 0 and isinstance(value, str)
                except InvalidOperation:
                    ok = False
                if not ok:
                    problems.append(f"{where} [filters.{key}]: expected a decimal string")
            elif key not in FILTERS or value not in FILTERS[key]:
                problems.append(f"{where} [filters.{key}]: {value!r} is not in the vocabulary")
        if kind == "constrained" and target in listings and len(problems) == before:
            problems += satisfies(where, listings[target], filters)
    spread = Counter(e.get("capability") for e in entries if isinstance(e, dict))
    for cap in sorted(slice_caps):
        if not 2 <= spread[cap] <= 15:
            problems.append(f"{path}: {spread[cap]} needs about {cap}, the brief asks 2 to 15")
    for kind, n in KINDS.items():
        if kinds[kind] != n:
            problems.append(f"{path}: {kinds[kind]} needs of kind {kind}, the brief asks {n}")
    return problems, entries


def satisfies(where: str, listing: dict[str, Any], filters: dict[str, Any]) -> list[str]:
    bad = []
    if "type" in filters and listing["type"] != filters["type"]:
        bad.append("type")
    if "network" in filters and filters["network"] not in listing["networks"]:
        bad.append("network")
    if "extension" in filters and filters["extension"] not in listing["extensions"]:
        bad.append("extension")
    if "max_price_usd" in filters and Decimal(listing["price_usd"]) > Decimal(
        filters["max_price_usd"]
    ):
        bad.append("max_price_usd")
    return [f"{where} [target]: the target does not satisfy {', '.join(bad)}"] if bad else []


def _capabilities(root: Path) -> set[str]:
    taxonomy = yaml.safe_load((root / "construction/taxonomy.yaml").read_text(encoding="utf-8"))
    return {c["id"] for c in taxonomy["capabilities"]}


def check_file(writer: str, path: Path, root: Path = ROOT) -> int:
    """One writer's file as the brief asks, before it is delivered (the name need not match)."""
    listings = {v["id"]: v for v in catalog_view(root)}
    target = path.with_name(writer + ".yaml") if path.stem != writer else path
    if target != path:
        sys.exit(f"{path}: the file of writer {writer} is named {writer}.yaml")
    problems, entries = check_writer(path, plan(root)[writer], listings, _capabilities(root))
    texts = Counter(
        " ".join(str(e.get("text")).lower().split()) for e in entries if isinstance(e, dict)
    )
    problems += [f"{path}: the text {t!r} appears {n} times" for t, n in texts.items() if n > 1]
    print("\n".join(problems) if problems else f"OK: {len(entries)} needs")
    return 1 if problems else 0


def check(root: Path = ROOT) -> int:
    listings = {v["id"]: v for v in catalog_view(root)}
    capabilities = _capabilities(root)
    problems: list[str] = []
    seen: dict[str, str] = {}
    repeats: list[str] = []
    writers = plan(root)
    delivered = sorted((root / "training/writers").glob("t*.yaml"))
    for path in delivered:
        if path.stem not in writers:
            problems.append(f"{path}: {path.stem} is not in writers.yaml")
            continue
        found, entries = check_writer(path, writers[path.stem], listings, capabilities)
        problems += found
        for e in entries:
            if not isinstance(e, dict) or not isinstance(e.get("text"), str):
                continue
            key = " ".join(e["text"].lower().split())
            if key in seen and seen[key].startswith(path.stem + "-"):
                problems.append(f"{path}: {e.get('id')} repeats the text of {seen[key]}")
            elif key in seen:
                repeats.append(f"{e.get('id')} = {seen[key]}")
            else:
                seen[key] = str(e.get("id"))
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    print(f"{len(delivered)} writers, {len(seen)} distinct needs: every file as the brief asks")
    if repeats:
        # Two writers working alone may type the same short need; training keeps the first.
        print(f"{len(repeats)} written by two writers alike (kept once): {', '.join(repeats)}")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    view = sub.add_parser("view", help="write the writers' catalog view and slices into DIR")
    view.add_argument("dir", type=Path)
    sub.add_parser("check", help="validate the delivered writers' files")
    one = sub.add_parser("check-file", help="validate one writer's file before delivery")
    one.add_argument("writer")
    one.add_argument("path", type=Path)
    args = parser.parse_args()
    if args.command == "view":
        write_view(args.dir)
    elif args.command == "check-file":
        sys.exit(check_file(args.writer, args.path))
    else:
        sys.exit(check())


if __name__ == "__main__":
    main()
