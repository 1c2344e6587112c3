"""Compute the counts of docs/collection.md from the data and rewrite its generated section.

Everything between the markers ``<!-- counts:begin -->`` and ``<!-- counts:end -->`` is produced
here from corpus/catalog.jsonl, collection.yaml, construction/taxonomy.yaml, conformance/ and (when
present) qrels/; the rest of the page is prose. Run: python construction/datasheet.py [--check]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "collection.md"
BEGIN, END = "<!-- counts:begin -->", "<!-- counts:end -->"


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def pct(n: int, total: int) -> str:
    return f"{n} ({100 * n / total:.1f}%)" if total else str(n)


def table(rows: list[tuple[str, str]], head: tuple[str, str] = ("", "count")) -> list[str]:
    out = [f"| {head[0]} | {head[1]} |", "|---|---|"]
    out += [f"| {a} | {b} |" for a, b in rows]
    return out


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def counts_section() -> str:
    docs = load_jsonl(ROOT / "corpus" / "catalog.jsonl")
    manifest = yaml.safe_load((ROOT / "collection.yaml").read_text(encoding="utf-8"))
    tax = yaml.safe_load((ROOT / "construction" / "taxonomy.yaml").read_text(encoding="utf-8"))
    assets = {(a["network"], a["address"]): a for a in manifest["assets"]}
    n = len(docs)
    sc = [d["sidecar"] for d in docs]
    kinds = Counter(d["x402"]["type"] for d in docs)
    lines: list[str] = []
    lines.append(
        f"Computed by `construction/datasheet.py` from the committed files ({n} listings)."
    )
    lines.append("")
    lines.append("### Listings")
    lines.append("")
    caps = {s["capability"] for s in sc}
    cats = {s["category"] for s in sc}
    providers = {s["provider"] for s in sc}
    per_cap = Counter(s["capability"] for s in sc if not s["adversarial"])
    prov_per_cap: dict[str, set[str]] = {}
    for s in sc:
        if not s["adversarial"]:
            prov_per_cap.setdefault(s["capability"], set()).add(s["provider"])
    prov_listings = Counter(s["provider"] for s in sc if not s["adversarial"])
    servers = Counter(d["fields"]["server"] for d in docs if d["x402"]["type"] == "mcp")
    distractors = sum(1 for s in sc if "distractor" in s["provenance"])
    rows = [
        ("listings", str(n)),
        ("HTTP resources", pct(kinds["http"], n)),
        ("MCP tools", pct(kinds["mcp"], n)),
        ("MCP servers (with 2+ tools)", f"{len(servers)} ({sum(v > 1 for v in servers.values())})"),
        ("categories", str(len(cats))),
        ("capabilities with listings", str(len(caps))),
        ("providers", str(len(providers))),
        ("providers with 2+ sibling listings", str(sum(v > 1 for v in prov_listings.values()))),
        (
            "competing providers per capability (min / median / max)",
            f"{min(map(len, prov_per_cap.values()))} / "
            f"{statistics.median(map(len, prov_per_cap.values())):g} / "
            f"{max(map(len, prov_per_cap.values()))}",
        ),
        ("genuine listings per capability (median)", f"{statistics.median(per_cap.values()):g}"),
        ("sparse listings (a few words)", pct(sum(s["sparse"] for s in sc), n)),
        ("distractors (borrowed vocabulary)", str(distractors)),
        (
            "adversarial: keyword stuffing",
            str(sum(s["adversarial"] == "keyword-stuffing" for s in sc)),
        ),
        (
            "adversarial: near duplicates (with duplicate_of)",
            str(sum(s["adversarial"] == "near-duplicate" for s in sc)),
        ),
        ("absent capabilities (no listing; for no-result queries)", str(len(tax["absent"]))),
    ]
    lines += table(rows, ("", "value"))
    lines.append("")
    style = Counter(s["style"] for s in sc if not s["sparse"])
    lines.append(
        "Writing styles (sparse listings excluded): "
        + ", ".join(f"{k} {v}" for k, v in sorted(style.items()))
        + "."
    )
    lengths = sorted(len(d["text"].split()) for d in docs)
    lines.append(
        f"Description length in words: min {lengths[0]}, median "
        f"{statistics.median(lengths):g}, max {lengths[-1]}."
    )
    # Vocabulary gap: how often a genuine, non-sparse description shares no word with the
    # capability's own id (e.g. "weather-forecast"), which is what a naive query would say.
    genuine = [d for d in docs if not d["sidecar"]["adversarial"]]
    gap = sum(
        1
        for d in genuine
        if not (words(d["sidecar"]["capability"].replace("-", " ")) & words(d["text"]))
    )
    lines.append(
        f"Vocabulary gap: {pct(gap, len(genuine))} of the genuine listings share no word with "
        "their capability's id (for example a weather-forecast listing that never says "
        "'weather' or 'forecast')."
    )
    lines.append("")
    lines.append("### Payment options")
    lines.append("")
    opts = [o for d in docs for o in d["x402"]["accepts"]]
    per_listing = Counter(len(d["x402"]["accepts"]) for d in docs)
    lines.append(
        f"{len(opts)} payment options; options per listing: "
        + ", ".join(f"{k}: {v}" for k, v in sorted(per_listing.items()))
        + "."
    )
    lines.append("")
    nets = Counter(frozenset(o["network"] for o in d["x402"]["accepts"]) for d in docs)
    schemes = Counter(frozenset(o["scheme"] for o in d["x402"]["accepts"]) for d in docs)
    rows = [
        ("pubnet only", str(nets[frozenset({"stellar:pubnet"})])),
        ("testnet only", str(nets[frozenset({"stellar:testnet"})])),
        ("both networks", str(nets[frozenset({"stellar:pubnet", "stellar:testnet"})])),
        ("exact only", str(schemes[frozenset({"exact"})])),
        ("upto only", str(schemes[frozenset({"upto"})])),
        ("exact and upto", str(schemes[frozenset({"exact", "upto"})])),
    ]
    lines += table(rows, ("listings", "count"))
    lines.append("")
    by_asset = Counter(assets[(o["network"], o["asset"])]["code"] for o in opts)
    payto = Counter(o["payTo"][0] for o in opts)
    lines.append(
        "Options by asset: "
        + ", ".join(f"{k} {v}" for k, v in by_asset.most_common())
        + ". Recipients: "
        + ", ".join(f"{k} {v}" for k, v in sorted(payto.items()))
        + " (G account, M muxed, C contract)."
    )
    prices = sorted(Decimal(s["price_usd"]) for s in sc)
    bands = [
        ("< $0.001", Decimal("0"), Decimal("0.001")),
        ("$0.001 to < $0.01", Decimal("0.001"), Decimal("0.01")),
        ("$0.01 to < $0.10", Decimal("0.01"), Decimal("0.1")),
        ("$0.10 to < $1", Decimal("0.1"), Decimal("1")),
        ("$1 and above", Decimal("1"), Decimal("1e9")),
    ]
    lines.append("")
    lines += table(
        [(label, str(sum(lo <= p < hi for p in prices))) for label, lo, hi in bands],
        ("cheapest option, USD (snapshot)", "listings"),
    )
    lines.append("")
    lines.append(
        f"USD price range: {format(prices[0].normalize(), 'f')} to "
        f"{format(prices[-1].normalize(), 'f')}; median "
        f"{format(prices[len(prices) // 2].normalize(), 'f')}."
    )
    ext = Counter(k for d in docs for k in (d["x402"].get("extensions") or {}))
    with_schema = sum(declares_schema(d["x402"]) for d in docs)
    live = Counter(s["liveness"] for s in sc)
    lines.append(
        "Extensions: "
        + ", ".join(f"{k} {v}" for k, v in sorted(ext.items()))
        + f". Listings whose Bazaar extension declares an input schema with fields: {with_schema}."
        " Liveness: " + ", ".join(f"{k} {v}" for k, v in sorted(live.items())) + "."
    )
    lines.append("")
    lines.append("### Asset registry (collection.yaml)")
    lines.append("")
    lines.append("| code | network | decimals | USD |")
    lines.append("|---|---|---|---|")
    for a in manifest["assets"]:
        lines.append(f"| {a['code']} | {a['network']} | {a['decimals']} | {a['usd']} |")
    lines.append("")
    conf = load_jsonl(ROOT / "conformance" / "corpus.jsonl")
    cases = yaml.safe_load((ROOT / "conformance" / "cases.yaml").read_text(encoding="utf-8"))
    empty = sum(1 for c in cases if not c["expect_ids"])
    lines.append("### Filter-conformance set")
    lines.append("")
    lines.append(
        f"{len(conf)} probe listings and {len(cases)} cases "
        f"({empty} expecting no match); filters per case: "
        + ", ".join(
            f"{k}: {v}" for k, v in sorted(Counter(len(c["filters"]) for c in cases).items())
        )
        + "."
    )
    queries = ROOT / "qrels" / "queries.yaml"
    if queries.exists():
        qs = yaml.safe_load(queries.read_text(encoding="utf-8")) or []
        lines.append("")
        lines.append("### Queries")
        lines.append("")
        by = Counter((q.get("class"), q.get("split")) for q in qs)
        classes = sorted({c for c, _ in by})
        lines.append("| class | dev | test |")
        lines.append("|---|---|---|")
        for c in classes:
            lines.append(f"| {c} | {by[(c, 'dev')]} | {by[(c, 'test')]} |")
        lines.append(
            f"| all | {sum(v for (c, s), v in by.items() if s == 'dev')} | "
            f"{sum(v for (c, s), v in by.items() if s == 'test')} |"
        )
    return "\n".join(lines) + "\n"


def declares_schema(x402: dict[str, Any]) -> bool:
    """The listing's Bazaar extension declares input fields (query parameters, body or tool)."""
    schema = ((x402.get("extensions") or {}).get("bazaar") or {}).get("schema") or {}
    declared = schema.get("properties", {}).get("input", {}).get("properties", {})
    if x402.get("type") == "mcp":
        tool = ((x402.get("extensions") or {}).get("bazaar") or {}).get("info", {}).get("input")
        return bool(((tool or {}).get("inputSchema") or {}).get("properties"))
    given = declared.get("queryParams") or declared.get("body") or {}
    return bool(given.get("properties"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if the page is out of date")
    args = ap.parse_args()
    page = DOC.read_text(encoding="utf-8")
    if BEGIN not in page or END not in page:
        print(f"{DOC}: expected the markers {BEGIN} and {END}", file=sys.stderr)
        return 1
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + BEGIN + "\n" + counts_section() + END + tail
    if args.check:
        if new != page:
            print(f"{DOC.relative_to(ROOT)} is out of date", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
