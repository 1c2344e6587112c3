"""The x402 filter predicate, run in PostgreSQL, against hand-written expectations and against
the independent oracle (pytest_searcheval.x402.oracle) over every filter combination."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest

from pytest_searcheval.collection.model import Asset
from pytest_searcheval.engine.isolation import IsolatedSchema
from pytest_searcheval.engine.x402 import Filters, option_rows, parse_filters, to_sql
from pytest_searcheval.x402 import oracle as constraints
from pytest_searcheval.x402 import strkey

USDC_PUB = strkey.encode_contract(bytes([1]) * 32)
USDC_TEST = strkey.encode_contract(bytes([2]) * 32)
EURC_PUB = strkey.encode_contract(bytes([3]) * 32)
SIX = strkey.encode_contract(bytes([4]) * 32)
WEI = strkey.encode_contract(bytes([5]) * 32)
UNKNOWN = strkey.encode_contract(bytes([6]) * 32)
ASSETS = [
    Asset("USDC", "stellar:pubnet", USDC_PUB, 7, Decimal("1.00")),
    Asset("USDC", "stellar:testnet", USDC_TEST, 7, Decimal("1.00")),
    Asset("EURC", "stellar:pubnet", EURC_PUB, 7, Decimal("1.08")),
    Asset("SIX", "stellar:testnet", SIX, 6, Decimal("0.25")),
    Asset("WEI", "stellar:pubnet", WEI, 18, Decimal("3000")),
]
G = strkey.encode_account(bytes([9]) * 32)
G2 = strkey.encode_account(bytes([10]) * 32)
M = strkey.encode_muxed(bytes([9]) * 32, 42)
M2 = strkey.encode_muxed(bytes([9]) * 32, 43)
C = strkey.encode_contract(bytes([7]) * 32)


def opt(
    network: str, asset: str, amount: str, pay_to: str = G, scheme: str = "exact"
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
    *options: dict[str, Any],
    kind: str = "http",
    extensions: dict[str, Any] | None = None,
) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "resource": f"https://{doc_id}.example/",
        "type": kind,
        "accepts": list(options),
    }
    if extensions is not None:
        wire["extensions"] = extensions
    return {"id": doc_id, "title": doc_id, "text": doc_id, "fields": {}, "x402": wire}


PUB, TEST = "stellar:pubnet", "stellar:testnet"
CORPUS = [
    # 1.00 USD on pubnet paid to G; the reference listing
    listing("usd1-pub-g", opt(PUB, USDC_PUB, "10000000")),
    # one base unit above 1 USD
    listing("usd1plus-pub-m", opt(PUB, USDC_PUB, "10000001", M)),
    # one base unit below 1 USD, testnet, upto scheme, to another muxed id
    listing("usd1minus-test-m2", opt(TEST, USDC_TEST, "9999999", M2, "upto"), kind="mcp"),
    # split: testnet is cheap but pays G2; pubnet pays G but is expensive
    listing(
        "split",
        opt(TEST, USDC_TEST, "100", G2),
        opt(PUB, USDC_PUB, "900000000", G),
        extensions={"bazaar": {}},
    ),
    # EURC: 1 EUR = 1.08 USD; 0.925925.. EUR; 9259259 units * 1.08 = 0.99999997 USD
    listing("eurc", opt(PUB, EURC_PUB, "9259259", C)),
    # 6 decimals: 4 USD exactly
    listing("six", opt(TEST, SIX, "16000000", G)),
    # 18 decimals: 1 USD = 1/3000 WEI-unit; one base unit above and at
    listing("wei-at", opt(PUB, WEI, "333333333333333", G)),  # 0.999999999999999 USD
    listing("wei-above", opt(PUB, WEI, "333333333333334", G)),  # 1.000000000000002 USD
    listing("wei-one-unit", opt(TEST, USDC_TEST, "999999999", C), opt(PUB, WEI, "1", M2)),
    # unknown asset: never priced
    listing("unknown", opt(PUB, UNKNOWN, "1", G), extensions={"other": {}}),
    # EURC address on testnet is not registered there
    listing("eurc-wrong-net", opt(TEST, EURC_PUB, "1", G)),
    # malformed amount and payTo
    listing("malformed", opt(PUB, USDC_PUB, "1.5", "not-a-key")),
    listing(
        "free",
        opt(TEST, USDC_TEST, "0", C, "upto"),
        kind="mcp",
        extensions={"bazaar": {}, "other": {}},
    ),
    listing("no-options"),
    {"id": "generic", "title": "plain", "text": "no x402", "fields": {}},
]


def seed(iso: IsolatedSchema, corpus: list[dict[str, Any]]) -> None:
    with iso.connection() as conn:
        for doc in corpus:
            wire = doc.get("x402")
            conn.execute(
                "INSERT INTO documents (id, title, body, x402, doc_type)"
                " VALUES (%s, %s, %s, %s, %s)",
                (
                    doc["id"],
                    doc["title"],
                    doc["text"],
                    json.dumps(wire) if wire else None,
                    wire["type"] if wire else None,
                ),
            )
            for row in option_rows(doc, ASSETS):
                conn.execute(
                    "INSERT INTO payment_options (doc_id, idx, scheme, network, asset, asset_code,"
                    " decimals, amount, pay_to, pay_to_account, usd_rate) VALUES (%(doc_id)s,"
                    " %(idx)s, %(scheme)s, %(network)s, %(asset)s, %(asset_code)s, %(decimals)s,"
                    " %(amount)s, %(pay_to)s, %(pay_to_account)s, %(usd_rate)s)",
                    row,
                )
            for name in (wire or {}).get("extensions", {}):
                conn.execute(
                    "INSERT INTO extensions (doc_id, name) VALUES (%s, %s)", (doc["id"], name)
                )


@pytest.fixture(scope="module")
def seeded(pg_server: Any) -> Iterator[IsolatedSchema]:
    iso = IsolatedSchema(pg_server.dsn, params={"embedding_dim": 8}, pool_max=2).open()
    try:
        seed(iso, CORPUS)
        yield iso
    finally:
        iso.close()


def matching(iso: IsolatedSchema, filters: Filters) -> set[str]:
    fragment, params = to_sql(filters)
    with iso.connection() as conn:
        rows = conn.execute(f"SELECT d.id FROM documents d WHERE {fragment}", params).fetchall()
    return {r[0] for r in rows}


CASES: list[tuple[dict[str, Any], set[str]]] = [
    (
        {"max_price_usd": "1"},
        {"wei-one-unit", "usd1-pub-g", "usd1minus-test-m2", "eurc", "wei-at", "free", "split"},
    ),
    (
        {"max_price_usd": "1.0000001"},
        {
            "wei-one-unit",
            "usd1-pub-g",
            "usd1plus-pub-m",
            "usd1minus-test-m2",
            "eurc",
            "wei-at",
            "wei-above",
            "free",
            "split",
        },
    ),
    # eurc costs 9259259 * 1.08 / 10^7 = 0.999999972 USD: at the ceiling, then one unit below
    (
        {"max_price_usd": "0.999999972"},
        {"wei-one-unit", "usd1minus-test-m2", "eurc", "free", "split"},
    ),
    ({"max_price_usd": "0.999999971"}, {"wei-one-unit", "usd1minus-test-m2", "free", "split"}),
    ({"max_price_usd": "0.00001"}, {"free", "split", "wei-one-unit"}),
    ({"max_price_usd": "0.0000099"}, {"free", "wei-one-unit"}),
    # one base unit of an 18-decimal asset: 3000 / 10^18 USD
    ({"max_price_usd": "0.000000000000003", "network": PUB}, {"wei-one-unit"}),
    ({"max_price_usd": "0.000000000000002999", "network": PUB}, set()),
    ({"max_price_usd": "0"}, {"free"}),
    (
        {"max_price_usd": "1000"},
        {
            d["id"]
            for d in CORPUS
            if d["id"] not in ("unknown", "eurc-wrong-net", "malformed", "no-options", "generic")
        },
    ),
    (
        {"max_price_usd": "4"},
        {
            "wei-one-unit",
            "usd1-pub-g",
            "usd1plus-pub-m",
            "usd1minus-test-m2",
            "eurc",
            "six",
            "wei-at",
            "wei-above",
            "free",
            "split",
        },
    ),
    ({"network": PUB, "max_price_usd": "1"}, {"wei-one-unit", "usd1-pub-g", "eurc", "wei-at"}),
    # split: each option satisfies part only
    ({"network": TEST, "recipient": G}, {"six", "eurc-wrong-net", "usd1minus-test-m2"}),
    ({"recipient": G2, "max_price_usd": "0.01"}, {"split"}),
    ({"recipient": G, "max_price_usd": "0.01"}, {"wei-one-unit"}),
    ({"recipient": M2, "max_price_usd": "0.01"}, {"wei-one-unit"}),
    ({"recipient": C, "network": PUB}, {"eurc"}),
    (
        {"recipient": G},
        {
            "wei-one-unit",
            "usd1-pub-g",
            "usd1plus-pub-m",
            "usd1minus-test-m2",
            "split",
            "six",
            "wei-at",
            "wei-above",
            "unknown",
            "eurc-wrong-net",
        },
    ),
    ({"recipient": M}, {"usd1plus-pub-m"}),
    ({"recipient": C}, {"eurc", "free", "wei-one-unit"}),
    (
        {"asset": "USDC"},
        {
            "wei-one-unit",
            "usd1-pub-g",
            "usd1plus-pub-m",
            "usd1minus-test-m2",
            "split",
            "malformed",
            "free",
        },
    ),
    ({"asset": USDC_TEST}, {"usd1minus-test-m2", "split", "free", "wei-one-unit"}),
    ({"asset": "EURC"}, {"eurc"}),
    ({"asset": "EURC", "network": TEST}, set()),
    ({"type": "mcp"}, {"usd1minus-test-m2", "free"}),
    ({"extension": "bazaar"}, {"split", "free"}),
    ({"extension": "bazaar", "scheme": "upto"}, {"free"}),
    ({"scheme": "upto", "network": PUB}, set()),
]


@pytest.mark.parametrize(("raw", "expected"), CASES, ids=[json.dumps(c[0]) for c in CASES])
def test_hand_written_cases(
    seeded: IsolatedSchema, raw: dict[str, Any], expected: set[str]
) -> None:
    filters = parse_filters(raw, ASSETS)
    assert matching(seeded, filters) == expected
    # The independent oracle agrees with the hand-written expectation.
    assert {d["id"] for d in CORPUS if constraints.satisfies(d, raw, ASSETS)} == expected


def test_every_combination_agrees_with_the_oracle(seeded: IsolatedSchema) -> None:
    domains: dict[str, list[Any]] = {
        "type": [None, "http", "mcp"],
        "network": [None, PUB, TEST],
        "scheme": [None, "exact", "upto"],
        "asset": [None, "USDC", "EURC", USDC_TEST, WEI],
        "recipient": [None, G, M, C, G2],
        "max_price_usd": [None, "0", "0.999999971", "0.999999972", "1", "4"],
        "extension": [None, "bazaar"],
    }
    keys = list(domains)
    mismatches: list[str] = []
    checked = 0
    with seeded.connection() as conn:
        for values in itertools.product(*(domains[k] for k in keys)):
            raw = {k: v for k, v in zip(keys, values, strict=True) if v is not None}
            # Keep the run short: at most four filters at once (still thousands of sets).
            if len(raw) > 4:
                continue
            fragment, params = to_sql(parse_filters(raw, ASSETS))
            got = {
                r[0]
                for r in conn.execute(
                    f"SELECT d.id FROM documents d WHERE {fragment}", params
                ).fetchall()
            }
            want = {d["id"] for d in CORPUS if constraints.satisfies(d, raw, ASSETS)}
            checked += 1
            if got != want:
                mismatches.append(f"{raw}: sql-only={got - want} oracle-only={want - got}")
    assert checked > 1000
    assert not mismatches, "\n".join(mismatches[:20])


def test_injection_values_are_data(isolated_schema: Callable[..., IsolatedSchema]) -> None:
    iso = isolated_schema(params={"embedding_dim": 8}, pool_max=1)
    payload = "'; DROP TABLE documents; --"
    seed(iso, [listing("x", opt(PUB, USDC_PUB, "1", G), extensions={"bazaar": {}})])
    filters = Filters(asset=payload, extension=payload, network=payload, scheme="$$", type="\\x00")
    assert matching(iso, filters) == set()
    with iso.connection() as conn:
        assert conn.execute("SELECT count(*) FROM documents").fetchone() == (1,)


def test_candidate_sql_joins_as_a_doc_id_set(seeded: IsolatedSchema) -> None:
    from psycopg import sql

    from pytest_searcheval.engine.x402 import candidate_sql

    composed, params = candidate_sql({"asset": "EURC", "network": PUB}, ASSETS)
    query = sql.SQL("SELECT cand.doc_id FROM ({}) cand ORDER BY 1").format(composed)
    with seeded.connection() as conn:
        assert [r[0] for r in conn.execute(query, params).fetchall()] == ["eurc"]


def test_shipped_conformance_set(pg_server: Any) -> None:
    """Every case of the shipped filter-conformance set: the SQL predicate returns exactly the
    hand-derived expect_ids."""
    from pathlib import Path

    import yaml

    from pytest_searcheval.x402.conformance import load_conformance

    root = Path(__file__).resolve().parents[2]
    if not (root / "conformance" / "cases.yaml").exists():
        pytest.skip("no shipped conformance set")
    manifest = yaml.safe_load((root / "collection.yaml").read_text(encoding="utf-8"))
    assets = [
        Asset(
            a["code"],
            a["network"],
            a["address"],
            int(a["decimals"]),
            None if a.get("usd") is None else Decimal(str(a["usd"])),
        )
        for a in manifest["assets"]
    ]
    conf = load_conformance(root / "conformance", assets, check_oracle=False)
    records = [
        {"id": d.id, "title": d.title, "text": d.text, "fields": d.fields, "x402": d.x402}
        for d in conf.documents.values()
    ]
    iso = IsolatedSchema(pg_server.dsn, params={"embedding_dim": 8}, pool_max=1).open()
    try:
        with iso.connection() as conn:
            for doc in records:
                wire = doc["x402"]
                conn.execute(
                    "INSERT INTO documents (id, title, body, x402, doc_type)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    (
                        doc["id"],
                        doc["title"],
                        doc["text"],
                        json.dumps(wire) if wire else None,
                        wire.get("type") if wire else None,
                    ),
                )
                for row in option_rows(doc, assets):
                    conn.execute(
                        "INSERT INTO payment_options VALUES (%(doc_id)s, %(idx)s, %(scheme)s,"
                        " %(network)s, %(asset)s, %(asset_code)s, %(decimals)s, %(amount)s,"
                        " %(pay_to)s, %(pay_to_account)s, %(usd_rate)s)",
                        row,
                    )
                for name in (wire or {}).get("extensions") or {}:
                    conn.execute("INSERT INTO extensions VALUES (%s, %s)", (doc["id"], name))
        failures = []
        for case in conf.cases:
            got = matching(iso, parse_filters(case.filters, assets))
            if got != set(case.expect_ids):
                failures.append(
                    f"{case.id} {case.filters}: extra {sorted(got - case.expect_ids)},"
                    f" missing {sorted(case.expect_ids - got)}"
                )
        assert len(conf.cases) >= 10
        assert not failures, "\n".join(failures)
    finally:
        iso.close()
