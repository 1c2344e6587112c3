"""The Bazaar facilitator target against the engine's own service as the facilitator.

The engine speaks x402 Bazaar discovery; ``BazaarTarget`` asks it only what the protocol can
carry, through the official SDK's client, so what it measures must be the engine's hybrid
ranking (the profile an SDK client gets), filters included, and the plugin must report what the
protocol cannot ask for.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_searcheval.collection import load
from pytest_searcheval.collection.model import Collection
from pytest_searcheval.engine.core import Engine, EngineSettings
from pytest_searcheval.engine.service import RunningService, serve_in_thread
from pytest_searcheval.targets import FilterUnsupported, TargetUnavailable
from pytest_searcheval.targets.bazaar import BazaarTarget, resource_ids
from pytest_searcheval.x402 import oracle
from pytest_searcheval.x402.synth import write_synthetic

pytest_plugins = ["pytester"]


@pytest.fixture(scope="module")
def collection_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic(
        tmp_path_factory.mktemp("synth"), n_docs=60, n_queries=10, judged_per_query=6, files=1
    )


@pytest.fixture(scope="module")
def collection(collection_dir: Path) -> Collection:
    return load(collection_dir)


@pytest.fixture(scope="module")
def service(
    pg_server: Any, collection: Collection, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningService]:
    settings = EngineSettings(cache_dir=str(tmp_path_factory.mktemp("cache")), no_result={})
    with (
        Engine.start(collection, dsn=pg_server.dsn, settings=settings) as engine,
        serve_in_thread(engine, admin=False) as running,
    ):
        yield running


@pytest.fixture
def target(service: RunningService, collection: Collection) -> Iterator[BazaarTarget]:
    t = BazaarTarget(
        "bazaar+" + service.url,
        resources=resource_ids(collection.documents.values()),
        profile="hybrid",
        page_size=7,
    )
    yield t
    t.close()


def engine_ids(service: RunningService, limit: int, **params: str) -> list[str]:
    r = httpx.get(
        service.url + "/search", params={"q": "weather forecast", "limit": str(limit), **params}
    )
    assert r.status_code == 200, r.text
    return [hit["id"] for hit in r.json()["results"]]


def test_the_target_measures_the_engine_ranking_across_pages(
    target: BazaarTarget, service: RunningService
) -> None:
    response = target.search("weather forecast", profile="hybrid", limit=20)
    # 20 results in pages of 7: three requests, the cursors followed by the SDK's client
    assert response.meta["pages"] == 3
    assert response.ids == engine_ids(service, 20)
    assert [h.score for h in response.hits] == [float(-i) for i in range(20)]
    first = response.hits[0].resource
    assert first is not None and first["x402Version"] == 2 and first["accepts"]
    assert response.extracted_filters == {}


def test_protocol_filters_are_sent_and_reported_applied(
    target: BazaarTarget, service: RunningService, collection: Collection
) -> None:
    pay_to = next(d.x402["accepts"][0]["payTo"] for d in collection.documents.values() if d.x402)
    for filters, engine_params in (
        ({"network": "stellar:testnet"}, {"network": "stellar:testnet"}),
        ({"type": "mcp", "scheme": "exact"}, {"type": "mcp", "scheme": "exact"}),
        ({"recipient": pay_to}, {"recipient": pay_to}),
    ):
        response = target.search("weather forecast", profile="hybrid", limit=40, filters=filters)
        assert response.applied_filters == filters
        assert response.ids == engine_ids(service, 40, **engine_params), filters
        assert response.ids, filters
        for doc_id in response.ids:
            assert oracle.satisfies(collection.documents[doc_id], filters, collection.assets)


def test_what_the_protocol_cannot_carry_is_unavailable(target: BazaarTarget) -> None:
    with pytest.raises(FilterUnsupported, match="no parameter for asset, max_price_usd"):
        target.search("x", profile="hybrid", filters={"asset": "USDC", "max_price_usd": "1"})
    with pytest.raises(TargetUnavailable, match="one ranking, measured as profile 'hybrid'"):
        target.search("x", profile="lexical")
    assert target.profiles() == {"hybrid": None}
    facts = target.describe()
    assert facts["target"] == "bazaar" and facts["filters"]["unsupported"] == [
        "asset",
        "max_price_usd",
    ]


def test_a_failing_facilitator_is_unavailable(service: RunningService) -> None:
    wrong_path = BazaarTarget(service.url + "/nowhere", resources={})
    with pytest.raises(TargetUnavailable, match="404"):
        wrong_path.search("weather", profile="hybrid")
    wrong_path.close()
    with pytest.raises(ValueError, match="bazaar\\+http"):
        BazaarTarget("bazaar+ftp://x", resources={})


def test_plugin_evaluates_a_facilitator_by_url(
    pytester: pytest.Pytester, service: RunningService, collection_dir: Path
) -> None:
    """``--search-eval-url bazaar+...``: the plugin measures the facilitator through the SDK;
    its numbers are the engine's hybrid numbers, and the invariants that need a filter the
    protocol lacks say so."""
    for path in collection_dir.rglob("*"):
        if path.is_file():
            target = pytester.path / path.relative_to(collection_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    # A filtered query: its filter chain reaches asset and price, which the protocol lacks.
    queries = pytester.path / "qrels" / "queries.yaml"
    text = queries.read_text(encoding="utf-8")
    head, sep, rest = text.partition("- id: q00002\n")
    queries.write_text(
        head + sep + rest.replace("constraints: {}", 'constraints: {network: "stellar:pubnet"}', 1),
        encoding="utf-8",
    )
    pytester.makeini(
        "[pytest]\nsearch_eval_bootstrap_samples = 100\nsearch_eval_permutations = 100\n"
    )
    args = ("--search-eval", "-p", "no:cacheprovider", "-p", "no:xdist")
    result = pytester.runpytest_subprocess(*args, f"--search-eval-url=bazaar+{service.url}")
    report = json.loads((pytester.path / "searcheval-report" / "report.json").read_text())
    assert report["environment"]["target"]["target"] == "bazaar", result.stdout.str()
    assert report["run"]["queries_run"] == 5  # the test split
    # the facilitator's one ranking, reported as the gated profile
    assert list(report["profiles"]) == ["hybrid"]
    bazaar = report["profiles"]["hybrid"]
    assert bazaar["available"] and bazaar["results_checked"] > 0
    chain = report["invariants"]["filter-monotonicity-q00002"]
    assert chain["status"] == "skipped"
    assert "has no parameter for asset" in chain["message"], chain

    (pytester.path / "searcheval-report" / "report.json").unlink()
    pytester.runpytest_subprocess(
        *args,
        f"--search-eval-url={service.url}",
        "--search-eval-profiles=hybrid",
        "-m",
        "searcheval_query",
    )
    served = json.loads((pytester.path / "searcheval-report" / "report.json").read_text())
    hybrid = served["profiles"]["hybrid"]
    for measure in ("nDCG@10", "R@20", "RR@20", "AP@20"):
        assert bazaar["measures"][measure]["mean"] == hybrid["measures"][measure]["mean"], measure
