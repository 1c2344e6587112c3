"""No-result calibration: confidence features of a split's queries, and the rules fit on them.

Rules are fit per profile by engine/threshold.py on the dev split (so the test split stays
unseen) and installed in the engine's settings; ``Engine.start`` does this automatically when
the settings carry no rules.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_searcheval.engine import search, threshold

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Collection
    from pytest_searcheval.engine.core import Engine

CALIBRATED_PROFILES: tuple[str, ...] = ("lexical", "semantic", "hybrid", "hybrid_rerank")


def search_uncut(engine: Engine, text: str, *, profile: str, limit: int = 10) -> dict[str, Any]:
    """The response with the no-result cut not applied, to a query sent as a client sends it
    by default (the text alone, constraints extracted); when an extracted constraint is one
    this registry rejects, the text is ranked unfiltered."""

    def uncut(extract: bool) -> dict[str, Any]:
        return search.run(
            engine,
            text,
            profile=profile,
            limit=limit,
            filters=None,
            extract=extract,
            apply_threshold=False,
        )

    try:
        return uncut(True)
    except ValueError:
        return uncut(False)


def threshold_samples(
    engine: Engine,
    collection: Collection,
    *,
    split: str = "dev",
    profiles: Sequence[str] = ("lexical", "semantic", "hybrid"),
    level: int = 2,
) -> dict[str, list[threshold.Sample]]:
    """Confidence features of every no-result and answerable query of ``split``."""
    queries = collection.queries_in(split)
    answerable = threshold.answerable_ids(
        collection.judgments, [q.id for q in queries], level=level
    )
    out: dict[str, list[threshold.Sample]] = {p: [] for p in profiles}
    for query in queries:
        is_nr = query.unanswerable
        if not is_nr and query.id not in answerable:
            continue
        for p in profiles:
            if engine.profiles()[p] is not None:
                continue
            body = search_uncut(engine, query.text, profile=p)
            conf = body["confidence"]
            relevant = [d for d, g in collection.judgments.get(query.id, {}).items() if g >= level]
            value = threshold.recall_at([r["id"] for r in body["results"]], relevant, 10)
            out[p].append(
                threshold.Sample(
                    query.id, conf["cos"], conf["coverage"], not is_nr, value, conf.get("rerank")
                )
            )
    return {p: s for p, s in out.items() if s}


def calibrate(
    engine: Engine,
    collection: Collection,
    *,
    split: str = "dev",
    max_answerable_loss: float = 0.02,
    profiles: Sequence[str] = CALIBRATED_PROFILES,
) -> dict[str, threshold.Fit]:
    """Fit no-result rules on ``split`` and install them in the engine's settings."""
    usable = [p for p in profiles if engine.profiles()[p] is None]
    samples = threshold_samples(engine, collection, split=split, profiles=usable)
    if not samples:
        raise ValueError(f"split {split!r} has no no-result or answerable judged queries")
    fits = threshold.calibrate(samples, max_answerable_loss=max_answerable_loss)
    engine.settings = engine.settings.with_no_result({p: f.rule for p, f in fits.items()})
    return fits


#: A rules file (``{"rules": {profile: {w_cos, w_cov, tau[, w_rerank]}}}``, as ``python -m
#: pytest_searcheval.engine rules`` writes it) used instead of calibrating on the indexed
#: collection's dev split: a collection without a dev split (a held-out query set over the
#: same corpus) is then cut by the rules fitted elsewhere.
RULES_ENV = "SEARCHEVAL_NO_RESULT_RULES"


def use_rules_file(engine: Engine, path: str) -> None:
    """The no-result rules of ``path``; a missing or malformed file is a ValueError naming it."""
    from pytest_searcheval.engine.threshold import load_rules

    try:
        rules = load_rules(path)
    except OSError as exc:
        raise ValueError(f"${RULES_ENV}={path}: {exc.strerror or exc}") from exc
    engine.settings = engine.settings.with_no_result(rules)
    engine.calibration = {"status": f"rules from ${RULES_ENV}", "path": path}


def rules_json(rules: Mapping[str, threshold.NoResultRule]) -> str:
    """The rules file of ``rules`` (profile -> rule), loadable by ``threshold.load_rules``."""
    import json
    from dataclasses import asdict

    body = {"rules": {p: asdict(r) for p, r in sorted(rules.items())}}
    return json.dumps(body, indent=1, sort_keys=True) + "\n"


def auto_calibrate(engine: Engine, collection: Collection) -> None:
    """Calibrate on the dev split at start; without one (or a class) the cut is disabled and
    ``engine.calibration`` says why."""
    t0 = time.perf_counter()
    try:
        fits = calibrate(
            engine, collection, split="dev", max_answerable_loss=engine.settings.max_answerable_loss
        )
    except (ValueError, KeyError) as exc:  # no dev split, or a class is missing
        engine.settings = engine.settings.with_no_result({})
        engine.calibration = {"status": "not calibrated", "reason": str(exc)}
        return
    engine.calibration = {
        "status": "calibrated on the dev split",
        "collection": collection.hashes,
        "fits": {p: f.as_dict() for p, f in fits.items()},
    }
    engine.timings["calibrate_seconds"] = time.perf_counter() - t0
