"""A large x402 catalog of real-looking listings, generated offline from the shipped one.

    from synth_catalog import generate
    docs, queries = generate(100_000, seed=2026)

Nothing is downloaded and nothing is written: the listings are recombined, deterministically
from ``seed``, out of the shipped catalog (``corpus/catalog.jsonl``: its prose, tags, payment
options and extensions) and the capabilities of ``construction/taxonomy.yaml``:

- providers are new brands, each made of the start of one shipped provider name and the end of
  another ("Sky" + "cast"), with one to six sibling endpoints of one category;
- a listing takes a shipped listing of the same capability as its base: the base's product
  words under the new brand as its title (an MCP tool keeps its tool name), one to three
  sentences drawn from the capability's listings (any provider name replaced by the brand),
  sometimes the capability's description and a sentence about coverage, freshness or limits;
- its x402 object is the base's (scheme, network, asset, amount, payTo, extensions), with the
  brand's own resource URL on the reserved ``.example`` domain; its sidecar has a fresh
  liveness and settlement count;
- keyword-stuffed and near-duplicate bases keep their share of the shipped catalog (3.4%).

Queries: the shipped collection's 189 golden queries, then one query per capability written
from its taxonomy description (its text without the final period, lower-cased).
"""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from pytest_searcheval.collection.model import Document

ROOT = Path(__file__).resolve().parent.parent
#: bump when the generator's output changes (part of the vector cache's key)
VERSION = 1

_SUFFIXES = ["", "", "", " Labs", " Works", " Cloud", " Data", " Systems", " HQ", " IO", " API"]
_REGIONS = [
    "Europe", "North America", "Latin America", "Southeast Asia", "the Nordics", "Japan",
    "India", "Australia and New Zealand", "Sub-Saharan Africa", "the Gulf states", "Canada",
    "the United Kingdom", "Germany, Austria and Switzerland", "Brazil", "200+ countries",
]  # fmt: skip
_EXTRAS = [
    "Coverage: {region}.",
    "Data refreshed every {n} minutes.",
    "Median latency under {ms} ms.",
    "Rate limit {rpm} requests per minute per key.",
    "Billed per successful call; failed calls are free.",
    "Responses are JSON with ISO 8601 timestamps.",
    "Available in {region} with a 99.{nines}% uptime target.",
    "Batch up to {batch} items per request.",
    "Historical data back to {year}.",
    "Cached results are served within {ms} ms.",
]
_MARK = "\x00"
_LIVENESS = ["live"] * 17 + ["degraded", "degraded", "stale"]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z])", text.strip())
    return [p for p in parts if len(p) > 3]


class _Brands:
    """Invented brand names, distinct, made on demand from pieces of the shipped provider
    names (its own random stream, so the first n listings do not depend on how many follow)."""

    def __init__(self, providers: Sequence[str], seed: int) -> None:
        self.rng = random.Random(seed)
        words = sorted({w for p in providers for w in re.findall(r"[A-Z][a-z]{4,}", p)})
        self.heads = sorted({w[:n] for w in words for n in (3, 4)})
        self.tails = sorted({w[-n:] for w in words for n in (3, 4, 5)})
        self.seen: set[str] = set()

    def next(self) -> str:
        while True:
            name = self.rng.choice(self.heads) + self.rng.choice(self.tails)
            full = name[0] + name[1:].lower() + self.rng.choice(_SUFFIXES)
            if full not in self.seen:
                self.seen.add(full)
                return full


def _brand_pattern(rows: Sequence[dict[str, Any]], taxonomy: dict[str, Any]) -> re.Pattern[str]:
    """Every shipped provider and MCP server name, and the first word of a multi-word one when
    that word is a brand (never written in lower case in the catalog's prose)."""
    full = {str(p["provider"]) for c in taxonomy["capabilities"] for p in c["providers"]}
    full |= {str(r["fields"].get(k, "")) for r in rows for k in ("provider", "server")}
    full.discard("")
    prose = " ".join(str(r["text"]) for r in rows)
    first = {n.split(" ")[0] for n in full if " " in n}
    full |= {w for w in first if len(w) >= 4 and w.lower() not in prose}
    alternatives = "|".join(re.escape(n) for n in sorted(full, key=len, reverse=True))
    return re.compile(rf"\b(?:{alternatives})\b")


def _load_shipped() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows = [
        json.loads(line)
        for line in (ROOT / "corpus" / "catalog.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    taxonomy = yaml.safe_load((ROOT / "construction" / "taxonomy.yaml").read_text("utf-8"))
    return rows, taxonomy


def _product_words(row: dict[str, Any]) -> str:
    """The base title without its provider's name (``Skyline Daily Forecast`` -> ``Daily
    Forecast``); an MCP tool's title is its tool name."""
    title = str(row["title"])
    if row["x402"]["type"] == "mcp":
        return title.split(" (")[0]
    provider = str(row["fields"].get("provider", ""))
    for name in sorted({provider, provider.split(" ")[0]}, key=len, reverse=True):
        if name and title.startswith(name + " "):
            return title[len(name) + 1 :]
    return title


def _extra(rng: random.Random) -> str:
    return rng.choice(_EXTRAS).format(
        region=rng.choice(_REGIONS),
        n=rng.choice([1, 5, 10, 15, 30, 60]),
        ms=rng.choice([20, 50, 80, 120, 250]),
        rpm=rng.choice([60, 120, 300, 600, 1200]),
        nines=rng.choice([5, 9, 95]),
        batch=rng.choice([10, 50, 100, 500]),
        year=rng.choice([1950, 1990, 2000, 2010, 2015]),
    )


def generate(n_docs: int, *, seed: int = 2026) -> tuple[list[Document], list[str]]:
    """``n_docs`` listings and the query texts (see the module docstring). The listings of
    ``generate(n)`` are the first n of ``generate(m)`` for any m > n (same seed)."""
    rng = random.Random(seed)
    rows, taxonomy = _load_shipped()
    by_capability: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_capability[row["sidecar"]["capability"]].append(row)
    for row in rows:  # a fresh copy per listing: json.loads of the text beats deepcopy
        row["x402_json"] = json.dumps(row["x402"])
    descriptions = {c["id"]: c["description"] for c in taxonomy["capabilities"]}
    by_category: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_category[row["sidecar"]["category"]].append(row)
    categories = sorted(by_category)
    providers = sorted({str(r["fields"].get("provider", "")) for r in rows})
    brands = _Brands(providers, seed + 1)
    # Provider names become a mark, replaced by each listing's brand (one regex pass per text).
    names = _brand_pattern(rows, taxonomy)
    for row in rows:
        row["branded"] = names.sub(_MARK, row["text"])
    sentences = {  # the prose of stuffed and duplicated listings stays with them
        cap: [
            s
            for r in group
            if not r["sidecar"].get("adversarial")
            for s in _sentences(r["branded"])
        ]
        for cap, group in by_capability.items()
    }

    docs: list[Document] = []
    used: set[str] = set()
    while len(docs) < n_docs:
        brand = brands.next()
        host = _slug(brand)
        category = rng.choice(categories)
        for _ in range(min(rng.choice([1, 1, 2, 2, 3, 4, 6]), n_docs - len(docs))):
            base = rng.choice(by_category[category])
            docs.append(_listing(base, brand, host, sentences, descriptions, used, rng))
    queries = _queries(taxonomy)
    return docs, queries


def _listing(
    base: dict[str, Any],
    brand: str,
    host: str,
    sentences: dict[str, list[str]],
    descriptions: dict[str, str],
    used: set[str],
    rng: random.Random,
) -> Document:
    sidecar = base["sidecar"]
    capability = sidecar["capability"]
    mcp = base["x402"]["type"] == "mcp"
    product = _product_words(base)
    server = f"{brand} MCP"
    # Like the shipped titles: the brand's first word, then the product ("Skyline Daily ...").
    title = f"{product} ({server})" if mcp else f"{brand.split(' ')[0]} {product}"

    def rebrand(text: str) -> str:
        return text.replace(_MARK, brand)

    if sidecar.get("adversarial"):
        # stuffed or duplicated prose stays what it is, sometimes with a sentence more
        text = " ".join(
            [rebrand(base["branded"])] + [_extra(rng) for _ in range(rng.randint(0, 1))]
        )
    else:
        pool = sentences[capability]
        picked = rng.sample(pool, min(len(pool), rng.choice([1, 1, 2, 2, 3])))
        parts = [rebrand(s) for s in picked]
        if rng.random() < 0.3:
            parts.insert(0, descriptions.get(capability, ""))
        for _ in range(rng.choice([0, 1, 1, 2])):
            parts.append(_extra(rng))
        text = " ".join(p for p in parts if p)
    doc_id = f"{host}-{_slug(product)}"
    while doc_id in used:
        doc_id = f"{host}-{_slug(product)}-{rng.randint(2, 99)}"
    used.add(doc_id)
    fields: dict[str, Any] = {"provider": brand}
    if mcp:
        fields["server"] = server
    if "tags" in base["fields"]:
        fields["tags"] = list(base["fields"]["tags"])
    x402 = json.loads(base["x402_json"])
    if mcp:
        x402["resource"] = f"mcp://mcp.{host}.example/tools/{product}"
        x402["serviceName"] = server
    else:
        x402["resource"] = f"https://api.{host}.example/v1/{_slug(product)}"
        x402["serviceName"] = brand
    x402["description"] = text
    settlements = int(rng.lognormvariate(5.0, 2.2)) if rng.random() > 0.08 else 0
    new_sidecar = {
        **sidecar,
        "provider": brand,
        "liveness": rng.choice(_LIVENESS),
        "settlements": settlements,
        "provenance": f"generated by benchmarks/synth_catalog.py (version {VERSION})",
        "source": "synthetic",
    }
    return Document(doc_id, title, text, fields, x402, new_sidecar)


def _queries(taxonomy: dict[str, Any]) -> list[str]:
    shipped = yaml.safe_load((ROOT / "qrels" / "queries.yaml").read_text(encoding="utf-8"))
    texts = [str(q["text"]) for q in shipped]
    for cap in taxonomy["capabilities"]:
        texts.append(str(cap["description"]).rstrip(".").lower())
    return texts
