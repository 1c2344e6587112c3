"""The no-result threshold: a calibrated confidence under which the engine answers nothing.

Features of one query, measured after hard filters, before the cut-off:

- ``cos``: the best dense cosine similarity between the query and any candidate document
  (all-MiniLM-L6-v2, normalised vectors; in [-1, 1], in practice [0, 1]);
- ``coverage``: lexical coverage, the idf-weighted share of the query's analyzed terms that the
  best-covering lexical candidate contains: ``max_d sum_{t in q ∩ d} idf(t) / sum_{t in q} idf(t)``
  (terms unseen in the corpus count with df = 0, i.e. maximal idf). 0 when the query has no
  indexable term.

- ``rerank`` (profile ``hybrid_rerank`` only): the best reranking-model score among the reranked
  head, as the model outputs it (sentence-transformers applies a sigmoid to one-label models
  unless their config names another activation).

Rule per profile: ``confidence = w_cos * cos + w_cov * coverage + w_rerank * rerank``; the engine
returns no result iff ``confidence < tau``. Profiles use the features they compute anyway:
``lexical`` coverage only (it must not pay for a query embedding), ``semantic`` cos only,
``hybrid`` cos and coverage, ``hybrid_rerank`` all three.

Calibration (:func:`calibrate`), on the dev split of a collection, queries of class ``no-result``
(or ``expect.no_result``) against answerable queries (at least one judged grade >= 2). Each
answerable query carries a value ``v_q``: its recall@10 of grade >= 2 documents under the profile
with no cut (what the engine stands to lose by answering nothing). For every weight vector on
the simplex grid of step 0.05 over the profile's features (weights >= 0 summing to 1; fixed for
one-feature profiles) and every cut ``tau``
between consecutive observed confidences, compute

    no_result_accuracy = share of no-result queries with confidence < tau
    recall_kept        = sum of v_q over answerable q with confidence >= tau / sum of v_q
    answerable_kept    = share of answerable queries with confidence >= tau

and keep the candidates with ``recall_kept >= 1 - max_answerable_loss`` (default 0.02). Among them
maximise no_result_accuracy, then recall_kept, then answerable_kept, then the margin (distance
from ``tau`` to the nearest observed confidence); ``tau`` is the midpoint of its gap. So the cut
may silence an answerable query on which the profile found nothing relevant anyway, but gives
up at most 2% of the dev split's answerable recall. With every ``v_q = 1`` this is the plain
count of answerable queries kept. The fitted rules serialise to JSON and
are loaded by ``EngineSettings``.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PROFILE_FEATURES: dict[str, tuple[bool, bool, bool]] = {
    # profile: (uses cos, uses coverage, uses rerank)
    "lexical": (False, True, False),
    "semantic": (True, False, False),
    "hybrid": (True, True, False),
    "hybrid_rerank": (True, True, True),
}


@dataclass(frozen=True)
class NoResultRule:
    """``confidence = w_cos * cos + w_cov * coverage + w_rerank * rerank``; no result iff
    ``confidence < tau``.

    A missing ``cos`` or ``coverage`` counts as 0 (both are >= 0 when present). A missing
    ``rerank`` under a rule that weighs it (no listing of the reranked head survived the
    filters) makes the confidence ``-inf``: cross-encoder scores may be negative logits, so 0
    would be *more* confident than a real score and a filter could turn silence into answers.
    """

    w_cos: float
    w_cov: float
    tau: float
    w_rerank: float = 0.0

    def confidence(
        self, cos: float | None, coverage: float | None, rerank: float | None = None
    ) -> float:
        if self.w_rerank > 0 and rerank is None:
            return -math.inf
        return (
            self.w_cos * (cos or 0.0)
            + self.w_cov * (coverage or 0.0)
            + self.w_rerank * (rerank or 0.0)
        )

    def suppress(
        self, cos: float | None, coverage: float | None, rerank: float | None = None
    ) -> bool:
        return self.confidence(cos, coverage, rerank) < self.tau


@dataclass(frozen=True)
class Sample:
    """One calibration query: its features under one profile and whether it is answerable."""

    query_id: str
    cos: float | None
    coverage: float | None
    answerable: bool
    #: recall@10 of the query's relevant documents with no cut (see the module docstring).
    value: float = 1.0
    rerank: float | None = None

    def features(self) -> tuple[float | None, float | None, float | None]:
        return (self.cos, self.coverage, self.rerank)


@dataclass(frozen=True)
class Fit:
    profile: str
    rule: NoResultRule
    no_result_accuracy: float
    answerable_kept: float
    recall_kept: float
    margin: float
    n_no_result: int
    n_answerable: int
    suppressed_answerable: list[str] = field(default_factory=list)
    answered_no_result: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["rule"] = asdict(self.rule)
        return data


def _grid(uses: tuple[bool, bool, bool], step: float) -> list[tuple[float, float, float]]:
    """Weight vectors on the simplex grid over the used features (unused ones weigh 0)."""
    n = round(1 / step)
    used = [i for i, u in enumerate(uses) if u]
    out = []
    for parts in itertools.product(range(n + 1), repeat=len(used) - 1):
        if sum(parts) > n:
            continue
        w = [0.0, 0.0, 0.0]
        for i, k in zip(used, parts, strict=False):
            w[i] = k / n
        # the last used feature takes the remainder, so the weights sum to 1 in floating point
        w[used[-1]] = 1 - sum(w)
        out.append((w[0], w[1], w[2]))
    return out


def fit_profile(
    profile: str,
    samples: Sequence[Sample],
    *,
    max_answerable_loss: float = 0.02,
    step: float = 0.05,
) -> Fit:
    """Fit one profile's rule (see the module docstring for the objective)."""
    pos = [s for s in samples if s.answerable]
    neg = [s for s in samples if not s.answerable]
    if not pos or not neg:
        raise ValueError(
            f"calibrate {profile}: need answerable and no-result queries, got "
            f"{len(pos)} answerable and {len(neg)} no-result"
        )
    total_value = sum(s.value for s in pos)
    best: tuple[tuple[float, float, float, float], NoResultRule] | None = None
    for w_cos, w_cov, w_rr in _grid(PROFILE_FEATURES[profile], step):
        candidate = NoResultRule(w_cos, w_cov, 0.0, w_rr)
        pos_c = sorted((candidate.confidence(*s.features()), s.value) for s in pos)
        neg_c = sorted(candidate.confidence(*s.features()) for s in neg)
        # -inf (a weighed feature missing) lies below every cut; cuts fall between finite values
        values = sorted({c for c, _ in pos_c} | set(neg_c))
        values = [c for c in values if math.isfinite(c)]
        if not values:
            continue
        cuts = [values[0] - 0.05] + [(a + b) / 2 for a, b in itertools.pairwise(values)]
        for tau in cuts:
            lost_value = sum(v for c, v in pos_c if c < tau)
            recall_kept = 1 - lost_value / total_value if total_value > 0 else 1.0
            if recall_kept < 1 - max_answerable_loss - 1e-12:
                break  # cuts ascend: every later cut loses at least as much
            lost = sum(1 for c, _ in pos_c if c < tau)
            caught = sum(1 for c in neg_c if c < tau)
            margin = min(abs(tau - v) for v in values)
            key = (caught / len(neg), recall_kept, 1 - lost / len(pos), margin)
            if best is None or key > best[0]:
                rule = NoResultRule(round(w_cos, 4), round(w_cov, 4), round(tau, 6), round(w_rr, 4))
                best = (key, rule)
    # weight vectors without the rerank feature exist for every profile, and their lowest cut
    # loses nothing
    assert best is not None
    rule = best[1]
    return Fit(
        profile=profile,
        rule=rule,
        no_result_accuracy=best[0][0],
        answerable_kept=best[0][2],
        recall_kept=best[0][1],
        margin=best[0][3],
        n_no_result=len(neg),
        n_answerable=len(pos),
        suppressed_answerable=sorted(s.query_id for s in pos if rule.suppress(*s.features())),
        answered_no_result=sorted(s.query_id for s in neg if not rule.suppress(*s.features())),
    )


def calibrate(
    samples_by_profile: Mapping[str, Sequence[Sample]],
    *,
    max_answerable_loss: float = 0.02,
) -> dict[str, Fit]:
    return {
        p: fit_profile(p, s, max_answerable_loss=max_answerable_loss)
        for p, s in samples_by_profile.items()
    }


def rules_to_json(rules: Mapping[str, NoResultRule], meta: Mapping[str, Any] | None = None) -> str:
    body = {"rules": {p: asdict(r) for p, r in sorted(rules.items())}, "meta": dict(meta or {})}
    return json.dumps(body, indent=2, sort_keys=True) + "\n"


_RULE_KEYS = ("w_cos", "w_cov", "tau", "w_rerank")
_WEIGHT_FEATURE = {"w_cos": 0, "w_cov": 1, "w_rerank": 2}


def _rule_from_mapping(profile: str, raw: Any, where: str) -> NoResultRule:
    if profile not in PROFILE_FEATURES:
        raise ValueError(
            f"{where}: unknown profile {profile!r}; expected one of {', '.join(PROFILE_FEATURES)}"
        )
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected an object {{w_cos, w_cov, tau[, w_rerank]}}")
    unknown = sorted(set(raw) - set(_RULE_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}")
    values: dict[str, float] = {"w_rerank": 0.0}
    for key in _RULE_KEYS:
        if key not in raw:
            if key == "w_rerank":
                continue
            raise ValueError(f"{where}: missing {key!r}")
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}.{key}: expected a number, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"{where}.{key}: expected a finite number, got {value!r}")
        if key != "tau" and value < 0:
            raise ValueError(f"{where}.{key}: expected a weight >= 0, got {value!r}")
        if key != "tau" and value > 0 and not PROFILE_FEATURES[profile][_WEIGHT_FEATURE[key]]:
            raise ValueError(
                f"{where}.{key}: profile {profile} does not compute that feature, expected 0"
            )
        values[key] = float(value)
    return NoResultRule(values["w_cos"], values["w_cov"], values["tau"], values["w_rerank"])


def rules_from_json(text: str, *, source: str = "<string>") -> dict[str, NoResultRule]:
    """Parse ``{"rules": {profile: {w_cos, w_cov, tau[, w_rerank]}}}``; every problem is a
    ValueError naming ``source``, the profile and the key (files without ``w_rerank`` load)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{source}: not JSON: {exc}") from exc
    raw = data.get("rules") if isinstance(data, dict) else None
    if not isinstance(raw, dict):
        raise ValueError(
            f"{source}: expected {{'rules': {{profile: {{w_cos, w_cov, tau[, w_rerank]}}}}}}"
        )
    return {str(p): _rule_from_mapping(str(p), r, f"{source}: rules.{p}") for p, r in raw.items()}


def load_rules(path: str | Path) -> dict[str, NoResultRule]:
    p = Path(path)
    return rules_from_json(p.read_text(encoding="utf-8"), source=str(p))


def recall_at(ranked: Sequence[str], relevant: Iterable[str], k: int = 10) -> float:
    rel = set(relevant)
    return len(rel & set(ranked[:k])) / len(rel) if rel else 0.0


def answerable_ids(
    judgments: Mapping[str, Mapping[str, int]], query_ids: Iterable[str], *, level: int = 2
) -> set[str]:
    return {q for q in query_ids if any(g >= level for g in judgments.get(q, {}).values())}
