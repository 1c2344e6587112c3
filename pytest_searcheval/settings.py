"""Plugin configuration: ``--search-eval-*`` options mirrored by ``search_eval_*`` ini keys.

Precedence is CLI > ini > default, tested with ``is not None`` so that an explicit ``0`` or empty
value on the command line still wins. The result is one frozen :class:`SearchEvalConfig`, built
once in ``pytest_configure`` and kept in ``config.stash``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

DEFAULT_PROFILES: tuple[str, ...] = ("lexical", "semantic", "hybrid", "hybrid_rerank")
DEFAULT_MEASURES: tuple[str, ...] = (
    "nDCG@5",
    "nDCG@10",
    "P@5",
    "R@20",
    "RR",
    "AP",
    "bpref",
    "Judged@10",
)
#: Measures the gate compares against the baseline (DESIGN section 7).
GATED_MEASURES: tuple[str, ...] = ("nDCG@10", "R@20")


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the option and what was expected.

    The plugin turns it into ``pytest.UsageError`` (exit status 4).
    """


@dataclass(frozen=True)
class SearchEvalConfig:
    """Every setting of one evaluation run, resolved once."""

    enabled: bool = False
    collection: Path = Path(".")
    split: str = "test"
    profiles: tuple[str, ...] = DEFAULT_PROFILES
    gated_profile: str = "hybrid"
    relevance_level: int = 2
    gain: str = "exp"
    measures: tuple[str, ...] = DEFAULT_MEASURES
    tolerance: float = 0.02
    query_tolerance: float = 0.2
    query_measure: str = "nDCG@10"
    limit: int = 20
    timeout_s: float = 30.0
    baseline: Path = Path("baselines/baseline.json")
    report_dir: Path = Path("searcheval-report")
    history: Path | None = Path("searcheval-report/history.jsonl")
    url: str | None = None
    dsn: str | None = None
    update_baseline: bool = False
    baseline_tag: str | None = None
    strict_baseline: bool = False
    latency_p95_ms: float | None = None
    latency_p99_ms: float | None = None
    latency_rounds: int = 200
    bootstrap_samples: int = 1000
    permutations: int = 10000
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class _Option:
    name: str  # suffix after the prefix, with underscores
    ini_type: str  # "string" | "bool" | "args"; numbers parsed by us for clear errors
    help: str
    kind: type = str
    cli_only: bool = False
    ini_only: bool = False
    flag: bool = False


OPTIONS: tuple[_Option, ...] = (
    _Option(
        "collection", "string", "collection directory (default: '.' if it has collection.yaml)"
    ),
    _Option("split", "string", "query split to evaluate: dev, test or all (default: test)"),
    _Option("profiles", "string", "comma-separated profiles to measure (default: all four)"),
    _Option(
        "gated_profile", "string", "profile whose queries fail tests and gate (default: hybrid)"
    ),
    _Option("relevance_level", "int", "minimum grade that counts as relevant (default: 2)", int),
    _Option("gain", "string", "nDCG gain: exp (2^g-1) or linear (default: exp)"),
    _Option("tolerance", "float", "allowed aggregate drop vs baseline (default: 0.02)", float),
    _Option("query_tolerance", "float", "allowed per-query drop vs baseline (default: 0.2)", float),
    _Option("query_measure", "string", "measure of the per-query check (default: nDCG@10)"),
    _Option("limit", "int", "results requested per query (default: 20)", int),
    _Option("timeout", "float", "seconds before a search counts as failed (default: 30)", float),
    _Option("baseline", "string", "baseline file (default: baselines/baseline.json)"),
    _Option("report_dir", "string", "report directory (default: searcheval-report)"),
    _Option(
        "history",
        "string",
        "append a line per full run to this file, plotted in the HTML report "
        "(default: <report_dir>/history.jsonl; 'off' keeps none)",
    ),
    _Option("url", "string", "evaluate this HTTP service (base URL or template with {query})"),
    _Option("dsn", "string", "PostgreSQL DSN for the reference engine (default: embedded)"),
    _Option("baseline_tag", "string", "git tag written into an updated baseline"),
    _Option("strict_baseline", "bool", "an unverifiable baseline fails the gate", bool, flag=True),
    _Option("latency_p95_ms", "float", "p95 latency budget in ms (enables latency tests)", float),
    _Option("latency_p99_ms", "float", "p99 latency budget in ms (enables latency tests)", float),
    _Option("latency_rounds", "int", "requests per latency test (default: 200)", int),
    _Option("bootstrap_samples", "int", "bootstrap resamples (default: 1000)", int),
    _Option("permutations", "int", "randomization test permutations (default: 10000)", int),
)


#: Invariant settings (``invariants_core.InvariantSettings`` fields) exposed as
#: ``--search-eval-invariant-NAME`` / ``search_eval_invariant_NAME``. The invariants' profile,
#: split and limit follow ``gated_profile``, ``split`` and ``limit``. Unset keys keep the
#: invariants' own defaults (listed in docs/configuration.md and docs/invariants.md).
INVARIANT_OPTIONS: tuple[_Option, ...] = (
    _Option("known_item_max_rank", "int", "known item must rank at or above this (1)", int),
    _Option("churn_k", "int", "top-k of the paraphrase churn overlap (10)", int),
    _Option("churn_rbo_p", "float", "RBO persistence p of the churn check (0.9)", float),
    _Option("churn_min_rbo", "float", "minimum RBO between paraphrases (0.2)", float),
    _Option("churn_min_jaccard", "float", "minimum Jaccard@k between paraphrases (0.1)", float),
    _Option("chain_limit", "int", "results fetched per filter-chain step (100)", int),
    _Option("max_inversions", "int", "allowed reorderings per filter-chain step (0)", int),
    _Option("duplicate_items", "int", "listings copied by the duplicate check (5)", int),
    _Option("duplicate_k", "int", "top-k of the duplicate check (10)", int),
    _Option("duplicate_max_copies", "int", "copies allowed to outrank top-k listings (1)", int),
    _Option("deletion_items", "int", "listings deleted by the deletion check (3)", int),
    _Option("deletion_probes", "int", "probe queries per deletion (12)", int),
    _Option("conformance_dir", "string", "filter-conformance set (default: conformance/)"),
    _Option("conformance_limit", "int", "result limit of a conformance search (1000)", int),
    _Option(
        "extraction_min_accuracy", "float", "minimum extraction accuracy per field (0.9)", float
    ),
    _Option("extraction_max_spurious", "int", "allowed spurious extracted filters (0)", int),
    _Option("enabled", "string", "comma-separated invariants to run (default: all)"),
)


def add_options(parser: pytest.Parser) -> None:
    """Register the CLI group and the ini keys; imports nothing heavy."""
    group = parser.getgroup("searcheval", "search quality evaluation (pytest-searcheval)")
    group.addoption(
        "--search-eval",
        action="store_true",
        default=False,
        dest="search_eval",
        help="evaluate search quality: query tests, report, baseline gate",
    )
    group.addoption(
        "--search-eval-update-baseline",
        action="store_true",
        default=False,
        dest="search_eval_update_baseline",
        help="rewrite the baseline from this run (a deliberate, reviewed change)",
    )
    for opt in OPTIONS + tuple(
        _Option("invariant_" + o.name, o.ini_type, o.help, o.kind) for o in INVARIANT_OPTIONS
    ):
        cli = "--search-eval-" + opt.name.replace("_", "-")
        dest = "search_eval_" + opt.name
        if opt.flag:
            group.addoption(cli, action="store_true", default=None, dest=dest, help=opt.help)
        else:
            group.addoption(cli, action="store", default=None, dest=dest, help=opt.help)
        parser.addini(dest, opt.help, type=opt.ini_type, default=None)  # type: ignore[arg-type]


def _raw(config: pytest.Config, name: str) -> tuple[Any, str]:
    """Value and its source ("--option" or "ini key") with CLI > ini precedence."""
    dest = "search_eval_" + name
    cli = config.getoption(dest, default=None)
    if cli is not None:
        return cli, "--search-eval-" + name.replace("_", "-")
    try:
        ini = config.getini(dest)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"ini {dest}: {exc}") from None
    if ini is not None and ini != "" and ini != []:
        return ini, f"ini {dest}"
    return None, ""


def _typed(config: pytest.Config, name: str, kind: type, default: Any) -> Any:
    value, source = _raw(config, name)
    if value is None:
        return default
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{source}: expected true or false, got {value!r}")
    try:
        return kind(str(value).strip())
    except ValueError:
        raise ConfigError(f"{source}: expected {kind.__name__}, got {value!r}") from None


def _default_collection(rootpath: Path) -> Path:
    if (rootpath / "collection.yaml").is_file():
        return rootpath
    raise ConfigError(
        f"{rootpath}: no collection.yaml here; pass --search-eval-collection=DIR "
        "or set search_eval_collection in the ini file"
    )


def _invariant_settings(config: pytest.Config, root: Path) -> dict[str, Any]:
    """The invariant settings given on the command line or in the ini file (typed), checked
    against ``InvariantSettings`` so that a bad value names its option."""
    out: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for opt in INVARIANT_OPTIONS:
        name = "invariant_" + opt.name
        value, source = _raw(config, name)
        if value is None:
            continue
        sources[opt.name] = source
        if opt.name == "enabled":
            out["enabled"] = tuple(v.strip() for v in str(value).split(",") if v.strip())
        elif opt.name == "conformance_dir":
            p = Path(str(value))
            out["conformance_dir"] = str(p if p.is_absolute() else root / p)
        else:
            out[opt.name] = _typed(config, name, opt.kind, None)
    if out:
        from pytest_searcheval.invariants.base import settings_from

        try:
            settings_from(out)
        except (ValueError, TypeError) as exc:
            named = ", ".join(sources[k] for k in sorted(sources) if k in str(exc)) or ", ".join(
                sources.values()
            )
            raise ConfigError(f"{named}: {exc}") from None
    return out


def build(config: pytest.Config) -> SearchEvalConfig:
    """Resolve every option once; raises :class:`ConfigError` naming the bad option."""
    enabled = bool(config.getoption("search_eval", default=False))
    update = bool(config.getoption("search_eval_update_baseline", default=False))
    root = Path(config.rootpath)

    def path(name: str, default: Path | None) -> Path:
        value, _ = _raw(config, name)
        p = Path(str(value)) if value is not None else default
        if p is None:
            p = _default_collection(root)
        return p if p.is_absolute() else root / p

    collection = path("collection", None) if enabled or update else root
    if enabled and not collection.is_dir():
        raise ConfigError(f"--search-eval-collection: {collection} is not a directory")

    profiles_raw, src = _raw(config, "profiles")
    profiles = DEFAULT_PROFILES
    if profiles_raw is not None:
        profiles = tuple(p.strip() for p in str(profiles_raw).split(",") if p.strip())
        if not profiles:
            raise ConfigError(f"{src}: expected a comma-separated list of profiles, got nothing")
    gated = str(_typed(config, "gated_profile", str, "hybrid"))
    if gated not in profiles:
        raise ConfigError(
            f"--search-eval-gated-profile: {gated!r} is not among the profiles {list(profiles)}"
        )
    gain = str(_typed(config, "gain", str, "exp"))
    if gain not in ("exp", "linear"):
        raise ConfigError(f"--search-eval-gain: expected exp or linear, got {gain!r}")
    split = str(_typed(config, "split", str, "test"))
    rel = int(_typed(config, "relevance_level", int, 2))
    if rel < 1:
        raise ConfigError(f"--search-eval-relevance-level: expected a grade >= 1, got {rel}")
    limit = int(_typed(config, "limit", int, 20))
    if limit < 1:
        raise ConfigError(f"--search-eval-limit: expected a positive integer, got {limit}")
    query_measure = str(_typed(config, "query_measure", str, "nDCG@10"))
    if query_measure not in DEFAULT_MEASURES:
        raise ConfigError(
            f"--search-eval-query-measure: expected one of {list(DEFAULT_MEASURES)}, "
            f"got {query_measure!r}"
        )
    url_value, _ = _raw(config, "url")
    dsn_value, _ = _raw(config, "dsn")
    tag_value, _ = _raw(config, "baseline_tag")
    report_dir = path("report_dir", Path("searcheval-report"))
    history_value, _ = _raw(config, "history")
    history: Path | None = path("history", report_dir / "history.jsonl")
    if history_value is not None and str(history_value).strip().lower() in ("", "off"):
        history = None
    return SearchEvalConfig(
        enabled=enabled or update,
        collection=collection,
        split=split,
        profiles=profiles,
        gated_profile=gated,
        relevance_level=rel,
        gain=gain,
        tolerance=float(_typed(config, "tolerance", float, 0.02)),
        query_tolerance=float(_typed(config, "query_tolerance", float, 0.2)),
        query_measure=query_measure,
        limit=limit,
        timeout_s=float(_typed(config, "timeout", float, 30.0)),
        baseline=path("baseline", Path("baselines/baseline.json")),
        report_dir=report_dir,
        history=history,
        url=str(url_value) if url_value is not None else None,
        dsn=str(dsn_value) if dsn_value is not None else None,
        update_baseline=update,
        baseline_tag=str(tag_value) if tag_value is not None else None,
        strict_baseline=bool(_typed(config, "strict_baseline", bool, False)),
        latency_p95_ms=_typed(config, "latency_p95_ms", float, None),
        latency_p99_ms=_typed(config, "latency_p99_ms", float, None),
        latency_rounds=int(_typed(config, "latency_rounds", int, 200)),
        bootstrap_samples=int(_typed(config, "bootstrap_samples", int, 1000)),
        permutations=int(_typed(config, "permutations", int, 10000)),
        extra={"invariants": _invariant_settings(config, root)} if enabled or update else {},
    )
