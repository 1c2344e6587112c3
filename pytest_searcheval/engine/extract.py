"""Query constraint extraction: hard filters stated in the query text.

"weather forecast under $5 on testnet, paid in EURC" becomes
``{"network": "stellar:testnet", "asset": "EURC", "max_price_usd": "5"}`` and the text left to
rank with is "weather forecast".

Precision first: a wrong filter silently removes every right answer, a missed one only lets
some wrong ones through (which ranking may still push down). So every rule needs an explicit
cue, and plain uses of the same words are not filters:

* network: "testnet" / "test net" -> ``stellar:testnet``; "pubnet", "mainnet", "main net",
  "public network" -> ``stellar:pubnet``. Bare "network" ("network latency") is nothing; a
  testnet/mainnet named after another chain ("ethereum mainnet", "sepolia testnet") is a topic.
  "not (on) testnet" names the other network; both networks named = no filter.
* type: any mention of MCP / "Model Context Protocol" -> ``mcp``, unless MCP is the topic
  ("a directory of MCP servers") or negated ("not MCP", "non-MCP" -> ``http``); "HTTP endpoint",
  "HTTP API", "REST API", "plain HTTP" -> ``http``. "tool" alone is never a filter.
* scheme: "upto" (one word), "up-to scheme", "pay-as-you-go", "usage-based pricing/billing",
  "metered billing" -> ``upto`` (not "pay as you go phone plans"); "exact scheme", "exact
  price", "fixed price", "flat fee" -> ``exact`` (not "fixed rate mortgage"). "up to" in two
  words is a price ceiling, never a scheme.
* asset: a registered code (case-insensitive: "usdc") or a registered contract address, unless
  the code is the topic ("USDC exchange rate", "price of XLM", "convert EURC to USDC").
  "euros"/"lumens" only in a payment phrase ("paid in euros", "pay with lumens"). A code that
  is also a word ("AQUA") needs its upper case or a payment cue.
* max_price_usd: a ceiling word ("under", "less than", "below", "max", "at most", "up to",
  "no more than", "cheaper than", "within", "<=", ...) before an amount with a currency
  ("$5", "5 USD", "10 cents", "a cent", "half a cent", "a tenth of a cent", "0.5 USDC"), or an
  amount followed by "or less" / "max", or a price per call with no lower bound before it
  ("1 cent per call", "5c a request"). Amounts in an asset unit are converted with the
  registry's USD rate (exactly). A ceiling on something else ("stocks under $5", "under $50
  meals") is a topic unless the text says it is per call.
* recipient: a valid Stellar G/M address, or a C address that is not a registered asset.
* extension: "<name> extension" for a known extension name, and each extension's own
  phrases: ``attestation`` for "with (signed) attestations", "attested output/results",
  "comes with attestations"; ``rate-limit`` for "publishes/documents/declares its rate limits",
  "documented rate limits"; ``bazaar`` for "listed in/on the bazaar", "in the bazaar". An
  attestation or a rate limit that is the object of the need ("verify a TPM attestation",
  "check my token's rate limit") is the topic.
* payment words as the topic: a network or an asset that names the object of the need is not
  a filter: "a stellar testnet account balance", "fund a testnet account with friendbot", "did
  my testnet payment with hash ... go through", "withdraw USDC to a bank", "cash out USDC",
  "this USDC deposit", "USDC payouts", "swap 500 XLM into USDC", "how much XLM and USDC",
  "pay us in USDC".

The value of each field is decided once: two different values for one field cancel (no filter),
except two price ceilings, where the looser one holds. A negated scheme ("not usage-based")
names the other scheme; a negated asset ("without EURC") is no filter.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from pytest_searcheval.engine.x402 import AssetLike, FilterError, parse_filters
from pytest_searcheval.x402 import strkey

__all__ = [
    "SCORED_FIELDS",
    "Extraction",
    "FieldScore",
    "extract",
    "extract_constraints",
    "score_extraction",
]

TESTNET, PUBNET = "stellar:testnet", "stellar:pubnet"
KNOWN_EXTENSIONS = ("bazaar", "rate-limit", "attestation")
#: Things on a chain: a network named right before one of them is the topic, not a filter.
_CHAIN_OBJECTS = (
    r"accounts?|wallets?|address(?:es)?|transactions?|txs?|balances?|ledgers?|friendbot|"
    r"faucets?|nodes?|horizon|explorers?|keypairs?|keys|contracts?|validators?|deposits?|"
    r"payments?\s+(?:with|hash|id|status|went|go|goes|confirm\w*)|payments?\s+hash|"
    r"operations?|trustlines?|anchors?"
)
MAX_QUERY_CHARS = 2048

#: Codes that are not English words: recognised in lower case without a payment cue.
_TICKERS = frozenset(
    {"USDC", "EURC", "XLM", "USDT", "EURT", "PYUSD", "WETH", "WBTC", "YUSDC", "USDB", "BTC", "ETH"}
)
_OTHER_SCHEME = {"exact": "upto", "upto": "exact"}
_OTHER_CHAINS = (
    r"ethereum|eth|bitcoin|btc|solana|sol|polygon|matic|base|arbitrum|optimism|avalanche|avax|"
    r"bsc|bnb|sepolia|goerli|holesky|tron|cardano|near|sui|aptos|cosmos|polkadot|xrp|ripple|"
    r"algorand|hedera|lightning"
)
_WORD_NUMBERS: dict[str, Decimal] = {
    "a": Decimal(1),
    "an": Decimal(1),
    "one": Decimal(1),
    "two": Decimal(2),
    "three": Decimal(3),
    "four": Decimal(4),
    "five": Decimal(5),
    "six": Decimal(6),
    "seven": Decimal(7),
    "eight": Decimal(8),
    "nine": Decimal(9),
    "ten": Decimal(10),
    "twenty": Decimal(20),
    "fifty": Decimal(50),
    "hundred": Decimal(100),
    "a hundred": Decimal(100),
    "half a": Decimal("0.5"),
    "a half": Decimal("0.5"),
    "a quarter of a": Decimal("0.25"),
    "a tenth of a": Decimal("0.1"),
    "one tenth of a": Decimal("0.1"),
    "a hundredth of a": Decimal("0.01"),
    "a thousandth of a": Decimal("0.001"),
    "a fraction of a": Decimal(-1),  # no number: never a filter
}
#: Things with prices of their own: a ceiling right after one of them is the topic.
_PRICED_NOUNS = (
    r"stocks?|shares?|equit(?:y|ies)|products?|items?|flights?|fares?|hotels?|rooms?|tickets?|"
    r"homes?|houses?|rentals?|apartments?|propert(?:y|ies)|cars?|vehicles?|deals?|coins?|"
    r"tokens?|nfts?|books?|games?|meals?|gifts?|wines?|goods|bonds|options|cryptos?|"
    r"cryptocurrenc(?:y|ies)|commodit(?:y|ies)|groceries|clothes|shoes|laptops?|phones?|"
    r"domains?|subscriptions?|plans?|courses?|rides?|trips?|stays?|restaurants?|dishes"
)
_PER_CALL = (
    r"(?:per|a|an|each|every|for\s+each|for\s+one|/)\s*"
    r"(?:call|request|req|query|lookup|use|invocation|hit|run|api\s+call)s?\b"
)


#: Each extension's own phrases (see the module docstring): extension name -> pattern.
_EXTENSION_PHRASES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # "with signed attestations (of its output)", "attested output", "whose responses
    # come with attestations"; never "verify an attestation", "TPM attestation"
    (
        "attestation",
        re.compile(
            r"\b(?:(?:that\s+)?(?:come|comes|coming|shipped|ships|provided|returned|signed|"
            r"delivered)\s+)?(?:with|plus|including|includes|and|has|having|offers?|provides?|"
            r"returns?)\s+(?:an?\s+|the\s+)?(?:signed\s+|cryptographic\s+|verifiable\s+)?"
            r"attestations?(?:\s+(?:of|for|on)\s+(?:its|their|the)\s+"
            r"(?:outputs?|results?|responses?|answers?|data))?\b"
            r"|\battested\s+(?:outputs?|results?|responses?|answers?|data)\b"
            r"|\battestation[\s-]+(?:backed|signed|enabled)\b"
        ),
    ),
    # "publishes its rate limits", "documented rate limits", "rate limits published"
    (
        "rate-limit",
        re.compile(
            r"\b(?:(?:that|which)\s+)?(?:publish(?:es|ed|ing)?|document(?:s|ed|ing)?|"
            r"declar(?:es|ed|ing)|advertis(?:es|ed|ing)|stat(?:es|ed)|expos(?:es|ed)|"
            r"list(?:s|ed)?|public)\s+(?:its\s+|their\s+|the\s+)?rate[\s-]+limits?\b"
            r"|\brate[\s-]+limits?\s+(?:published|documented|declared|stated|listed)\b"
            r"|\bwith\s+(?:published\s+|documented\s+|declared\s+)?rate[\s-]+limit\s+"
            r"(?:info|information|metadata|headers|details)\b"
        ),
    ),
    # "listed in the bazaar", "in the x402 bazaar", "bazaar-listed"
    (
        "bazaar",
        re.compile(
            r"\b(?:(?:that\s+(?:is|are|'s)\s+|which\s+(?:is|are)\s+)?(?:listed|registered|"
            r"discoverable|published|found|available)\s+)?(?:in|on|via|through)\s+(?:the\s+)?"
            r"(?:x402\s+)?bazaar\b(?!\s+of\b)|\bbazaar[\s-]+(?:listed|registered)\b"
        ),
    ),
)


@dataclass(frozen=True)
class Extraction:
    """Filters found in a query (filter vocabulary, JSON-safe strings) and the text left over.

    ``matches`` lists ``(field, matched text)`` for every cue, including ones that cancelled.
    """

    filters: dict[str, str]
    text: str
    matches: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class _Hit:
    field: str
    value: str | None  # None: recognised (and removed from the text) but no filter
    start: int
    end: int


#: A family's finder: (vocabulary, text, lower-case text) -> its cues.
_Finder = Callable[["_Vocabulary", str, str], Iterable[_Hit]]


def _decimal_text(d: Decimal) -> str:
    text = format(d.normalize(), "f")
    return text


def _parse_number(text: str) -> Decimal | None:
    t = text.replace(",", "").strip()
    try:
        d = Decimal(t)
    except InvalidOperation:
        return None
    return d if d.is_finite() and d >= 0 else None


@dataclass(frozen=True)
class _Vocabulary:
    """What the asset registry lends to the families: codes, contract addresses, USD rates."""

    assets: list[AssetLike]
    #: lower-case code -> code as registered (first spelling wins)
    codes: dict[str, str]
    addresses: frozenset[str]
    #: USD rate of one whole unit of each code (only when every network agrees)
    rates: dict[str, Decimal]
    #: the registered euro stablecoin that "euros" stands for, if any
    euro_code: str | None

    @classmethod
    def of(cls, assets: Iterable[AssetLike]) -> _Vocabulary:
        listed = list(assets)
        codes: dict[str, str] = {}
        for a in listed:
            codes.setdefault(a.code.lower(), a.code)
        seen: dict[str, set[Decimal]] = {}
        for a in listed:
            if a.usd is not None:
                seen.setdefault(a.code, set()).add(Decimal(a.usd))
        rates = {code: next(iter(r)) for code, r in seen.items() if len(r) == 1}
        euro_code = next((c for c in ("EURC", "EURS", "EUROC") if c in rates), None)
        return cls(listed, codes, frozenset(a.address for a in listed), rates, euro_code)


# -- families -------------------------------------------------------------------------------
# One finder per field family. Each reads the original text and its lower-case copy and yields
# every cue it recognises; ``_FAMILIES`` below fixes the order in which they claim text.


def _recipients(vocab: _Vocabulary, text: str, low: str) -> Iterable[_Hit]:
    """recipient: a valid Stellar G/M address (or a C address that is not a registered
    asset, which is an asset instead), with the "pay to" words before it. First in line so
    that no other family reads inside a 56-character key."""
    for m in re.finditer(r"\b[GMC][A-Z2-7]{55}(?:[A-Z2-7]{13})?\b", text):
        key = m.group(0)
        if not strkey.is_valid(key):
            continue
        start = m.start()
        lead = re.search(
            r"(?:\b(?:pay(?:s|ing)?|paid|payto|pay\s+to|recipient|receiver|payee|"
            r"address|to)\s*[:=]?\s*)$",
            low[:start],
        )
        if lead:
            start = lead.start()
        if key.startswith("C") and key in vocab.addresses:
            yield _Hit("asset", key, start, m.end())
        else:
            yield _Hit("recipient", key, start, m.end())


def _networks(vocab: _Vocabulary, text: str, low: str) -> Iterable[_Hit]:
    """network: testnet / pubnet words, flipped by a negation; skipped when another chain
    owns the word ("sepolia testnet") or a chain object follows ("testnet account")."""
    pattern = re.compile(
        r"(?P<neg>\b(?:not|no|never|without|except|excluding)\s+(?:on\s+(?:the\s+)?)?)?"
        r"(?P<pre>\b(?:on|via|over|using|for|in)\s+(?:the\s+)?)?"
        r"(?:stellar(?:'s)?\s+)?"
        r"(?P<net>test[\s-]?net|testnets|pub[\s-]?net|main[\s-]?net|public\s+network|"
        r"public\s+net|production\s+network|live\s+network)\b"
        r"(?P<post>\s+network)?"
        # "net promoter score", "main net income": not networks
        r"(?![\s-]+(?:promoter|income|worth|profit|margin|salary|weight|zero|neutral|"
        r"present|assets?|sales|revenue|pay)\b)"
    )
    for m in pattern.finditer(low):
        before = low[: m.start("net")]
        if re.search(rf"\b(?:{_OTHER_CHAINS})(?:'s)?\s+(?:\w+\s+)?$", before):
            continue
        if re.match(rf"[\s-]+(?:{_CHAIN_OBJECTS})\b", low[m.end() :]):
            continue  # "a testnet account balance": the account is the topic
        net = m.group("net")
        if net.startswith(("public", "production", "live")) and not re.search(
            r"stellar(?:'s)?\s+$", before
        ):
            # "public network" alone is too common a phrase; only "stellar public network".
            continue
        value = TESTNET if net.startswith("test") else PUBNET
        if m.group("neg"):
            value = PUBNET if value == TESTNET else TESTNET
        yield _Hit("network", value, m.start(), m.end())


def _types(vocab: _Vocabulary, text: str, low: str) -> Iterable[_Hit]:
    """type: MCP unless it is the topic ("directory of MCP servers"), negated MCP as http,
    and explicit HTTP/REST endpoint phrases unless HTTP itself is the topic."""
    negated = re.compile(
        r"\b(?:not|no|non|never|without|rather\s+than|instead\s+of|other\s+than)"
        r"(?:\s+an?|\s+via|\s+as\s+an?|\s+through)?[\s-]+"
        r"(?:mcp|model\s+context\s+protocol)(?:\s+(?:tools?|servers?|server\s+tools?))?\b"
    )
    for m in negated.finditer(low):
        yield _Hit("type", "http", m.start(), m.end())
    mcp = re.compile(
        r"(?P<pre>\b(?:as|via|through|over|using|with|from)\s+(?:an?\s+|the\s+)?)?"
        r"(?P<word>\bmcp\b|\bmodel\s+context\s+protocol\b)"
        r"(?:\s*\(mcp\))?"
        r"(?:[\s-]+(?:compatible|enabled|native|based))?"
        r"(?:\s+(?:tools?|servers?|server\s+tools?|integrations?|endpoints?))?"
    )
    for m in mcp.finditer(low):
        if negated.search(low[max(0, m.start() - 30) : m.end() + 1]) and re.search(
            r"(?:not|no|non|never|without|than|of)[\s-]+(?:an?\s+|via\s+|as\s+an?\s+)?$",
            low[: m.start("word")],
        ):
            continue
        before = low[: m.start("word")]
        after = low[m.end("word") :]
        if re.search(
            r"\b(?:list(?:s|ing)?\s+of|director(?:y|ies)\s+(?:of|for)|registr(?:y|ies)\s+"
            r"(?:of|for)|catalog(?:ue)?s?\s+of|index\s+of|about|monitor(?:s|ing)?|"
            r"that\s+lists|which\s+lists|search(?:es|ing)?\s+(?:for|across)|build(?:ing)?|"
            r"develop(?:ing)?|debug(?:ging)?|test(?:ing)?|host(?:ing)?)\s+(?:an?\s+|the\s+)?$",
            before,
        ) or re.match(
            r"(?:\s+(?:servers?|tools?))?\s+(?:director(?:y|ies)|registr(?:y|ies)|catalogs?|"
            r"indexes|spec(?:ification)?s?|sdks?|framework|debugger|inspector|hosting)\b",
            after,
        ):
            continue
        yield _Hit("type", "mcp", m.start(), m.end())
    http = re.compile(
        r"(?P<pre>\b(?:as|via|through|over|using|with)\s+(?:an?\s+|the\s+)?)?"
        r"(?:\b(?:plain|regular|ordinary|simple|normal|standard)\s+)?"
        r"(?:\bhttps?\b|\brest(?:ful)?\b)"
        r"(?:\s+(?:json\s+)?(?:endpoints?|apis?|resources?|services?|routes?))?"
    )
    for m in http.finditer(low):
        word = m.group(0)
        explicit = re.search(r"\b(?:plain|regular|ordinary|simple|normal|standard)\s", word)
        has_noun = re.search(r"(?:endpoints?|apis?|resources?|services?|routes?)$", word)
        if not (explicit or has_noun):
            continue
        if "rest" in word and not has_noun:
            continue
        before = low[: m.start()]
        after = low[m.end() :]
        if re.search(
            r"\b(?:for|test(?:s|ing)?|monitor(?:s|ing)?|mock(?:s|ing)?|document(?:s|ing)?|"
            r"generat(?:e|es|ing)|convert(?:s|ing)?|debug(?:s|ging)?|fuzz(?:ing)?|"
            r"scan(?:s|ning)?|inspect(?:s|ing)?|log(?:s|ging)?|call(?:s|ing)?|"
            r"wrap(?:s|ping)?|any|other|third[\s-]party|your)\s+(?:an?\s+|the\s+)?$",
            before,
        ) and not re.match(r"\s*(?:for|that|which|to)\b", after):
            continue
        if re.match(
            r"\s+(?:status|headers?|requests?|responses?|codes?|client|proxy|logs?|traffic|"
            r"testing|tester|monitor(?:ing)?|mock(?:s|ing)?|documentation|docs|specs?|"
            r"schema|generator|gateway|fuzzer|scanner|checker)\b",
            after,
        ):
            continue
        yield _Hit("type", "http", m.start(), m.end())


def _schemes(vocab: _Vocabulary, text: str, low: str) -> Iterable[_Hit]:
    """scheme: upto (usage-based, pay-as-you-go) and exact (fixed price, flat fee) phrases;
    negation is decided later, in ``_decide``."""
    upto = re.compile(
        r"(?:\b(?:the|an?|with|using|via|on|under)\s+)?"
        r"(?:\bupto\b(?:\s+(?:payment\s+)?(?:scheme|pricing|billing|payments?|model|plan))?|"
        r"\bup-to\s+(?:payment\s+)?(?:scheme|pricing|billing|payments?)|"
        r"\bpay[\s-]+as[\s-]+you[\s-]+go\b(?:\s+(?:pricing|billing|payments?|model|plan))?|"
        r"\b(?:usage|consumption|metered)[\s-]+(?:based\s+)?(?:pricing|billing|payments?|"
        r"charging|model)\b|"
        r"\bpay[\s-]+(?:per|for\s+what\s+you)[\s-]+(?:use|usage)\s+(?:pricing|billing))"
    )
    for m in upto.finditer(low):
        if re.match(
            r"[\s-]+(?:phones?|mobile|sim|cell(?:ular)?|data|plans?|tariffs?|insurance|"
            r"electricity|energy|gas|parking|gym|cards?|broadband|internet|taxes?)\b",
            low[m.end() :],
        ):
            continue  # "pay as you go phone plans": the topic, not how the API is paid
        yield _Hit("scheme", "upto", m.start(), m.end())
    exact = re.compile(
        r"(?:\b(?:the|an?|with|using|via|on|under|at\s+an?)\s+)?"
        r"(?:\bexact\s+(?:x402\s+)?(?:payment\s+)?(?:scheme|payments?|pricing|price\b(?!\s+of))|"
        r"\bexact[\s-]+scheme\b|"
        r"\bscheme\s*[:=]?\s*exact\b|"
        r"\b(?:fixed|flat)[\s-]+(?:exact\s+)?(?:price|pricing|fee)"
        r"(?:\s+(?:per\s+(?:call|request)|payments?))?(?!\s+(?:of|for|shipping|tax))\b)"
    )
    for m in exact.finditer(low):
        before = low[: m.start()]
        if re.search(r"\b(?:the|find|get|calculate|compute|look\s+up)\s+$", before) and (
            "scheme" not in m.group(0)
        ):
            continue
        yield _Hit("scheme", "exact", m.start(), m.end())


def _code_topic(vocab: _Vocabulary, low: str, start: int, end: int) -> bool:
    """The asset code at ``low[start:end]`` names the object of the need ("USDC price")."""
    before, after = low[:start], low[end:]
    if re.match(
        r"(?:'s)?\s*(?:/|to\s+\w+\b|(?:exchange\s+|conversion\s+)?(?:price|prices|rate|rates|"
        r"supply|balance|balances|transfers?|wallet|wallets|volume|market|chart|charts|"
        r"history|data|conversions?|quotes?|ticker|peg|reserves?|holders?|tokens?|"
        r"liquidity|yield|staking|swap|bridge|trading|analytics|feed|deposits?|payouts?|"
        r"withdrawals?|remittances?|invoices?|salar(?:y|ies)|payroll|off[\s-]?ramp|"
        r"on[\s-]?ramp|account|accounts|addresses)\b)",
        after,
    ):
        return True
    codes = "|".join(re.escape(c) for c in vocab.codes)
    if re.search(
        rf"\b(?:{codes}|usd|eur|euros?|dollars?)\s+(?:to|into|for|vs\.?|versus)\s+$", before
    ):
        return True  # "convert EURC to USDC": a pair of currencies is the topic
    listed = re.search(rf"\b({codes})\s+(?:and|or|&)\s+$", before)
    if listed:  # "how much XLM and USDC": as the code before it ("paid in USDC or EURC": not)
        return _code_topic(vocab, low, listed.start(1), listed.end(1))
    return bool(
        re.search(
            r"\b(?:of|convert(?:s|ing)?|between|swap(?:s|ping)?|buy(?:s|ing)?|sell(?:s|ing)?|"
            r"track(?:s|ing)?|exchange|from|send(?:s|ing)?|transfer(?:s|ring)?|receive|"
            r"bridge|mint(?:s|ing)?|hold(?:s|ing)?|stake|lend|borrow|withdraw(?:s|ing)?|"
            r"cash(?:ing)?\s+out|off[\s-]?ramp|on[\s-]?ramp|deposit(?:s|ing)?|"
            r"how\s+much|how\s+many|pay(?:s|ing)?\s+(?:us|me|them|you|him|her)\s+(?:in|with))"
            r"\s+(?:some\s+|my\s+|our\s+|the\s+)?(?:[\d.,]+\s+)?$",
            before,
        )
    )


def _assets(vocab: _Vocabulary, text: str, low: str) -> Iterable[_Hit]:
    """asset: a registered code (or "euros"/"lumens" in a payment phrase) unless the code
    is the topic; a code that is also a word needs its case or a payment cue."""
    if vocab.codes:
        names = "|".join(sorted((re.escape(c) for c in vocab.codes), key=len, reverse=True))
        pattern = re.compile(
            r"(?P<pre>\b(?:(?:paid|pay(?:s|ing|able)?|priced|settled?|settles|charged?|"
            r"billed)\s+(?:for\s+)?(?:in|with|using|via)|accept(?:s|ing)?|takes?|"
            r"in|with|using|via|for)\s+)?"
            rf"\b(?P<code>{names})\b(?P<post>\s+(?:payments?|only|accepted))?"
        )
        for m in pattern.finditer(low):
            written = text[m.start("code") : m.end("code")]
            code = vocab.codes[m.group("code")]
            if (
                not m.group("pre")
                and not m.group("post")
                and written != code
                and code not in _TICKERS
            ):
                continue  # "aqua theme": a code that is also a word needs its case or a cue
            if _code_topic(vocab, low, m.start("code"), m.end("code")) and not m.group("pre"):
                continue
            if (
                m.group("pre")
                and m.group("pre").strip() in ("in", "with", "for")
                and (_code_topic(vocab, low, m.start("code"), m.end("code")))
            ):
                continue
            yield _Hit("asset", vocab.codes[m.group("code")], m.start(), m.end())
    aliases = {"euros?|eur": vocab.euro_code, "lumens?": vocab.codes.get("xlm")}
    for words, alias_of in aliases.items():
        if alias_of is None:
            continue
        named = re.compile(
            r"\b(?:paid|pay(?:s|ing|able)?|priced|settled?|charged?|billed)\s+"
            rf"(?:for\s+)?(?:in|with|using)\s+(?:{words})\b"
        )
        for m in named.finditer(low):
            yield _Hit("asset", alias_of, m.start(), m.end())


def _extensions(vocab: _Vocabulary, text: str, low: str) -> Iterable[_Hit]:
    """extension: "<name> extension" for a known name, and each extension's own phrases
    from ``_EXTENSION_PHRASES``."""
    names = "|".join(re.escape(n) for n in KNOWN_EXTENSIONS)
    for m in re.finditer(
        rf"(?:\b(?:with|using|has|having|supports?|supporting)\s+(?:the\s+|an?\s+)?)?"
        rf"\b(?P<name>{names})\s+extensions?\b",
        low,
    ):
        yield _Hit("extension", m.group("name"), m.start(), m.end())
    for name, pattern in _EXTENSION_PHRASES:
        for m in pattern.finditer(low):
            yield _Hit("extension", name, m.start(), m.end())


# -- prices ------------------------------------------------------------------------------


def _amount_unit(
    vocab: _Vocabulary, number: Decimal, unit: str
) -> tuple[Decimal | None, str | None]:
    """USD amount of ``number unit`` and the asset it names (if any)."""
    u = unit.strip().lower()
    if u in ("$", "usd", "us$", "dollar", "dollars", "buck", "bucks", "usd$"):
        return number, None
    if u in ("cent", "cents", "¢", "c", "penny", "pennies"):
        return number / 100, None
    if u in ("€", "eur", "euro", "euros"):
        rate = vocab.rates.get(vocab.euro_code) if vocab.euro_code else None
        return (number * rate if rate is not None else None), None
    code = vocab.codes.get(u)
    if code is not None:
        rate = vocab.rates.get(code)
        return (number * rate if rate is not None else None), code
    return None, None


def _prices(vocab: _Vocabulary, text: str, low: str) -> Iterable[_Hit]:
    """max_price_usd: a ceiling word before an amount, an amount with "or less"/"max", or a
    price per call; an amount in an asset unit also names that asset. Before the networks
    and assets so that "5 USDC" is read as one price, not a bare code."""
    codes = "|".join(sorted((re.escape(c) for c in vocab.codes), key=len, reverse=True))
    unit_words = r"usd|us\$|dollars?|bucks?|cents?|¢|pennies|penny|eur|euros?|€"
    if codes:
        unit_words = f"{unit_words}|{codes}"
    number = r"\d+(?:,\d{3})*(?:\.\d+)?|\.\d+"
    words = "|".join(sorted((re.escape(w) for w in _WORD_NUMBERS), key=len, reverse=True))
    amount = (
        rf"(?:(?P<cur>\$|us\$|usd|€|eur)\s?(?P<n1>{number})(?:\s?(?P<u1>cents?|usd))?"
        rf"|(?P<n2>{number})\s?(?P<u2>{unit_words}|\$)(?![a-z])"
        rf"|(?P<w>{words})\s+(?P<u3>dollars?|cents?|penny|pennies|dime|nickel|buck|bucks)\b"
        rf"|(?P<w2>a\s+penny|a\s+dime|a\s+nickel|a\s+buck)"
        rf"|(?P<n3>{number})c\b)"
    )
    bound = (
        r"under|below|beneath|less\s+than|lower\s+than|cheaper\s+than|fewer\s+than|"
        r"at\s+most|no\s+more\s+than|not\s+more\s+than|not\s+over|not\s+exceeding|"
        r"no\s+higher\s+than|max(?:imum)?(?:\s+of)?|max\.|up\s+to|upto|within|capped\s+at|"
        r"a\s+budget\s+of|budget(?:\s+of)?|<=|<|≤|=<|tops|≤\s*"
    )
    pre = re.compile(
        rf"(?P<lead>\b(?:for|at|costing|costs?|priced|price|pricing|that\s+costs?|paying|"
        rf"pay|charging|spend(?:ing)?)\s+)?"
        rf"(?P<bound>(?<![\w$]){'(?:' + bound + ')'})\s*(?::\s*)?"
        rf"(?:(?:a|one)\s+)?{amount}"
        rf"(?P<per>\s+{_PER_CALL}|\s+per\s+(?:call|request|query))?"
    )
    post = re.compile(
        rf"(?<![\w.]){amount}"
        rf"(?P<per>\s+{_PER_CALL})?"
        r"\s+(?P<bound>or\s+(?:less|under|cheaper|below)|max(?:imum)?\b|at\s+most|tops|"
        r"or\s+lower|ceiling|limit|cap)"
    )
    sub = re.compile(r"\bsub[\s-]?(?P<unit>cent|penny|dollar)\b(?:\s+(?:pric\w*|cost))?")
    # A price per call with no ceiling word ("for 1 cent per call") is what the user will
    # pay, hence a ceiling; unless a lower bound precedes it ("more than $1 per call").
    per_call = re.compile(rf"(?<![\w.]){amount}(?P<per>\s+{_PER_CALL})")
    found: list[_Hit] = []
    for m in [*pre.finditer(low), *post.finditer(low), *per_call.finditer(low)]:
        usd, code = _value(vocab, m)
        if usd is None:
            continue
        if not m.group("per") and (
            _priced_topic(low, m.start()) or re.match(rf"\s+(?:{_PRICED_NOUNS})\b", low[m.end() :])
        ):
            continue
        if "bound" not in m.groupdict() and re.search(
            r"\b(?:more\s+than|over|above|at\s+least|from|starting\s+at|exceed\w*|"
            r"higher\s+than|greater\s+than|minimum(?:\s+of)?|min)\s*$",
            low[: m.start()],
        ):
            continue
        if any(m.start() < h.end and h.start < m.end() for h in found):
            continue
        found.append(_Hit("max_price_usd", _decimal_text(usd), m.start(), m.end()))
        if code is not None:
            found.append(_Hit("asset", code, m.end(), m.end()))
    for m in sub.finditer(low):
        if any(m.start() < h.end and h.start < m.end() for h in found):
            continue
        usd = Decimal("0.01") if m.group("unit") in ("cent", "penny") else Decimal(1)
        found.append(_Hit("max_price_usd", _decimal_text(usd), m.start(), m.end()))
    return found


def _value(vocab: _Vocabulary, m: re.Match[str]) -> tuple[Decimal | None, str | None]:
    """USD amount (and asset, if named) of one amount match of ``_prices``."""
    if m.group("n1") is not None:
        n = _parse_number(m.group("n1"))
        if n is None:
            return None, None
        unit = m.group("u1") or m.group("cur")
        if unit and unit.startswith("cent"):
            return n / 100, None
        return _amount_unit(vocab, n, unit if unit != "usd" else "$")
    if m.group("n2") is not None:
        n = _parse_number(m.group("n2"))
        return (None, None) if n is None else _amount_unit(vocab, n, m.group("u2"))
    if m.group("w") is not None:
        n = _WORD_NUMBERS[m.group("w")]
        if n < 0:
            return None, None
        unit = m.group("u3")
        if unit == "dime":
            return n * Decimal("0.10"), None
        if unit == "nickel":
            return n * Decimal("0.05"), None
        return _amount_unit(vocab, n, unit)
    if m.group("n3") is not None:
        n = _parse_number(m.group("n3"))
        return (None, None) if n is None else (n / 100, None)
    if m.group("w2") is not None:
        coin = m.group("w2").split()[-1]
        value = {"penny": "0.01", "dime": "0.10", "nickel": "0.05", "buck": "1"}[coin]
        return Decimal(value), None
    return None, None


def _priced_topic(low: str, start: int) -> bool:
    """The ceiling follows a thing with its own price ("stocks under $5")."""
    before = low[:start]
    return bool(
        re.search(
            rf"\b(?:{_PRICED_NOUNS})(?:\s+(?:that\s+(?:cost|are|sell)|priced|costing|"
            rf"selling|trading|going\s+for|for|at))?\s*$",
            before,
        )
    )


#: The families in the order they claim text: a cue overlapping one already found is dropped.
_FAMILIES: tuple[tuple[str, _Finder], ...] = (
    ("recipient", _recipients),
    ("max_price_usd", _prices),
    ("network", _networks),
    ("type", _types),
    ("scheme", _schemes),
    ("asset", _assets),
    ("extension", _extensions),
)


def _hits(vocab: _Vocabulary, text: str) -> list[_Hit]:
    """Every family's cues in ``_FAMILIES`` order, without overlaps."""
    low = text.lower()
    out: list[_Hit] = []
    for _family, finder in _FAMILIES:
        for hit in finder(vocab, text, low):
            if not any(hit.start < h.end and h.start < hit.end for h in out):
                out.append(hit)
    return out


# -- decision -------------------------------------------------------------------------------


def _decide(vocab: _Vocabulary, query: str) -> Extraction:
    """Apply negations, settle one value per field and keep what the HTTP layer accepts."""
    text = query[:MAX_QUERY_CHARS]
    hits = sorted(_hits(vocab, text), key=lambda h: h.start)
    low = text.lower()
    for h in hits:
        if h.field not in ("scheme", "asset") or h.value is None:
            continue
        # "not usage-based", "no upto", "without USDC": a scheme flips to the other one;
        # an excluded asset cannot be expressed as a filter, so it is dropped.
        neg = re.search(
            r"(?:\b(?:not|no|never|without|except|excluding|rather\s+than|instead\s+of)"
            r"(?:\s+(?:an?|the|in|with|via|using|on))?\s+|\bnon-)$",
            low[: h.start],
        )
        if neg is not None:
            h.start = neg.start()
            h.value = _OTHER_SCHEME.get(h.value) if h.field == "scheme" else None
    values: dict[str, set[str]] = {}
    for h in hits:
        if h.value is not None:
            values.setdefault(h.field, set()).add(h.value)
    filters: dict[str, str] = {}
    for key, vals in values.items():
        if len(vals) == 1:
            filters[key] = next(iter(vals))
        elif key == "max_price_usd":
            # Two ceilings ("between $1 and $5", "under $5, ideally under $1"): the
            # looser one is the hard constraint.
            filters[key] = _decimal_text(max(Decimal(v) for v in vals))
    for key in list(filters):
        # Only values the HTTP layer would accept ("under $1e50" is text, not a filter).
        try:
            parse_filters({key: filters[key]}, vocab.assets)
        except FilterError:
            del filters[key]
    remaining = _remove(text, [(h.start, h.end) for h in hits])
    return Extraction(filters, remaining, [(h.field, text[h.start : h.end]) for h in hits])


_FILLER = re.compile(
    r"(?:^|(?<=\s))(?:on|in|via|with|for|paid|pay|payable|priced|and|or|but|that|which|accepts?|"
    r"using|over|at|costing|costs?|a|an|the|only|,|;|-|\u2014)(?=\s|$)",
    re.IGNORECASE,
)


def _remove(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` without the cue spans, dangling connectives and punctuation."""
    if not spans:
        return " ".join(text.split())
    pieces: list[str] = []
    last = 0
    for start, end in sorted(spans):
        if start < last:
            start = last
        pieces.append(text[last:start])
        pieces.append(" , ")
        last = max(last, end)
    pieces.append(text[last:])
    joined = "".join(pieces)
    # Drop connectives left dangling at the edges of each removed span.
    chunks = [c.strip() for c in re.split(r"\s*[,;]\s*", joined)]
    cleaned: list[str] = []
    for chunk in chunks:
        words = chunk.split()
        while words and _FILLER.fullmatch(words[-1]):
            words.pop()
        while words and _FILLER.fullmatch(words[0]) and len(words) > 1:
            words.pop(0)
        if words and not (len(words) == 1 and _FILLER.fullmatch(words[0])):
            cleaned.append(" ".join(words))
    return " ".join(cleaned).strip()


def extract(query: str, assets: Iterable[AssetLike]) -> Extraction:
    """Filters stated in ``query`` and the query text without them (see the module docstring)."""
    return _decide(_Vocabulary.of(assets), query)


def extract_constraints(query: str, assets: Iterable[AssetLike]) -> tuple[dict[str, str], str]:
    """``(filters, remaining query text)``; filters use the vocabulary of ``FILTER_KEYS``."""
    found = extract(query, assets)
    return found.filters, found.text


#: Fields that extraction is scored on (recipient has no labels in practice).
SCORED_FIELDS = ("network", "type", "asset", "max_price_usd", "scheme", "extension")


@dataclass
class FieldScore:
    """Per field: ``labelled`` values, ``found`` (extracted and equal), ``missed`` (labelled, not
    extracted), ``wrong`` (labelled, another value extracted), ``spurious`` (extracted, none
    labelled)."""

    labelled: int = 0
    found: int = 0
    missed: int = 0
    wrong: int = 0
    spurious: int = 0


def _same(key: str, a: str, b: str) -> bool:
    if key == "max_price_usd":
        try:
            return Decimal(a) == Decimal(b)
        except InvalidOperation:
            return False
    return a == b


def score_extraction(
    queries: Iterable[tuple[str, str, Mapping[str, object]]],
    assets: Iterable[AssetLike],
    fields: Iterable[str] = SCORED_FIELDS,
) -> tuple[dict[str, FieldScore], list[str]]:
    """Score extraction against hand-labelled constraints.

    ``queries`` yields ``(query id, text, labelled constraints)``. Returns per-field counts and
    one line per disagreement (``id: field extracted=... labelled=... | text``). Prices compare
    as decimals ("0.10" == "0.1").
    """
    registry = list(assets)
    keys = list(fields)
    scores = {k: FieldScore() for k in keys}
    lines: list[str] = []
    for qid, text, labels in queries:
        got = extract(text, registry).filters
        for key in keys:
            want = None if labels.get(key) is None else str(labels[key])
            have = got.get(key)
            score = scores[key]
            if want is not None:
                score.labelled += 1
                if have is None:
                    score.missed += 1
                elif _same(key, have, want):
                    score.found += 1
                    continue
                else:
                    score.wrong += 1
            elif have is not None:
                score.spurious += 1
            else:
                continue
            lines.append(f"{qid}: {key} extracted={have!r} labelled={want!r} | {text}")
    return scores, lines
