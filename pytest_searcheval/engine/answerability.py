"""Does a listing serve the need? A pair model behind the no-result cut.

``serves(q) = max over the top ``TOP_K`` surviving dense candidates d of p(q, d)``, with
``p = sigmoid(w . standardise(phi(q, d)) + b)`` and ``phi`` the pair features of the frozen
bi-encoder: ``q * d`` and ``|q - d|`` (elementwise, over the unit vectors), ``cos(q, d)`` and
the share of the query's analyzed terms that the listing's embedded text contains. A maximum
over surviving candidates can only fall when a filter removes candidates, so a rule that weighs
it stays monotone under filters. The weights are trained by ``benchmarks/answerability.py`` on
dev data only and ship as ``answerability.json`` (numpy at run time, no download).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_searcheval.engine import index

TOP_K = 10
DEFAULT_PATH = Path(__file__).with_name("answerability.json")

Array = npt.NDArray[np.float64]


def doc_terms(text: str) -> frozenset[str]:
    return frozenset(index.analyze(text))


def query_terms(text: str) -> frozenset[str]:
    return frozenset(index.analyze(text))


def pair_features(q: Array, d: Array, q_terms: Iterable[str], d_terms: frozenset[str]) -> Array:
    qt = set(q_terms)
    overlap = len(qt & d_terms) / len(qt) if qt else 0.0
    cos = float(q @ d)
    return np.concatenate([q * d, np.abs(q - d), [cos, overlap]])


@dataclass
class Model:
    mean: Array
    scale: Array
    w: Array
    b: float
    tau: float = 0.5
    meta: dict[str, Any] = field(default_factory=dict)

    def pair_scores(self, X: Array) -> Array:
        z = ((np.atleast_2d(X) - self.mean) / self.scale) @ self.w + self.b
        return 1.0 / (1.0 + np.exp(-z))

    def to_json(self) -> str:
        body = {
            "kind": "pair logistic regression",
            "top_k": TOP_K,
            "tau": self.tau,
            "b": self.b,
            "mean": [round(float(x), 7) for x in self.mean],
            "scale": [round(float(x), 7) for x in self.scale],
            "w": [round(float(x), 7) for x in self.w],
            "meta": self.meta,
        }
        return json.dumps(body, indent=1) + "\n"


def load(path: str | Path = DEFAULT_PATH) -> Model:
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        mean, scale, w = (np.asarray(data[k], np.float64) for k in ("mean", "scale", "w"))
        b, tau = float(data["b"]), float(data["tau"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{p}: not an answerability model ({exc})") from exc
    if not (mean.shape == scale.shape == w.shape) or mean.ndim != 1:
        raise ValueError(f"{p}: mean, scale and w must be vectors of one length")
    if not np.all(np.isfinite(np.concatenate([mean, scale, w, [b, tau]]))) or np.any(scale <= 0):
        raise ValueError(f"{p}: weights must be finite and scales > 0")
    return Model(mean, scale, w, b, tau, dict(data.get("meta") or {}))


def train(X: Array, y: Array, weight: Array, *, l2: float = 1e-2) -> Model:
    """Weighted L2-regularised logistic regression (L-BFGS) on standardised features."""
    from scipy.optimize import minimize

    mean = X.mean(axis=0)
    scale = X.std(axis=0) + 1e-6
    Z = (X - mean) / scale
    dim = Z.shape[1]
    wsum = float(weight.sum())

    def loss(theta: Array) -> tuple[float, Array]:
        w, b = theta[:dim], theta[dim]
        z = Z @ w + b
        p = 1.0 / (1.0 + np.exp(-z))
        ll = weight * (np.logaddexp(0, z) - y * z)
        g = weight * (p - y)
        value = ll.sum() / wsum + 0.5 * l2 * float(w @ w)
        grad = np.concatenate([Z.T @ g / wsum + l2 * w, [g.sum() / wsum]])
        return value, grad

    res = minimize(loss, np.zeros(dim + 1), jac=True, method="L-BFGS-B", options={"maxiter": 500})
    return Model(mean, scale, res.x[:dim], float(res.x[dim]))
