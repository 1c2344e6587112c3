from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_searcheval.collection import CollectionError, load
from pytest_searcheval.x402 import strkey
from pytest_searcheval.x402.conformance import load_conformance
from pytest_searcheval.x402.overrides import apply_constraint_overrides


def _c(label: str) -> str:
    return strkey.encode_contract(hashlib.sha256(label.encode()).digest())


G = strkey.encode_account(hashlib.sha256(b"payee").digest())
USDC_P, USDC_T = _c("usdc-p"), _c("usdc-t")
MANIFEST = f"""\
name: tiny
version: 1
grades: [0, 1, 2, 3]
splits: [dev, test]
classes: [exact-name, filtered, typo, no-result]
price_snapshot: "2026-11-01"
assets:
  - {{code: USDC, network: "stellar:pubnet", address: {USDC_P}, decimals: 7, usd: "1.00"}}
  - {{code: USDC, network: "stellar:testnet", address: {USDC_T}, decimals: 7, usd: "1.00"}}
"""


def doc(i: int, network: str = "stellar:pubnet", amount: str = "50000") -> dict[str, Any]:
    asset = USDC_P if network == "stellar:pubnet" else USDC_T
    return {
        "id": f"d{i}",
        "title": f"Title {i}",
        "text": f"text of document {i}",
        "fields": {"provider": "P", "tags": ["a", "b"]},
        "x402": {
            "resource": f"https://api.example/{i}",
            "type": "http",
            "accepts": [
                {
                    "scheme": "exact",
                    "network": network,
                    "asset": asset,
                    "amount": amount,
                    "payTo": G,
                }
            ],
        },
        "sidecar": {"category": "c", "liveness": "live"},
    }


QUERIES = """\
- id: q1
  text: first query
  class: exact-name
  split: dev
  source: null
  group: null
  constraints: {}
  expect: {known_item: d1, max_rank: 1}
- id: q2
  text: cheap things on testnet
  class: filtered
  split: test
  constraints: {network: "stellar:testnet", max_price_usd: "0.01"}
- id: q3
  text: frist query
  class: typo
  split: dev
  source: q1
- id: q4
  text: nothing matches this
  class: no-result
  split: test
  expect: {no_result: true}
"""

JUDGMENTS = "query_id\tdoc_id\tgrade\nq1\td1\t3\nq1\td2\t0\nq2\td2\t2\nq2\td3\t3\nq4\td1\t0\n"


def write(
    root: Path,
    docs: list[dict[str, Any]] | None = None,
    queries: str = QUERIES,
    judgments: str = JUDGMENTS,
    manifest: str = MANIFEST,
    files: int = 1,
) -> Path:
    docs = docs if docs is not None else [doc(1), doc(2), doc(3, "stellar:testnet")]
    (root / "corpus").mkdir(parents=True, exist_ok=True)
    (root / "qrels").mkdir(exist_ok=True)
    (root / "collection.yaml").write_text(manifest, encoding="utf-8")
    for k in range(files):
        part = [json.dumps(d) for i, d in enumerate(docs) if i % files == k]
        (root / "corpus" / f"part{k}.jsonl").write_text("\n".join(part) + "\n", encoding="utf-8")
    (root / "qrels" / "queries.yaml").write_text(queries, encoding="utf-8")
    (root / "qrels" / "judgments.tsv").write_text(judgments, encoding="utf-8")
    return root


def problems_of(root: Path, **kw: Any) -> list[tuple[str, int | None, str | None, str]]:
    with pytest.raises(CollectionError) as info:
        load(root, **kw)
    assert str(info.value).startswith(f"{len(info.value.problems)} problem")
    return [(p.file, p.line, p.field, p.message) for p in info.value.problems]


def test_valid_collection_loads_with_splits_classes_and_judged_pairs(tmp_path: Path) -> None:
    c = load(write(tmp_path))
    assert sorted(c.documents) == ["d1", "d2", "d3"]
    assert [q.id for q in c.queries_in("dev")] == ["q1", "q3"]
    assert [q.id for q in c.queries_in("test")] == ["q2", "q4"]
    assert len(c.queries_in("all")) == 4
    with pytest.raises(KeyError, match="unknown split"):
        c.queries_in("train")
    assert c.queries["q3"].source == "q1"
    assert c.queries["q2"].constraints == {"network": "stellar:testnet", "max_price_usd": "0.01"}
    assert c.queries["q1"].expect == {"known_item": "d1", "max_rank": 1}
    # An inspected 0 is a judgment; an unjudged pair is absent.
    assert c.judgments["q1"]["d2"] == 0 and c.is_judged("q1", "d2")
    assert not c.is_judged("q1", "d3")
    assert c.assets[1].network == "stellar:testnet"
    assert c.manifest["name"] == "tiny"
    assert [q.id for q in c.queries_of_class("typo")] == ["q3"]
    assert set(c.hashes) == {"corpus", "queries", "judgments"}
    assert all(h.startswith("sha256:") and len(h) == 71 for h in c.hashes.values())


def test_hashes_ignore_file_order_key_order_and_whitespace(tmp_path: Path) -> None:
    a = load(write(tmp_path / "a")).hashes
    docs = [dict(reversed(list(d.items()))) for d in (doc(3, "stellar:testnet"), doc(2))]
    docs.append(doc(1))
    docs[2]["x402"]["accepts"][0] = dict(reversed(list(docs[2]["x402"]["accepts"][0].items())))
    queries = QUERIES.replace("constraints: {}", "constraints: {   }")
    lines = JUDGMENTS.splitlines()
    b_root = write(
        tmp_path / "b",
        docs=docs,
        queries=queries,
        judgments="\n".join([lines[0], *reversed(lines[1:])]) + "\n",
        files=2,
    )
    text = (b_root / "corpus" / "part0.jsonl").read_text()
    (b_root / "corpus" / "part0.jsonl").write_text(text.replace(", ", ",   "))
    assert load(b_root).hashes == a


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (
            lambda r: r.__setitem__("judgments", JUDGMENTS.replace("q1\td2\t0", "q1\td2\t1")),
            "judgments",
        ),
        (
            lambda r: r.__setitem__("queries", QUERIES.replace("first query", "first  query")),
            "queries",
        ),
        (lambda r: r["docs"][0]["sidecar"].__setitem__("liveness", "stale"), "corpus"),
    ],
)
def test_any_content_change_changes_exactly_its_hash(tmp_path: Path, change: Any, key: str) -> None:
    base = load(write(tmp_path / "a")).hashes
    spec: dict[str, Any] = {
        "docs": [doc(1), doc(2), doc(3, "stellar:testnet")],
        "queries": QUERIES,
        "judgments": JUDGMENTS,
    }
    change(spec)
    other = load(write(tmp_path / "b", spec["docs"], spec["queries"], spec["judgments"])).hashes
    assert {k for k in base if base[k] != other[k]} == {key}


def test_every_problem_is_reported_at_once_with_file_line_field(tmp_path: Path) -> None:
    docs = [doc(1), doc(2), doc(2), {"id": "d9", "title": 5, "text": "t", "colour": "red"}]
    docs.append(
        dict(
            doc(5),
            x402={
                "type": "ftp",
                "resource": "r",
                "accepts": [
                    {
                        "scheme": "exact",
                        "network": "n",
                        "asset": "a",
                        "amount": "1.5",
                        "payTo": "GBAD",
                    }
                ],
            },
        )
    )
    queries = (
        QUERIES
        + """\
- id: q1
  text: again
  class: exact-name
  split: dev
- id: q5
  text: "   "
  class: made-up
  split: train
  constraints: {netwrk: x, asset: DOGE, max_price_usd: cheap}
  expect: {known_item: nope}
- id: q6
  text: typo in other split
  class: typo
  split: test
  source: q1
- id: q7
  text: orphan typo
  class: typo
  split: dev
  source: q99
"""
    )
    judgments = JUDGMENTS + "q1\td1\t2\nq1\td404\t1\nq404\td1\t1\nq1\td3\t7\nq1\td3\tx\nbad line\n"
    p = problems_of(write(tmp_path, docs, queries, judgments))
    found = {(f, line, field) for f, line, field, _ in p}
    expected = {
        ("corpus/part0.jsonl", 3, "id"),  # duplicate d2
        ("corpus/part0.jsonl", 4, "colour"),
        ("corpus/part0.jsonl", 4, "title"),
        ("corpus/part0.jsonl", 5, "x402.type"),
        ("corpus/part0.jsonl", 5, "x402.accepts[0].amount"),
        ("corpus/part0.jsonl", 5, "x402.accepts[0].payTo"),
        ("qrels/queries.yaml", 24, "id"),  # duplicate q1
        ("qrels/queries.yaml", 29, "text"),
        ("qrels/queries.yaml", 30, "class"),
        ("qrels/queries.yaml", 31, "split"),
        ("qrels/queries.yaml", 32, "constraints.netwrk"),
        ("qrels/queries.yaml", 32, "constraints.asset"),
        ("qrels/queries.yaml", 32, "constraints.max_price_usd"),
        ("qrels/queries.yaml", 33, "expect.known_item"),
        ("qrels/queries.yaml", 38, "split"),  # typo query in another split than q1
        ("qrels/queries.yaml", 43, "source"),  # unknown source
        ("qrels/judgments.tsv", 7, None),  # duplicate pair
        ("qrels/judgments.tsv", 8, "doc_id"),
        ("qrels/judgments.tsv", 9, "query_id"),
        ("qrels/judgments.tsv", 10, "grade"),  # outside the scale
        ("qrels/judgments.tsv", 11, "grade"),  # not an integer
        ("qrels/judgments.tsv", 12, None),  # wrong field count
    }
    assert expected <= found, sorted(expected - found)
    messages = " | ".join(m for *_, m in p)
    assert "outside the declared scale 0, 1, 2, 3" in messages
    assert "expected the same split" in messages
    assert "unknown asset 'DOGE'" in messages


def test_malformed_json_and_yaml_name_the_line(tmp_path: Path) -> None:
    root = write(tmp_path, queries="- id: q1\n  text: [unclosed\n  class: x\n")
    with (root / "corpus" / "part0.jsonl").open("a") as fh:
        fh.write('{"id": "d7", "title": "t", "text": }\n[1, 2]\n')
    p = problems_of(root)
    assert ("corpus/part0.jsonl", 4) in {(f, line) for f, line, *_ in p}
    assert any(
        f == "corpus/part0.jsonl" and line == 5 and "JSON object" in m for f, line, _, m in p
    )
    assert any(
        f == "qrels/queries.yaml" and m.startswith("malformed YAML") and line in (2, 3, 4)
        for f, line, _, m in p
    )


def test_duplicate_yaml_keys_are_problems(tmp_path: Path) -> None:
    queries = QUERIES.replace("  text: first query\n", "  text: first query\n  text: again\n")
    p = problems_of(write(tmp_path, queries=queries))
    assert ("qrels/queries.yaml", 3, "text") in {(f, line, fld) for f, line, fld, _ in p}


def test_encoding_errors_and_overlong_lines_are_problems_not_tracebacks(tmp_path: Path) -> None:
    root = write(tmp_path)
    with (root / "corpus" / "part0.jsonl").open("ab") as fh:
        fh.write(b'{"id": "d8", "title": "caf\xe9", "text": "t"}\n')
        fh.write(b'{"id": "d9", "text": "' + b"x" * 5000 + b'"}\n')
        fh.write(json.dumps(doc(10)).encode() + b"\n")
    p = problems_of(root, max_line_bytes=4096)
    assert [(f, line) for f, line, *_ in p] == [
        ("corpus/part0.jsonl", 4),
        ("corpus/part0.jsonl", 5),
    ]
    assert "UTF-8" in p[0][3] and "longer than the limit of 4096 bytes" in p[1][3]


def test_a_huge_single_line_file_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    root = write(tmp_path)
    with (root / "corpus" / "part1.jsonl").open("wb") as fh:
        chunk = b"A" * (1 << 20)
        for _ in range(24):  # 24 MiB on one line, three times the default cap
            fh.write(chunk)
    p = problems_of(root)
    assert len(p) == 1 and p[0][:2] == ("corpus/part1.jsonl", 1)
    assert "25165824 bytes" in p[0][3]


def test_empty_corpus_and_missing_files(tmp_path: Path) -> None:
    root = write(tmp_path, docs=[])
    (root / "qrels" / "judgments.tsv").unlink()
    p = problems_of(root)
    msgs = [(f, m) for f, _, _, m in p]
    assert any(m.startswith("empty corpus") for _, m in msgs)
    assert any(f == "qrels/judgments.tsv" and m.startswith("missing") for f, m in msgs)


def test_no_result_query_with_relevant_judgments_is_a_problem(tmp_path: Path) -> None:
    p = problems_of(write(tmp_path, judgments=JUDGMENTS.replace("q4\td1\t0", "q4\td1\t2")))
    assert [fld for _, _, fld, _ in p] == ["q4.expect.no_result"]


def test_no_result_query_may_have_tangential_judgments(tmp_path: Path) -> None:
    collection = load(write(tmp_path, judgments=JUDGMENTS.replace("q4\td1\t0", "q4\td1\t1")))
    assert collection.judgments["q4"]["d1"] == 1


def test_manifest_and_asset_registry_are_validated(tmp_path: Path) -> None:
    bad = (
        MANIFEST.replace("decimals: 7, usd", "decimals: -1, usd")
        .replace(f"address: {USDC_T}", "address: CNOTAKEY")
        .replace("grades: [0, 1, 2, 3]", "grades: high")
    )
    p = problems_of(write(tmp_path, manifest=bad))
    fields = {fld for _, _, fld, _ in p}
    assert {"grades", "assets[0].decimals", "assets[1].decimals", "assets[1].address"} <= fields


def test_constraint_override_forces_zero_and_counts(tmp_path: Path) -> None:
    docs = [doc(1), doc(2), doc(3, "stellar:testnet"), doc(4, "stellar:testnet", "500000")]
    judgments = JUDGMENTS + "q2\td4\t1\n"
    c = load(write(tmp_path, docs=docs, judgments=judgments))
    new, overrides = apply_constraint_overrides(c)
    # d2 is on pubnet (breaks network); d4 costs 0.05 USD (breaks max_price_usd 0.01).
    assert [(o.query_id, o.doc_id, o.original_grade) for o in overrides] == [
        ("q2", "d2", 2),
        ("q2", "d4", 1),
    ]
    assert "network" in overrides[0].reasons[0] and "0.05 USD" in overrides[1].reasons[0]
    assert new["q2"] == {"d2": 0, "d3": 3, "d4": 0}
    assert c.judgments["q2"]["d2"] == 2  # the loaded collection is not modified
    assert new["q1"] == c.judgments["q1"]


def test_conformance_set_is_checked_against_the_oracle(tmp_path: Path) -> None:
    c = load(write(tmp_path / "c"))
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "corpus.jsonl").write_text(
        "\n".join(json.dumps(d) for d in [doc(1), doc(3, "stellar:testnet")]) + "\n"
    )
    (conf / "cases.yaml").write_text(
        "- {id: c1, filters: {network: 'stellar:testnet'}, query: x, expect_ids: [d3]}\n"
        "- {id: c2, filters: {asset: USDC}, query: x, expect_ids: [d1]}\n"
        "- {id: c3, filters: {asset: DOGE}, query: x, expect_ids: []}\n"
    )
    with pytest.raises(CollectionError) as info:
        load_conformance(conf, c.assets)
    by_line = {(p.line, p.field) for p in info.value.problems}
    assert by_line == {(2, "expect_ids"), (3, "filters.asset")}
    assert "missing ['d3']" in str(info.value)
    (conf / "cases.yaml").write_text(
        "- {id: c1, filters: {network: 'stellar:testnet'}, query: x, expect_ids: [d3]}\n"
    )
    assert [k.id for k in load_conformance(conf, c.assets).cases] == ["c1"]


def test_load_refuses_non_collections(tmp_path: Path) -> None:
    with pytest.raises(CollectionError, match="not a collection"):
        load(tmp_path)
    with pytest.raises(CollectionError, match="no such directory"):
        load(tmp_path / "absent")


def test_check_export_and_overrides_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_searcheval.collection.cli import main

    root = write(tmp_path / "c")
    assert main(["check", str(root)]) == 1  # q2 judges d2 (pubnet) relevant: an override
    out = capsys.readouterr().out
    assert "3 documents, 4 queries, 5 judgments" in out
    assert "q2 d2 grade 2 -> 0: no single payment option" in out
    qrels = tmp_path / "test.qrels"
    assert main(["export", str(root), "--out", str(qrels), "--split", "test"]) == 0
    assert qrels.read_text() == "q2 0 d2 2\nq2 0 d3 3\nq4 0 d1 0\n"
    assert main(["overrides", str(root), "--write"]) == 0
    capsys.readouterr()
    assert main(["check", str(root)]) == 0
    assert "constraint overrides pending: 0" in capsys.readouterr().out
    assert load(root).judgments["q2"] == {"d2": 0, "d3": 3}
    (root / "qrels" / "queries.yaml").write_text("q1: {text: not a list}\n")
    assert main(["check", str(root)]) == 2
    assert "qrels/queries.yaml:1: expected a YAML list of queries" in capsys.readouterr().err


def test_yaml_encoding_errors_name_the_line_and_provenance_loads(tmp_path: Path) -> None:
    root = write(tmp_path)
    (root / "qrels" / "provenance.yaml").write_text("judges: [a, b]\noverrides: 0\n")
    assert load(root).provenance == {"judges": ["a", "b"], "overrides": 0}
    (root / "qrels" / "queries.yaml").write_bytes(QUERIES.encode() + b"- id: q9\n  text: caf\xe9\n")
    p = problems_of(root)
    assert [(f, line) for f, line, *_ in p] == [("qrels/queries.yaml", 25)]
    assert "UTF-8" in p[0][3]


def test_integer_ids_in_yaml_are_strings(tmp_path: Path) -> None:
    queries = (
        "- {id: 1, text: one, class: exact-name, split: dev}\n"
        "- {id: 2, text: onne, class: typo, split: dev, source: 1}\n"
    )
    c = load(write(tmp_path, queries=queries, judgments="query_id\tdoc_id\tgrade\n1\td1\t3\n"))
    assert c.queries["2"].source == "1" and c.judgments == {"1": {"d1": 3}}


def test_a_garbage_file_stops_being_read_after_many_problems(tmp_path: Path) -> None:
    root = write(tmp_path)
    (root / "corpus" / "junk.jsonl").write_text("not json\n" * 5000)
    with pytest.raises(CollectionError) as info:
        load(root)
    junk = [p for p in info.value.problems if p.file == "corpus/junk.jsonl"]
    assert len(junk) == 1001
    assert (junk[-1].line, junk[-1].message) == (
        1000,
        "stopped reading after 1000 problems in this file",
    )


def _generic(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != "x402"}


def test_constraints_without_a_domain_are_refused_with_the_remedy(tmp_path: Path) -> None:
    # No document carries an x402 record and the manifest names no domain: nothing can judge
    # the labelled constraints of q2, so the loader says so instead of assuming x402.
    docs = [_generic(doc(i)) for i in (1, 2, 3)]
    problems = problems_of(write(tmp_path, docs=docs))
    assert [(f, fld) for f, _, fld, m in problems if "need a domain" in m] == [
        ("qrels/queries.yaml", "constraints")
    ]


def test_an_unknown_declared_domain_is_a_manifest_problem(tmp_path: Path) -> None:
    problems = problems_of(write(tmp_path, manifest=MANIFEST + "domain: shop\n"))
    assert any(
        f == "collection.yaml" and fld == "domain" and "unknown domain 'shop'" in m
        for f, _, fld, m in problems
    )


class _Shop:
    """A domain of a user's own: one filter key, judged on the document's fields."""

    name = "shop"
    filter_keys = ("brand",)
    record_key = None

    def violations(self, document: Any, filters: Any, collection: Any) -> list[str]:
        brand = document.fields.get("provider")
        return [] if brand == filters.get("brand") else [f"brand {brand!r}"]

    def applied(self, filters: Any) -> dict[str, Any]:
        return {k: v for k, v in filters.items() if k == "brand"}

    def record_problems(self, record: Any) -> list[tuple[str, str]]:
        return []

    def asset_problems(self, asset: Any) -> list[tuple[str, str]]:
        return []

    def filter_problems(self, filters: Any, assets: Any) -> list[tuple[str, str]]:
        return [(k, "expected brand") for k in filters if k != "brand"]

    def normalize_filters(self, filters: Any) -> dict[str, Any]:
        return {k: str(v).upper() for k, v in filters.items()}

    def collection_checks(self, collection: Any, root: Any) -> list[str]:
        return []


def test_a_registered_domain_judges_the_constraints_of_a_generic_collection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_searcheval import domain
    from pytest_searcheval.collection.overrides import apply_constraint_overrides as generic

    monkeypatch.setitem(domain._REGISTRY, "shop", f"{__name__}:_Shop")
    # a private copy: the domain loaded here must not outlive the test
    monkeypatch.setattr(domain, "_LOADED", {k: v for k, v in domain._LOADED.items() if k != "shop"})
    docs = [_generic(doc(i)) for i in (1, 2, 3)]
    queries = QUERIES.replace(
        'constraints: {network: "stellar:testnet", max_price_usd: "0.01"}',
        "constraints: {color: red}",
    )
    problems = problems_of(
        write(tmp_path, docs=docs, queries=queries, manifest=MANIFEST + "domain: shop\n")
    )
    assert [(fld, m) for _, _, fld, m in problems] == [("constraints.color", "expected brand")]
    queries = queries.replace("constraints: {color: red}", "constraints: {brand: q}")
    c = load(write(tmp_path, docs=docs, queries=queries, manifest=MANIFEST + "domain: shop\n"))
    assert c.queries["q2"].constraints == {"brand": "Q"}
    # every judged pair of q2 breaks brand Q (the provider is P): forced to 0 by the domain
    _, overrides = generic(c)
    assert {o.query_id for o in overrides} == {"q2"}
    assert all(o.reasons == ("brand 'P'",) for o in overrides)
