from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any

import pytest

from pytest_searcheval.collection.model import Asset, Document
from pytest_searcheval.x402 import strkey
from pytest_searcheval.x402.oracle import check_filters, option_price_usd, satisfies, violations


def _c(label: str) -> str:
    return strkey.encode_contract(hashlib.sha256(label.encode()).digest())


KEY = hashlib.sha256(b"acct").digest()
G = strkey.encode_account(KEY)
M7 = strkey.encode_muxed(KEY, 7)
M8 = strkey.encode_muxed(KEY, 8)
OTHER_G = strkey.encode_account(hashlib.sha256(b"other").digest())
CONTRACT = _c("payee")
USDC_P, USDC_T, EURC_P, WETH_P = _c("usdc-p"), _c("usdc-t"), _c("eurc-p"), _c("weth-p")
ASSETS = [
    Asset("USDC", "stellar:pubnet", USDC_P, 7, Decimal("1.00")),
    Asset("USDC", "stellar:testnet", USDC_T, 7, Decimal("1.00")),
    Asset("EURC", "stellar:pubnet", EURC_P, 7, Decimal("1.08")),
    Asset("WETH", "stellar:pubnet", WETH_P, 18, Decimal("3000")),
]


def opt(**kw: Any) -> dict[str, Any]:
    base = {
        "scheme": "exact",
        "network": "stellar:pubnet",
        "asset": USDC_P,
        "amount": "50000",
        "payTo": G,
        "maxTimeoutSeconds": 60,
        "extra": {},
    }
    base.update(kw)
    return base


def listing(*options: dict[str, Any], type_: str = "http", ext: Any = None) -> Document:
    wire: dict[str, Any] = {
        "resource": "https://x.example/",
        "type": type_,
        "accepts": list(options),
    }
    if ext is not None:
        wire["extensions"] = ext
    return Document("d", "t", "x", {}, wire, {})


def test_one_option_must_satisfy_all_option_filters_at_once() -> None:
    # Option 0 is on testnet in USDC, option 1 on pubnet in EURC: each satisfies half.
    doc = listing(opt(network="stellar:testnet", asset=USDC_T), opt(asset=EURC_P))
    f = {"network": "stellar:pubnet", "asset": "USDC"}
    assert not satisfies(doc, f, ASSETS)
    assert "no single payment option" in violations(doc, f, ASSETS)[0]
    assert satisfies(listing(opt(), opt(asset=EURC_P)), f, ASSETS)


def test_asset_code_resolves_per_network_and_address_is_exact() -> None:
    on_test = listing(opt(network="stellar:testnet", asset=USDC_T))
    assert satisfies(on_test, {"asset": "USDC"}, ASSETS)
    assert satisfies(on_test, {"asset": USDC_T}, ASSETS)
    assert not satisfies(on_test, {"asset": USDC_P}, ASSETS)
    # The pubnet USDC address used on testnet is not a registered asset there.
    mislabelled = listing(opt(network="stellar:testnet", asset=USDC_P))
    assert not satisfies(mislabelled, {"asset": "USDC"}, ASSETS)
    assert not satisfies(listing(opt()), {"asset": "usdc"}, ASSETS)  # codes are case-sensitive


def test_recipient_g_matches_its_muxed_accounts_but_m_matches_only_itself() -> None:
    assert satisfies(listing(opt(payTo=M7)), {"recipient": G}, ASSETS)
    assert satisfies(listing(opt(payTo=G)), {"recipient": G}, ASSETS)
    assert not satisfies(listing(opt(payTo=G)), {"recipient": M7}, ASSETS)
    assert not satisfies(listing(opt(payTo=M8)), {"recipient": M7}, ASSETS)
    assert satisfies(listing(opt(payTo=M7)), {"recipient": M7}, ASSETS)
    assert not satisfies(listing(opt(payTo=OTHER_G)), {"recipient": G}, ASSETS)
    assert satisfies(listing(opt(payTo=CONTRACT)), {"recipient": CONTRACT}, ASSETS)
    assert not satisfies(listing(opt(payTo=CONTRACT)), {"recipient": G}, ASSETS)
    assert not satisfies(listing(opt(payTo="not-a-key")), {"recipient": G}, ASSETS)


def test_price_is_exact_and_the_ceiling_matches() -> None:
    doc = listing(opt(amount="50000"))  # 0.005 USDC
    assert satisfies(doc, {"max_price_usd": "0.005"}, ASSETS)
    assert satisfies(doc, {"max_price_usd": 0.005}, ASSETS)  # YAML float goes through str()
    assert not satisfies(doc, {"max_price_usd": "0.0049999"}, ASSETS)
    eurc = listing(opt(asset=EURC_P, amount="10000000"))  # 1 EURC = 1.08 USD
    assert satisfies(eurc, {"max_price_usd": "1.08"}, ASSETS)
    assert not satisfies(eurc, {"max_price_usd": "1.0799999"}, ASSETS)


def test_eighteen_decimals_distinguish_one_base_unit() -> None:
    # 1e-18 WETH at 3000 USD: ceiling of exactly 1 WETH-wei more or less must flip the result.
    amount = 10**18  # 1 WETH = 3000 USD
    doc = listing(opt(asset=WETH_P, amount=str(amount)))
    assert satisfies(doc, {"max_price_usd": "3000"}, ASSETS)
    over = listing(opt(asset=WETH_P, amount=str(amount + 1)))
    assert not satisfies(over, {"max_price_usd": "3000"}, ASSETS)
    assert satisfies(over, {"max_price_usd": "3000.000000000000003"}, ASSETS)
    assert not satisfies(over, {"max_price_usd": "3000.000000000000002999"}, ASSETS)
    assert float(amount + 1) / 1e18 * 3000 == 3000.0  # floats could not tell them apart


def test_unknown_asset_has_no_price_and_never_matches_a_price_filter() -> None:
    doc = listing(opt(asset=_c("mystery"), amount="1"))
    assert option_price_usd(doc.x402["accepts"][0], ASSETS) is None  # type: ignore[index]
    assert not satisfies(doc, {"max_price_usd": "1000000"}, ASSETS)
    assert satisfies(doc, {"network": "stellar:pubnet"}, ASSETS)


def test_listing_level_filters_type_and_extension() -> None:
    mcp = listing(opt(), type_="mcp", ext={"bazaar": {}})
    assert satisfies(mcp, {"type": "mcp", "extension": "bazaar"}, ASSETS)
    assert not satisfies(mcp, {"type": "http"}, ASSETS)
    assert not satisfies(mcp, {"extension": "other"}, ASSETS)
    assert not satisfies(listing(opt()), {"extension": "bazaar"}, ASSETS)


def test_raw_records_and_registry_mappings_are_accepted() -> None:
    record = {"id": "r", "x402": listing(opt()).x402}
    registry = [
        {
            "code": "USDC",
            "network": "stellar:pubnet",
            "address": USDC_P,
            "decimals": 7,
            "usd": "1.00",
        }
    ]
    assert satisfies(record, {"asset": "USDC", "max_price_usd": "0.01"}, registry)


def test_generic_documents_and_empty_accepts_fail_x402_filters() -> None:
    generic = Document("g", "t", "x")
    assert violations(generic, {}, ASSETS) == []
    assert not satisfies(generic, {"network": "stellar:pubnet"}, ASSETS)
    assert not satisfies(listing(), {"scheme": "exact"}, ASSETS)
    assert satisfies(listing(), {"type": "http"}, ASSETS)


@pytest.mark.parametrize(
    ("filters", "key"),
    [
        ({"netwrk": "stellar:pubnet"}, "netwrk"),
        ({"network": "ethereum"}, "network"),
        ({"type": "grpc"}, "type"),
        ({"scheme": "stream"}, "scheme"),
        ({"asset": "DOGE"}, "asset"),
        ({"recipient": "GABC"}, "recipient"),
        ({"max_price_usd": "-1"}, "max_price_usd"),
        ({"max_price_usd": "cheap"}, "max_price_usd"),
        ({"extension": ""}, "extension"),
    ],
)
def test_check_filters_names_the_bad_key(filters: dict[str, Any], key: str) -> None:
    problems = check_filters(filters, ASSETS)
    assert [k for k, _ in problems] == [key]
    assert not satisfies(listing(opt()), filters, ASSETS) or key == "extension"


def test_valid_filters_have_no_problems() -> None:
    f = {
        "type": "http",
        "network": "stellar:testnet",
        "scheme": "upto",
        "asset": "EURC",
        "recipient": M7,
        "max_price_usd": "0.5",
        "extension": "bazaar",
    }
    assert check_filters(f, ASSETS) == []
