"""The HTTP service and the command line through the real engine (PostgreSQL + the model).

One synthetic native collection (written by ``collection_synth``), one engine and one HTTP
service per module; the admin test writes to a clone.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_searcheval.collection import load
from pytest_searcheval.collection.model import Collection
from pytest_searcheval.engine.core import Engine, EngineSettings
from pytest_searcheval.engine.service import RunningService, serve_in_thread
from pytest_searcheval.x402 import oracle as constraints
from pytest_searcheval.x402.synth import write_synthetic
from pytest_searcheval.x402.vocabulary import FILTER_KEYS

N_DOCS = 80


@pytest.fixture(scope="module")
def collection_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic(
        tmp_path_factory.mktemp("synth"), n_docs=N_DOCS, n_queries=12, judged_per_query=8, files=2
    )


@pytest.fixture(scope="module")
def collection(collection_dir: Path) -> Collection:
    return load(collection_dir)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("embed-cache")


@pytest.fixture(scope="module")
def engine(pg_server: Any, collection: Collection, cache_dir: Path) -> Iterator[Engine]:
    settings = EngineSettings(cache_dir=str(cache_dir), no_result={})
    with Engine.start(collection, dsn=pg_server.dsn, settings=settings) as eng:
        yield eng


@pytest.fixture(scope="module")
def service(engine: Engine) -> Iterator[RunningService]:
    with serve_in_thread(engine, token="t0ken") as running:
        yield running


def get(service: RunningService, **params: str) -> httpx.Response:
    return httpx.get(service.url + "/search", params=params, timeout=30)


def test_healthz_reports_the_stack(service: RunningService) -> None:
    body = httpx.get(service.url + "/healthz", timeout=30).json()
    assert body["status"] == "ok" and body["documents"] == N_DOCS
    assert body["postgres"] and body["pgvector"]
    assert body["model"]["dimensions"] == 384
    assert body["profiles"]["lexical"] is None


FILTER_SETS: list[dict[str, str]] = [
    {"network": "stellar:testnet"},
    {"asset": "EURC"},
    {"type": "mcp", "network": "stellar:pubnet"},
    {"max_price_usd": "0.05"},
    {"asset": "WETH", "max_price_usd": "1500"},
    {"asset": "USDC", "network": "stellar:pubnet", "max_price_usd": "0.5"},
]


@pytest.mark.parametrize("filters", FILTER_SETS, ids=[str(f) for f in FILTER_SETS])
def test_filtered_search_returns_exactly_the_oracle_set(
    service: RunningService, collection: Collection, filters: dict[str, str]
) -> None:
    # The semantic profile scores every candidate, so with a large limit the result set is the
    # whole filtered set: compare it with the independent oracle, both ways.
    r = get(
        service, q="weather forecast", profile="semantic", limit="1000", extract="false", **filters
    )
    assert r.status_code == 200, r.text
    body = r.json()
    got = {hit["id"] for hit in body["results"]}
    want = {
        d.id
        for d in collection.documents.values()
        if constraints.satisfies(d, filters, collection.assets)
    }
    assert want, "the synthetic collection should have listings matching " + str(filters)
    assert got == want
    assert body["filters"]["applied"] == filters


def test_extracted_filters_are_reported_and_applied(
    service: RunningService, collection: Collection
) -> None:
    body = get(
        service, q="weather forecast on testnet paid in USDC", profile="hybrid", limit="50"
    ).json()
    assert body["filters"]["extracted"] == {"network": "stellar:testnet", "asset": "USDC"}
    assert body["results"]
    for hit in body["results"]:
        doc = collection.documents[hit["id"]]
        assert constraints.satisfies(doc, body["filters"]["applied"], collection.assets)


PAYLOADS = [
    "'; DROP TABLE documents; --",
    "$$; DROP TABLE payment_options; $$",
    "\\x00",
    "%00",
    "1 OR 1=1",
    '") OR TRUE --',
    "ab\x00cd",
]
PARAMS = ["q", "profile", "limit", "extract", *FILTER_KEYS]


def test_injection_payloads_in_every_parameter(service: RunningService) -> None:
    statuses: dict[int, int] = {}
    for name in PARAMS:
        for payload in PAYLOADS:
            params = {"q": "weather", name: payload}
            r = get(service, **params)
            assert r.status_code in (200, 400), (name, payload, r.status_code, r.text)
            assert "error" in r.json() or "results" in r.json()
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
    assert statuses.get(400, 0) > 0 and statuses.get(200, 0) > 0
    body = httpx.get(service.url + "/healthz", timeout=30).json()
    assert body["documents"] == N_DOCS
    r = get(service, q="weather", network="stellar:pubnet", profile="lexical")
    assert r.status_code == 200 and r.json()["results"]


def test_concurrent_clients_get_the_serial_answers(service: RunningService) -> None:
    queries = [
        "weather forecast",
        "stock quote",
        "translate speech",
        "image caption",
        "news search",
        "map route",
    ]
    serial = {
        q: [h["id"] for h in get(service, q=q, profile="hybrid").json()["results"]] for q in queries
    }
    answers: list[tuple[str, list[str]]] = []
    errors: list[str] = []

    def worker(offset: int) -> None:
        with httpx.Client(base_url=service.url, timeout=30) as client:
            for i in range(len(queries)):
                q = queries[(i + offset) % len(queries)]
                r = client.get("/search", params={"q": q, "profile": "hybrid"})
                if r.status_code != 200:
                    errors.append(r.text)
                else:
                    answers.append((q, [h["id"] for h in r.json()["results"]]))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(answers) == 8 * len(queries)
    assert all(ids == serial[q] for q, ids in answers)


def test_admin_upsert_and_delete_on_a_clone(engine: Engine) -> None:
    record = {
        "id": "zz-new-listing",
        "title": "Quokka Habitat Census",
        "text": "Counts of quokkas on Rottnest island.",
        "fields": {},
    }
    with engine.clone() as clone, serve_in_thread(clone, token="adm") as svc:
        auth = {"Authorization": "Bearer adm"}
        r = httpx.put(
            svc.url + "/admin/resources/zz-new-listing", json=record, headers=auth, timeout=60
        )
        assert r.status_code == 200, r.text
        ids = [h["id"] for h in get(svc, q="quokka census", profile="lexical").json()["results"]]
        assert ids[:1] == ["zz-new-listing"]
        r = httpx.delete(svc.url + "/admin/resources/zz-new-listing", headers=auth, timeout=60)
        assert r.status_code == 200
        ids = [h["id"] for h in get(svc, q="quokka census", profile="lexical").json()["results"]]
        assert "zz-new-listing" not in ids
    # the shared engine never saw it
    assert engine.describe()["documents"] == N_DOCS


def test_cli_run_writes_a_trec_run(
    pg_server: Any,
    collection_dir: Path,
    collection: Collection,
    cache_dir: Path,
    tmp_path: Path,
    engine: Engine,
) -> None:
    import pytrec_eval

    from pytest_searcheval.engine.__main__ import main

    out = tmp_path / "lexical.run"
    code = main(
        [
            "run",
            "--collection",
            str(collection_dir),
            "--profile",
            "lexical",
            "--out",
            str(out),
            "--split",
            "dev",
            "--limit",
            "20",
            "--dsn",
            pg_server.dsn,
            "--cache-dir",
            str(cache_dir),
        ]
    )
    assert code == 0
    lines = out.read_text().splitlines()
    assert lines and all(len(line.split()) == 6 and line.endswith(" lexical") for line in lines)
    with out.open() as fh:
        run = pytrec_eval.parse_run(fh)
    dev = {q.id for q in collection.queries_in("dev")}
    assert set(run) <= dev and len(run) >= len(dev) - 1
    # trec_eval's order (score desc) is the engine's order for every query
    for qid, scores in run.items():
        ranked = [d for d, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]
        body = engine.search(collection.queries[qid].text, profile="lexical", limit=20)
        assert ranked == [h["id"] for h in body["results"]]
    qrels = {q: dict(j) for q, j in collection.qrels("dev").items()}
    measures = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut"}).evaluate(run)
    assert measures and all(0.0 <= m["ndcg_cut_10"] <= 1.0 for m in measures.values())


def test_cli_run_refuses_an_unavailable_profile(
    pg_server: Any,
    collection_dir: Path,
    cache_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    engine: Engine,
) -> None:
    from pytest_searcheval.engine.__main__ import main

    if engine.profiles()["hybrid_rerank"] is None:
        pytest.skip("a cross-encoder is configured in this environment")
    out = tmp_path / "rerank.run"
    code = main(
        [
            "run",
            "--collection",
            str(collection_dir),
            "--profile",
            "hybrid_rerank",
            "--out",
            str(out),
            "--dsn",
            pg_server.dsn,
            "--cache-dir",
            str(cache_dir),
        ]
    )
    assert code == 1 and not out.exists()
    assert "hybrid_rerank is unavailable" in capsys.readouterr().err


def test_cli_errors_exit_2(tmp_path: Path) -> None:
    from pytest_searcheval.engine.__main__ import main

    missing = str(tmp_path / "nope")
    assert main(["run", "--collection", missing, "--profile", "lexical", "--out", "x"]) == 2
    assert (
        main(["run", "--collection", missing, "--profile", "lexical", "--out", "x", "--limit", "0"])
        == 2
    )


def test_cli_serve_fails_fast_on_a_busy_port(collection_dir: Path) -> None:
    import socket

    from pytest_searcheval.engine.__main__ import main

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        # Exit status 2 before any server or model is started.
        assert main(["serve", "--collection", str(collection_dir), "--port", str(port)]) == 2


# --- x402 Bazaar discovery through the official SDK's client -----------------------------------


@pytest.fixture(scope="module")
def sdk(service: RunningService) -> Iterator[Any]:
    from x402.extensions.bazaar import with_bazaar
    from x402.http import FacilitatorConfig, HTTPFacilitatorClientSync

    client = with_bazaar(HTTPFacilitatorClientSync(FacilitatorConfig(url=service.url, timeout=60)))
    with client:
        yield client.extensions.bazaar


def _resource_ids(collection: Collection) -> dict[str, str]:
    return {d.x402["resource"]: d.id for d in collection.documents.values() if d.x402}


def test_sdk_search_pages_are_the_engine_ranking(
    sdk: Any, service: RunningService, collection: Collection
) -> None:
    from x402.extensions.bazaar import SearchDiscoveryResourcesParams

    body = get(service, q="weather forecast", limit="35").json()
    engine_ids = [h["id"] for h in body["results"]]
    by_resource = _resource_ids(collection)
    paged: list[str] = []
    cursor: str | None = None
    for _ in range(5):
        page = sdk.search(
            SearchDiscoveryResourcesParams(query="weather forecast", limit=7, cursor=cursor)
        )
        assert page.x402_version == 2 and page.partial_results is False
        assert all(r.x402_version == 2 and r.accepts for r in page.resources)
        paged += [by_resource[r.resource] for r in page.resources]
        assert page.pagination is not None and page.pagination.limit == 7
        cursor = page.pagination.cursor
        assert cursor is not None
    assert len(engine_ids) == 35 and paged == engine_ids


def test_sdk_filtered_search_through_cursors_is_the_oracle_set(
    sdk: Any, collection: Collection
) -> None:
    from x402.extensions.bazaar import SearchDiscoveryResourcesParams

    by_resource = _resource_ids(collection)
    some_pay_to = next(d.x402["accepts"][0]["payTo"] for d in collection.documents.values())
    for filters in (
        {"network": "stellar:testnet"},
        {"type": "mcp", "scheme": "exact"},
        {"pay_to": some_pay_to},
    ):
        found: list[str] = []
        cursor: str | None = None
        while True:
            page = sdk.search(
                SearchDiscoveryResourcesParams(
                    query="weather forecast", limit=25, cursor=cursor, **filters
                )
            )
            found += [by_resource[r.resource] for r in page.resources]
            cursor = page.pagination.cursor if page.pagination else None
            if cursor is None:
                break
        vocabulary = {("recipient" if k == "pay_to" else k): v for k, v in filters.items()}
        want = {
            d.id
            for d in collection.documents.values()
            if constraints.satisfies(d, vocabulary, collection.assets)
        }
        assert want, filters
        assert len(found) == len(set(found)) and set(found) == want, filters


def test_sdk_list_pages_the_whole_catalog(sdk: Any, collection: Collection) -> None:
    from x402.extensions.bazaar import ListDiscoveryResourcesParams

    by_resource = _resource_ids(collection)
    listed: list[str] = []
    offset = 0
    while True:
        page = sdk.list_resources(ListDiscoveryResourcesParams(limit=30, offset=offset))
        assert page.pagination.total == N_DOCS and page.pagination.offset == offset
        listed += [by_resource[i.resource] for i in page.items]
        offset += 30
        if offset >= page.pagination.total:
            break
    assert listed == sorted(collection.documents)
    mcp = sdk.list_resources(ListDiscoveryResourcesParams(type="mcp", limit=1000))
    want = sorted(i for i, d in collection.documents.items() if (d.x402 or {}).get("type") == "mcp")
    assert [by_resource[i.resource] for i in mcp.items] == want
    assert mcp.pagination.total == len(want) > 0


def test_explanations_reproduce_the_scores(service: RunningService) -> None:
    params = {"query": "weather forecast", "limit": "15", "explain": "true"}
    body = httpx.get(service.url + "/discovery/search", params=params, timeout=30).json()
    checked = 0
    for item in body["resources"]:
        why = item["explanation"]
        assert set(why) >= {"lexical", "semantic", "rrf", "title_boost", "prior"}
        if why["duplicates"]:
            continue  # a group's representative carries the group's best score
        parts = sum(why["rrf"].values()) + why["title_boost"] + why["prior"]
        assert item["score"] == pytest.approx(parts * why["stuffing_penalty"], abs=1e-5)
        checked += 1
    assert checked >= 10
    lexical = httpx.get(
        service.url + "/discovery/search", params={**params, "profile": "lexical"}, timeout=30
    ).json()
    for rank, item in enumerate(lexical["resources"], start=1):
        assert item["explanation"] == {
            "lexical": {"rank": rank, "score": pytest.approx(item["score"], abs=1e-6)}
        }
