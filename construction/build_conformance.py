"""Build and check the filter-conformance set: conformance/corpus.jsonl and conformance/cases.yaml.

Every case's ``expect_ids`` was worked out by hand (written below, next to the listings it
reasons about) and is then re-derived here by an evaluator that uses only exact Decimal
arithmetic and this file's own strkey reading; the build fails when the two disagree. When the
package is importable, the project's oracle (pytest_searcheval.x402.oracle) is checked as well.

Asset registry: the shipped ../collection.yaml, which holds 6-decimal (USDB) and 18-decimal (WETH)
tokens besides the 7-decimal ones. One asset (UNKNOWN below) is deliberately not registered: an
option in it has no USD price and never matches a price or asset filter.

Price of an option in USD = amount / 10^decimals * usd (snapshot rate); "at the ceiling" matches.

Run: python construction/build_conformance.py [--check]
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_corpus import (
    PUBNET,
    ROOT,
    TESTNET,
    asset,
    encode_account,
    encode_contract,
    encode_muxed,
    key_of,
)

OUT = ROOT / "conformance"
QUERY = "conformance probe listing"

A_KEY = key_of("conformance/account-a")
G_A = encode_account(A_KEY)
M_A7 = encode_muxed(A_KEY, 7)
M_A8 = encode_muxed(A_KEY, 8)
G_B = encode_account(key_of("conformance/account-b"))
C1 = encode_contract(key_of("conformance/contract-1"))
UNKNOWN = encode_contract(key_of("conformance/unregistered-asset"))

PUB, TEST = PUBNET, TESTNET


def addr(code: str, network: str) -> str:
    return UNKNOWN if code == "UNKNOWN" else asset(code, network).address


# (id, type, extensions, [(network, scheme, asset code, amount, payTo)], what it probes)
Option = tuple[str, str, str, int, str]
LISTINGS: list[tuple[str, str, list[str], list[Option], str]] = [
    ("cf-01", "http", ["bazaar"], [(PUB, "exact", "USDC", 100000, G_A)], "USDC at 0.01"),
    ("cf-02", "http", [], [(TEST, "exact", "USDC", 100000, G_A)], "testnet USDC at 0.01"),
    ("cf-03", "http", [], [(PUB, "upto", "USDC", 100000, M_A7)], "upto, muxed M on A"),
    ("cf-04", "http", [], [(PUB, "exact", "EURC", 50000, G_B)], "EURC 0.0054 USD"),
    ("cf-05", "http", [], [(PUB, "exact", "XLM", 1000000, C1)], "XLM at 0.01, contract payee"),
    ("cf-06", "http", [], [(PUB, "exact", "USDB", 10000, G_A)], "6 decimals at 0.01"),
    ("cf-07", "http", [], [(PUB, "exact", "WETH", 4000000000000, G_A)], "18 decimals at 0.01"),
    ("cf-08", "http", [], [(PUB, "exact", "WETH", 4000000000001, G_A)], "18 dec, 1 unit above"),
    ("cf-09", "http", [], [(PUB, "exact", "WETH", 3999999999999, G_A)], "18 dec, 1 unit below"),
    ("cf-10", "http", [], [(PUB, "exact", "USDB", 10001, G_A)], "6 dec, 1 unit above"),
    ("cf-11", "http", [], [(PUB, "exact", "USDB", 9999, G_A)], "6 dec, 1 unit below"),
    ("cf-12", "http", [], [(PUB, "exact", "USDC", 100001, G_A)], "7 dec, 1 unit above"),
    ("cf-13", "http", [], [(PUB, "exact", "USDC", 99999, G_A)], "7 dec, 1 unit below"),
    ("cf-14", "http", [], [(PUB, "exact", "UNKNOWN", 1, G_A)], "unregistered asset"),
    (
        "cf-15",
        "http",
        [],
        [(PUB, "exact", "USDC", 100000, G_B), (TEST, "upto", "USDC", 100000, G_A)],
        "split: pubnet pays B, A is paid on testnet",
    ),
    (
        "cf-16",
        "http",
        [],
        [(PUB, "upto", "EURC", 1, G_A), (PUB, "exact", "USDC", 50000000, G_A)],
        "split: cheap option is upto, exact option costs 5 USD",
    ),
    (
        "cf-17",
        "http",
        [],
        [(TEST, "exact", "XLM", 1000000, C1), (PUB, "exact", "XLM", 100000000, C1)],
        "cheap on testnet, 1 USD on pubnet",
    ),
    ("cf-18", "mcp", [], [(PUB, "exact", "USDC", 100000, M_A8)], "MCP tool, muxed id 8"),
    ("cf-19", "mcp", [], [(TEST, "upto", "EURC", 500000, G_B)], "MCP, EURC at 0.054"),
    ("cf-20", "http", [], [(PUB, "exact", "EURC", 500000, G_B)], "EURC at 0.054"),
    ("cf-21", "http", [], [(PUB, "exact", "EURC", 500001, G_B)], "EURC 1 unit above 0.054"),
    ("cf-22", "http", [], [(PUB, "exact", "EURC", 499999, G_B)], "EURC 1 unit below 0.054"),
    ("cf-23", "http", [], [(PUB, "exact", "XLM", 1000001, G_A)], "XLM 1 unit above 0.01"),
    ("cf-24", "http", [], [(PUB, "exact", "XLM", 999999, G_A)], "XLM 1 unit below 0.01"),
    ("cf-25", "http", ["attestation"], [(PUB, "exact", "USDC", 100000, G_B)], "attested"),
    (
        "cf-26",
        "http",
        [],
        [(TEST, "exact", "USDC", 100000, G_B), (PUB, "exact", "USDC", 100000, M_A7)],
        "pubnet option pays muxed M on A",
    ),
    ("cf-27", "http", [], [(PUB, "exact", "USDC", 0, G_A)], "free (amount 0)"),
    ("cf-28", "http", [], [(TEST, "exact", "USDB", 10000, C1)], "testnet 6 dec, contract"),
    ("cf-29", "http", [], [(TEST, "exact", "WETH", 4000000000000, M_A7)], "testnet 18 dec"),
    (
        "cf-30",
        "http",
        ["bazaar", "rate-limit"],
        [(PUB, "upto", "XLM", 1000000, G_B)],
        "upto XLM at 0.01",
    ),
]

USDC_PUB = asset("USDC", PUB).address


def ids(*numbers: int) -> list[str]:
    return [f"cf-{n:02d}" for n in numbers]


ALL = list(range(1, 31))
# Hand-derived expectations (see the option table above for the prices).
CASES: list[tuple[str, dict[str, Any], list[str], str]] = [
    ("network-pubnet", {"network": PUB},
     ids(*[n for n in ALL if n not in (2, 19, 28, 29)]), "any pubnet option"),
    ("network-testnet", {"network": TEST}, ids(2, 15, 17, 19, 26, 28, 29), "any testnet option"),
    ("scheme-upto", {"scheme": "upto"}, ids(3, 15, 16, 19, 30), "any upto option"),
    ("exact-on-testnet", {"scheme": "exact", "network": TEST}, ids(2, 17, 26, 28, 29),
     "cf-15 and cf-19 are upto on testnet"),
    ("recipient-g-a", {"recipient": G_A},
     ids(1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 23, 24, 26, 27, 29),
     "G matches itself and every muxed M on it"),
    ("recipient-m-a7", {"recipient": M_A7}, ids(3, 26, 29), "M matches only itself"),
    ("recipient-m-a8", {"recipient": M_A8}, ids(18), "M matches only itself"),
    ("recipient-g-b", {"recipient": G_B}, ids(4, 15, 19, 20, 21, 22, 25, 26, 30), "another G"),
    ("recipient-c", {"recipient": C1}, ids(5, 17, 28), "contract payee"),
    ("usdc-at-most-1-cent", {"asset": "USDC", "max_price_usd": "0.01"},
     ids(1, 2, 3, 13, 15, 18, 25, 26, 27), "code matches both networks; cf-12 one unit above"),
    ("usdb-6dec-at-most-1-cent", {"asset": "USDB", "max_price_usd": "0.01"}, ids(6, 11, 28),
     "cf-10 one unit above"),
    ("weth-18dec-at-most-1-cent", {"asset": "WETH", "max_price_usd": "0.01"}, ids(7, 9, 29),
     "cf-08 one unit (2.5e-15 USD) above"),
    ("weth-18dec-one-unit-below", {"asset": "WETH", "max_price_usd": "0.0099999999999975"},
     ids(9), "ceiling exactly at 3999999999999 units"),
    ("xlm-at-most-1-cent", {"asset": "XLM", "max_price_usd": "0.01"}, ids(5, 17, 24, 30),
     "cf-23 one unit above; cf-17 via its testnet option"),
    ("eurc-at-most-0.054", {"asset": "EURC", "max_price_usd": "0.054"}, ids(4, 16, 19, 20, 22),
     "cf-21 one unit above; cf-16 via its 1-unit upto option"),
    ("price-at-most-1-cent", {"max_price_usd": "0.01"},
     ids(1, 2, 3, 4, 5, 6, 7, 9, 11, 13, 15, 16, 17, 18, 24, 25, 26, 27, 28, 29, 30),
     "unregistered asset (cf-14) has no price"),
    ("pubnet-to-g-a", {"network": PUB, "recipient": G_A},
     ids(1, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 18, 23, 24, 26, 27),
     "cf-15 pays A only on testnet: never matches"),
    ("exact-at-most-1-cent", {"scheme": "exact", "max_price_usd": "0.01"},
     ids(1, 2, 4, 5, 6, 7, 9, 11, 13, 15, 17, 18, 24, 25, 26, 27, 28, 29),
     "cf-16: cheap option is upto, exact one costs 5 USD: never matches"),
    ("testnet-contract-cheap", {"network": TEST, "recipient": C1, "max_price_usd": "0.01"},
     ids(17, 28), "cf-17 via its testnet option"),
    ("type-mcp", {"type": "mcp"}, ids(18, 19), "listing-level"),
    ("extension-bazaar", {"extension": "bazaar"}, ids(1, 30), "listing-level"),
    ("attested-on-pubnet", {"extension": "attestation", "network": PUB}, ids(25), ""),
    ("usdc-pubnet-by-address", {"asset": USDC_PUB},
     ids(1, 3, 12, 13, 15, 16, 18, 25, 26, 27), "address names one network's contract only"),
    ("free-only", {"max_price_usd": "0"}, ids(27), "amount 0 is at a zero ceiling"),
    ("eurc-exact", {"asset": "EURC", "scheme": "exact"}, ids(4, 20, 21, 22),
     "cf-16 and cf-19 hold EURC only in upto options"),
    ("http-testnet-upto", {"type": "http", "network": TEST, "scheme": "upto"}, ids(15),
     "cf-19 is an MCP tool"),
    ("price-at-most-1000", {"max_price_usd": "1000"}, ids(*[n for n in ALL if n != 14]),
     "only the unregistered asset fails"),
    ("mcp-pubnet-usdc-to-g-a",
     {"type": "mcp", "network": PUB, "asset": "USDC", "recipient": G_A}, ids(18), ""),
    ("eurc-upto-one-unit", {"network": PUB, "scheme": "upto", "asset": "EURC",
                            "max_price_usd": "0.000000108"}, ids(16), "1 unit of EURC exactly"),
    ("eurc-upto-below-one-unit", {"network": PUB, "scheme": "upto", "asset": "EURC",
                                  "max_price_usd": "0.000000107"}, [], "nothing matches"),
]  # fmt: skip


def cheapest(options: list[Option]) -> str | None:
    """Exact USD price of the cheapest registered option (None when every option is unknown)."""
    prices = [
        Decimal(amount) * asset(code, network).usd / Decimal(10) ** asset(code, network).decimals
        for network, _s, code, amount, _p in options
        if code != "UNKNOWN"
    ]
    return format(min(prices).normalize(), "f") if prices else None


def record(
    doc_id: str, kind: str, exts: list[str], options: list[Option], probe: str
) -> dict[str, Any]:
    text = f"Conformance probe listing {doc_id[3:]}: {probe}."
    wire: dict[str, Any] = {
        "resource": (
            f"mcp://mcp.conformance.example/tools/{doc_id}"
            if kind == "mcp"
            else f"https://api.conformance.example/v1/{doc_id}"
        ),
        "type": kind,
        "description": text,
        "mimeType": "application/json",
        "accepts": [
            {
                "scheme": scheme,
                "network": network,
                "asset": addr(code, network),
                "amount": str(amount),
                "payTo": pay_to,
                "maxTimeoutSeconds": 60,
                "extra": {},
            }
            for network, scheme, code, amount, pay_to in options
        ],
    }
    if exts:
        wire["extensions"] = {e: {} for e in exts}
    return {
        "id": doc_id,
        "title": f"Conformance probe {doc_id[3:]}",
        "text": text,
        "fields": {"provider": "Conformance"},
        "x402": wire,
        "sidecar": {
            "category": "conformance",
            "capability": "conformance-probe",
            "provider": "Conformance",
            "liveness": "live",
            "settlements": 0,
            **({"price_usd": price} if (price := cheapest(options)) is not None else {}),
            "provenance": "synthetic filter-conformance probe, construction/build_conformance.py",
            "source": "sample",
            "style": "terse",
            "adversarial": None,
            "duplicate_of": None,
            "sparse": False,
        },
    }


# ------------------------------------------------------------ independent evaluator (Decimal)


def _raw_key(text: str) -> tuple[str, bytes, bytes]:
    """(kind letter, 32-byte key, muxed id bytes or b'') read straight from the base32."""
    raw = base64.b32decode(text + "=" * (-len(text) % 8))
    body = raw[1:-2]
    return text[0], body[:32], body[32:]


def _pay_matches(want: str, pay_to: str) -> bool:
    wk, wkey, wid = _raw_key(want)
    pk, pkey, pid = _raw_key(pay_to)
    if wk == "G":
        return pk in ("G", "M") and pkey == wkey
    return (wk, wkey, wid) == (pk, pkey, pid)


def expected(
    listings: list[dict[str, Any]], filters: dict[str, Any], registry: list[dict[str, Any]]
) -> list[str]:
    by_key = {(a["network"], a["address"]): a for a in registry}
    out = []
    for doc in listings:
        wire = doc["x402"]
        if "type" in filters and wire["type"] != filters["type"]:
            continue
        if "extension" in filters and filters["extension"] not in wire.get("extensions", {}):
            continue
        ok_any = False
        for o in wire["accepts"]:
            reg = by_key.get((o["network"], o["asset"]))
            if "network" in filters and o["network"] != filters["network"]:
                continue
            if "scheme" in filters and o["scheme"] != filters["scheme"]:
                continue
            if "asset" in filters and (
                reg is None or filters["asset"] not in (reg["code"], reg["address"])
            ):
                continue
            if "recipient" in filters and not _pay_matches(filters["recipient"], o["payTo"]):
                continue
            if "max_price_usd" in filters:
                if reg is None:
                    continue
                usd = Decimal(o["amount"]) * Decimal(str(reg["usd"]))
                usd = usd.scaleb(-int(reg["decimals"]))
                if usd > Decimal(filters["max_price_usd"]):
                    continue
            ok_any = True
            break
        if ok_any:
            out.append(doc["id"])
    return out


def build() -> tuple[str, str, list[str]]:
    docs = [record(*spec) for spec in LISTINGS]
    manifest = yaml.safe_load((ROOT / "collection.yaml").read_text(encoding="utf-8"))
    registry = manifest["assets"]
    assert all(a["address"] != UNKNOWN for a in registry), "UNKNOWN must stay unregistered"
    problems: list[str] = []
    constraints: Any
    try:
        from pytest_searcheval.x402 import oracle as constraints
    except ImportError:  # pragma: no cover - standalone use: hand vs Decimal check only
        print("note: pytest_searcheval not importable; oracle cross-check skipped", file=sys.stderr)
        constraints = None
    for case_id, filters, hand, _why in CASES:
        derived = expected(docs, filters, registry)
        if sorted(hand) != derived:
            problems.append(f"{case_id}: hand {sorted(hand)} != derived {derived}")
        if constraints is not None:
            oracle = [d["id"] for d in docs if constraints.satisfies(d, filters, registry)]
            if oracle != derived:
                problems.append(f"{case_id}: oracle {oracle} != derived {derived}")
    corpus = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)
    cases = [
        {"id": c, "filters": f, "query": QUERY, "expect_ids": sorted(h), "note": why}
        for c, f, h, why in CASES
    ]
    header = (
        "# Filter-conformance cases. Generated by construction/build_conformance.py; the\n"
        "# expect_ids were derived by hand and re-checked with exact Decimal arithmetic.\n"
        "# Asset registry: ../collection.yaml (USDB has 6 decimals, WETH 18). The asset\n"
        f"# {UNKNOWN} used by cf-14 is deliberately NOT registered.\n"
        f"# Recipients: account A {G_A}\n#   muxed on A, id 7: {M_A7}\n"
        f"#   muxed on A, id 8: {M_A8}\n#   account B {G_B}\n#   contract {C1}\n"
    )
    text = header + yaml.safe_dump(cases, sort_keys=False, width=120)
    return corpus, text, problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if outputs are out of date")
    args = ap.parse_args()
    corpus, cases, problems = build()
    for problem in problems:
        print("MISMATCH " + problem, file=sys.stderr)
    if problems:
        return 1
    targets = ((OUT / "corpus.jsonl", corpus), (OUT / "cases.yaml", cases))
    if args.check:
        stale = [str(p) for p, c in targets if not p.exists() or p.read_text() != c]
        if stale:
            print("out of date: " + ", ".join(stale), file=sys.stderr)
            return 1
        return 0
    OUT.mkdir(exist_ok=True)
    for p, c in targets:
        p.write_text(c, encoding="utf-8")
    print(f"wrote {len(LISTINGS)} listings and {len(CASES)} cases; hand == derived == oracle")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
