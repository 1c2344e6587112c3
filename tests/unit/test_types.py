"""The typed shapes of the report and the baseline, and the JSON schemas generated from them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_searcheval import types

ROOT = Path(__file__).resolve().parents[2]


def _validator(name: str) -> jsonschema.Draft202012Validator:
    spec = json.loads((types.SCHEMA_DIR / name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(spec)
    return jsonschema.Draft202012Validator(spec)


def test_the_checked_in_schemas_are_generated_from_the_types() -> None:
    for name, tp in types.SCHEMAS.items():
        assert (types.SCHEMA_DIR / name).read_text(encoding="utf-8") == types.schema_text(tp), (
            f"{name} is stale: python -m pytest_searcheval.types"
        )
    assert types.main(["--check"]) == 0


def test_required_keys_read_the_markers_of_string_annotations() -> None:
    assert types.required_keys(types.ProfileEntry) == {"available", "reason"}
    assert types.required_keys(types.LatencyRecord) == {"profile"}
    assert "errors" not in types.required_keys(types.QueryRow)
    assert "errors" in types.QueryRow.__annotations__
    assert types.required_keys(types.SearchError) == {"error", "url", "attempts"}


def test_the_shipped_baseline_conforms() -> None:
    data = json.loads((ROOT / "baselines" / "baseline.json").read_text(encoding="utf-8"))
    assert list(_validator("baseline.schema.json").iter_errors(data)) == []


def _report() -> dict[str, Any]:
    interval = {"mean": 0.5, "low": 0.4, "high": 0.6, "n": 2}
    conventions = {"split": "test", "limit": 20, "gain": "exp", "relevance_level": 2,
                   "measures": ["nDCG@10"], "trec_compat": False}  # fmt: skip
    return {
        "schema_version": 1,
        "tool": {"name": "pytest-searcheval", "version": "0"},
        "created": "2026-12-01T00:00:00+00:00",
        "run": {
            **{k: v for k, v in conventions.items() if k != "trec_compat"},
            "profiles": ["hybrid"],
            "gated_profile": "hybrid",
            "gate_over": None,
            "trec_compat": False,
            "conventions": conventions,
            "tolerance": 0.02,
            "query_tolerance": 0.2,
            "query_measure": "nDCG@10",
            "queries_expected": 1,
            "queries_run": 1,
            "complete": True,
            "partial": False,
            "xdist_workers": 0,
            "bootstrap": {"samples": 10, "seed": 1, "confidence": 0.95},
            "randomization": {"permutations": 10, "seed": 1, "correction": "holm"},
        },
        "environment": {
            "host": "h",
            "platform": "p",
            "machine": "m",
            "cpus": 2,
            "python": "3",
            "pytest": "8",
            "postgres": None,
            "pgvector": None,
            "target": {},
        },
        "collection": {
            "name": "c",
            "version": 1,
            "path": "c.yaml",
            "documents": 1,
            "queries": 1,
            "hashes": {},
            "price_snapshot": None,
        },
        "model": None,
        "metric_manifest": {k: "x" for k in types.MetricManifest.__annotations__}
        | {"measures": ["nDCG@10"], "mode": "default", "relevance_level": 2}
        | {"measure_relevance_levels": {"P(rel=2)@5": 2}},
        "profiles": {
            "hybrid": {
                "available": True,
                "reason": None,
                "errored": 0,
                "measures": {"nDCG@10": interval},
            }
        },
        "unavailable": {},
        "classes": {
            "hybrid": {
                "a": {"queries": 1, "evaluated": 1, "nDCG@10": interval, "no_result_accuracy": None}
            }
        },
        "comparisons": [],
        "vs_baseline": [],
        "queries": {
            "q1": {
                "class": "a",
                "split": "test",
                "text": "t",
                "unanswerable": False,
                "failures": [],
                "reasons": [],
                "relevant": 1,
                "judged": True,
                "evaluated": True,
                "unavailable": {},
                "errors": {"lexical": {"error": "ReadTimeout: 30 s", "url": None, "attempts": 2}},
                "profiles": {
                    "hybrid": {
                        "ids": ["d1"],
                        "grades": [2],
                        "returned": 1,
                        "measures": {"nDCG@10": 1.0},
                        "violations": [],
                        "constraint_breaks": 0,
                        "applied_filters": {},
                        "extracted_filters": None,
                        "expectations_unmet": [],
                        "latency_ms": 1.5,
                        "confidence": None,
                    }
                },
                "baseline": {"nDCG@10": 1.0, "ids": ["d1"]},
                "ledger": None,
            }
        },
        "invariants": {},
        "latency_tests": {"hybrid": {"profile": "hybrid", "not_measured": "why"}},
        "invariant_summary": None,
        "quality": {
            "k": 10,
            "profiles": {},
            "reranker_lift": None,
            "embeddings": None,
            "not_measured": {},
        },
        "no_result_tradeoff": {},
        "known_failures": {
            "baseline_ledger": False,
            "queries": {"known": [], "new": [], "fixed": []},
            "invariants": {"known": [], "new": [], "fixed": []},
        },
        "limitations": [],
        "gate": {
            "passed": True,
            "rules": [{"name": "r", "status": "passed", "detail": ""}],
            "baseline": {"path": "b.json", "tag": None, "integrity": "skipped"},
        },
    }


def test_a_report_conforms_and_a_wrong_status_or_an_undescribed_key_does_not() -> None:
    validator = _validator("report.schema.json")
    report = _report()
    assert list(validator.iter_errors(report)) == []

    bad = copy.deepcopy(report)
    bad["gate"]["rules"][0]["status"] = "passd"
    error = jsonschema.exceptions.best_match(validator.iter_errors(bad))
    assert error is not None and list(error.absolute_path) == ["gate", "rules", 0, "status"]

    bad = copy.deepcopy(report)
    bad["profiles"]["hybrid"]["surprise"] = 1
    assert [list(e.path) for e in validator.iter_errors(bad)] == [["profiles", "hybrid"]]

    bad = copy.deepcopy(report)
    del bad["queries"]["q1"]["errors"]["lexical"]["attempts"]
    assert len(list(validator.iter_errors(bad))) == 1


def test_the_manifest_of_measures_with_their_own_level_and_err_conforms() -> None:
    from pytest_searcheval.metrics import manifest

    spec = types.json_schema(types.MetricManifest)
    written = manifest(measures=["nDCG@10", "P(rel=2)@5", "ERR@10"], relevance_level=1)
    assert written["measure_relevance_levels"] == {"P(rel=2)@5": 2}
    assert "err_stopping_probability" in written
    assert list(jsonschema.Draft202012Validator(spec).iter_errors(written)) == []


def test_a_type_without_a_json_form_is_refused() -> None:
    with pytest.raises(TypeError, match="no JSON form"):
        types.json_schema(set[str])


MISREAD = """
from pytest_searcheval.baseline.gate import GateContext, Rule, gate_rule
from pytest_searcheval.report.model import build


@gate_rule("p95")
def fast(ctx: GateContext) -> Rule:
    p95 = ctx.report["profiles"][ctx.gated]["latency"]["p95"]
    return Rule("p95", "passed", str(p95))


def first_query(**kwargs: object) -> str:
    report = build(**kwargs)  # type: ignore[arg-type]
    return report["queries"]["q1"]["profiles"]["hybrid"]["idz"][0]
"""


@pytest.mark.slow  # mypy over the package
def test_mypy_checks_the_readers_of_the_report_and_of_a_gate_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mypy import api

    monkeypatch.setenv("MYPYPATH", str(ROOT))  # this tree's package, not an installed one
    (tmp_path / "rule.py").write_text(MISREAD, encoding="utf-8")
    out, _, status = api.run(
        ["--strict", "--no-incremental", "--ignore-missing-imports", str(tmp_path / "rule.py")]
    )
    assert status == 1, out
    assert 'TypedDict "ProfileEntry" has no key "latency"' in out
    assert 'TypedDict "QueryProfileEntry" has no key "idz"' in out
