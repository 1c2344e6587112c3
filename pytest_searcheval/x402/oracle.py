"""The independent hard-filter oracle: does a listing satisfy a set of filters?

Written from the filter vocabulary alone and sharing no code with the engine's SQL, so that the
two can be checked against each other.

Vocabulary (``FILTER_KEYS``):

* listing level: ``type`` ("http" | "mcp"), ``extension`` (a key of ``x402.extensions``);
* option level: ``network``, ``scheme``, ``asset``, ``recipient``, ``max_price_usd``.

A listing matches when every listing-level filter holds and ONE of its ``accepts[]`` options
satisfies ALL option-level filters at once (two options that each satisfy part never match).

* ``asset``: an asset code ("USDC") or an asset contract address, resolved through the registry
  to a set of (network, address) pairs: a code names every registered asset with that code, an
  address every registered asset at that address. An option matches when its (network, asset)
  is in the set. Codes are case-sensitive, as on Stellar.
* ``recipient``: a strkey. A G filter matches payTo == G and every muxed M whose account is G;
  an M filter matches only that M (same account and id); a C filter matches only that C.
* ``max_price_usd``: price = amount / 10^decimals * usd, computed with exact rationals and
  compared with ``<=`` (at the ceiling matches). An option whose (network, asset) is not in the
  registry, has no USD rate, or has a non-integer amount has no price and never matches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from pytest_searcheval.collection.model import Asset
from pytest_searcheval.x402 import strkey
from pytest_searcheval.x402.vocabulary import FILTER_KEYS

__all__ = [
    "FILTER_KEYS",
    "LISTING_KEYS",
    "OPTION_KEYS",
    "check_filters",
    "normalize_filters",
    "option_price_usd",
    "satisfies",
    "violations",
]

LISTING_KEYS = ("type", "extension")
OPTION_KEYS = ("network", "scheme", "asset", "recipient", "max_price_usd")
TYPES = ("http", "mcp")
NETWORKS = ("stellar:pubnet", "stellar:testnet")
SCHEMES = ("exact", "upto")


def _asset_list(assets: Iterable[Asset | Mapping[str, Any]]) -> list[Asset]:
    out: list[Asset] = []
    for a in assets:
        if isinstance(a, Asset):
            out.append(a)
        else:
            usd = a.get("usd")
            out.append(
                Asset(
                    code=str(a["code"]),
                    network=str(a["network"]),
                    address=str(a["address"]),
                    decimals=int(a["decimals"]),
                    usd=None if usd is None else Decimal(str(usd)),
                )
            )
    return out


def _decimal(value: object) -> Decimal | None:
    """Parse a price ceiling. Floats go through str() so that 0.05 means 0.05, not its binary
    approximation."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float, Decimal)):
        return None
    if not str(value).isascii():  # Decimal() reads other scripts' digits; prices are ASCII
        return None
    try:
        d = Decimal(str(value).strip())
    except InvalidOperation:
        return None
    if not d.is_finite() or d < 0:
        return None
    return d


def _x402(document: object) -> Mapping[str, Any] | None:
    wire = (
        document.get("x402") if isinstance(document, Mapping) else getattr(document, "x402", None)
    )
    return wire if isinstance(wire, Mapping) else None


def check_filters(
    filters: Mapping[str, Any], assets: Iterable[Asset | Mapping[str, Any]]
) -> list[tuple[str, str]]:
    """Problems with a filter set as (key, message) pairs: unknown keys, invalid values, assets
    that the registry does not know. Empty means the filters are well formed."""
    registry = _asset_list(assets)
    out: list[tuple[str, str]] = []
    for key, value in filters.items():
        if key not in FILTER_KEYS:
            out.append(
                (str(key), f"unknown filter {key!r}: expected one of {', '.join(FILTER_KEYS)}")
            )
        elif key == "type" and value not in TYPES:
            out.append((key, f"expected one of {', '.join(TYPES)}, got {value!r}"))
        elif key == "network" and value not in NETWORKS:
            out.append((key, f"expected one of {', '.join(NETWORKS)}, got {value!r}"))
        elif key == "scheme" and value not in SCHEMES:
            out.append((key, f"expected one of {', '.join(SCHEMES)}, got {value!r}"))
        elif key == "asset":
            if not isinstance(value, str) or not value:
                out.append((key, f"expected an asset code or contract address, got {value!r}"))
            elif not any(value in (a.code, a.address) for a in registry):
                codes = sorted({a.code for a in registry})
                out.append(
                    (
                        key,
                        f"unknown asset {value!r}: expected a registered code ({', '.join(codes)})"
                        " or a registered contract address",
                    )
                )
        elif key == "recipient":
            try:
                strkey.decode(value)
            except strkey.StrkeyError as exc:
                out.append((key, f"expected a Stellar G, M or C address: {exc}"))
        elif key == "max_price_usd" and _decimal(value) is None:
            out.append((key, f"expected a non-negative decimal number, got {value!r}"))
        elif key == "extension" and (not isinstance(value, str) or not value):
            out.append((key, f"expected an extension name, got {value!r}"))
    return out


def normalize_filters(filters: Mapping[str, Any]) -> dict[str, Any]:
    """Canonical form of well-formed filters: max_price_usd as a plain decimal string."""
    out = dict(filters)
    if "max_price_usd" in out:
        d = _decimal(out["max_price_usd"])
        if d is not None:
            out["max_price_usd"] = format(d.normalize(), "f")
    return out


def option_price_usd(option: Mapping[str, Any], assets: Sequence[Asset]) -> Fraction | None:
    """Exact USD price of one payment option, or None when it has none (see module docstring)."""
    amount = option.get("amount")
    if isinstance(amount, bool):
        return None
    if isinstance(amount, int):
        units = amount
    elif isinstance(amount, str) and amount.isascii() and amount.isdigit():
        units = int(amount)
    else:
        return None
    for a in assets:
        if a.address == option.get("asset") and a.network == option.get("network"):
            if a.usd is None:
                return None
            return Fraction(units, 10**a.decimals) * Fraction(a.usd)
    return None


def _recipient_matches(want: str, pay_to: object) -> bool:
    if not isinstance(pay_to, str):
        return False
    try:
        w = strkey.decode(want)
    except strkey.StrkeyError:
        return False
    try:
        p = strkey.decode(pay_to)
    except strkey.StrkeyError:
        return False
    if w.kind == "G":
        return p.kind in ("G", "M") and p.key == w.key
    return p == w


def _option_reasons(
    option: Mapping[str, Any], filters: Mapping[str, Any], assets: Sequence[Asset]
) -> list[str]:
    reasons: list[str] = []
    network, scheme = option.get("network"), option.get("scheme")
    if "network" in filters and network != filters["network"]:
        reasons.append(f"network {network!r} != {filters['network']!r}")
    if "scheme" in filters and scheme != filters["scheme"]:
        reasons.append(f"scheme {scheme!r} != {filters['scheme']!r}")
    if "asset" in filters:
        want = filters["asset"]
        allowed = {(a.network, a.address) for a in assets if want in (a.code, a.address)}
        if (network, option.get("asset")) not in allowed:
            reasons.append(f"asset {option.get('asset')!r} on {network!r} is not {want!r}")
    if "recipient" in filters and not _recipient_matches(filters["recipient"], option.get("payTo")):
        reasons.append(f"payTo {option.get('payTo')!r} is not {filters['recipient']!r}")
    if "max_price_usd" in filters:
        ceiling = _decimal(filters["max_price_usd"])
        price = option_price_usd(option, assets)
        if ceiling is None:
            reasons.append(f"invalid max_price_usd {filters['max_price_usd']!r}")
        elif price is None:
            reasons.append(
                f"amount {option.get('amount')!r} of {option.get('asset')!r} has no USD price"
            )
        elif price > Fraction(ceiling):
            reasons.append(f"price {_show(price)} USD > {ceiling} USD")
    return reasons


def _show(price: Fraction) -> str:
    d = Decimal(price.numerator) / Decimal(price.denominator)
    return format(d.normalize(), "f")


def violations(
    document: object, filters: Mapping[str, Any], assets: Iterable[Asset | Mapping[str, Any]]
) -> list[str]:
    """Why ``document`` (a Document or a raw record mapping) fails ``filters``; empty = it matches.

    Unknown filter keys are reported as violations so that a typo never passes silently.
    """
    registry = _asset_list(assets)
    reasons: list[str] = []
    for key in filters:
        if key not in FILTER_KEYS:
            reasons.append(f"unknown filter {key!r}")
    wire = _x402(document)
    if wire is None:
        if any(k in FILTER_KEYS for k in filters):
            reasons.append("not an x402 listing: no payment options to filter on")
        return reasons
    if "type" in filters and wire.get("type") != filters["type"]:
        reasons.append(f"type {wire.get('type')!r} != {filters['type']!r}")
    if "extension" in filters:
        ext = wire.get("extensions")
        if not isinstance(ext, Mapping) or filters["extension"] not in ext:
            reasons.append(f"extension {filters['extension']!r} absent")
    if any(k in OPTION_KEYS for k in filters):
        accepts = wire.get("accepts")
        options = (
            [o for o in accepts if isinstance(o, Mapping)] if isinstance(accepts, list) else []
        )
        if not options:
            reasons.append("no payment options (accepts[] is empty)")
        else:
            per_option = [_option_reasons(o, filters, registry) for o in options]
            if all(per_option):
                detail = "; ".join(f"option {i}: {', '.join(r)}" for i, r in enumerate(per_option))
                reasons.append(f"no single payment option satisfies all option filters ({detail})")
    return reasons


def satisfies(
    document: object, filters: Mapping[str, Any], assets: Iterable[Asset | Mapping[str, Any]]
) -> bool:
    """True when ``document`` matches every filter (``violations`` is empty)."""
    return not violations(document, filters, assets)
