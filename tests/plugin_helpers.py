"""A tiny collection and an in-memory fake target for the plugin's pytester tests.

The fake ranks by word overlap; ``SEARCHEVAL_FAKE`` (an environment variable read inside the
test process) switches behaviours so one project serves several tests: ``worse`` drops the best
document of q1, ``stuff`` answers the unanswerable query, ``violate`` claims a testnet filter
while returning a mainnet listing, ``broken-semantic`` makes the semantic profile raise,
``slow`` sleeps 2 ms per request.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

# Imported here, before any in-process pytester run: pytester restores sys.modules after each
# run, and re-importing yaml-based loaders per run breaks their registered constructors.
from pytest_searcheval.x402.strkey import encode_account, encode_contract

PUBNET = "stellar:pubnet"
TESTNET = "stellar:testnet"
USDC_PUB = encode_contract(bytes(range(32)))
USDC_TEST = encode_contract(bytes(range(1, 33)))
PAY_TO = encode_account(bytes(range(2, 34)))


def _listing(doc_id: str, title: str, text: str, network: str) -> dict[str, Any]:
    return {
        "id": doc_id,
        "title": title,
        "text": text,
        "fields": {"provider": title.split()[0]},
        "x402": {
            "resource": f"https://api.{doc_id}.example/v1",
            "type": "http",
            "description": text,
            "mimeType": "application/json",
            "accepts": [
                {
                    "scheme": "exact",
                    "network": network,
                    "asset": USDC_PUB if network == PUBNET else USDC_TEST,
                    "amount": "10000",
                    "payTo": PAY_TO,
                    "maxTimeoutSeconds": 60,
                    "extra": {},
                }
            ],
        },
        "sidecar": {"source": "sample"},
    }


DOCS = [
    _listing("d1", "Skyline weather forecast", "daily weather forecast api", TESTNET),
    _listing("d2", "Ticker stock quotes", "real time stock quotes prices", PUBNET),
    _listing("d3", "Almanac weather history", "historical weather data archive", TESTNET),
    _listing("d4", "Bolt stock screener", "stock screener with prices and charts", PUBNET),
    _listing("d5", "Rain forecast", "weather rain forecast by city", TESTNET),
]

QUERIES = """\
- id: q1
  text: weather forecast
  class: exact-name
  split: test
  expect: {known_item: d1}
- id: q2
  text: stock prices
  class: paraphrase
  split: test
- id: q3
  text: unicorn rentals
  class: no-result
  split: test
  expect: {no_result: true}
- id: q4
  text: rain forecast city
  class: paraphrase
  split: test
- id: q5
  text: stock screener
  class: exact-name
  split: dev
"""

JUDGMENTS = [
    ("q1", "d1", 3),
    ("q1", "d5", 2),
    ("q1", "d3", 1),
    ("q1", "d2", 0),
    ("q2", "d2", 3),
    ("q2", "d4", 2),
    ("q3", "d1", 0),
    ("q4", "d5", 3),
    ("q4", "d1", 1),
    ("q5", "d4", 3),
]

CONFTEST = """
import os
import time

import pytest

from pytest_searcheval.targets import CallableTarget, Hit, SearchResponse, TargetUnavailable

TEXT = {TEXT}


def fake(query, *, profile, limit, filters, extract):
    mode = os.environ.get("SEARCHEVAL_FAKE", "")
    if mode == "slow":
        time.sleep(0.002)
    if profile == "semantic" and mode == "broken-semantic":
        raise TargetUnavailable("semantic index is not built")
    words = set(query.split())
    scored = sorted(
        ((d, len(words & set(t.split()))) for d, t in TEXT.items()), key=lambda x: (-x[1], x[0])
    )
    ids = [d for d, s in scored if s > 0]
    if profile == "lexical":
        ids = ids[::-1]
    if mode == "worse" and query == "weather forecast":
        ids = [d for d in ids if d != "d1"]
    if mode in ("stuff", "stuff-flagged") and query == "unicorn rentals":
        ids = ["d2"]
    applied = {}
    if mode == "violate" and query == "stock prices":
        applied = {"network": "stellar:testnet"}
    hits = tuple(Hit(d, float(10 - i)) for i, d in enumerate(ids[:limit]))
    meta = {}
    if mode == "stuff-flagged" and query == "unicorn rentals":
        meta = {"no_result": True}  # answers anyway: threshold compliance's own failure
    if mode == "confidence":
        # the share of the query's words the best listing has; empty under 0.5
        best = max((s for _, s in scored), default=0)
        value = best / max(len(words), 1)
        meta = {"confidence": {"value": value, "threshold": 0.5}}
        if value < 0.5:
            hits = ()
    return SearchResponse(hits=hits, applied_filters=applied, meta=meta)


@pytest.fixture(scope="session")
def searcheval_target():
    return CallableTarget(fake, profiles=["lexical", "semantic", "hybrid"])
"""


def make_project(pytester: pytest.Pytester, *, ini: str = "", invariants: bool = False) -> None:
    """Write the tiny collection, the fake target's conftest and an ini file.

    The invariant tests (their own module's business) are deselected unless ``invariants``.
    """
    pytester.makefile(
        ".yaml",
        collection=(
            "name: tiny\nversion: 1\ngrades: [0, 1, 2, 3]\nsplits: [dev, test]\n"
            "classes: [exact-name, paraphrase, no-result]\n"
            "assets:\n"
            f"  - {{code: USDC, network: {PUBNET}, address: {USDC_PUB}, decimals: 7, usd: '1'}}\n"
            f"  - {{code: USDC, network: {TESTNET}, address: {USDC_TEST}, decimals: 7, usd: '1'}}\n"
        ),
    )
    corpus = pytester.mkdir("corpus")
    (corpus / "docs.jsonl").write_text(
        "".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8"
    )
    qrels = pytester.mkdir("qrels")
    (qrels / "queries.yaml").write_text(QUERIES, encoding="utf-8")
    (qrels / "judgments.tsv").write_text(
        "query_id\tdoc_id\tgrade\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in JUDGMENTS),
        encoding="utf-8",
    )
    text = {d["id"]: d["title"].lower() + " " + d["text"] for d in DOCS}
    pytester.makeconftest(CONFTEST.replace("{TEXT}", repr(text)))
    pytester.makeini(
        "[pytest]\nsearch_eval_profiles = lexical,semantic,hybrid\n"
        + ("" if "search_eval_gated_profile" in ini else "search_eval_gated_profile = hybrid\n")
        + ("" if "search_eval_gate_over" in ini else "search_eval_gate_over = lexical\n")
        + "search_eval_bootstrap_samples = 200\nsearch_eval_permutations = 500\n"
        + ("" if invariants else 'addopts = -m "not searcheval_invariant"\n')
        + ini
    )


def read_report(pytester: pytest.Pytester) -> dict[str, Any]:
    path = pytester.path / "searcheval-report" / "report.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    assert_valid(data, "report.schema.json")
    return data


def assert_valid(data: Any, schema: str) -> None:
    """``data`` conforms to a schema generated from pytest_searcheval.types (every report the
    plugin tests read is checked, so a key the types do not describe fails here). The core
    install has no jsonschema (a test extra): there the plugin tests run without this check,
    which tests/unit/test_types.py makes on every full run."""
    try:
        import jsonschema
    except ModuleNotFoundError:
        return

    from pytest_searcheval.types import SCHEMA_DIR

    spec = json.loads((SCHEMA_DIR / schema).read_text(encoding="utf-8"))
    errors = sorted(
        jsonschema.Draft202012Validator(spec).iter_errors(data), key=lambda e: list(e.path)
    )
    assert not errors, "\n".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:10]
    )


TIMING_KEYS = {"latency_ms", "created", "environment", "xdist_workers", "p50", "p95", "p99"}


def without_timings(value: Any) -> Any:
    """The report with every timing, timestamp and host field removed (for run comparisons)."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value
