"""HttpTarget against a real local HTTP server; CallableTarget and EngineTarget adapters."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from pytest_searcheval.targets import (
    CallableTarget,
    EngineTarget,
    Hit,
    HttpTarget,
    MutableTarget,
    SearchFailed,
    SearchResponse,
    SearchTarget,
    TargetUnavailable,
    response_from_json,
)

SEEN: list[dict[str, list[str]]] = []


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: Any, raw: bytes | None = None) -> None:
        data = raw if raw is not None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        # The timeout test's client has given up by then, as intended.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(data)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        params = parse_qs(url.query)
        SEEN.append(
            params | {"_path": [url.path], "_auth": [self.headers.get("Authorization", "")]}
        )
        q = params.get("q", params.get("query", [""]))[0]
        if url.path == "/healthz":
            self._send(
                200,
                {
                    "status": "ok",
                    "profiles": {"lexical": None, "hybrid_rerank": "no"},
                    "defaults": {"gated_profile": "lexical", "gate_over": 3, "other": "x"},
                },
            )
        elif q == "sleep":
            time.sleep(0.5)
            self._send(200, {"results": []})
        elif q == "bad":
            self._send(400, {"error": "unknown asset", "field": "asset"})
        elif q == "html":
            self._send(200, None, raw=b"<html>oops</html>")
        elif url.path == "/discovery/search":
            self._send(
                200,
                {
                    "x402Version": 2,
                    "resources": [
                        {"resource": "https://a.example", "type": "http", "id": "a", "score": 2.0},
                        {"resource": "https://b.example", "type": "http", "id": "b", "score": 1.0},
                    ],
                    "partialResults": False,
                    "pagination": {"limit": 5, "cursor": None},
                    "query": q,
                    "profile": params.get("profile", ["x"])[0],
                    "filters": {"applied": {"recipient": "G"}, "extracted": {}},
                    "no_result": False,
                    "model": {"id": "m", "revision": "r"},
                    "latency_ms": 1.5,
                },
            )
        elif url.path == "/s":
            self._send(
                200,
                {
                    "query": q,
                    "profile": params.get("profile", ["x"])[0],
                    "results": [
                        {"id": "a", "score": 2.0, "resource": {"resource": "https://a.example"}},
                        {"id": "b", "score": 1.0},
                    ],
                    "filters": {"applied": {"network": "stellar:testnet"}, "extracted": {}},
                    "no_result": False,
                    "model": {"id": "m", "revision": "r"},
                    "latency_ms": 1.5,
                },
            )
        else:
            self._send(404, {"error": "no route"})


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_http_target_speaks_the_reference_api(server: str) -> None:
    target = HttpTarget(server + "/", token="s3cret")
    assert isinstance(target, SearchTarget)
    response = target.search(
        "weather",
        profile="hybrid",
        limit=5,
        filters={"network": "stellar:testnet", "recipient": "G", "asset": "USDC"},
        extract=False,
    )
    assert response.ids == ["a", "b"]
    assert response.hits[0].resource is not None
    assert response.hits[0].resource["resource"] == "https://a.example"
    assert response.applied_filters == {"recipient": "G"}
    assert response.meta["model"] == {"id": "m", "revision": "r"}
    assert response.latency_ms is not None and response.latency_ms > 0
    sent = SEEN[-1]
    assert sent["_path"] == ["/discovery/search"]
    assert sent["query"] == ["weather"] and sent["profile"] == ["hybrid"]
    assert sent["limit"] == ["5"] and "q" not in sent
    assert sent["network"] == ["stellar:testnet"] and sent["extract"] == ["false"]
    # filters under the protocol's names; asset has none and goes as the engine's extra
    assert sent["payTo"] == ["G"] and sent["asset"] == ["USDC"] and "recipient" not in sent
    assert sent["_auth"] == ["Bearer s3cret"]
    assert target.profiles() == {"lexical": None, "hybrid_rerank": "no"}
    assert target.describe()["status"] == "ok"
    target.close()


def test_http_target_takes_the_defaults_the_service_advertises(server: str) -> None:
    """Only string gated/gate-over profiles count; a template URL has no /healthz."""
    assert HttpTarget(server).defaults() == {"gated_profile": "lexical"}
    assert HttpTarget(server + "/search?q={query}").defaults() == {}


def test_http_target_url_template(server: str) -> None:
    target = HttpTarget(server + "/s?q={query}&mode={profile}&n={limit}")
    response = target.search("a b&c", profile="lexical", limit=3)
    assert response.ids == ["a", "b"]
    sent = SEEN[-1]
    assert sent["q"] == ["a b&c"] and sent["mode"] == ["lexical"] and sent["n"] == ["3"]
    target.search("x", profile="hybrid", filters={"type": "mcp"})
    assert SEEN[-1]["type"] == ["mcp"] and SEEN[-1]["q"] == ["x"]
    assert target.profiles() == {}


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("bad", "HTTP 400 from GET *unknown asset*"),
        ("html", "non-JSON body from GET *"),
        ("sleep", "timed out after 0.2 s: GET *"),
    ],
)
def test_http_failures_make_the_profile_unavailable(server: str, query: str, reason: str) -> None:
    from fnmatch import fnmatch

    target = HttpTarget(server, timeout=0.2)
    with pytest.raises(TargetUnavailable) as info:
        target.search(query, profile="hybrid")
    assert fnmatch(str(info.value), reason), str(info.value)


def test_http_connection_refused_is_unavailable() -> None:
    target = HttpTarget("http://127.0.0.1:9", timeout=1)
    with pytest.raises(TargetUnavailable, match="ConnectError"):
        target.search("x", profile="hybrid")
    assert target.profiles() == {}
    assert "error" in target.describe()


@pytest.mark.parametrize(
    "answer",
    [
        ["a", "b"],
        [("a", 0.9), ("b", 0.1)],
        {"results": [{"id": "a", "score": 0.9}, {"id": "b"}]},
        SearchResponse(hits=(Hit("a", 0.9), Hit("b", 0.1))),
    ],
)
def test_callable_target_accepts_the_documented_shapes(answer: Any) -> None:
    calls: list[dict[str, Any]] = []

    def fn(query: str, **kwargs: Any) -> Any:
        calls.append({"query": query, **kwargs})
        return answer

    target = CallableTarget(fn, profiles=["hybrid"], description={"model": {"id": "x"}})
    response = target.search("q", profile="hybrid", limit=7, filters={"type": "mcp"})
    assert response.ids == ["a", "b"]
    assert response.latency_ms is not None
    assert calls == [
        {"query": "q", "profile": "hybrid", "limit": 7, "filters": {"type": "mcp"}, "extract": True}
    ]
    assert target.profiles() == {"hybrid": None}
    assert target.describe()["model"] == {"id": "x"}


def test_response_parsing_errors_name_the_problem() -> None:
    with pytest.raises(TargetUnavailable, match="no 'results' list"):
        response_from_json({"items": []})
    with pytest.raises(TargetUnavailable, match="result 1 has no 'id'"):
        response_from_json({"results": [{"id": "a"}, {"score": 1}]})


class FakeEngine:
    def __init__(self, docs: dict[str, str], name: str = "main") -> None:
        self.docs = dict(docs)
        self.name = name
        self.closed = False

    def search(self, q: str, **kwargs: Any) -> dict[str, Any]:
        if kwargs["profile"] == "hybrid_rerank":
            raise RuntimeError("no cross-encoder configured")
        hits = [{"id": d, "score": 1.0} for d, t in sorted(self.docs.items()) if q in t]
        return {"results": hits, "filters": {"applied": {}, "extracted": {}}}

    def profiles(self) -> Mapping[str, str | None]:
        return {"hybrid": None, "hybrid_rerank": "no cross-encoder configured"}

    def describe(self) -> Mapping[str, Any]:
        return {"postgres": "17", "name": self.name}

    def upsert(self, record: dict[str, Any]) -> None:
        self.docs[record["id"]] = record["text"]

    def delete(self, doc_id: str) -> None:
        del self.docs[doc_id]

    def reindex(self) -> None:
        pass

    def clone(self) -> FakeEngine:
        return FakeEngine(self.docs, name="clone")

    def close(self) -> None:
        self.closed = True


def test_engine_target_is_mutable_and_isolates_writes() -> None:
    engine = FakeEngine({"a": "rain", "b": "sun"})
    target = EngineTarget(engine)
    assert isinstance(target, MutableTarget)
    assert target.search("rain", profile="hybrid").ids == ["a"]
    with pytest.raises(TargetUnavailable, match="RuntimeError: no cross-encoder"):
        target.search("rain", profile="hybrid_rerank")
    with target.isolated() as copy:
        copy.upsert({"id": "c", "text": "rain again"})
        copy.delete("a")
        assert copy.search("rain", profile="hybrid").ids == ["c"]
        assert copy.describe()["name"] == "clone"
        clone = copy.engine  # type: ignore[attr-defined]
    assert clone.closed and not engine.closed
    assert target.search("rain", profile="hybrid").ids == ["a"]
    assert target.describe() == {"target": "engine", "postgres": "17", "name": "main"}


def test_bulk_writes_fall_back_to_single_ones_on_an_engine_without_them() -> None:
    """Filter conformance writes in bulk through the target; an engine with only
    ``upsert``/``delete`` still gets every write, one at a time."""
    from pytest_searcheval.targets import write_in_bulk

    engine = FakeEngine({"a": "rain", "b": "sun", "c": "snow"})
    target = EngineTarget(engine)
    write_in_bulk(target, "delete", ["a", "b"])
    write_in_bulk(target, "upsert", [{"id": "d", "text": "rain"}, {"id": "d", "text": "hail"}])
    assert engine.docs == {"c": "snow", "d": "hail"}


def test_response_meta_keeps_the_no_result_decision_inputs() -> None:
    body = {
        "results": [{"id": "a", "score": 0.4}],
        "no_result": False,
        "confidence": {"cos": 0.3, "coverage": 0.1, "value": 0.21, "threshold": 0.35},
        "score_threshold": 0.5,
        "latency_ms": 1.5,
    }
    meta = response_from_json(body).meta
    assert meta["confidence"] == body["confidence"]
    assert meta["score_threshold"] == 0.5
    assert meta["no_result"] is False and meta["server_latency_ms"] == 1.5
    assert "confidence" not in response_from_json({"results": [], "confidence": 0.2}).meta


def test_threshold_compliance_fires_on_an_answer_under_the_threshold() -> None:
    # The engine's JSON passes through response_from_json; the invariant must see the
    # confidence it reports and fail an answer given under the no-result threshold.
    import invariants_data as fx

    from pytest_searcheval.invariants.base import InvariantSettings
    from pytest_searcheval.invariants.ranking import check_threshold_compliance

    coll = fx.collection()
    query = next(
        q for q in coll.queries.values() if q.query_class != "no-result" and not q.constraints
    )
    doc = sorted(coll.documents)[0]

    def answer(confidence: float) -> CallableTarget:
        body = {
            "results": [{"id": doc, "score": 0.9}],
            "no_result": False,
            "confidence": {"value": confidence, "threshold": 0.35},
        }
        return CallableTarget(lambda q, **kw: body, profiles=["hybrid"])

    settings = InvariantSettings()
    under = check_threshold_compliance(answer(0.2), coll, query, settings)
    assert under.status == "failed", under.message
    assert "confidence 0.2 < threshold 0.35 but 1 result(s)" in under.message
    over = check_threshold_compliance(answer(0.5), coll, query, settings)
    assert "< threshold" not in over.message, over.message


def test_bazaar_target_sends_filters_under_the_sdk_parameter_names(server: str) -> None:
    """The official SDK's client builds the request: the vocabulary's filters arrive under the
    protocol's names, results map back to corpus ids by resource URL."""
    from pytest_searcheval.targets.bazaar import _SDK_FIELD, BazaarTarget, is_bazaar_url
    from pytest_searcheval.x402.vocabulary import BAZAAR_PARAMS

    assert set(_SDK_FIELD) == set(BAZAAR_PARAMS)
    assert is_bazaar_url("bazaar+https://x.example") and not is_bazaar_url("https://x.example")
    target = BazaarTarget("bazaar+" + server, resources={"https://a.example": "doc-a"})
    response = target.search(
        "weather",
        profile="hybrid",
        limit=5,
        filters={"recipient": "G", "extension": "bazaar", "network": "stellar:testnet"},
    )
    sent = SEEN[-1]
    assert sent["_path"] == ["/discovery/search"] and sent["query"] == ["weather"]
    assert sent["payTo"] == ["G"] and sent["extensions"] == ["bazaar"]
    assert sent["network"] == ["stellar:testnet"] and sent["limit"] == ["5"]
    assert "recipient" not in sent and "profile" not in sent
    # the first resource is in the corpus, the second is not and keeps its URL
    assert response.ids == ["doc-a", "https://b.example"]
    assert response.applied_filters["recipient"] == "G"
    target.close()


@pytest.mark.parametrize(
    "body",
    [
        b'{"results": [{"id": "a", "score": 0.5}], "x": [1, 2.25, null, true, "\\u00e9"]}',
        b'{"results": [{"id": 123456789012345678901234567890, "score": 1}]}',  # > 64 bits
        b'{"hits": [{"doc_id": 123456789012345678901234567890}, {"doc_id": 1.5}]}',
        b'[{"id": 18446744073709551616}, "b"]',
        b'{"results": [], "score": NaN}',  # not JSON, yet what Python services send
        '{"results": [{"id": "\u00e9", "score": 1}]}'.encode("utf-16"),
    ],
)
def test_response_bodies_decode_as_the_standard_library_decodes_them(body: bytes) -> None:
    from pytest_searcheval.targets.http import _decode_json

    want = json.loads(body)
    for fast in (False, True):
        got = _decode_json(body, fast=fast)
        assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


def test_a_body_neither_decoder_reads_is_an_error() -> None:
    from pytest_searcheval.targets.http import _decode_json

    for fast in (False, True):
        with pytest.raises(ValueError):
            _decode_json(b"<html>502 Bad Gateway</html>", fast=fast)


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ({"error": "rate limited"}, "malformed answer: response has no 'results' list"),
        ({"results": [{"score": 1}]}, "malformed answer: result 0 has no 'id'"),
        ([("a", 0.5, "extra")], "malformed answer: ValueError: too many values to unpack"),
        (None, "malformed answer: TypeError: 'NoneType' object is not iterable"),
    ],
)
def test_a_malformed_callable_answer_is_that_querys_search_error(answer: Any, why: str) -> None:
    target = CallableTarget(lambda q, **kw: answer, profiles=["hybrid"])
    with pytest.raises(SearchFailed, match=re.escape(why)):
        target.search("q", profile="hybrid")
