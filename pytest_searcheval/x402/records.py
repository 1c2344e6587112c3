"""What the x402 domain checks in a collection beyond the generic loader: the listing record
(``x402``: type, resource, extensions, payment options) and the payment assets' addresses.

The loader (:mod:`pytest_searcheval.collection.native`) reports each problem at the record's
file and line; the fields here are relative to the record (``accepts[0].payTo``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_searcheval.x402 import strkey

#: an atomic amount is a uint256 at most: 78 decimal digits
MAX_AMOUNT_DIGITS = 78


def record_problems(wire: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Problems of one listing's x402 record as (field, message)."""
    out: list[tuple[str, str]] = []
    if wire.get("type") not in ("http", "mcp"):
        out.append(("type", f"expected 'http' or 'mcp', got {wire.get('type')!r}"))
    if not isinstance(wire.get("resource"), str):
        out.append(("resource", "expected a URL string"))
    ext = wire.get("extensions")
    if ext is not None and not isinstance(ext, dict):
        out.append(("extensions", "expected an object"))
    accepts = wire.get("accepts")
    if not isinstance(accepts, list):
        out.append(("accepts", "expected a list of payment options"))
        return out
    for i, opt in enumerate(accepts):
        f = f"accepts[{i}]"
        if not isinstance(opt, dict):
            out.append((f, "expected an object"))
            continue
        for key in ("scheme", "network", "asset"):
            if not isinstance(opt.get(key), str) or not opt.get(key):
                out.append((f"{f}.{key}", "expected a non-empty string"))
        amount = opt.get("amount")
        if not (
            isinstance(amount, str)
            and amount.isascii()
            and amount.isdigit()
            and len(amount) <= MAX_AMOUNT_DIGITS
        ):
            out.append(
                (
                    f"{f}.amount",
                    f"expected atomic units as a string of at most {MAX_AMOUNT_DIGITS} digits, "
                    f"got {str(amount)[:80]!r}",
                )
            )
        try:
            pay_to: Any = opt.get("payTo")
            strkey.decode(pay_to)
        except strkey.StrkeyError as exc:
            out.append((f"{f}.payTo", f"expected a Stellar G, M or C address: {exc}"))
    return out


def asset_problems(asset: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A payment asset whose address is a contract (C...) must decode as one."""
    address = asset.get("address")
    if isinstance(address, str) and address.startswith("C"):
        try:
            strkey.decode(address, "C")
        except strkey.StrkeyError as exc:
            return [("address", f"invalid contract address: {exc}")]
    return []
