"""The pair model behind the no-result study: features, training, the shipped file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pytest_searcheval.engine import answerability


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_pair_features_layout() -> None:
    q = unit(np.array([1.0, 0.0, 1.0]))
    d = unit(np.array([1.0, 1.0, 0.0]))
    phi = answerability.pair_features(
        q, d, answerability.query_terms("send sms"), answerability.doc_terms("Send an SMS message")
    )
    assert phi.shape == (3 * 2 + 2,)
    assert phi[:3] == pytest.approx(q * d)
    assert phi[3:6] == pytest.approx(np.abs(q - d))
    assert phi[6] == pytest.approx(0.5)
    assert phi[7] == pytest.approx(1.0)  # both analyzed query terms occur in the listing


def test_train_separates_a_separable_problem() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(float)
    model = answerability.train(X, y, np.ones(len(y)), l2=1e-3)
    accuracy = np.mean((model.pair_scores(X) > 0.5) == (y == 1))
    assert accuracy > 0.95


def test_query_score_is_a_maximum_so_removing_candidates_only_lowers_it() -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    model = answerability.train(X, (X[:, 0] > 0).astype(float), np.ones(200))
    scores = model.pair_scores(X[:10])
    for keep in (slice(0, 10), slice(2, 7), slice(5, 6)):
        assert model.pair_scores(X[keep]).max() <= scores.max()


def test_shipped_model_loads_and_is_small(tmp_path) -> None:
    model = answerability.load()
    assert answerability.DEFAULT_PATH.stat().st_size < 25 * 2**20
    assert model.w.shape == (2 * 384 + 2,)
    assert 0 < model.tau < 1
    bad = tmp_path / "m.json"
    bad.write_text(json.dumps({"mean": [0.0], "scale": [0.0], "w": [1.0], "b": 0, "tau": 0.5}))
    with pytest.raises(ValueError, match="scales > 0"):
        answerability.load(bad)
    bad.write_text("{")
    with pytest.raises(ValueError, match="not an answerability model"):
        answerability.load(bad)
