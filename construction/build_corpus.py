"""Build corpus/catalog.jsonl and collection.yaml from the taxonomy and the drafted prose.

Deterministic: every random choice comes from a generator seeded by a SHA-256 of the listing id,
so the same drafts always give byte-identical output (no clock, no global random state).

Inputs: construction/taxonomy.yaml (capabilities, providers, products),
        construction/drafts/*.yaml (prose written by hand; style codes t, m, x, h, sp).
Outputs: corpus/catalog.jsonl (one listing a line, sorted by id), collection.yaml (manifest and
         asset registry).

Prices: a listing's nominal USD price is drawn from its capability's tier; each payment option
converts it into atomic units of the option's asset: ``units = round(usd / rate * 10**decimals)``
(half-even), and the sidecar's ``price_usd`` is the exact USD value of the cheapest option,
``min(units * rate / 10**decimals)``, computed with Decimal (exact: the divisor is a power of ten).

Addresses: Stellar strkeys derived from SHA-256 of a label, encoded with CRC16-XModem checksums
(pytest_searcheval.x402.strkey when importable, else the fallback below).

Wire objects: built the way an x402 Bazaar facilitator sees a listing, with the official x402 SDK
(the ``x402`` extra): the seller declares its discovery extension (``declare_discovery_extension``
or ``declare_mcp_discovery_extension``, with its schemas), its resource server answers 402, the
client echoes the extensions, and the facilitator validates and extracts the discovery record
(pytest_searcheval/x402/bazaar.py). The wire object holds only the fields of a discovered
resource; category, liveness, provenance and the USD price stay in the sidecar.

Run: python construction/build_corpus.py [--check]  (--check: fail if outputs would change or
the SDK's facilitator side refuses, or would store differently, any shipped listing)
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import re
import sys
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
TAXONOMY = ROOT / "construction" / "taxonomy.yaml"
DRAFTS = ROOT / "construction" / "drafts"
CORPUS = ROOT / "corpus" / "catalog.jsonl"
MANIFEST = ROOT / "collection.yaml"

PUBNET = "stellar:pubnet"
TESTNET = "stellar:testnet"
PRICE_SNAPSHOT = "2026-11-01"
STYLE = {"t": "terse", "m": "marketing", "x": "technical", "h": "schema-heavy", "sp": "terse"}

# --------------------------------------------------------------------------- strkeys

try:  # the package's implementation, when the repository is installed
    sys.path.insert(0, str(ROOT))
    from pytest_searcheval.x402 import strkey as _strkey

    def encode_account(key: bytes) -> str:
        return _strkey.encode_account(key)

    def encode_muxed(key: bytes, muxed_id: int) -> str:
        return _strkey.encode_muxed(key, muxed_id)

    def encode_contract(key: bytes) -> str:
        return _strkey.encode_contract(key)

except ImportError:  # pragma: no cover - standalone fallback, same encoding (SEP-23)

    def _crc16_xmodem(data: bytes) -> int:
        crc = 0
        for byte in data:
            crc ^= byte << 8
            for _ in range(8):
                crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
        return crc

    def _encode(version: int, payload: bytes) -> str:
        body = bytes([version]) + payload
        raw = body + _crc16_xmodem(body).to_bytes(2, "little")
        return base64.b32encode(raw).decode("ascii").rstrip("=")

    def encode_account(key: bytes) -> str:
        return _encode(6 << 3, key)

    def encode_muxed(key: bytes, muxed_id: int) -> str:
        return _encode(12 << 3, key + muxed_id.to_bytes(8, "big"))

    def encode_contract(key: bytes) -> str:
        return _encode(2 << 3, key)


def key_of(label: str) -> bytes:
    """32 deterministic bytes for a label (an ed25519 key or contract id stand-in)."""
    return hashlib.sha256(("pytest-searcheval/catalog/" + label).encode("utf-8")).digest()


def muxed_id_of(label: str) -> int:
    return int.from_bytes(hashlib.sha256(label.encode("utf-8")).digest()[:8], "big") % 10**9


# --------------------------------------------------------------------------- assets


@dataclass(frozen=True)
class AssetDef:
    code: str
    network: str
    decimals: int
    usd: Decimal

    @property
    def address(self) -> str:
        return encode_contract(key_of(f"asset/{self.code}/{self.network}"))


ASSETS: list[AssetDef] = [
    AssetDef("USDC", PUBNET, 7, Decimal("1.00")),
    AssetDef("USDC", TESTNET, 7, Decimal("1.00")),
    AssetDef("EURC", PUBNET, 7, Decimal("1.08")),
    AssetDef("EURC", TESTNET, 7, Decimal("1.08")),
    AssetDef("XLM", PUBNET, 7, Decimal("0.10")),
    AssetDef("XLM", TESTNET, 7, Decimal("0.10")),
    AssetDef("AQUA", PUBNET, 7, Decimal("0.0008")),
    AssetDef("YUSDC", PUBNET, 7, Decimal("1.00")),
    # Non-7-decimal tokens (Soroban custom tokens): exercise exact arithmetic in price filters.
    AssetDef("USDB", PUBNET, 6, Decimal("1.00")),
    AssetDef("USDB", TESTNET, 6, Decimal("1.00")),
    AssetDef("WETH", PUBNET, 18, Decimal("2500.00")),
    AssetDef("WETH", TESTNET, 18, Decimal("2500.00")),
]


def asset(code: str, network: str) -> AssetDef:
    for a in ASSETS:
        if a.code == code and a.network == network:
            return a
    raise KeyError((code, network))


def units_for(usd: Decimal, a: AssetDef) -> int:
    return int((usd / a.usd * (Decimal(10) ** a.decimals)).to_integral_value(ROUND_HALF_EVEN))


def usd_of(units: int, a: AssetDef) -> Decimal:
    return Decimal(units) * a.usd / (Decimal(10) ** a.decimals)


def plain(d: Decimal) -> str:
    text = format(d.normalize(), "f")
    return text


# --------------------------------------------------------------------------- prices

TIERS: dict[str, list[str]] = {
    "micro": ["0.0001", "0.0002", "0.0005", "0.0008", "0.001"],
    "small": ["0.001", "0.002", "0.003", "0.005", "0.008", "0.01"],
    "standard": ["0.01", "0.015", "0.02", "0.03", "0.05", "0.08", "0.1"],
    "premium": ["0.1", "0.15", "0.25", "0.4", "0.5", "0.75", "1"],
    "high": ["1", "1.5", "2", "2.5", "3", "5", "7.5"],
}
# Capabilities whose real-world cost is clearly above or below the default draw.
TIER_OF: dict[str, str] = {
    "kyc-verification": "high",
    "smart-contract-audit": "high",
    "postal-mail": "high",
    "contract-analysis": "premium",
    "e-signature": "premium",
    "fax-sending": "premium",
    "code-review": "premium",
    "voice-calls": "premium",
    "image-generation": "standard",
    "image-upscaling": "standard",
    "llm-completion": "small",
    "text-embedding": "micro",
    "random-numbers": "micro",
    "unit-conversion": "micro",
    "timezone-lookup": "micro",
    "language-detection": "micro",
    "token-price": "micro",
    "gas-fee-estimate": "micro",
    "dns-lookup": "micro",
    "qr-code-generation": "micro",
    "url-shortening": "micro",
    "public-holidays": "micro",
    "sanctions-screening": "premium",
    "court-records": "premium",
    "company-registry": "standard",
    "speech-to-text": "standard",
    "flight-search": "standard",
    "hotel-search": "standard",
}
DEFAULT_TIERS = ["small", "small", "standard", "standard", "micro", "premium"]


def tier_for(capability: str) -> str:
    if capability in TIER_OF:
        return TIER_OF[capability]
    h = int(hashlib.sha256(capability.encode()).hexdigest(), 16)
    return DEFAULT_TIERS[h % len(DEFAULT_TIERS)]


# --------------------------------------------------------------------------- helpers


def slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s


def rng_for(doc_id: str, purpose: str) -> random.Random:
    seed = int(hashlib.sha256(f"{doc_id}/{purpose}".encode()).hexdigest(), 16)
    return random.Random(seed)


def schema_of(spec: dict[str, str], required: int = 1) -> dict[str, Any]:
    props = {k: {"type": v} for k, v in spec.items()}
    return {"type": "object", "properties": props, "required": list(spec)[:required]}


def example_of(spec: dict[str, str]) -> dict[str, Any]:
    samples: dict[str, Any] = {
        "string": "example",
        "number": 1.5,
        "integer": 3,
        "boolean": True,
        "array": [],
        "object": {},
    }
    return {k: samples[v] for k, v in spec.items()}


@dataclass
class Product:
    name: str
    provider: str
    capability: str
    category: str
    type: str
    server: str | None


def load_taxonomy() -> tuple[dict[str, Product], dict[str, str]]:
    tax = yaml.safe_load(TAXONOMY.read_text(encoding="utf-8"))
    products: dict[str, Product] = {}
    cap_category: dict[str, str] = {}
    for cap in tax["capabilities"]:
        cap_category[cap["id"]] = cap["category"]
        for p in cap["providers"]:
            for name in p["products"]:
                if name in products:
                    raise SystemExit(f"taxonomy: product {name!r} listed twice")
                products[name] = Product(
                    name, p["provider"], cap["id"], cap["category"], p["type"], p.get("server")
                )
    return products, cap_category


# --------------------------------------------------------------------------- payments

RECIPIENT_KIND = ["G"] * 68 + ["M"] * 20 + ["C"] * 12


def recipients(provider: str) -> dict[str, str]:
    """The provider's pay-to addresses: its main account, a muxed address on it, a contract and a
    separate testnet account."""
    key = key_of(f"account/{provider}")
    return {
        "G": encode_account(key),
        "M": encode_muxed(key, muxed_id_of(provider)),
        "C": encode_contract(key_of(f"contract/{provider}")),
        "T": encode_account(key_of(f"account/{provider}/testnet")),
    }


def payment_options(doc_id: str, provider: str, capability: str) -> list[dict[str, Any]]:
    r = rng_for(doc_id, "payments")
    tier = tier_for(capability)
    choices = TIERS[tier]
    nominal = Decimal(choices[r.randrange(len(choices))])
    x = r.random()
    networks = [PUBNET] if x < 0.62 else [TESTNET] if x < 0.80 else [PUBNET, TESTNET]
    y = r.random()
    schemes = ["exact"] if y < 0.72 else ["exact", "upto"] if y < 0.90 else ["upto"]
    z = r.random()
    primary = (
        "USDC"
        if z < 0.62
        else "EURC"
        if z < 0.76
        else "XLM"
        if z < 0.90
        else "AQUA"
        if z < 0.93
        else "YUSDC"
        if z < 0.96
        else "USDB"
        if z < 0.98
        else "WETH"
    )
    secondary = None
    if r.random() < 0.25:
        secondary = r.choice([c for c in ("USDC", "EURC", "XLM") if c != primary])
    kind = RECIPIENT_KIND[int(hashlib.sha256(provider.encode()).hexdigest(), 16) % 100]
    addrs = recipients(provider)
    timeout = r.choice([30, 60, 60, 60, 120, 300])
    upto_factor = r.choice([2, 5, 10])
    options: list[dict[str, Any]] = []
    for i, network in enumerate(networks):
        for scheme in schemes:
            codes = [primary] + ([secondary] if secondary and i == 0 and scheme == "exact" else [])
            for code in codes:
                if code in ("AQUA", "YUSDC") and network == TESTNET:
                    code = "USDC"
                a = asset(code, network)
                usd = nominal * (upto_factor if scheme == "upto" else 1)
                units = max(1, units_for(usd, a))
                pay_to = addrs["T"] if network == TESTNET and kind == "G" else addrs[kind]
                options.append(
                    {
                        "scheme": scheme,
                        "network": network,
                        "asset": a.address,
                        "amount": str(units),
                        "payTo": pay_to,
                        "maxTimeoutSeconds": timeout,
                        "extra": {},
                    }
                )
    return options[:4]


def price_usd(options: list[dict[str, Any]]) -> str:
    by_address = {(a.network, a.address): a for a in ASSETS}
    prices = [usd_of(int(o["amount"]), by_address[(o["network"], o["asset"])]) for o in options]
    return plain(min(prices))


# --------------------------------------------------------------------------- listings


def host_of(provider: str) -> str:
    return f"api.{slug(provider)}.example"


def mcp_host(server: str) -> str:
    return f"mcp.{slug(server.removesuffix(' MCP'))}.example"


def endpoint_path(product: str, provider: str) -> str:
    words = slug(product).split("-")
    first = slug(provider).split("-")[0]
    if words and words[0] == first and len(words) > 1:
        words = words[1:]
    return "/v1/" + "-".join(words)


def build_listing(
    *,
    doc_id: str,
    title: str,
    text: str,
    provider: str,
    capability: str,
    category: str,
    kind: str,
    server: str | None,
    tool: str | None,
    style: str,
    sparse: bool,
    tags: list[str],
    io: dict[str, Any] | None,
    provenance: str,
    adversarial: str | None = None,
    duplicate_of: str | None = None,
) -> dict[str, Any]:
    r = rng_for(doc_id, "listing")
    options = payment_options(doc_id, provider, capability)
    if kind == "mcp":
        assert server is not None and tool is not None
        resource = f"mcp://{mcp_host(server)}/tools/{tool}"
    else:
        resource = f"https://{host_of(provider)}{endpoint_path(title, provider)}"
    in_spec: dict[str, str] = dict(io["in"]) if io else {}
    out_spec: dict[str, str] = dict(io["out"]) if io else {}
    method = io["method"] if io else "GET"
    # The draws keep their order and conditions: every later draw (liveness, settlements) of
    # the listing depends on how many came before.
    with_schema = style == "schema-heavy" or (not sparse and r.random() < 0.6)
    with_example = kind == "http" and bool(in_spec) and not sparse and r.random() < 0.45
    extensions = declared_extension(
        kind=kind,
        tool=tool,
        description=text,
        method=method,
        in_spec=in_spec,
        out_spec=out_spec,
        with_schema=with_schema,
        with_example=with_example,
    )
    if r.random() < 0.08:
        extensions["attestation"] = {"issuer": host_of(provider), "method": "signed-response"}
    if r.random() < 0.10:
        extensions["rate-limit"] = {"requests_per_minute": r.choice([30, 60, 120, 600])}
    wire = facilitator_record(
        doc_id=doc_id,
        resource=resource,
        description=text,
        service_name=server if kind == "mcp" else provider,
        tags=tags,
        accepts=options,
        extensions=extensions,
        method=method if kind == "http" else None,
    )
    x = r.random()
    liveness = "live" if x < 0.75 else "degraded" if x < 0.90 else "stale"
    if adversarial == "keyword-stuffing" or sparse:
        settlements = int(r.uniform(0, 30))
    elif liveness == "live":
        settlements = int(2.718281828 ** r.uniform(3, 10.5))
    else:
        settlements = int(2.718281828 ** r.uniform(0, 6))
    fields: dict[str, Any] = {"provider": provider}
    if tags:
        fields["tags"] = tags
    if kind == "mcp":
        fields["server"] = server
    return {
        "id": doc_id,
        "title": title,
        "text": text,
        "fields": fields,
        "x402": wire,
        "sidecar": {
            "category": category,
            "capability": capability,
            "provider": provider,
            "liveness": liveness,
            "settlements": settlements,
            "price_usd": price_usd(options),
            "provenance": provenance,
            "source": "sample",
            "style": style,
            "adversarial": adversarial,
            "duplicate_of": duplicate_of,
            "sparse": sparse,
        },
    }


# --------------------------------------------------------------------------- x402 SDK

#: When the facilitator cataloged every listing (a fixed date: the build uses no clock).
LAST_UPDATED = f"{PRICE_SNAPSHOT}T00:00:00Z"


def declared_extension(
    *,
    kind: str,
    tool: str | None,
    description: str,
    method: str,
    in_spec: dict[str, str],
    out_spec: dict[str, str],
    with_schema: bool,
    with_example: bool,
) -> dict[str, Any]:
    """The listing's Bazaar discovery extension, declared with the official x402 SDK as its
    seller would: an MCP tool with its description and input schema; an HTTP endpoint with its
    query or body schema and output schema when ``with_schema``, its example input and output
    when ``with_example``. A body method that declares a body schema declares an example body
    with it, since the SDK validates the one against the other."""
    from x402.extensions.bazaar import (
        DeclareMcpDiscoveryConfig,
        OutputConfig,
        declare_discovery_extension,
        declare_mcp_discovery_extension,
    )

    if kind == "mcp":
        assert tool is not None
        return declare_mcp_discovery_extension(
            DeclareMcpDiscoveryConfig(
                tool_name=tool,
                input_schema=schema_of(in_spec) if in_spec else {"type": "object"},
                description=description,
                transport="streamable-http",
            )
        )
    body = method in ("POST", "PUT", "PATCH")
    with_schema = with_schema and bool(in_spec)
    example = example_of(in_spec) if in_spec and (with_example or (body and with_schema)) else None
    output = None
    if out_spec and (with_schema or with_example):
        output = OutputConfig(
            example=example_of(out_spec),
            schema=schema_of(out_spec, required=0) if with_schema else None,
        )
    return declare_discovery_extension(
        input=example,
        input_schema=schema_of(in_spec) if with_schema else None,
        body_type="json" if body else None,
        output=output,
    )


def facilitator_record(
    *,
    doc_id: str,
    resource: str,
    description: str,
    service_name: str | None,
    tags: list[str],
    accepts: list[dict[str, Any]],
    extensions: dict[str, Any],
    method: str | None,
) -> dict[str, Any]:
    """The wire object: what a Bazaar facilitator stores for a settlement of the listing, by
    the SDK's own seller, client and facilitator code (pytest_searcheval.x402.bazaar)."""
    from pytest_searcheval.x402 import bazaar

    required = bazaar.payment_required(
        resource=resource,
        description=description,
        mime_type="application/json",
        service_name=service_name,
        tags=tags or None,
        accepts=accepts,
        extensions=extensions,
        method=method,
    )
    try:
        record = bazaar.catalog_record(required, last_updated=LAST_UPDATED)
    except bazaar.ListingRefused as exc:
        raise SystemExit(f"listing {doc_id}: the x402 SDK refuses it: {exc}") from None
    if record["resource"] != resource or record.get("description") != description:
        raise SystemExit(
            f"listing {doc_id}: the facilitator would catalog it as {record['resource']!r}"
            f" with another description; the engine indexes both"
        )
    return record


def product_id(p: Product) -> str:
    if p.type == "mcp":
        assert p.server is not None
        return f"{slug(p.server)}-{slug(p.name)}"
    return slug(p.name)


def product_title(p: Product) -> str:
    return f"{p.name} ({p.server})" if p.type == "mcp" else p.name


def build() -> tuple[list[dict[str, Any]], str]:
    products, cap_category = load_taxonomy()
    io_all: dict[str, Any] = {}
    drafts: list[tuple[str, dict[str, Any]]] = []
    adversarial: list[dict[str, Any]] = []
    for path in sorted(DRAFTS.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        io_all.update(data.get("io") or {})
        for item in data["listings"]:
            if "kind" in item:
                adversarial.append(item)
            else:
                drafts.append((path.name, item))
    listings: list[dict[str, Any]] = []
    used: set[str] = set()
    for fname, item in drafts:
        p = products.get(item["p"])
        if p is None:
            raise SystemExit(f"drafts/{fname}: product {item['p']!r} is not in the taxonomy")
        if p.name in used:
            raise SystemExit(f"drafts/{fname}: product {p.name!r} drafted twice")
        used.add(p.name)
        code = item["s"]
        provenance = (
            f"synthetic; prose drafted by the project's authors in construction/drafts/{fname}"
        )
        if item.get("bait"):
            provenance += f"; distractor borrowing the vocabulary of: {item['bait']}"
        listings.append(
            build_listing(
                doc_id=product_id(p),
                title=product_title(p),
                text=item["d"],
                provider=p.provider,
                capability=p.capability,
                category=p.category,
                kind=p.type,
                server=p.server,
                tool=p.name if p.type == "mcp" else None,
                style=STYLE[code],
                sparse=code == "sp",
                tags=list(item.get("g") or []),
                io=io_all.get(p.capability),
                provenance=provenance,
            )
        )
    missing = sorted(set(products) - used)
    if missing:
        raise SystemExit(f"taxonomy products without a draft: {missing}")
    for item in adversarial:
        genuine = products[item["of"]]
        kind = item.get("type", "http")
        server = item.get("server")
        doc_id = f"{slug(item['provider'])}-{slug(item['title'])}"
        listings.append(
            build_listing(
                doc_id=doc_id,
                title=item["title"] if kind == "http" else f"{item['title']} ({server})",
                text=item["d"],
                provider=item["provider"],
                capability=genuine.capability,
                category=genuine.category,
                kind=kind,
                server=server,
                tool=item["title"] if kind == "mcp" else None,
                style=STYLE[item["s"]],
                sparse=False,
                tags=list(item.get("tags") or []),
                io=io_all.get(genuine.capability),
                provenance=(
                    "synthetic adversarial listing drafted by the project's authors in "
                    f"construction/drafts/adversarial.yaml ({item['kind']} of {item['of']})"
                ),
                adversarial=item["kind"],
                duplicate_of=product_id(genuine) if item["kind"] == "near-duplicate" else None,
            )
        )
    ids = [d["id"] for d in listings]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise SystemExit(f"duplicate ids: {dupes}")
    listings.sort(key=lambda d: d["id"])
    body = "".join(json.dumps(d, ensure_ascii=False, sort_keys=False) + "\n" for d in listings)
    del cap_category
    return listings, body


def manifest_text() -> str:
    manifest = {
        "name": "x402-discovery",
        "version": 1,
        "description": (
            "Synthetic catalog of x402 paid APIs and MCP tools on Stellar, written by the "
            "project's authors (see docs/collection.md). Built by construction/build_corpus.py."
        ),
        "grades": [0, 1, 2, 3],
        "splits": ["dev", "test"],
        "classes": [
            "exact-name",
            "paraphrase",
            "filtered",
            "no-result",
            "adversarial",
            "mcp",
            "typo",
        ],
        "price_snapshot": PRICE_SNAPSHOT,
        "assets": [
            {
                "code": a.code,
                "network": a.network,
                "address": a.address,
                "decimals": a.decimals,
                "usd": str(a.usd),
            }
            for a in ASSETS
        ],
    }
    header = (
        "# The shipped collection's manifest. Generated by construction/build_corpus.py; edit the\n"
        "# generator, not this file. USD rates are a fixed snapshot (price_snapshot).\n"
    )
    return header + yaml.safe_dump(manifest, sort_keys=False, width=100)


def refused(listings: list[dict[str, Any]]) -> list[str]:
    """Every listing the x402 SDK's facilitator side refuses or would store differently."""
    from pytest_searcheval.x402 import bazaar

    return [f"{d['id']}: {problem}" for d in listings for problem in bazaar.refusals(d["x402"])]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--check",
        action="store_true",
        help="fail if the outputs are out of date or the x402 SDK refuses a listing",
    )
    args = ap.parse_args()
    listings, body = build()
    manifest = manifest_text()
    if args.check:
        shipped = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]
        problems = refused(shipped) if CORPUS.exists() else []
        if problems:
            print("refused by the x402 SDK:\n  " + "\n  ".join(problems), file=sys.stderr)
            return 1
        stale = [
            str(p.relative_to(ROOT))
            for p, content in ((CORPUS, body), (MANIFEST, manifest))
            if not p.exists() or p.read_text(encoding="utf-8") != content
        ]
        if stale:
            print("out of date: " + ", ".join(stale), file=sys.stderr)
            return 1
        return 0
    CORPUS.parent.mkdir(parents=True, exist_ok=True)
    CORPUS.write_text(body, encoding="utf-8")
    MANIFEST.write_text(manifest, encoding="utf-8")
    n_mcp = sum(1 for d in listings if d["x402"]["type"] == "mcp")
    print(f"wrote {len(listings)} listings ({n_mcp} mcp) to {CORPUS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
