"""The HTTP layer with a fake engine: parameter validation, error shapes, auth, threading.

The fake engine records what reached it, so each test proves that bad input was stopped at
the HTTP layer and good input arrived validated. End-to-end tests through the real engine are
in test_engine_api_e2e.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from pytest_searcheval.collection.model import Asset
from pytest_searcheval.engine.app import MAX_QUERY_CHARS, create_app
from pytest_searcheval.engine.service import serve_in_thread
from pytest_searcheval.x402 import strkey
from pytest_searcheval.x402.vocabulary import FILTER_KEYS

USDC = strkey.encode_contract(bytes([1]) * 32)
G = strkey.encode_account(bytes([9]) * 32)
TOKEN = "s3cret-token"


class ProfileUnavailable(RuntimeError):
    pass


class FakeEngine:
    def __init__(self) -> None:
        self.assets = [Asset("USDC", "stellar:pubnet", USDC, 7, Decimal(1))]
        self.calls: list[dict[str, Any]] = []
        self.docs: dict[str, Mapping[str, Any]] = {"a": {"id": "a"}}
        #: what search() ranks, best first (a page of it answers each call)
        self.ranked: list[str] = ["a"]
        self.list_calls: list[dict[str, Any]] = []
        self.reindexed = 0
        self.lock = threading.Lock()
        self.active = 0
        self.max_active = 0
        self.delay = 0.0

    def profiles(self) -> dict[str, str | None]:
        return {
            "lexical": None,
            "semantic": None,
            "hybrid": None,
            "hybrid_rerank": "no cross-encoder configured",
        }

    def describe(self) -> dict[str, Any]:
        return {
            "postgres": "18.0",
            "pgvector": "0.8.0",
            "model": {"id": "m"},
            "documents": len(self.docs),
        }

    def search(
        self,
        q: str,
        *,
        profile: str = "hybrid",
        limit: int = 10,
        filters: Mapping[str, Any] | None = None,
        extract: bool = True,
        explain: bool = False,
    ) -> dict[str, Any]:
        import time

        with self.lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            time.sleep(self.delay)
            self.calls.append(
                {
                    "q": q,
                    "profile": profile,
                    "limit": limit,
                    "filters": dict(filters or {}),
                    "extract": extract,
                }
            )
            if q == "raise-unavailable":
                raise ProfileUnavailable("profile hybrid is unavailable: model failed")
            if q == "raise-bug":
                raise KeyError("boom")
            if q == "raise-pool-timeout":
                from psycopg_pool import PoolTimeout

                raise PoolTimeout("couldn't get a connection after 30.00 sec")
            return {
                "query": q,
                "profile": profile,
                "results": [
                    {
                        "id": d,
                        "score": float(len(self.ranked) - i),
                        "resource": wire(d),
                        **({"explanation": {"lexical": {"rank": i + 1}}} if explain else {}),
                    }
                    for i, d in enumerate(self.ranked[:limit])
                ],
                "filters": {"applied": dict(filters or {}), "extracted": {}},
                "no_result": False,
                "model": {"id": "m"},
                "latency_ms": 0.1,
            }
        finally:
            with self.lock:
                self.active -= 1

    def list_resources(
        self,
        *,
        filters: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> dict[str, Any]:
        self.list_calls.append({"filters": dict(filters or {}), "limit": limit, "offset": offset})
        ids = sorted(self.ranked)
        page = ids[offset : offset + limit]
        return {"total": len(ids), "items": [{"id": d, "resource": wire(d)} for d in page]}

    def upsert(self, record: Mapping[str, Any]) -> None:
        self.docs[str(record["id"])] = record

    def delete(self, doc_id: str) -> bool:
        return self.docs.pop(doc_id, None) is not None

    def reindex(self) -> None:
        self.reindexed += 1


def wire(doc_id: str) -> dict[str, Any]:
    """A discovered-resource record as the shipped catalog stores it."""
    return {
        "resource": f"https://api.{doc_id}.example/v1/{doc_id}",
        "type": "http",
        "x402Version": 2,
        "accepts": [
            {
                "scheme": "exact",
                "network": "stellar:pubnet",
                "asset": USDC,
                "amount": "1000",
                "payTo": G,
                "maxTimeoutSeconds": 60,
                "extra": {},
            }
        ],
        "lastUpdated": "2026-11-01T00:00:00Z",
        "description": f"listing {doc_id}",
        "mimeType": "application/json",
        "extensions": {"bazaar": {"info": {"input": {"type": "http", "method": "GET"}}}},
    }


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def client(engine: FakeEngine) -> Iterator[TestClient]:
    with TestClient(create_app(engine, admin_token=TOKEN), raise_server_exceptions=False) as c:
        yield c


def test_search_passes_validated_values(client: TestClient, engine: FakeEngine) -> None:
    r = client.get(
        "/search",
        params={
            "q": "weather",
            "profile": "lexical",
            "limit": "25",
            "extract": "false",
            "network": "stellar:pubnet",
            "asset": "USDC",
            "max_price_usd": "0.50",
            "recipient": G,
        },
    )
    assert r.status_code == 200, r.text
    assert r.json()["results"][0]["id"] == "a"
    assert engine.calls == [
        {
            "q": "weather",
            "profile": "lexical",
            "limit": 25,
            "extract": False,
            "filters": {
                "network": "stellar:pubnet",
                "asset": "USDC",
                "max_price_usd": "0.5",
                "recipient": G,
            },
        }
    ]


def test_defaults(client: TestClient, engine: FakeEngine) -> None:
    assert client.get("/search", params={"q": "x"}).status_code == 200
    assert engine.calls[0]["profile"] == "hybrid"
    assert engine.calls[0]["limit"] == 10 and engine.calls[0]["extract"] is True


BAD: list[tuple[dict[str, str], str, str]] = [
    ({}, "q", "missing"),
    ({"q": "   "}, "q", "empty"),
    ({"q": "x" * (MAX_QUERY_CHARS + 1)}, "q", "longer than"),
    ({"q": "abc\x00def"}, "q", "NUL"),
    ({"q": "x", "limit": "0"}, "limit", "[1, 1000]"),
    ({"q": "x", "limit": "1001"}, "limit", "[1, 1000]"),
    ({"q": "x", "limit": "-5"}, "limit", "integer"),
    ({"q": "x", "limit": "ten"}, "limit", "integer"),
    ({"q": "x", "limit": "1e3"}, "limit", "integer"),
    ({"q": "x", "limit": "99999999999999999999"}, "limit", "integer"),
    ({"q": "x", "profile": "bm25"}, "profile", "unknown profile"),
    ({"q": "x", "extract": "maybe"}, "extract", "true or false"),
    ({"q": "x", "network": "stellar:mainnet"}, "network", "unknown network"),
    ({"q": "x", "asset": "DOGE"}, "asset", "unknown asset"),
    ({"q": "x", "max_price_usd": "-1"}, "max_price_usd", "negative"),
    ({"q": "x", "max_price_usd": "cheap"}, "max_price_usd", "decimal"),
    ({"q": "x", "max_price_usd": "inf"}, "max_price_usd", "decimal"),
    ({"q": "x", "max_price_usd": "nan"}, "max_price_usd", "decimal"),
    ({"q": "x", "recipient": G[:-1] + "Q"}, "recipient", "Stellar"),
    ({"q": "x", "type": "grpc"}, "type", "unknown type"),
    ({"q": "x", "scheme": "stream"}, "scheme", "unknown scheme"),
    ({"q": "x", "extension": "a b"}, "extension", "extension name"),
    ({"q": "x", "netwrok": "stellar:pubnet"}, "netwrok", "unknown parameter"),
]


@pytest.mark.parametrize(
    ("params", "field", "needle"), BAD, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD)]
)
def test_bad_input_is_400_with_field(
    client: TestClient, engine: FakeEngine, params: dict[str, str], field: str, needle: str
) -> None:
    r = client.get("/search", params=params)
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["field"] == field and needle in body["error"]
    assert engine.calls == []


def test_repeated_parameter_and_bad_percent_encoding(client: TestClient) -> None:
    r = client.get("/search?q=a&q=b")
    assert r.status_code == 400 and r.json()["field"] == "q"
    r = client.get("/search?q=%FF%FE")
    assert r.status_code == 400 and r.json()["field"] == "q"
    r = client.get("/search?q=ok&network=%00")
    assert r.status_code == 400 and r.json()["field"] == "network"


def test_unavailable_profile_is_503_with_reason(client: TestClient, engine: FakeEngine) -> None:
    r = client.get("/search", params={"q": "x", "profile": "hybrid_rerank"})
    assert r.status_code == 503
    assert r.json()["reason"] == "no cross-encoder configured"
    r = client.get("/search", params={"q": "raise-unavailable"})
    assert r.status_code == 503 and "model failed" in r.json()["reason"]


def test_engine_bug_is_a_json_500_without_traceback(client: TestClient) -> None:
    r = client.get("/search", params={"q": "raise-bug"})
    assert r.status_code == 500
    assert r.json() == {"error": "internal error (KeyError)", "field": None}


def test_database_outage_is_a_503(client: TestClient) -> None:
    r = client.get("/search", params={"q": "raise-pool-timeout"})
    assert r.status_code == 503
    assert r.json() == {"error": "database unavailable (PoolTimeout)", "field": None}


def test_unknown_route_and_method_are_json(client: TestClient) -> None:
    r = client.get("/nope")
    assert r.status_code == 404 and "error" in r.json()
    r = client.post("/search")
    assert r.status_code == 405 and "error" in r.json()


def test_healthz(client: TestClient) -> None:
    body = client.get("/healthz").json()
    assert body["status"] == "ok" and body["documents"] == 1
    assert body["defaults"] == {"gated_profile": "hybrid", "gate_over": "lexical"}
    assert body["profiles"]["hybrid_rerank"] == "no cross-encoder configured"
    assert body["postgres"] == "18.0" and body["pgvector"] == "0.8.0"


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_admin_requires_the_token(client: TestClient, engine: FakeEngine) -> None:
    record = {"id": "b", "title": "B", "text": "b"}
    assert client.put("/admin/resources/b", json=record).status_code == 401
    r = client.put("/admin/resources/b", json=record, headers=auth("wrong"))
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    r = client.put("/admin/resources/b", json=record, headers={"Authorization": f"Basic {TOKEN}"})
    assert r.status_code == 401
    assert client.delete("/admin/resources/a").status_code == 401
    assert client.post("/admin/reindex").status_code == 401
    assert set(engine.docs) == {"a"} and engine.reindexed == 0


def test_admin_routes(client: TestClient, engine: FakeEngine) -> None:
    r = client.put("/admin/resources/b", json={"title": "B", "text": "b"}, headers=auth())
    assert r.status_code == 200 and r.json() == {"id": "b", "status": "upserted"}
    assert engine.docs["b"]["id"] == "b"
    assert client.delete("/admin/resources/b", headers=auth()).json()["status"] == "deleted"
    r = client.delete("/admin/resources/b", headers=auth())
    assert r.status_code == 404 and r.json()["field"] == "id"
    assert client.post("/admin/reindex", headers=auth()).status_code == 200
    assert engine.reindexed == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"id": "other"}, "id"),
        ({"title": 5}, "title"),
        ({"text": "a\x00b"}, "text"),
        ({"x402": "no"}, "x402"),
        ({"x402": {"type": "grpc"}}, "x402.type"),
        ({"x402": {"accepts": [{"amount": "1.5"}]}}, "x402.accepts[0].amount"),
        ({"fields": {"k\x00": 1}}, "fields.'k\\x00'"),
        ({"sidecar": {"settlements": True}}, "sidecar.settlements"),
        ({"sidecar": {"liveness": {"a": 1}}}, "sidecar.liveness"),
        ({"fields": {"n": float("nan")}}, "fields.n"),
        ({"fields": {"n": 10**30}}, "fields.n"),
        ({"title": "\ud800"}, "title"),
        ({"fields": {"\ud800": 1}}, "fields.'\\ud800'"),
        ([1, 2], "body"),
    ],
)
def test_admin_rejects_bad_records(
    client: TestClient, engine: FakeEngine, body: Any, field: str
) -> None:
    if isinstance(body, dict):
        body = {"text": "t", **body}  # otherwise a valid record: the named field is at fault
    raw = json.dumps(body, allow_nan=True).encode("utf-8", "surrogatepass")
    r = client.put("/admin/resources/c", content=raw, headers=auth())
    assert r.status_code == 400, r.text
    answer = r.json()
    fields = [p["field"] for p in answer.get("problems", [])] or [answer["field"]]
    assert field in fields, answer
    assert answer["field"] == fields[0]
    assert "c" not in engine.docs


def test_admin_rejects_non_json_and_huge_bodies(client: TestClient) -> None:
    r = client.put("/admin/resources/c", content=b"{not json", headers=auth())
    assert r.status_code == 400 and r.json()["field"] == "body"
    r = client.put("/admin/resources/c", content=b"x" * 1_000_001, headers=auth())
    assert r.status_code == 413


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("application/json", 200),
        ("application/json; charset=utf-8", 200),
        ("application/merge-patch+json", 200),
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
        ("multipart/form-data; boundary=x", 415),
        ("application/jsonx", 415),
    ],
)
def test_admin_put_reads_json_only(
    client: TestClient, engine: FakeEngine, content_type: str, status: int
) -> None:
    """A body declared as another type is refused with 415, not read as JSON anyway."""
    raw = json.dumps({"title": "C", "text": "c"}).encode()
    engine.docs.pop("c", None)
    r = client.put(
        "/admin/resources/c", content=raw, headers={**auth(), "Content-Type": content_type}
    )
    assert r.status_code == status, r.text
    if status == 415:
        assert r.json()["field"] == "Content-Type"
        assert content_type.split(";")[0] in r.json()["error"]
        assert "c" not in engine.docs
    else:
        assert "c" in engine.docs


def test_admin_disabled_without_token(engine: FakeEngine) -> None:
    with TestClient(create_app(engine, admin_token=None)) as c:
        r = c.post("/admin/reindex", headers=auth())
        assert r.status_code == 403
    assert engine.reindexed == 0


def test_served_in_a_thread_with_concurrent_clients(engine: FakeEngine) -> None:
    engine.delay = 0.05
    service = serve_in_thread(engine, token=TOKEN)
    try:
        assert service.url.startswith("http://127.0.0.1:") and service.port > 0
        statuses: list[int] = []

        def client_thread() -> None:
            with httpx.Client(base_url=service.url, timeout=10) as c:
                for _ in range(3):
                    statuses.append(c.get("/search", params={"q": "x"}).status_code)

        threads = [threading.Thread(target=client_thread) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert statuses == [200] * 18
        # Requests overlapped: they were served by several worker threads at once.
        assert engine.max_active > 1
        r = httpx.post(service.url + "/admin/reindex", headers=auth(), timeout=10)
        assert r.status_code == 200
    finally:
        service.stop()
    with pytest.raises(httpx.TransportError):
        httpx.get(service.url + "/healthz", timeout=1)
    service.stop()  # idempotent


def test_random_token_when_none_given(engine: FakeEngine) -> None:
    with serve_in_thread(engine) as service:
        assert service.token and len(service.token) >= 32
        r = httpx.post(service.url + "/admin/reindex", headers=auth(service.token), timeout=10)
        assert r.status_code == 200


def test_random_parameter_values_never_give_a_500(client: TestClient) -> None:
    import random

    rng = random.Random(20261130)
    alphabet = "aZ09 $%'\";\\-_.:,()[]{}<>=!?\x00\x01\x7f\u00e9\u2014\U0001f600\ufffd\n\t"
    names = ["q", "profile", "limit", "extract", *FILTER_KEYS]
    for _ in range(300):
        params = {"q": "weather"}
        for name in rng.sample(names, rng.randint(1, 4)):
            params[name] = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        r = client.get("/search", params=params)
        assert r.status_code in (200, 400, 503), (params, r.status_code, r.text)
        body = r.json()
        assert ("results" in body) if r.status_code == 200 else ("error" in body)


def test_extraction_never_raises_on_random_text() -> None:
    import random

    from pytest_searcheval.engine.extract import extract

    rng = random.Random(7)
    words = [
        "under",
        "$",
        "5",
        "cents",
        "testnet",
        "mcp",
        "not",
        "USDC",
        "paid",
        "in",
        "per",
        "call",
        "upto",
        "exact",
        "scheme",
        "max",
        "0.",
        ".5",
        "€",
        "¢",
        "1c",
        "or",
        "less",
        G,
        G[:20],
        "\x00",
        "up",
        "to",
        "a",
        "half",
        "tenth",
        "of",
        "dollar",
    ]
    for _ in range(500):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
        found = extract(text, FakeEngine().assets)
        assert isinstance(found.filters, dict) and isinstance(found.text, str)


def test_accepted_connections_disable_nagle(engine: FakeEngine) -> None:
    """asyncio sets TCP_NODELAY only on IPPROTO_TCP sockets; a listening socket made with
    proto 0 made every keep-alive response wait ~40 ms for the client's delayed ACK."""
    import socket

    with serve_in_thread(engine) as service:
        listeners = [s for server in service._server.servers for s in server.sockets]
        assert listeners and all(s.proto == socket.IPPROTO_TCP for s in listeners)
        with httpx.Client(base_url=service.url, timeout=10) as c:
            assert c.get("/healthz").status_code == 200


def test_query_cap_is_configurable(engine: FakeEngine) -> None:
    with TestClient(create_app(engine, admin_token=None, max_query_chars=20)) as c:
        assert c.get("/search", params={"q": "x" * 20}).status_code == 200
        r = c.get("/search", params={"q": "x" * 21})
        assert r.status_code == 400 and "longer than 20" in r.json()["error"]
    with TestClient(create_app(engine, admin_token=None, max_query_chars=2000)) as c:
        assert c.get("/search", params={"q": "x" * 1500}).status_code == 200


def test_chunked_body_over_the_limit_is_413(client: TestClient, engine: FakeEngine) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(20):
            yield b"x" * 100_000

    r = client.put("/admin/resources/big", content=chunks(), headers=auth())
    assert r.status_code == 413 and r.json()["field"] == "body"
    assert "big" not in engine.docs


# --- x402 Bazaar discovery ------------------------------------------------------------------


def test_discovery_search_maps_protocol_parameters(client: TestClient, engine: FakeEngine) -> None:
    r = client.get(
        "/discovery/search",
        params={
            "query": "weather",
            "type": "http",
            "payTo": G,
            "scheme": "exact",
            "network": "stellar:pubnet",
            "extensions": "bazaar",
            "limit": "3",
            "profile": "lexical",
            "asset": "USDC",
            "max_price_usd": "0.50",
            "extract": "false",
        },
    )
    assert r.status_code == 200, r.text
    assert engine.calls == [
        {
            "q": "weather",
            "profile": "lexical",
            "limit": 4,  # one past the page: is there a next one?
            "extract": False,
            "filters": {
                "type": "http",
                "recipient": G,
                "scheme": "exact",
                "network": "stellar:pubnet",
                "extension": "bazaar",
                "asset": "USDC",
                "max_price_usd": "0.5",
            },
        }
    ]
    body = r.json()
    assert body["x402Version"] == 2 and body["partialResults"] is False
    assert body["pagination"] == {"limit": 3, "cursor": None}
    item = body["resources"][0]
    assert item == {**wire("a"), "id": "a", "score": 1.0}
    assert body["filters"]["applied"]["recipient"] == G and body["profile"] == "lexical"


BAD_DISCOVERY: list[tuple[dict[str, str], str, str]] = [
    ({}, "query", "missing"),
    ({"query": " "}, "query", "empty"),
    ({"query": "x", "payTo": G[:-1] + "Q"}, "payTo", "Stellar"),
    ({"query": "x", "extensions": "a b"}, "extensions", "extension name"),
    ({"query": "x", "network": "eip155:8453"}, "network", "unknown network"),
    ({"query": "x", "limit": "0"}, "limit", "[1, 1000]"),
    ({"query": "x", "cursor": "not a cursor!"}, "cursor", "not a cursor"),
    ({"query": "x", "cursor": "MTAuYWJj"}, "cursor", "another search"),
    ({"query": "x", "recipient": G}, "recipient", "unknown parameter"),
]


@pytest.mark.parametrize(
    ("params", "field", "needle"),
    BAD_DISCOVERY,
    ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD_DISCOVERY)],
)
def test_discovery_search_errors_name_the_protocol_parameter(
    client: TestClient, engine: FakeEngine, params: dict[str, str], field: str, needle: str
) -> None:
    r = client.get("/discovery/search", params=params)
    assert r.status_code == 400, r.text
    assert r.json()["field"] == field and needle in r.json()["error"], r.json()
    assert engine.calls == []


def test_discovery_search_pages_follow_cursors(client: TestClient, engine: FakeEngine) -> None:
    engine.ranked = [f"d{i:02d}" for i in range(7)]
    seen: list[str] = []
    params = {"query": "weather", "limit": "3"}
    cursors: list[str | None] = []
    while True:
        body = client.get("/discovery/search", params=params).json()
        seen += [item["id"] for item in body["resources"]]
        cursor = body["pagination"]["cursor"]
        cursors.append(cursor)
        if cursor is None:
            break
        params = {"query": "weather", "limit": "3", "cursor": cursor}
    assert seen == engine.ranked and len(cursors) == 3
    # a cursor continues only the search it came from
    first = cursors[0]
    assert first is not None
    r = client.get("/discovery/search", params={"query": "other", "cursor": first})
    assert r.status_code == 400 and "another search" in r.json()["error"]
    r = client.get("/discovery/search", params={"query": "weather", "type": "mcp", "cursor": first})
    assert r.status_code == 400 and r.json()["field"] == "cursor"


def test_discovery_search_flags_a_ranking_cut_at_the_depth(
    client: TestClient, engine: FakeEngine
) -> None:
    engine.ranked = [f"d{i:04d}" for i in range(1200)]
    body = client.get("/discovery/search", params={"query": "x", "limit": "1000"}).json()
    assert len(body["resources"]) == 1000
    assert body["pagination"]["cursor"] is None and body["partialResults"] is True
    body = client.get("/discovery/search", params={"query": "x", "limit": "999"}).json()
    assert body["pagination"]["cursor"] is not None and body["partialResults"] is False


def test_old_search_parameters_are_redirected(client: TestClient, engine: FakeEngine) -> None:
    r = client.get(
        "/discovery/search", params={"q": "weather", "recipient": G}, follow_redirects=False
    )
    assert r.status_code == 308
    assert r.headers["location"].startswith("/search?q=weather&recipient=")
    body = client.get("/discovery/search", params={"q": "weather"}).json()
    assert body["results"][0]["id"] == "a"


def test_discovery_resources_lists_with_offsets(client: TestClient, engine: FakeEngine) -> None:
    engine.ranked = ["c", "a", "b"]
    r = client.get(
        "/discovery/resources",
        params={"limit": "2", "offset": "1", "network": "stellar:testnet", "payTo": G},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["x402Version"] == 2
    assert [i["id"] for i in body["items"]] == ["b", "c"]
    assert body["pagination"] == {"limit": 2, "offset": 1, "total": 3}
    assert engine.list_calls == [
        {"filters": {"network": "stellar:testnet", "recipient": G}, "limit": 2, "offset": 1}
    ]
    assert client.get("/discovery/resources").json()["pagination"]["limit"] == 100
    for params, field in (
        ({"offset": "-1"}, "offset"),
        ({"offset": "x"}, "offset"),
        ({"limit": "1001"}, "limit"),
        ({"query": "x"}, "query"),
        ({"type": "grpc"}, "type"),
    ):
        r = client.get("/discovery/resources", params=params)
        assert r.status_code == 400 and r.json()["field"] == field, (params, r.text)


def test_random_discovery_parameters_never_give_a_500(client: TestClient) -> None:
    import random

    from pytest_searcheval.engine.bazaar import LIST_PARAMS, SEARCH_PARAMS

    rng = random.Random(20261201)
    alphabet = "aZ09 $%'\";\\-_.:,()[]{}<>=!?\x00\x01\x7f\u00e9\u2014\U0001f600\ufffd\n\t"
    for path, names, key in (
        ("/discovery/search", SEARCH_PARAMS, "resources"),
        ("/discovery/resources", LIST_PARAMS, "items"),
    ):
        for _ in range(200):
            params = {"query": "weather"} if path == "/discovery/search" else {}
            for name in rng.sample(names, rng.randint(1, 4)):
                params[name] = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
            r = client.get(path, params=params)
            assert r.status_code in (200, 400, 503), (params, r.status_code, r.text)
            body = r.json()
            assert (key in body) if r.status_code == 200 else ("error" in body)


def test_the_sdk_client_searches_and_lists_the_service(engine: FakeEngine) -> None:
    """The official x402 SDK's own Bazaar client, unchanged, against the running service."""
    from x402.extensions.bazaar import (
        ListDiscoveryResourcesParams,
        SearchDiscoveryResourcesParams,
        with_bazaar,
    )
    from x402.http import FacilitatorConfig, HTTPFacilitatorClientSync

    engine.ranked = [f"d{i}" for i in range(5)]
    with serve_in_thread(engine, admin=False) as service:
        client = with_bazaar(HTTPFacilitatorClientSync(FacilitatorConfig(url=service.url)))
        bazaar = client.extensions.bazaar
        first = bazaar.search(
            SearchDiscoveryResourcesParams(query="weather", network="stellar:pubnet", limit=2)
        )
        assert first.x402_version == 2 and first.partial_results is False
        assert [r.resource for r in first.resources] == [wire(d)["resource"] for d in ("d0", "d1")]
        assert first.resources[0].accepts == wire("d0")["accepts"]
        assert first.resources[0].extensions == wire("d0")["extensions"]
        assert first.resources[0].last_updated == "2026-11-01T00:00:00Z"
        assert first.pagination is not None and first.pagination.cursor is not None
        rest = bazaar.search(
            SearchDiscoveryResourcesParams(
                query="weather", network="stellar:pubnet", limit=10, cursor=first.pagination.cursor
            )
        )
        assert [r.description for r in rest.resources] == [f"listing d{i}" for i in (2, 3, 4)]
        assert rest.pagination is not None and rest.pagination.cursor is None
        assert engine.calls[0]["filters"] == {"network": "stellar:pubnet"}
        listed = bazaar.list_resources(ListDiscoveryResourcesParams(limit=2, offset=4, type="http"))
        assert [i.resource for i in listed.items] == [wire("d4")["resource"]]
        assert (listed.pagination.limit, listed.pagination.offset) == (2, 4)
        assert listed.pagination.total == 5
        with pytest.raises(ValueError, match="400"):
            bazaar.search(SearchDiscoveryResourcesParams(query="x", pay_to="GNOTANADDRESS"))


def test_the_openapi_document_describes_what_the_handlers_check(client: TestClient) -> None:
    from pytest_searcheval.engine import bazaar
    from pytest_searcheval.engine.app import SEARCH_PARAMS

    r = client.get("/openapi.json")
    assert r.status_code == 200
    spec = r.json()
    paths = spec["paths"]

    def names(path: str, method: str = "get") -> list[str]:
        return [p["name"] for p in paths[path][method]["parameters"]]

    assert names("/search") == list(SEARCH_PARAMS)
    assert names("/discovery/search") == list(bazaar.SEARCH_PARAMS)
    assert names("/discovery/resources") == list(bazaar.LIST_PARAMS)
    profile = next(p for p in paths["/search"]["get"]["parameters"] if p["name"] == "profile")
    # hybrid_rerank is unavailable in the fake: a client is not invited to ask for it
    assert profile["schema"]["enum"] == ["lexical", "semantic", "hybrid"]
    put = paths["/admin/resources/{doc_id}"]["put"]
    assert put["security"] == [{"bearer": []}]
    body = put["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    record = spec["components"]["schemas"][body.rsplit("/", 1)[1]]
    assert record["required"] == ["text"] and "$defs" not in json.dumps(record)
    for op in (put, paths["/discovery/search"]["get"]):
        assert {"200", "400", "503"} <= set(op["responses"])


def test_a_wrong_method_answers_405_with_allow(client: TestClient) -> None:
    r = client.post("/healthz")
    assert r.status_code == 405 and "GET" in r.headers["allow"]


def test_discovery_search_explains_on_request(client: TestClient, engine: FakeEngine) -> None:
    engine.ranked = ["a", "b"]
    plain = client.get("/discovery/search", params={"query": "x"}).json()
    assert all("explanation" not in item for item in plain["resources"])
    body = client.get("/discovery/search", params={"query": "x", "explain": "true"}).json()
    assert [item["explanation"] for item in body["resources"]] == [
        {"lexical": {"rank": 1}},
        {"lexical": {"rank": 2}},
    ]
    r = client.get("/discovery/search", params={"query": "x", "explain": "maybe"})
    assert r.status_code == 400 and r.json()["field"] == "explain"
