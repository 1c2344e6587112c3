"""x402 filters: validation (parse_filters), payment-option rows, and the SQL predicate's shape.

The predicate's results are checked against PostgreSQL in test_x402_sql.py.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from pytest_searcheval.collection.model import Asset
from pytest_searcheval.engine.x402 import (
    FilterError,
    Filters,
    option_rows,
    parse_filters,
    parse_price,
    to_sql,
)
from pytest_searcheval.x402 import strkey

USDC_PUB = strkey.encode_contract(bytes([1]) * 32)
USDC_TEST = strkey.encode_contract(bytes([2]) * 32)
EURC_PUB = strkey.encode_contract(bytes([3]) * 32)
ASSETS = [
    Asset("USDC", "stellar:pubnet", USDC_PUB, 7, Decimal("1.00")),
    Asset("USDC", "stellar:testnet", USDC_TEST, 7, Decimal("1.00")),
    Asset("EURC", "stellar:pubnet", EURC_PUB, 7, Decimal("1.08")),
]
G = strkey.encode_account(bytes([9]) * 32)
M = strkey.encode_muxed(bytes([9]) * 32, 42)
C = strkey.encode_contract(bytes([7]) * 32)


def test_parse_all_fields() -> None:
    f = parse_filters(
        {
            "type": "mcp",
            "network": "stellar:testnet",
            "scheme": "upto",
            "asset": "EURC",
            "recipient": M,
            "max_price_usd": "0.50",
            "extension": "bazaar",
        },
        ASSETS,
    )
    assert f == Filters("mcp", "stellar:testnet", "upto", "EURC", M, Decimal("0.50"), "bazaar")
    assert f.to_dict()["max_price_usd"] == "0.5"
    assert bool(f) and not bool(Filters())


def test_empty_and_none_values_mean_unset() -> None:
    assert parse_filters({"network": "", "asset": None}, ASSETS) == Filters()
    assert parse_filters(None, ASSETS) == Filters()


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        ("network", "stellar:mainnet", "unknown network"),
        ("network", "Stellar:Pubnet", "unknown network"),
        ("type", "grpc", "unknown type"),
        ("scheme", "stream", "unknown scheme"),
        ("asset", "DOGE", "unknown asset"),
        ("asset", "usdc", "unknown asset"),
        ("asset", strkey.encode_contract(bytes([5]) * 32), "unknown asset"),
        ("recipient", "GABC", "characters"),
        ("recipient", "X" * 56, "unknown strkey prefix"),
        ("recipient", G[:-1] + ("A" if G[-1] != "A" else "B"), "checksum"),
        ("recipient", G.lower(), "strkey prefix"),
        ("max_price_usd", "-1", "negative"),
        ("max_price_usd", "abc", "decimal number"),
        ("max_price_usd", "NaN", "decimal number"),
        ("max_price_usd", "Infinity", "decimal number"),
        ("max_price_usd", "1e3", "decimal number"),
        ("max_price_usd", "1" * 41, "at most"),
        ("max_price_usd", float("nan"), "NaN"),
        ("max_price_usd", True, "boolean"),
        ("extension", "has space", "extension name"),
        ("extension", "'; DROP TABLE documents; --", "extension name"),
        ("network", "stellar:pubnet\x00", "NUL"),
        ("type", " http", "surrounding spaces"),
        ("netwrok", "stellar:pubnet", "unknown filter"),
        ("asset", 5, "expected a string"),
    ],
)
def test_invalid_values_name_the_field(key: str, value: object, needle: str) -> None:
    with pytest.raises(FilterError) as info:
        parse_filters({key: value}, ASSETS)
    assert info.value.field == key
    assert needle in info.value.message


@pytest.mark.parametrize(
    ("value", "expected"),
    [("5", "5"), ("0.05", "0.05"), (".5", "0.5"), ("5.", "5"), (0, "0"), (Decimal("1.10"), "1.1")],
)
def test_price_forms(value: object, expected: str) -> None:
    assert format(parse_price(value).normalize(), "f") == expected


def test_asset_by_address_and_recipient_kinds() -> None:
    assert parse_filters({"asset": USDC_TEST}, ASSETS).asset == USDC_TEST
    for key in (G, M, C):
        assert parse_filters({"recipient": key}, ASSETS).recipient == key


def test_merged_over_keeps_explicit_values() -> None:
    explicit = Filters(network="stellar:pubnet")
    extracted = Filters(network="stellar:testnet", asset="USDC")
    merged = explicit.merged_over(extracted)
    assert merged == Filters(network="stellar:pubnet", asset="USDC")


def test_option_rows_registry_and_muxed_account() -> None:
    doc = {
        "id": "d1",
        "x402": {
            "type": "http",
            "accepts": [
                {
                    "scheme": "exact",
                    "network": "stellar:pubnet",
                    "asset": EURC_PUB,
                    "amount": "50000",
                    "payTo": M,
                },
                "not an option",
                {
                    "scheme": "upto",
                    "network": "stellar:testnet",
                    "asset": EURC_PUB,
                    "amount": "1.5",
                    "payTo": C,
                },
                {
                    "scheme": "exact",
                    "network": "stellar:testnet",
                    "asset": USDC_TEST,
                    "amount": 7,
                    "payTo": "bogus",
                },
            ],
        },
    }
    rows = option_rows(doc, ASSETS)
    assert [r["idx"] for r in rows] == [0, 2, 3]
    first, second, third = rows
    assert first["asset_code"] == "EURC" and first["decimals"] == 7
    assert first["usd_rate"] == Decimal("1.08") and first["amount"] == Decimal(50000)
    assert first["pay_to"] == M and first["pay_to_account"] == G
    # EURC's address is registered on pubnet only: on testnet it is an unknown asset.
    assert second["asset_code"] is None and second["usd_rate"] is None
    assert second["amount"] is None and second["pay_to_account"] is None
    assert third["amount"] == Decimal(7) and third["pay_to_account"] is None
    assert option_rows({"id": "generic", "title": "t"}, ASSETS) == []


def test_sql_is_parameterised_and_single_exists() -> None:
    f = Filters(
        network="stellar:pubnet",
        asset="'; DROP TABLE documents; --",
        recipient=G,
        max_price_usd=Decimal("1"),
        type="http",
        extension="bazaar",
    )
    fragment, params = to_sql(f)
    assert "DROP" not in fragment
    assert fragment.count("payment_options") == 1
    assert params["xf_asset"] == "'; DROP TABLE documents; --"
    assert "pay_to_account" in fragment
    assert to_sql(Filters()) == ("TRUE", {})
    assert "po.pay_to =" in to_sql(Filters(recipient=M))[0]
    with pytest.raises(ValueError):
        to_sql(f, doc="d; DROP")
