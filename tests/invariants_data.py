"""Shared data of the invariant tests (no tests here): a small x402 collection and conformance set
on which every invariant can pass or fail."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from pytest_searcheval.collection.model import Asset, Collection, Document, Query
from pytest_searcheval.x402.strkey import encode_account, encode_contract, encode_muxed

PUB, TEST = "stellar:pubnet", "stellar:testnet"
USDC_PUB = encode_contract(bytes([1] * 32))
USDC_TEST = encode_contract(bytes([2] * 32))
EURC_PUB = encode_contract(bytes([3] * 32))
XLM_PUB = encode_contract(bytes([4] * 32))
TOKEN18 = encode_contract(bytes([5] * 32))
UNKNOWN = encode_contract(bytes([6] * 32))
ALICE = encode_account(bytes([7] * 32))
BOB = encode_account(bytes([8] * 32))
ALICE_MUX = encode_muxed(bytes([7] * 32), 42)

ASSETS = [
    Asset("USDC", PUB, USDC_PUB, 7, Decimal("1.00")),
    Asset("USDC", TEST, USDC_TEST, 7, Decimal("1.00")),
    Asset("EURC", PUB, EURC_PUB, 7, Decimal("1.10")),
    Asset("XLM", PUB, XLM_PUB, 7, Decimal("0.10")),
    Asset("TOK", PUB, TOKEN18, 18, Decimal("2.00")),
]


def option(
    network: str = PUB,
    asset: str = USDC_PUB,
    amount: str = "50000",
    scheme: str = "exact",
    pay_to: str = ALICE,
) -> dict[str, Any]:
    return {
        "scheme": scheme,
        "network": network,
        "asset": asset,
        "amount": amount,
        "payTo": pay_to,
        "maxTimeoutSeconds": 60,
        "extra": {},
    }


def listing(
    doc_id: str,
    title: str,
    text: str,
    options: list[dict[str, Any]],
    *,
    kind: str = "http",
    settlements: int = 100,
) -> Document:
    return Document(
        id=doc_id,
        title=title,
        text=text,
        fields={"provider": title.split()[0]},
        x402={
            "resource": f"https://api.{doc_id}.example/v1",
            "type": kind,
            "description": text,
            "mimeType": "application/json",
            "accepts": options,
        },
        sidecar={"settlements": settlements, "liveness": "live", "source": "sample"},
    )


DOCS = [
    listing(
        "skyline-daily",
        "Skyline Daily Forecast",
        "Daily weather forecast for any city, temperature and rain.",
        [option(PUB, USDC_PUB, "50000"), option(TEST, USDC_TEST, "50000", "upto")],
        settlements=900,
    ),
    listing(
        "nimbus-outlook",
        "Nimbus Outlook",
        "Weather outlook for the next ten days with wind and rain.",
        [option(TEST, USDC_TEST, "20000")],
    ),
    listing(
        "stratus-hourly",
        "Stratus Hourly Forecast",
        "Hourly weather forecast and rain radar for a city.",
        [option(PUB, EURC_PUB, "30000", "upto")],
    ),
    listing(
        "almanac-history",
        "Almanac Weather History",
        "Historical weather data archive by city and day.",
        [option(PUB, XLM_PUB, "900000")],
    ),
    listing(
        "polyglot-translate",
        "Polyglot Translate",
        "Translate text between languages with a neural translation model.",
        [option(PUB, USDC_PUB, "10000"), option(TEST, USDC_TEST, "10000")],
        settlements=500,
    ),
    listing(
        "lingua-bridge",
        "Lingua Bridge",
        "Text translation api for documents and short messages in many languages.",
        [option(TEST, USDC_TEST, "5000", "upto")],
    ),
    listing(
        "babel-mcp",
        "Babel Translation Tool",
        "MCP tool that translates text for agents in many languages.",
        [option(PUB, USDC_PUB, "20000")],
        kind="mcp",
    ),
    listing(
        "tickerline-fx",
        "Tickerline FX",
        "Foreign exchange rates and currency conversion quotes.",
        [option(PUB, USDC_PUB, "10000")],
        settlements=700,
    ),
    listing(
        "coinpulse-spot",
        "Coinpulse Spot",
        "Spot crypto token prices and currency quotes in real time.",
        [option(PUB, XLM_PUB, "100000"), option(TEST, USDC_TEST, "80000")],
    ),
    listing(
        "forex-feed",
        "Forex Rates Feed",
        "Currency exchange rates feed with historical quotes.",
        [option(TEST, USDC_TEST, "40000", "upto")],
    ),
    listing(
        "geo-waypoint",
        "Waypoint Geocode",
        "Geocoding: turn a street address into coordinates.",
        [option(PUB, USDC_PUB, "20000")],
        settlements=300,
    ),
    listing(
        "geo-reverse",
        "Reverse Geocoder",
        "Reverse geocoding from coordinates to a street address.",
        [option(TEST, USDC_TEST, "20000")],
    ),
]


def query(
    qid: str,
    text: str,
    cls: str,
    *,
    source: str | None = None,
    group: str | None = None,
    constraints: dict[str, Any] | None = None,
    expect: dict[str, Any] | None = None,
) -> Query:
    return Query(qid, text, cls, "test", source, group, constraints or {}, expect or {})


QUERIES = [
    query("q001", "Skyline Daily Forecast", "exact-name"),
    query("q002", "Polyglot Translate", "exact-name"),
    query("q003", "Tickerline FX", "exact-name"),
    query("q004", "Waypoint Geocode", "exact-name"),
    query("q005", "Skyline Daily Forcast", "typo", source="q001"),
    query("q010", "weather forecast for my city", "paraphrase", group="p01"),
    query("q011", "city weather forecast and rain", "paraphrase", group="p01"),
    query("q020", "weather forecast on testnet", "filtered", constraints={"network": TEST}),
    query(
        "q021",
        "translate text under $0.01 on testnet",
        "filtered",
        constraints={"network": TEST, "max_price_usd": "0.01"},
    ),
    query("q022", "currency quotes paid in XLM", "filtered", constraints={"asset": "XLM"}),
    query("q023", "translation as an mcp tool", "mcp", constraints={"type": "mcp"}),
    query("q030", "unicorn grooming salon", "no-result", expect={"no_result": True}),
]

JUDGMENTS: dict[str, dict[str, int]] = {
    "q001": {"skyline-daily": 3, "stratus-hourly": 1, "nimbus-outlook": 1},
    "q002": {"polyglot-translate": 3, "lingua-bridge": 2},
    "q003": {"tickerline-fx": 3, "forex-feed": 2},
    "q004": {"geo-waypoint": 3, "geo-reverse": 1},
    "q005": {"skyline-daily": 3},
    "q010": {"skyline-daily": 3, "stratus-hourly": 3, "nimbus-outlook": 2},
    "q011": {"skyline-daily": 3, "stratus-hourly": 3},
    "q020": {"nimbus-outlook": 3, "skyline-daily": 2},
    "q021": {"polyglot-translate": 3, "lingua-bridge": 3},
    "q022": {"coinpulse-spot": 3},
    "q023": {"babel-mcp": 3},
    "q030": {"skyline-daily": 0},
}

CONFORMANCE_DOCS = [
    listing("cf-pub-usdc", "Conformance Pub USDC", "conformance listing", [option(PUB)]),
    listing(
        "cf-test-upto",
        "Conformance Test Upto",
        "conformance listing",
        [option(TEST, USDC_TEST, scheme="upto")],
    ),
    listing(
        "cf-split",
        "Conformance Split Options",
        "conformance listing",
        # Each option satisfies part of {network: testnet, scheme: upto}; never the whole.
        [option(TEST, USDC_TEST, scheme="exact"), option(PUB, USDC_PUB, scheme="upto")],
    ),
    listing(
        "cf-muxed", "Conformance Muxed Recipient", "conformance listing", [option(pay_to=ALICE_MUX)]
    ),
    listing("cf-bob", "Conformance Bob Recipient", "conformance listing", [option(pay_to=BOB)]),
    listing(
        "cf-18-at",
        "Conformance Eighteen Decimals At Ceiling",
        "conformance listing",
        [option(PUB, TOKEN18, str(5 * 10**15))],  # 0.005 TOK * 2.00 = 0.01 USD
    ),
    listing(
        "cf-18-above",
        "Conformance Eighteen Decimals Above",
        "conformance listing",
        [option(PUB, TOKEN18, str(5 * 10**15 + 1))],
    ),
    listing(
        "cf-unknown",
        "Conformance Unknown Asset",
        "conformance listing",
        [option(PUB, UNKNOWN, "1")],
    ),
]

CONFORMANCE_CASES: list[dict[str, Any]] = [
    {"id": "c01", "filters": {"network": TEST, "scheme": "upto"}, "expect_ids": ["cf-test-upto"]},
    {
        "id": "c02",
        "filters": {"recipient": ALICE},
        "expect_ids": [
            "cf-18-above",
            "cf-18-at",
            "cf-muxed",
            "cf-pub-usdc",
            "cf-split",
            "cf-test-upto",
            "cf-unknown",
        ],
    },
    {"id": "c03", "filters": {"asset": "TOK", "max_price_usd": "0.01"}, "expect_ids": ["cf-18-at"]},
    {
        "id": "c04",
        "filters": {"network": PUB, "asset": "USDC"},
        "expect_ids": ["cf-bob", "cf-muxed", "cf-pub-usdc", "cf-split"],
    },
]


def write_conformance(root: Path) -> Path:
    conf = root / "conformance"
    conf.mkdir(parents=True, exist_ok=True)
    with open(conf / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for d in CONFORMANCE_DOCS:
            record = {
                "id": d.id,
                "title": d.title,
                "text": d.text,
                "fields": d.fields,
                "x402": d.x402,
                "sidecar": d.sidecar,
            }
            fh.write(json.dumps(record) + "\n")
    lines = []
    for case in CONFORMANCE_CASES:
        lines.append(f"- id: {case['id']}")
        lines.append("  query: conformance listing")
        lines.append(f"  filters: {json.dumps(case['filters'])}")
        lines.append(f"  expect_ids: {json.dumps(sorted(case['expect_ids']))}")
    (conf / "cases.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return conf


def collection(root: Path | None = None) -> Collection:
    if root is not None:
        write_conformance(root)
    return Collection(
        documents={d.id: d for d in DOCS},
        queries={q.id: q for q in QUERIES},
        judgments={q: dict(j) for q, j in JUDGMENTS.items()},
        assets=list(ASSETS),
        manifest={"grades": [0, 1, 2, 3], "splits": ["dev", "test"]},
        root=str(root) if root is not None else None,
    )
