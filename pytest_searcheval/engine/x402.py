"""x402 hard filters for the reference engine: validation, SQL predicate, payment-option rows.

The filter vocabulary is the one every layer shares (``targets.FILTER_KEYS``):

* listing level: ``type`` ("http" | "mcp"), ``extension`` (a key of ``x402.extensions``);
* option level: ``network``, ``scheme``, ``asset``, ``recipient``, ``max_price_usd``.

A listing matches when every listing-level filter holds and ONE row of ``payment_options``
(one entry of ``x402.accepts[]``) satisfies ALL option-level filters at once: the predicate is a
single ``EXISTS`` over the options, never one ``EXISTS`` per filter (that would let two options
that each satisfy half of the filters match the whole).

Option-level semantics, as SQL over the ``payment_options`` row ``po``:

* ``asset``: a registered code or contract address. ``po.asset_code`` is set (by
  :func:`option_rows`) only when ``(po.network, po.asset)`` is in the registry, so
  ``po.asset_code IS NOT NULL AND (po.asset_code = :asset OR po.asset = :asset)``: a code names
  every registered asset with that code on the option's network, an address the registered asset
  at that address. Codes are case-sensitive, as on Stellar.
* ``recipient``: G matches ``po.pay_to_account = G`` (``pay_to_account`` is the account of a G or
  muxed M ``payTo``); M and C match ``po.pay_to`` exactly (strkeys are canonical, so textual
  equality is key equality).
* ``max_price_usd``: price = amount * usd_rate / 10^decimals, compared as
  ``amount * usd_rate <= max_price_usd * 10^decimals`` in ``numeric`` (exact decimal arithmetic,
  no division, no float: an 18-decimal asset distinguishes one base unit). At the ceiling
  matches. An option in an asset the registry does not know has ``usd_rate IS NULL`` and never
  matches; so does an option whose amount is not a non-negative integer (``amount IS NULL``).

Documents without an ``x402`` object have no options and no type, so any filter excludes them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from decimal import Decimal, InvalidOperation, localcontext
from typing import TYPE_CHECKING, Any, Protocol

from pytest_searcheval.x402 import strkey
from pytest_searcheval.x402.vocabulary import FILTER_KEYS

if TYPE_CHECKING:
    from psycopg import sql

__all__ = [
    "EXTENSION_PATTERN",
    "FILTER_KEYS",
    "MAX_PRICE_CHARS",
    "NETWORKS",
    "PRICE_PATTERN",
    "SCHEMES",
    "TYPES",
    "AssetLike",
    "FilterError",
    "Filters",
    "candidate_sql",
    "option_rows",
    "parse_filters",
    "to_sql",
]

OPTION_KEYS: tuple[str, ...] = ("network", "scheme", "asset", "recipient", "max_price_usd")
TYPES: tuple[str, ...] = ("http", "mcp")
NETWORKS: tuple[str, ...] = ("stellar:pubnet", "stellar:testnet")
SCHEMES: tuple[str, ...] = ("exact", "upto")

#: Extension keys are identifiers ("bazaar", "sign-in-with-x", "payment.identifier").
EXTENSION_PATTERN = r"[A-Za-z][A-Za-z0-9_.:-]{0,63}"
#: A price ceiling is a plain decimal of ASCII digits (no exponent, no sign, no spaces inside;
#: not ``\d``, which takes every script's digits and Decimal() would read them), at most
#: MAX_PRICE_CHARS long.
PRICE_PATTERN = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
MAX_PRICE_CHARS = 40
_EXTENSION_RE = re.compile(EXTENSION_PATTERN)
_PRICE_RE = re.compile(PRICE_PATTERN)
_MAX_PRICE_CHARS = MAX_PRICE_CHARS
_MAX_VALUE_CHARS = 256


class AssetLike(Protocol):
    """What the filters need of a registered asset (``collection_model.Asset`` fits)."""

    @property
    def code(self) -> str: ...
    @property
    def network(self) -> str: ...
    @property
    def address(self) -> str: ...
    @property
    def decimals(self) -> int: ...
    @property
    def usd(self) -> Decimal | None: ...


class FilterError(ValueError):
    """A filter value is invalid. ``field`` is the filter key (the HTTP parameter name)."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True, slots=True)
class Filters:
    """Validated hard filters; ``None`` means "no constraint on this key".

    ``max_price_usd`` is a finite non-negative ``Decimal``; ``recipient`` a canonical strkey.
    """

    type: str | None = None
    network: str | None = None
    scheme: str | None = None
    asset: str | None = None
    recipient: str | None = None
    max_price_usd: Decimal | None = None
    extension: str | None = None

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) is not None for f in fields(self))

    def to_dict(self) -> dict[str, str]:
        """The set filters as JSON-safe strings (``max_price_usd`` as a plain decimal)."""
        out: dict[str, str] = {}
        for key, value in asdict(self).items():
            if value is None:
                continue
            out[key] = _plain(value) if isinstance(value, Decimal) else str(value)
        return out

    def merged_over(self, base: Filters) -> Filters:
        """``self`` with every unset key taken from ``base`` (explicit filters beat extracted)."""
        updates = {
            f.name: getattr(base, f.name)
            for f in fields(self)
            if getattr(self, f.name) is None and getattr(base, f.name) is not None
        }
        return replace(self, **updates)


def _plain(d: Decimal) -> str:
    text = format(d.normalize(), "f")
    return text


def _text(key: str, value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, str):
        raise FilterError(key, f"expected a string, got {type(value).__name__}")
    if "\x00" in value:
        raise FilterError(key, "contains a NUL byte")
    if len(value) > _MAX_VALUE_CHARS:
        raise FilterError(key, f"longer than {_MAX_VALUE_CHARS} characters")
    if value != value.strip() or not value:
        raise FilterError(
            key, f"expected a non-empty value without surrounding spaces, got {value!r}"
        )
    return value


def _choice(key: str, value: object, allowed: Sequence[str]) -> str:
    text = _text(key, value)
    if text not in allowed:
        raise FilterError(key, f"unknown {key} {text!r}: expected one of {', '.join(allowed)}")
    return text


def parse_price(value: object, key: str = "max_price_usd") -> Decimal:
    """A price ceiling in USD: a plain non-negative decimal ("5", "0.05", ".5"), as ``Decimal``.

    Numbers (int, Decimal, float via ``str``) are accepted from Python callers; exponents, signs,
    NaN and infinities are not, so every accepted value is exactly representable in ``numeric``.
    """
    if isinstance(value, bool):
        raise FilterError(key, "expected a non-negative decimal number, got a boolean")
    if isinstance(value, (int, float, Decimal)):
        if isinstance(value, float) and value != value:
            raise FilterError(key, "expected a non-negative decimal number, got NaN")
        text = str(value) if not isinstance(value, Decimal) else format(value, "f")
    else:
        text = _text(key, value)
    if len(text) > _MAX_PRICE_CHARS:
        raise FilterError(key, f"expected at most {_MAX_PRICE_CHARS} characters, got {len(text)}")
    if text.startswith("-"):
        raise FilterError(key, f"a price ceiling cannot be negative, got {text!r}")
    if not text.isascii():
        undecodable = " (U+FFFD: bytes that were not UTF-8)" if "\ufffd" in text else ""
        raise FilterError(
            key,
            f"expected ASCII digits, a non-negative decimal such as 5 or 0.05, got {text!r}"
            + undecodable,
        )
    if not _PRICE_RE.fullmatch(text):
        raise FilterError(
            key, f"expected a non-negative decimal number such as 5 or 0.05, got {text!r}"
        )
    try:
        price = Decimal(text)
    except InvalidOperation:  # pragma: no cover - the regex admits only valid decimals
        raise FilterError(key, f"not a decimal number: {text!r}") from None
    return price


def _asset(value: object, assets: Sequence[AssetLike]) -> str:
    text = _text("asset", value)
    if any(text in (a.code, a.address) for a in assets):
        return text
    codes = sorted({a.code for a in assets})
    known = ", ".join(codes) if codes else "none registered"
    raise FilterError(
        "asset",
        f"unknown asset {text!r}: expected a registered code ({known}) or a registered contract"
        " address",
    )


def _recipient(value: object) -> str:
    text = _text("recipient", value)
    try:
        strkey.decode(text)
    except strkey.StrkeyError as exc:
        raise FilterError("recipient", f"expected a Stellar G, M or C address: {exc}") from None
    return text


def _extension(value: object) -> str:
    text = _text("extension", value)
    if not _EXTENSION_RE.fullmatch(text):
        raise FilterError(
            "extension",
            f"expected an extension name (a letter, then letters, digits, '_', '.', ':' or '-',"
            f" at most 64 characters), got {text!r}",
        )
    return text


def parse_filters(
    params: Mapping[str, Any] | Filters | None, assets: Iterable[AssetLike]
) -> Filters:
    """Validate filter values (HTTP parameters or a constraints mapping) into :class:`Filters`.

    Keys outside ``FILTER_KEYS`` are rejected (a typo must not pass silently); ``None`` values
    and empty strings mean "not set". Raises :class:`FilterError` naming the key.
    """
    if params is None:
        return Filters()
    if isinstance(params, Filters):
        return params
    registry = list(assets)
    values: dict[str, Any] = {}
    for key, value in params.items():
        if key not in FILTER_KEYS:
            raise FilterError(
                str(key), f"unknown filter {key!r}: expected one of {', '.join(FILTER_KEYS)}"
            )
        if value is None or value == "":
            continue
        if key == "type":
            values[key] = _choice(key, value, TYPES)
        elif key == "network":
            values[key] = _choice(key, value, NETWORKS)
        elif key == "scheme":
            values[key] = _choice(key, value, SCHEMES)
        elif key == "asset":
            values[key] = _asset(value, registry)
        elif key == "recipient":
            values[key] = _recipient(value)
        elif key == "max_price_usd":
            values[key] = parse_price(value)
        else:
            values[key] = _extension(value)
    return Filters(**values)


def to_sql(
    filters: Filters | None, *, doc: str = "d", prefix: str = "xf_"
) -> tuple[str, dict[str, Any]]:
    """A parameterised boolean SQL predicate over ``documents`` aliased ``doc``.

    Returns ``(fragment, params)`` with psycopg named placeholders ``%(<prefix>key)s``; with no
    filter set the fragment is ``TRUE``. ``doc`` and ``prefix`` are identifiers chosen by the
    caller (checked), never user input.
    """
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", doc) or not re.fullmatch(r"[a-z_][a-z0-9_]*", prefix):
        raise ValueError(f"doc alias and prefix must be SQL identifiers, got {doc!r}, {prefix!r}")
    if filters is None or not filters:
        return "TRUE", {}
    params: dict[str, Any] = {}

    def ph(key: str, value: Any) -> str:
        params[prefix + key] = value
        return f"%({prefix}{key})s"

    clauses: list[str] = []
    if filters.type is not None:
        clauses.append(f"{doc}.doc_type = {ph('type', filters.type)}")
    if filters.extension is not None:
        clauses.append(
            f"EXISTS (SELECT 1 FROM extensions xe WHERE xe.doc_id = {doc}.id"
            f" AND xe.name = {ph('extension', filters.extension)})"
        )
    option: list[str] = []
    if filters.network is not None:
        option.append(f"po.network = {ph('network', filters.network)}")
    if filters.scheme is not None:
        option.append(f"po.scheme = {ph('scheme', filters.scheme)}")
    if filters.asset is not None:
        p = ph("asset", filters.asset)
        option.append(f"po.asset_code IS NOT NULL AND (po.asset_code = {p} OR po.asset = {p})")
    if filters.recipient is not None:
        p = ph("recipient", filters.recipient)
        column = "po.pay_to_account" if filters.recipient.startswith("G") else "po.pay_to"
        option.append(f"{column} = {p}")
    if filters.max_price_usd is not None:
        p = ph("max_price_usd", filters.max_price_usd)
        # Multiply instead of dividing: numeric products are exact, quotients are rounded.
        option.append(
            "po.amount IS NOT NULL AND po.usd_rate IS NOT NULL AND po.decimals IS NOT NULL"
            f" AND po.amount * po.usd_rate <= {p}::numeric * power(10::numeric, po.decimals)"
        )
    if option:
        body = " AND ".join(f"({c})" for c in option)
        clauses.append(
            f"EXISTS (SELECT 1 FROM payment_options po WHERE po.doc_id = {doc}.id AND {body})"
        )
    return " AND ".join(f"({c})" for c in clauses), params


def matches(
    filters: Filters,
    *,
    doc_type: str | None,
    extensions: Iterable[str],
    options: Sequence[Mapping[str, Any]],
) -> bool:
    """:func:`to_sql`'s predicate evaluated in Python on one listing: its ``doc_type``, its
    extension names and its :func:`option_rows`. Same semantics clause by clause (NULL never
    equals; one option must satisfy every option-level filter; prices compared as exact
    products), so the two agree on every listing (tests/engine/test_postings.py,
    test_the_in_memory_filter_check_agrees_with_the_sql)."""
    if filters.type is not None and doc_type != filters.type:
        return False
    if filters.extension is not None and filters.extension not in set(extensions):
        return False
    option_level = (
        filters.network,
        filters.scheme,
        filters.asset,
        filters.recipient,
        filters.max_price_usd,
    )
    if all(v is None for v in option_level):
        return True
    return any(_option_matches(filters, o) for o in options)


def _option_matches(filters: Filters, o: Mapping[str, Any]) -> bool:
    if filters.network is not None and o.get("network") != filters.network:
        return False
    if filters.scheme is not None and o.get("scheme") != filters.scheme:
        return False
    if filters.asset is not None:
        code = o.get("asset_code")
        if code is None or (code != filters.asset and o.get("asset") != filters.asset):
            return False
    if filters.recipient is not None:
        column = "pay_to_account" if filters.recipient.startswith("G") else "pay_to"
        if o.get(column) != filters.recipient:
            return False
    if filters.max_price_usd is not None:
        amount, rate, decimals = o.get("amount"), o.get("usd_rate"), o.get("decimals")
        if amount is None or rate is None or decimals is None:
            return False
        # PostgreSQL's numeric products are exact: so are these, at 200 digits (an amount has
        # at most 78, a rate and a price a few dozen).
        with localcontext() as ctx:
            ctx.prec = 200
            if Decimal(amount) * Decimal(rate) > filters.max_price_usd * Decimal(10) ** decimals:
                return False
    return True


def candidate_sql(
    filters: Mapping[str, Any] | Filters | None, assets: Iterable[AssetLike]
) -> tuple[sql.Composable, dict[str, Any]]:
    """A query returning the column ``doc_id`` of every document that satisfies ``filters``.

    ``filters`` is validated with :func:`parse_filters` (raises :class:`FilterError`); the
    result joins into the rankers' SQL as a candidate set (``JOIN (...) cand ON ...``).
    """
    from psycopg import sql

    fragment, params = to_sql(parse_filters(filters, assets))
    # The fragment holds only constant SQL and placeholders; values travel in params.
    return sql.SQL("SELECT d.id AS doc_id FROM documents d WHERE " + fragment), params


def _registry_index(assets: Iterable[AssetLike]) -> dict[tuple[str, str], AssetLike]:
    return {(a.network, a.address): a for a in assets}


def _amount(value: object) -> Decimal | None:
    """Atomic amount: a non-negative integer (string of digits, or int), else None (no price)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value) if value >= 0 else None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 78:
        return Decimal(int(value))
    return None


def _pay_to_account(pay_to: object) -> str | None:
    if not isinstance(pay_to, str):
        return None
    try:
        decoded = strkey.decode(pay_to)
    except strkey.StrkeyError:
        return None
    return decoded.account if decoded.kind in ("G", "M") else None


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def option_rows(document: object, assets: Iterable[AssetLike]) -> list[dict[str, Any]]:
    """``payment_options`` rows of a listing (a ``Document`` or a raw record mapping).

    Keys: ``doc_id, idx, scheme, network, asset, asset_code, decimals, amount, pay_to,
    pay_to_account, usd_rate``. ``asset_code``/``decimals``/``usd_rate`` come from the registry
    entry of ``(network, asset)`` (all None for an unknown asset); ``pay_to_account`` is the G
    account of a G or muxed M ``payTo`` (None for C or an invalid strkey); ``amount`` is a
    ``Decimal`` integer or None when not a non-negative integer. Non-object entries of
    ``accepts`` are skipped but keep their index.
    """
    if isinstance(document, Mapping):
        doc_id, wire = document.get("id"), document.get("x402")
    else:
        doc_id, wire = getattr(document, "id", None), getattr(document, "x402", None)
    if not isinstance(wire, Mapping):
        return []
    accepts = wire.get("accepts")
    if not isinstance(accepts, list):
        return []
    registry = _registry_index(assets)
    rows: list[dict[str, Any]] = []
    for idx, option in enumerate(accepts):
        if not isinstance(option, Mapping):
            continue
        network, asset = _str_or_none(option.get("network")), _str_or_none(option.get("asset"))
        known = registry.get((network, asset)) if network is not None and asset else None
        rows.append(
            {
                "doc_id": doc_id,
                "idx": idx,
                "scheme": _str_or_none(option.get("scheme")),
                "network": network,
                "asset": asset,
                "asset_code": known.code if known is not None else None,
                "decimals": known.decimals if known is not None else None,
                "amount": _amount(option.get("amount")),
                "pay_to": _str_or_none(option.get("payTo")),
                "pay_to_account": _pay_to_account(option.get("payTo")),
                "usd_rate": known.usd if known is not None else None,
            }
        )
    return rows
