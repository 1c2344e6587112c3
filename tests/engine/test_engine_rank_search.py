"""The engine end to end on a small synthetic x402 collection (PostgreSQL + the real model).

One module-scoped engine serves the read-only tests; tests that write use ``engine.clone()``.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from pytest_searcheval.collection.model import Asset, Collection, Document, Query
from pytest_searcheval.engine import index
from pytest_searcheval.engine.bm25 import BM25FParams, idf
from pytest_searcheval.engine.core import Engine, EngineSettings, ProfileUnavailable
from pytest_searcheval.engine.dense import DenseParams
from pytest_searcheval.engine.threshold import NoResultRule
from pytest_searcheval.x402.strkey import encode_account

PUB = "stellar:pubnet"
TEST = "stellar:testnet"
USDC_PUB = "CUSDCPUBNETCONTRACT"
USDC_TEST = "CUSDCTESTNETCONTRACT"
# A valid account strkey: the engine validates upserted records as the loader does.
PAY_TO = encode_account(bytes(range(32)))
ASSETS = [
    Asset("USDC", PUB, USDC_PUB, 7, Decimal("1.00")),
    Asset("USDC", TEST, USDC_TEST, 7, Decimal("1.00")),
]

# topic -> three listings (title, description); the first of each is the canonical answer.
TOPICS: dict[str, list[tuple[str, str]]] = {
    "weather": [
        ("Skyline Daily Forecast", "Daily weather forecast for any city: temperature, rain, wind."),
        ("StormWatch Alerts", "Severe weather warnings, storm tracking and hurricane alerts."),
        ("Climate Archive", "Historical climate records and monthly temperature averages."),
    ],
    "fx": [
        ("FX Rates Live", "Real-time currency exchange rates, EUR to USD conversion."),
        ("Forex History", "Historical foreign exchange quotes for 150 currencies."),
        ("Money Converter", "Convert amounts between currencies at today's rate."),
    ],
    "translate": [
        ("Polyglot Translate", "Machine translation of text between 100 languages."),
        ("Doc Translator", "Translate whole documents and keep their formatting."),
        ("Language Detect", "Detect which language a piece of text is written in."),
    ],
    "geo": [
        ("GeoCoder", "Turn street addresses into latitude and longitude coordinates."),
        ("Reverse Geocode", "Find the address nearest to a latitude/longitude point."),
        ("Route Planner", "Driving directions and travel time between two places."),
    ],
    "stocks": [
        ("Ticker Quotes", "Live stock prices and intraday quotes for listed companies."),
        ("Earnings Calendar", "Upcoming company earnings reports and analyst estimates."),
        ("Market Indices", "S&P 500, Nasdaq and Dow Jones index levels."),
    ],
    "email": [
        ("MailDrop Send", "Send transactional email with templates and attachments."),
        ("Inbox Verify", "Check whether an email address exists and accepts mail."),
        ("Newsletter Blast", "Bulk email campaigns to subscriber lists."),
    ],
    "pdf": [
        ("PDF Extract", "Extract text and tables from PDF files."),
        ("OCR Scanner", "Optical character recognition for scanned images and photos."),
        ("PDF Merge", "Combine several PDF documents into one file."),
    ],
    "speech": [
        ("Transcribe Pro", "Speech to text transcription of audio recordings."),
        ("Voice Synth", "Text to speech: natural sounding synthetic voices."),
        ("Podcast Summary", "Summaries of podcast episodes from their audio."),
    ],
    "news": [
        ("Headline Wire", "Breaking news headlines from thousands of sources."),
        ("Topic News Search", "Search news articles by keyword and date."),
        ("Press Release Feed", "Corporate press releases as they are published."),
    ],
    "flights": [
        ("Flight Status", "Real-time flight status, delays and gate changes."),
        ("Airport Info", "Airport codes, terminals and opening hours."),
        ("Fare Tracker", "Track airfare prices for a route over time."),
    ],
}

ANSWERABLE: dict[str, tuple[str, str]] = {
    # topic: (dev query, test query)
    "weather": ("will it rain tomorrow in my city", "temperature forecast for the weekend"),
    "fx": ("convert euros to dollars", "current exchange rate of the yen"),
    "translate": ("translate a sentence into spanish", "machine translation api"),
    "geo": ("coordinates of a street address", "geocode an address"),
    "stocks": ("share price of a company", "live stock market quotes"),
    "email": ("send an email with an attachment", "transactional email delivery"),
    "pdf": ("get the text out of a pdf", "pull tables from pdf documents"),
    "speech": ("turn an audio recording into text", "speech recognition transcription"),
    "news": ("latest news headlines", "breaking news feed"),
    "flights": ("is my flight delayed", "flight departure status"),
}

NO_RESULT: tuple[list[str], list[str]] = (
    [
        "predict next week's lottery numbers",
        "book a dentist appointment",
        "recipe for vegan lasagna",
        "adopt a puppy near me",
        "knitting pattern for a wool sweater",
        "hire a plumber to fix a leak",
        "tarot card reading online",
        "yoga class schedule",
    ],
    [
        "compose a symphony for orchestra",
        "rent a kayak for the afternoon",
        "find a wedding photographer",
        "tutoring for calculus homework",
        "horoscope for scorpio",
        "divorce lawyer consultation",
        "buy tickets to a rock concert",
        "repair my bicycle brakes",
    ],
)


def _listing(topic: str, i: int, title: str, text: str) -> Document:
    doc_id = f"{topic}-{i}"
    mcp = i == 2
    network = TEST if i == 1 else PUB
    asset = USDC_TEST if network == TEST else USDC_PUB
    x402: dict[str, Any] = {
        "resource": f"https://api.{topic}.example/v1/{doc_id}",
        "type": "mcp" if mcp else "http",
        "description": text,
        "accepts": [
            {
                "scheme": "exact",
                "network": network,
                "asset": asset,
                "amount": str(10_000 * (i + 1)),  # 0.001, 0.002, 0.003 USD
                "payTo": PAY_TO,
                "maxTimeoutSeconds": 60,
                "extra": {},
            }
        ],
    }
    extensions: dict[str, Any] = {}
    if mcp:
        x402["resource"] = f"mcp://{topic}.example/tools/{topic}_tool"
        declared = {"type": "mcp", "toolName": f"{topic}_tool", "inputSchema": {}}
        extensions["bazaar"] = {"info": {"input": declared}}
    if i == 0:
        extensions.setdefault("bazaar", {})
    if extensions:
        x402["extensions"] = extensions
    sidecar = {"liveness": "live" if i == 0 else "degraded", "settlements": 100 * (3 - i)}
    return Document(doc_id, title, text, {"tags": [topic]}, x402, sidecar)


def synthetic_collection() -> Collection:
    docs: dict[str, Document] = {}
    for topic, listings in TOPICS.items():
        for i, (title, text) in enumerate(listings):
            doc = _listing(topic, i, title, text)
            docs[doc.id] = doc
    docs["generic-poem"] = Document("generic-poem", "Ode to Autumn", "Seasons of mists.", {}, None)
    queries: dict[str, Query] = {}
    judgments: dict[str, dict[str, int]] = {}
    for topic, (dev, test) in ANSWERABLE.items():
        for split, text in (("dev", dev), ("test", test)):
            qid = f"{split}-{topic}"
            queries[qid] = Query(qid, text, "paraphrase", split)
            judgments[qid] = {f"{topic}-0": 3, f"{topic}-1": 1, f"{topic}-2": 1}
    for split, texts in zip(("dev", "test"), NO_RESULT, strict=True):
        for n, text in enumerate(texts):
            qid = f"{split}-none-{n}"
            queries[qid] = Query(qid, text, "no-result", split, expect={"no_result": True})
            judgments[qid] = {}
    return Collection(documents=docs, queries=queries, judgments=judgments, assets=list(ASSETS))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("embed-cache")


@pytest.fixture(scope="module")
def engine(pg_server: Any, cache_dir: Path) -> Iterator[Engine]:
    settings = EngineSettings(cache_dir=str(cache_dir), no_result={})
    with Engine.start(synthetic_collection(), dsn=pg_server.dsn, settings=settings) as eng:
        yield eng


def _ids(body: dict[str, Any]) -> list[str]:
    return [r["id"] for r in body["results"]]


@pytest.mark.parametrize("profile", ["lexical", "semantic", "hybrid"])
def test_profiles_find_the_canonical_listing(engine: Engine, profile: str) -> None:
    body = engine.search("daily weather forecast", profile=profile, limit=5)
    assert _ids(body)[0] == "weather-0"
    assert body["profile"] == profile and body["no_result"] is False
    model = body["model"]
    assert model["dimensions"] == 384 and len(model["revision"]) == 64
    assert model["embedding_failures"] == 0
    assert body["results"][0]["resource"]["resource"].endswith("/weather-0")


def test_bm25f_score_matches_the_documented_formula(engine: Engine) -> None:
    """Recompute BM25F in Python from the same analyzer output and compare with the SQL."""
    params = engine.settings.bm25
    query = "exchange rates currency"
    qtf = index.query_terms(query)
    per_doc = {
        d.id: index.field_terms(index.field_texts(d.title, d.text, d.fields, d.x402))
        for d in engine.catalog.docs.values()
    }
    n = len(per_doc)
    lengths: dict[str, list[int]] = {}
    for fields in per_doc.values():
        for f, c in fields.items():
            lengths.setdefault(f, []).append(sum(c.values()))
    avg = {f: sum(v) / len(v) for f, v in lengths.items()}
    expected: dict[str, float] = {}
    for doc_id, fields in per_doc.items():
        score = 0.0
        for term, q in qtf.items():
            df = sum(1 for fs in per_doc.values() if any(term in c for c in fs.values()))
            wtf = sum(
                params.weights[f]
                * c[term]
                / (1 - params.b[f] + params.b[f] * sum(c.values()) / avg[f])
                for f, c in fields.items()
                if term in c and params.weights.get(f, 0) > 0
            )
            if wtf:
                score += q * idf(n, df) * wtf * (params.k1 + 1) / (params.k1 + wtf)
        if score:
            expected[doc_id] = score
    body = engine.search(query, profile="lexical", limit=50, extract=False)
    got = {r["id"]: r["score"] for r in body["results"]}
    assert got.keys() == expected.keys()
    for doc_id, score in expected.items():
        assert got[doc_id] == pytest.approx(score, rel=1e-5)


def test_keyword_stuffing_saturates(engine: Engine) -> None:
    clone = engine.clone()
    try:
        clone.upsert(
            {"id": "stuffed", "title": "Cheap stuff", "text": "transcription " * 60, "fields": {}}
        )
        body = clone.search("transcription", profile="lexical", limit=10, extract=False)
        scores = {r["id"]: r["score"] for r in body["results"]}
        bound = idf(len(clone.catalog.docs), 2) * (clone.settings.bm25.k1 + 1)
        assert scores["stuffed"] <= bound + 1e-9
        # a listing that says it once in title and text stays within a factor of the stuffed one
        assert scores["speech-0"] > 0.5 * scores["stuffed"]
    finally:
        clone.close()


def test_filters_apply_per_option_and_are_reported(engine: Engine) -> None:
    body = engine.search(
        "forecast", profile="hybrid", limit=50, filters={"network": TEST}, extract=False
    )
    assert body["filters"]["applied"] == {"network": TEST}
    assert _ids(body) and all(i.endswith("-1") for i in _ids(body))
    body = engine.search(
        "weather", profile="semantic", limit=50, filters={"type": "mcp"}, extract=False
    )
    assert _ids(body) and all(i.endswith("-2") for i in _ids(body))
    cheap = engine.search(
        "api", profile="lexical", limit=50, filters={"max_price_usd": "0.002"}, extract=False
    )
    assert cheap["results"] and not any(i.endswith("-2") for i in _ids(cheap))
    with pytest.raises(ValueError, match="network"):
        engine.search("x", filters={"network": "ethereum"})


def test_generic_document_is_searchable_and_excluded_by_any_filter(engine: Engine) -> None:
    assert _ids(engine.search("autumn mists", profile="lexical"))[0] == "generic-poem"
    body = engine.search("autumn mists", profile="lexical", filters={"type": "http"})
    assert "generic-poem" not in _ids(body)


def test_upsert_delete_and_clone_isolation(engine: Engine) -> None:
    clone = engine.clone()
    try:
        assert clone.schema_name != engine.schema_name
        clone.upsert({"id": "zebra", "title": "Zebra Stripes API", "text": "Count zebra stripes."})
        assert _ids(clone.search("zebra stripes", profile="hybrid"))[0] == "zebra"
        assert "zebra" not in _ids(engine.search("zebra stripes", profile="lexical"))
        assert clone.delete("weather-0") is True
        assert "weather-0" not in _ids(clone.search("daily weather forecast", profile="hybrid"))
        assert _ids(engine.search("daily weather forecast", profile="hybrid"))[0] == "weather-0"
        clone.reindex()
        assert _ids(clone.search("zebra", profile="semantic"))[0] == "zebra"
    finally:
        clone.close()


def _answers(e: Engine, texts: Sequence[str]) -> list[list[tuple[str, float]]]:
    return [
        [(r["id"], r["score"]) for r in e.search(t, profile=p, limit=20)["results"]]
        for t in texts
        for p in ("lexical", "semantic", "hybrid")
    ]


def test_scratch_answers_as_a_clone_and_leaves_the_engine_as_it_was(engine: Engine) -> None:
    import psycopg

    texts = ["daily weather forecast", "zebra stripes", "currency exchange", "translate text"]
    before = _answers(engine, texts)
    seen: dict[str, list[list[tuple[str, float]]]] = {}
    for make in (engine.clone, engine.scratch):
        copy = make()
        try:
            copy.upsert({"id": "zebra", "title": "Zebra Stripes API", "text": "Count zebra."})
            assert copy.delete("weather-0") is True
            if make == engine.scratch:
                assert copy.schema_name == engine.schema_name
                # Not committed: neither the engine nor another connection sees the writes.
                assert _answers(engine, texts) == before
                with psycopg.connect(engine.dsn) as other:
                    row = other.execute(
                        f'SELECT count(*) FROM "{engine.schema_name}".documents'
                        " WHERE id = 'zebra' OR deleted_at IS NOT NULL"
                    ).fetchone()
                assert row == (0,)
            first = _answers(copy, texts)
            copy.reindex()
            seen[make.__name__] = [*first, *_answers(copy, texts)]
        finally:
            copy.close()
    assert seen["scratch"] == seen["clone"]
    assert "zebra" in {i for ranking in seen["scratch"] for i, _ in ranking}
    assert _answers(engine, texts) == before
    assert engine.describe()["documents"] == len(engine.catalog.docs)


def test_a_closed_scratch_refuses_work(engine: Engine) -> None:
    from pytest_searcheval.engine.isolation import IsolationError

    copy = engine.scratch()
    copy.close()
    with pytest.raises(IsolationError, match="closed"):
        copy.delete("weather-1")
    live = engine.scratch()
    try:
        for make in (live.clone, live.scratch):
            with pytest.raises(IsolationError, match="scratch copy"):
                make()
    finally:
        live.close()


def test_rerank_unavailable_on_a_corpus_the_packaged_model_was_not_trained_for(
    engine: Engine,
) -> None:
    reason = engine.profiles()["hybrid_rerank"]
    assert reason is not None and "trained for the shipped catalog" in reason
    assert "SEARCHEVAL_RERANKER" in reason
    with pytest.raises(ProfileUnavailable, match="hybrid_rerank"):
        engine.search("weather", profile="hybrid_rerank")
    with pytest.raises(ValueError, match="limit"):
        engine.search("weather", limit=0)


def test_describe_reports_model_and_dense_mode(engine: Engine) -> None:
    info = engine.describe()
    assert info["documents"] == len(engine.catalog.docs)
    assert info["dense"]["mode"] == "exact"
    assert info["model"]["id"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert info["pgvector"]


def test_calibrated_threshold_rejects_unanswerable_and_keeps_answerable(engine: Engine) -> None:
    col = synthetic_collection()
    clone = engine.clone()
    try:
        fits = clone.calibrate(col, split="dev", max_answerable_loss=0.0)
        assert fits["hybrid"].answerable_kept == 1.0
        assert fits["hybrid"].no_result_accuracy >= 0.75
        # held-out split
        answered_none = 0
        suppressed = 0
        for q in col.queries_in("test"):
            body = clone.search(q.text, profile="hybrid", extract=False)
            if q.query_class == "no-result":
                answered_none += body["no_result"]
            else:
                suppressed += body["no_result"]
        assert answered_none >= 6  # of 8 unanswerable test queries
        assert suppressed <= 1  # of 10 answerable test queries
    finally:
        clone.close()


def test_hnsw_path_and_recall(pg_server: Any, cache_dir: Path) -> None:
    settings = EngineSettings(
        cache_dir=str(cache_dir), dense=DenseParams(exact_below=10), recall_sample=20
    )
    with Engine.start(synthetic_collection(), dsn=pg_server.dsn, settings=settings) as eng:
        info = eng.describe()
        assert info["dense"]["mode"] == "hnsw"
        recall = info["dense"]["hnsw_recall"]
        assert recall["queries"] == 20 and recall["recall"] >= 0.9
        assert _ids(eng.search("daily weather forecast", profile="semantic"))[0] == "weather-0"
        filtered = eng.search(
            "historical climate records", profile="semantic", limit=5, filters={"type": "mcp"}
        )
        assert len(filtered["results"]) == 5
        # HNSW path: the hybrid still ranks unfiltered candidates (to candidate_depth) and
        # restricts, so a filtered answer is the unfiltered one minus what the filter rejects
        wide = eng.search("weather alerts", profile="hybrid", limit=100, extract=False)
        narrow = eng.search(
            "weather alerts", profile="hybrid", limit=100, filters={"network": TEST}, extract=False
        )
        kept = {r["id"] for r in narrow["results"]}
        assert kept and all(i.endswith("-1") for i in kept)
        assert [(r["id"], r["score"]) for r in narrow["results"]] == [
            (r["id"], r["score"]) for r in wide["results"] if r["id"] in kept
        ]
        # default settings calibrate the no-result rules on the dev split at start
        assert info["no_result"]["status"] == "calibrated on the dev split"
        assert set(info["settings"]["no_result"]) == {"lexical", "semantic", "hybrid"}
        body = eng.search("horoscope for scorpio", profile="hybrid")
        assert body["no_result"] is True and body["results"] == []
        assert body["confidence"]["value"] < body["confidence"]["threshold"]
        why = body["why_empty"]
        assert why["reason"] == "below-threshold" and why["rule"].endswith(
            f"< {body['confidence']['threshold']:g}"
        )
        assert why["evidence"]["cos"] == body["confidence"]["cos"]
        assert why["evidence"]["candidates"] > 0
        # the cut is monotone under filters: each filter keeps an empty answer empty
        for filters in ({"type": "mcp"}, {"network": TEST}, {"type": "http"}):
            narrowed = eng.search("horoscope for scorpio", profile="hybrid", filters=filters)
            assert narrowed["no_result"] is True and narrowed["results"] == []
        answered = eng.search("daily weather forecast", profile="hybrid")
        assert answered["results"] and answered["why_empty"] is None
        # a filter nothing satisfies: the answer is empty and says so
        gone = eng.search(
            "daily weather forecast",
            profile="hybrid",
            filters={"max_price_usd": "0"},
            apply_threshold=False,
        )
        assert gone["results"] == [] and gone["why_empty"]["reason"] == "filtered-out"


def test_warm_run_never_imports_torch(engine: Engine, cache_dir: Path) -> None:
    texts = ["daily weather forecast", "a text only this test embeds"]
    expected = engine.embedder.embed(texts)
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from pytest_searcheval.engine.embed import Embedder
        emb = Embedder(cache_dir=Path({str(cache_dir)!r}))
        vecs = emb.embed({texts!r})
        assert emb.stats.cache_misses == 0, emb.stats
        heavy = [m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules]
        print(heavy, [round(float(v[0]), 6) for v in vecs])
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("[] "), out
    assert out.strip().endswith(str([round(float(v[0]), 6) for v in expected if v is not None]))


def test_reranker_loads_from_a_local_path(pg_server: Any, cache_dir: Path, tmp_path: Path) -> None:
    """A tiny cross-encoder built here (random weights, MiniLM tokenizer): the real load path."""
    import shutil

    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from pytest_searcheval.engine.embed import default_model_path

    src = default_model_path()
    path = tmp_path / "tiny-ce"
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
    )
    config.num_labels = 1
    BertForSequenceClassification(config).save_pretrained(path)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(src / name, path / name)
    col = Collection(
        documents={d.id: d for d in list(synthetic_collection().documents.values())[:6]},
        queries={},
        judgments={},
        assets=list(ASSETS),
    )
    settings = EngineSettings(cache_dir=str(cache_dir), reranker_path=str(path), rerank_depth=4)
    with Engine.start(col, dsn=pg_server.dsn, settings=settings) as eng:
        assert eng.describe()["no_result"]["status"] == "not calibrated"
        assert eng.profiles()["hybrid_rerank"] is None
        body = eng.search("weather forecast", profile="hybrid_rerank", limit=6, extract=False)
        hybrid = eng.search("weather forecast", profile="hybrid", limit=6, extract=False)
        assert sorted(_ids(body)) == sorted(_ids(hybrid))
        head = body["results"][:4]
        assert all(math.isfinite(r["score"]) for r in head)
        assert [r["score"] for r in head] == sorted((r["score"] for r in head), reverse=True)
        # the tail keeps hybrid order below the reranked head
        assert _ids(body)[4:] == [i for i in _ids(hybrid) if i not in _ids(body)[:4]]
        # the no-result feature of this profile is the best cross-encoder score of the head
        assert body["confidence"]["rerank"] == pytest.approx(head[0]["score"], abs=1e-6)
        assert hybrid["confidence"]["rerank"] is None
        # a rule on that score alone decides: just above it silences, just below answers
        best = body["confidence"]["rerank"]
        for tau, empty in ((best + 1e-3, True), (best - 1e-3, False)):
            eng.settings = eng.settings.with_no_result(
                {"hybrid_rerank": NoResultRule(0.0, 0.0, tau, 1.0)}
            )
            again = eng.search("weather forecast", profile="hybrid_rerank", limit=6, extract=False)
            assert again["no_result"] is empty and (again["results"] == []) is empty


class _LogitReranker:
    """A cross-encoder with an MS MARCO-style logit head: every score negative."""

    unavailable = None
    path = None
    reads = "rerank"

    def load(self) -> None:
        pass

    def info(self) -> dict[str, Any]:
        return {"path": None, "fingerprint": None, "unavailable": None}

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [-3.0 - 0.1 * i for i, _ in enumerate(texts)]


def test_filter_never_turns_a_reranked_silence_into_answers(
    pg_server: Any, cache_dir: Path
) -> None:
    """A filter that removes the whole reranked head leaves no cross-encoder evidence: under a
    rule that weighs it the answer stays empty (a missing score is not a score of 0)."""
    settings = EngineSettings(cache_dir=str(cache_dir), no_result={}, rerank_depth=2)
    with Engine.start(synthetic_collection(), dsn=pg_server.dsn, settings=settings) as eng:
        eng.reranker = _LogitReranker()  # type: ignore[assignment]
        eng.settings = eng.settings.with_no_result(
            {"hybrid_rerank": NoResultRule(0.0, 0.0, -1.0, 1.0)}  # answer iff best score >= -1
        )
        plain = eng.search("weather forecast", profile="hybrid_rerank", limit=5, extract=False)
        assert plain["no_result"] and plain["confidence"]["rerank"] == -3.0
        head = {r["id"] for r in eng.search("weather forecast", limit=2, extract=False)["results"]}
        kinds = {eng.catalog.docs[d].x402["type"] for d in head if eng.catalog.docs[d].x402}
        other = "mcp" if "mcp" not in kinds else "http"
        filtered = eng.search(
            "weather forecast",
            profile="hybrid_rerank",
            limit=5,
            filters={"type": other},
            extract=False,
        )
        assert filtered["confidence"]["rerank"] is None
        assert filtered["no_result"] and filtered["results"] == []
        assert filtered["confidence"]["value"] is None  # -inf is not sent as JSON


def test_broken_reranker_path_is_unavailable_with_reason(tmp_path: Path) -> None:
    from pytest_searcheval.engine.rerank import Reranker

    (tmp_path / "config.json").write_text("{}")
    reranker = Reranker(tmp_path)
    reranker.load()
    assert reranker.unavailable is not None and "failed to load" in reranker.unavailable
    assert Reranker(tmp_path / "missing").unavailable is not None


def test_params_reach_the_sql(engine: Engine) -> None:
    clone = engine.clone()
    try:
        body = clone.search("forecast", profile="lexical", extract=False)
        clone.settings = EngineSettings(
            bm25=BM25FParams(weights={"title": 0.0, "text": 1.0}), no_result={}
        )
        other = clone.search("forecast", profile="lexical", extract=False)
        assert body["results"][0]["score"] != other["results"][0]["score"]
    finally:
        clone.close()


@pytest.mark.parametrize(
    "chain",
    [
        [{}, {"type": "http"}, {"type": "http", "network": TEST}],
        [{}, {"max_price_usd": "0.003"}, {"max_price_usd": "0.002"}, {"max_price_usd": "0.001"}],
        [{}, {"network": PUB}, {"network": PUB, "extension": "bazaar"}],
    ],
)
def test_hybrid_filters_only_restrict_the_fused_ranking(
    engine: Engine, chain: list[dict[str, str]]
) -> None:
    # Fusion is rank-based: ranking inside the filtered set would reorder and add listings.
    # Each step's answer must be the previous one minus what the new filter rejects, same scores.
    wide: list[tuple[str, float]] | None = None
    for filters in chain:
        body = engine.search(
            "weather forecast alerts", profile="hybrid", limit=100, filters=filters, extract=False
        )
        now = [(r["id"], r["score"]) for r in body["results"]]
        assert now, f"{filters}: nothing found"
        if wide is not None:
            kept = {d for d, _ in now}
            assert now == [(d, s) for d, s in wide if d in kept], filters
        wide = now


def test_tight_filter_still_reaches_listings_far_down_the_unfiltered_ranking(
    engine: Engine,
) -> None:
    # Only the "-1" listings are on testnet. Ranking only ``limit`` unfiltered candidates
    # would leave the filtered answer short; ranking every document with a signal fills it.
    unfiltered = _ids(engine.search("podcast", profile="hybrid", limit=3, extract=False))
    assert not all(i.endswith("-1") for i in unfiltered)
    body = engine.search(
        "podcast", profile="hybrid", limit=3, filters={"network": TEST}, extract=False
    )
    assert len(_ids(body)) == 3 and all(i.endswith("-1") for i in _ids(body))


def test_delete_is_a_tombstone_that_moves_no_other_listing(engine: Engine) -> None:
    probes = ["daily weather forecast", "currency exchange", "translate text", "podcast"]
    clone = engine.clone()
    try:
        before = {
            (q, p): [(r["id"], r["score"]) for r in clone.search(q, profile=p, limit=20)["results"]]
            for q in probes
            for p in ("lexical", "semantic", "hybrid")
        }
        assert clone.delete("weather-1") is True
        assert clone.delete("weather-1") is False  # already gone
        assert clone.describe()["tombstones"] == 1
        for (q, p), answer in before.items():
            after = [(r["id"], r["score"]) for r in clone.search(q, profile=p, limit=20)["results"]]
            expected = [(d, s) for d, s in answer if d != "weather-1"]
            # the deleted listing is gone; everything else keeps its order and its exact score
            assert after[: len(expected)] == expected, (q, p)
            assert "weather-1" not in [d for d, _ in after]
        clone.upsert(engine.catalog.docs["weather-1"])  # an upsert revives a tombstoned id
        assert "weather-1" in _ids(clone.search("storm alerts", profile="hybrid"))
        clone.delete("weather-1")
        clone.reindex()
        assert clone.describe()["tombstones"] == 0
        assert clone.describe()["documents"] == len(engine.catalog.docs) - 1
        assert "weather-1" not in _ids(clone.search("storm alerts", profile="lexical"))
    finally:
        clone.close()


def test_title_match_finds_a_misspelled_name_in_hybrid(engine: Engine) -> None:
    assert _ids(engine.search("Transcrbie Pro", profile="hybrid", limit=3))[0] == "speech-0"
    assert _ids(engine.search("Doc Translater", profile="hybrid", limit=3))[0] == "translate-1"


def test_stuffed_and_near_duplicate_copies_do_not_displace_the_original(engine: Engine) -> None:
    original = engine.catalog.docs["weather-0"]
    assert original.x402 is not None
    copies = [
        {
            "id": "weather-0~stuffed",
            "title": "Skyline Daily Forecast " * 3,
            "text": "Skyline Daily Forecast " * 15 + original.text,
            "x402": {**original.x402, "resource": "https://copy-one.example/v1/f"},
            "sidecar": {"settlements": 0, "liveness": "live"},
        },
        {
            "id": "weather-0~near-duplicate",
            "title": original.title,
            "text": original.text + " Mirrored listing of the same service.",
            "x402": {**original.x402, "resource": "https://copy-two.example/v1/f"},
            "sidecar": {"settlements": 0, "liveness": "live"},
        },
    ]
    clone = engine.clone()
    try:
        for record in copies:
            clone.upsert(record)
        ids = _ids(clone.search("Skyline Daily Forecast", profile="hybrid", limit=10))
        assert ids[0] == "weather-0"
        assert "weather-0~near-duplicate" not in ids  # collapsed into the original
        # the copies still exist for the pure baselines
        assert "weather-0~near-duplicate" in _ids(
            clone.search("Skyline Daily Forecast", profile="lexical", limit=10)
        )
    finally:
        clone.close()


def test_clone_analyses_only_its_own_tables(engine: Engine) -> None:
    import psycopg

    with psycopg.connect(engine.dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS searcheval_test_bystander")
        conn.execute("DROP TABLE IF EXISTS searcheval_test_bystander.t")
        conn.execute("CREATE TABLE searcheval_test_bystander.t AS SELECT generate_series(1, 50) x")
        try:
            clone = engine.clone()
            try:
                rows = dict(
                    conn.execute(
                        "SELECT n.nspname || '.' || c.relname, c.reltuples FROM pg_class c"
                        " JOIN pg_namespace n ON n.oid = c.relnamespace"
                        " WHERE (n.nspname = %s AND c.relname = 'documents')"
                        " OR (n.nspname = 'searcheval_test_bystander' AND c.relname = 't')",
                        (clone.schema_name,),
                    ).fetchall()
                )
            finally:
                clone.close()
        finally:
            conn.execute("DROP SCHEMA searcheval_test_bystander CASCADE")
    assert rows[f"{clone.schema_name}.documents"] == len(engine.catalog.docs)  # analysed
    assert rows["searcheval_test_bystander.t"] == -1  # never analysed: not ours


def test_rules_written_from_one_collection_cut_another_without_a_dev_split(
    pg_server: Any, cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``engine rules`` fits on the dev split; ``$SEARCHEVAL_NO_RESULT_RULES`` carries those
    rules to a held-out query set over the same corpus (no dev split, nothing to fit on)."""
    import dataclasses

    from pytest_searcheval.engine import __main__ as cli
    from pytest_searcheval.engine.calibrate import RULES_ENV
    from pytest_searcheval.engine.threshold import load_rules

    full = synthetic_collection()
    root = tmp_path / "rules.json"
    monkeypatch.delenv(RULES_ENV, raising=False)
    monkeypatch.setattr(cli, "_load", lambda path: full)
    argv = ["rules", "--collection", "x", "--dsn", pg_server.dsn, "--cache-dir", str(cache_dir)]
    assert cli.main([*argv, "--out", str(root)]) == 0
    rules = load_rules(root)
    assert set(rules) == {"lexical", "semantic", "hybrid"}
    held_out = dataclasses.replace(
        full, queries={q: v for q, v in full.queries.items() if v.split == "test"}
    )
    settings = EngineSettings(cache_dir=str(cache_dir))
    with Engine.start(held_out, dsn=pg_server.dsn, settings=settings) as eng:
        assert eng.describe()["no_result"]["status"] == "not calibrated"
        assert eng.search("horoscope for scorpio", profile="hybrid")["results"]
    monkeypatch.setenv(RULES_ENV, str(root))
    with Engine.start(held_out, dsn=pg_server.dsn, settings=settings) as eng:
        assert eng.describe()["no_result"] == {
            "status": f"rules from ${RULES_ENV}",
            "path": str(root),
        }
        assert dict(eng.settings.no_result or {}) == rules
        assert eng.search("horoscope for scorpio", profile="hybrid")["no_result"] is True
    monkeypatch.setenv(RULES_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match=r"SEARCHEVAL_NO_RESULT_RULES=.*missing\.json"):
        Engine.start(held_out, dsn=pg_server.dsn, settings=settings)
