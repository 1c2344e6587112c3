"""What a run settles once it knows its collection and its target: the relevance level and
gain, the profiles, the gated and gate-over profiles, and the measure names at their depth."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_searcheval.settings import ConfigError, SearchEvalConfig

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Collection


def resolve_profiles(
    cfg: SearchEvalConfig, offered: Mapping[str, str | None], defaults: Mapping[str, Any]
) -> dict[str, Any]:
    """The profiles, the gated profile, the gate-over profile and the measure names: from the
    settings, else the target's own ``defaults``, else what it ``offered``."""
    profiles = cfg.profiles or tuple(offered) or ("default",)
    gated = cfg.gated_profile or defaults.get("gated_profile") or profiles[0]
    if gated not in profiles:
        gated = profiles[0] if cfg.gated_profile is None else gated
    over = cfg.gate_over if cfg.gate_over is not None else defaults.get("gate_over")
    # A measure over a ranking cut at `limit` says so in its name (AP@20 is not AP); run
    # files are ranked whole, as trec_eval ranks them.
    depth = None if defaults.get("whole") else cfg.limit
    return {
        "profiles": list(profiles),
        "gated_profile": gated,
        "gate_over": over,
        "measures": [at_depth(m, depth) for m in cfg.measures],
        "query_measure": at_depth(cfg.query_measure, depth),
    }


def apply_resolution(cfg: SearchEvalConfig, resolved: Mapping[str, Any]) -> SearchEvalConfig:
    """``cfg`` with what :func:`resolve_profiles` settled (here or on an xdist worker)."""
    return dataclasses.replace(
        cfg,
        profiles=tuple(resolved["profiles"]),
        gated_profile=resolved["gated_profile"],
        gate_over=resolved.get("gate_over"),
        measures=tuple(resolved.get("measures") or cfg.measures),
        query_measure=resolved.get("query_measure") or cfg.query_measure,
    )


def at_depth(measure: str, depth: int | None) -> str:
    """``measure`` cut at ``depth`` when it takes a cut-off and has none (``AP`` -> ``AP@20``,
    ``AP(rel=2)`` -> ``AP(rel=2)@20``, ``Rprec`` unchanged)."""
    from pytest_searcheval.metrics import with_depth

    return with_depth(measure, depth)


def resolve_relevance(cfg: SearchEvalConfig, collection: Collection) -> SearchEvalConfig:
    """The relevance level and gain of the run: set, else the collection's, else trec_eval's
    (level 1, linear gain) in trec-compat mode, else the lowest positive grade of a binary
    scale, else 2. A level at which no judged query has a relevant document is a usage error
    (every measure would be empty and the gate would judge nothing)."""
    grades = sorted({g for docs in collection.judgments.values() for g in docs.values()})
    level = cfg.relevance_level
    source = "--search-eval-relevance-level"
    if level is None:
        manifest_level = collection.manifest.get("relevance_level")
        if manifest_level is not None:
            level, source = int(manifest_level), "collection.yaml relevance_level"
        elif cfg.trec_compat:
            level, source = 1, "trec-compat default"
        else:
            positive = [g for g in (collection.manifest.get("grades") or grades) if g > 0]
            level = 1 if len(positive) <= 1 else 2
            source = "default for a binary scale" if len(positive) <= 1 else "default"
            if positive and min(positive) > level:
                level = min(positive)
    gain = cfg.gain or ("linear" if cfg.trec_compat else "exp")
    if collection.judgments and not any(
        g >= level for docs in collection.judgments.values() for g in docs.values()
    ):
        raise ConfigError(
            f"relevance level {level} ({source}): no query has a judged document of grade >= "
            f"{level}; the judgments hold grades {grades}. Set --search-eval-relevance-level "
            "(ini search_eval_relevance_level) or relevance_level in collection.yaml"
        )
    return dataclasses.replace(cfg, relevance_level=level, gain=gain)
