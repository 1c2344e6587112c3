"""A small report and its settings for the gate's tests (test_gate, test_gate_rules)."""

from __future__ import annotations

from typing import Any

from pytest_searcheval.baseline.gate import Rule, conventions
from pytest_searcheval.settings import SearchEvalConfig

CFG = SearchEvalConfig(
    enabled=True, profiles=("lexical", "hybrid"), gated_profile="hybrid", gate_over="lexical"
)
OK = Rule("baseline matches its git tag", "passed", "ok")
HASHES = {"corpus": "sha256:a", "queries": "sha256:b", "judgments": "sha256:c"}


def profile(ndcg: float, recall: float, nra: float = 1.0, violations: int = 0) -> dict[str, Any]:
    def cell(v: float) -> dict[str, Any]:
        return {"mean": v, "low": v - 0.05, "high": v + 0.05, "n": 10}

    return {
        "available": True,
        "reason": None,
        "measures": {"nDCG@10": cell(ndcg), "R@20": cell(recall)},
        "no_result": {"accuracy": nra},
        "hard_filter_violations": violations,
        "results_checked": 100,
    }


def report(**hybrid: Any) -> dict[str, Any]:
    """Lexical at nDCG@10 0.5 / R@20 0.6, hybrid at ``profile(**hybrid)``, one query."""
    return {
        "run": {"complete": True, "conventions": conventions(CFG), "gated_profile": CFG.gated},
        "profiles": {"lexical": profile(0.5, 0.6), "hybrid": profile(**hybrid)},
        "collection": {"name": "t", "version": 1, "hashes": dict(HASHES)},
        "model": {"id": "m", "revision": "r1"},
        "queries": {
            "q1": {"profiles": {"hybrid": {"measures": {"nDCG@10": 0.7}, "ids": ["a", "b"]}}}
        },
        "invariants": {},
    }
