"""Every setting of an evaluation run, declared once.

A setting is a field of :class:`SearchEvalConfig` made with :func:`setting`: its annotation is
its type, and the same declaration carries its default, its help and its check. From that one
declaration come the command-line option ``--search-eval-NAME``, the ini key
``search_eval_NAME``, the parsing (with an error naming the option and what was expected) and
the table in docs/configuration.md (``python -m pytest_searcheval.settings`` prints it; a test
compares the two).

Precedence is CLI > ini > default, tested with ``is not None`` so that an explicit ``0`` or an
empty value on the command line still wins. The invariants' knobs are the fields of
:class:`~pytest_searcheval.invariants.base.InvariantSettings`, exposed the same way as
``--search-eval-invariant-NAME``.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

#: Measures the gate compares against the baseline (see the gate rules in docs/report.md).
GATED_MEASURES: tuple[str, ...] = ("nDCG@10", "R@20")
PREFIX = "search_eval_"


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the option and what was expected.

    The plugin turns it into ``pytest.UsageError`` (exit status 4).
    """


Check = Callable[[Any], str | None]


class Rejected(str):
    """What a check expected, naming the one item of a list it rejects: the error shows that
    item (``got 'ndcg@5'``), not the whole value the list was split from."""

    item: Any = None

    @classmethod
    def of(cls, wanted: str, item: Any) -> Rejected:
        out = cls(wanted)
        out.item = item
        return out


def setting(
    default: Any,
    help: str,
    *,
    check: Check | None = None,
    cli: bool = True,
    ini: bool = True,
    factory: Callable[[], Any] | None = None,
) -> Any:
    """A dataclass field that is also an option and an ini key.

    ``check(value)`` returns what was expected when the value is wrong (a :class:`Rejected`
    to name the item of a list it rejects), else ``None``.
    """
    meta = {"help": help, "check": check, "cli": cli, "ini": ini}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _positive(value: Any) -> str | None:
    return None if value is None or value >= 1 else "a positive integer"


def _non_negative(value: Any) -> str | None:
    return None if value is None or 0 <= value < math.inf else "a finite number >= 0"


def _one_of(*choices: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value is None or value in choices else "one of " + ", ".join(choices)

    return check


def _measures(value: Any) -> str | None:
    if value is None:
        return None
    if not value:
        return "at least one measure"
    from pytest_searcheval.metrics import parse_measure

    for m in value:
        try:
            parse_measure(m)
        except ValueError as exc:
            return Rejected.of(f"known measures ({exc})", m)
    return None


def _grade_scale(value: Any) -> str | None:
    from pytest_searcheval.collection.model import GRADES_EXPECTED, parse_grades

    if value is None:
        return None
    try:
        parse_grades(value)
    except ValueError:
        return GRADES_EXPECTED
    return None


def _split_names(value: Any) -> str | None:
    return "at least one name" if value is not None and not value else None


LATENCY_BUDGET_EXPECTED = (
    "PROFILE=P95 or PROFILE=P95/P99 (finite milliseconds >= 0; '-' keeps the default)"
)


def parse_latency_budget(item: str) -> tuple[str, float | None, float | None, bool]:
    """One ``latency_budgets`` item: ``hybrid_rerank=250/400`` is the profile, its p95 and p99
    budgets, and whether the p99 was given; ``-`` for either keeps the general budget."""
    name, sep, numbers = item.partition("=")
    parts = numbers.split("/")
    if not sep or not name.strip() or len(parts) > 2:
        raise ValueError(item)

    def number(text: str) -> float | None:
        text = text.strip()
        if text == "-":
            return None
        value = float(text)
        if not 0 <= value < math.inf:
            raise ValueError(item)
        return value

    p95 = number(parts[0])
    p99 = number(parts[1]) if len(parts) == 2 else None
    return name.strip(), p95, p99, len(parts) == 2


def _latency_budgets(value: Any) -> str | None:
    if value is None:
        return None
    seen: set[str] = set()
    for item in value:
        try:
            name = parse_latency_budget(item)[0]
        except ValueError:
            return Rejected.of(LATENCY_BUDGET_EXPECTED, item)
        if name in seen:
            return Rejected.of(f"each profile once ({name!r} is named twice)", item)
        seen.add(name)
    return None


@dataclass(frozen=True)
class SearchEvalConfig:
    """Every setting of one evaluation run, resolved once in ``pytest_configure``."""

    enabled: bool = setting(
        False, "turn the evaluation on (ini: for IDEs that run plain pytest; same as --search-eval)"
    )
    collection: Path | None = setting(
        None,
        "collection directory: native, BEIR, or TREC files given by qrels/topics "
        "(default: the rootdir when it has collection.yaml, or BEIR's corpus.jsonl and "
        "queries.jsonl)",
    )
    qrels: Path | None = setting(None, "TREC qrels file (qid 0 docid grade) as the judgments")
    topics: Path | None = setting(
        None, "TREC topics file (SGML or qid<TAB>text) for --search-eval-qrels"
    )
    corpus: Path | None = setting(None, "TREC/JSONL corpus for --search-eval-qrels (optional)")
    split: str = setting("test", "query split to evaluate: a split name or all")
    target: str = setting(
        "auto",
        "what is measured: auto (url, run files, or the reference engine), http, "
        "bazaar (an x402 Bazaar facilitator at url, through the x402 SDK; auto picks it for a "
        "bazaar+https:// url), engine, run",
        check=_one_of("auto", "http", "bazaar", "engine", "run"),
    )
    url: str | None = setting(
        None, "evaluate this HTTP service (base URL or template with {query})"
    )
    run: tuple[str, ...] = setting(
        (),
        "TREC run file(s) as targets, comma-separated or repeated: each is a profile "
        "named after its file",
        factory=tuple,
    )
    profiles: tuple[str, ...] | None = setting(
        None,
        "comma-separated profiles to measure (default: what the target offers)",
        check=_split_names,
    )
    gated_profile: str | None = setting(
        None,
        "profile whose queries fail tests and gate (default: the target's own, e.g. "
        "hybrid for the reference engine or an HTTP service's /healthz defaults, else the "
        "first profile)",
    )
    gate_over: str | None = setting(
        None,
        "the gated profile must score at least this profile on the gated measures, now "
        "and in the baseline (default: the target's own, e.g. lexical for the reference "
        "engine or an HTTP service's /healthz defaults, else none)",
    )
    relevance_level: int | None = setting(
        None,
        "minimum grade that counts as relevant (default: the collection's "
        "relevance_level, else 1 with trec-compat or a binary scale, else 2)",
        check=_positive,
    )
    grades: str | None = setting(
        None,
        "grade scale of a BEIR or TREC collection, e.g. 0,1 or 0-3: the qrels' grades must "
        "lie on it, its top is ERR's g_max and its positive grades choose the default relevance "
        "level (default: the grades the qrels hold; a native collection declares grades in "
        "collection.yaml)",
        check=_grade_scale,
    )
    gain: str | None = setting(
        None,
        "nDCG gain: exp (2^g-1) or linear (default: exp; linear with trec-compat)",
        check=_one_of("exp", "linear"),
    )
    trec_compat: bool = setting(
        False,
        "trec_eval's conventions for the whole run: linear gain, relevance level 1 "
        "unless set, ties by score then docid descending, every judged query counts, "
        "measures over the whole returned list",
    )
    measures: tuple[str, ...] = setting(
        ("nDCG@5", "nDCG@10", "P@5", "R@20", "RR", "AP", "bpref", "Judged@10"),
        "comma-separated measures (ir_measures names) reported per profile",
        check=_measures,
    )
    tolerance: float = setting(0.02, "allowed aggregate drop vs baseline", check=_non_negative)
    query_tolerance: float = setting(0.2, "allowed per-query drop vs baseline", check=_non_negative)
    max_errors: int = setting(
        0,
        "errored queries per profile the gate tolerates (a search that failed after its "
        "retries); the rules comparing means then compare the queries that answered: with the "
        "baseline on the same queries, and the gated profile with the gate-over profile on the "
        "queries both answered",
        check=_non_negative,
    )
    query_measure: str = setting(
        "nDCG@10", "measure of the per-query check", check=lambda v: _measures((v,))
    )
    limit: int = setting(
        20,
        "results requested per query (unset: 20, or the deepest cut-off of the measures when "
        "deeper; set below a cut-off: a usage error)",
        check=_positive,
    )
    timeout: float = setting(30.0, "seconds before a search counts as failed", check=_non_negative)
    retries: int = setting(
        2,
        "HTTP targets: times a search is asked again after a connection error, a timeout, "
        "status 429 or 5xx",
        check=_non_negative,
    )
    retry_backoff: float = setting(
        0.5,
        "HTTP targets: seconds before the first retry, doubled before each next one",
        check=_non_negative,
    )
    baseline: Path = setting(Path("baselines/baseline.json"), "baseline file")
    report_dir: Path = setting(Path("searcheval-report"), "report directory")
    report_rankings: str = setting(
        "top",
        "per query and profile, the report keeps the top of each ranking (as deep as the "
        "deepest cut-off measured, at least 10) or, with full, every returned id",
        check=_one_of("top", "full"),
    )
    history: str = setting(
        "",
        "append a line per full run to this file, plotted in the HTML report "
        "(default: <report_dir>/history.jsonl; off keeps none)",
    )
    dsn: str | None = setting(None, "PostgreSQL DSN for the reference engine (default: embedded)")
    baseline_tag: str | None = setting(
        None,
        "git tag written into an updated baseline (default: searcheval-<collection>-<first 12 "
        "hex digits of the baseline's content hash>, new for every changed baseline)",
    )
    strict_baseline: bool = setting(
        False,
        "a baseline that cannot be verified against its git tag, or a latency budget "
        "that was not measured, fails the gate",
    )
    update_baseline: bool = setting(
        False, "rewrite the baseline from this run (a deliberate, reviewed change)", ini=False
    )
    snapshot_update: bool = setting(
        False,
        "re-record the ranking snapshots the hand-written tests check (ranking_snapshot) "
        "instead of comparing them, and remove the entries no test checks any more",
        ini=False,
    )
    snapshot_strict: bool | None = setting(
        None,
        "a ranking snapshot that was never recorded fails its test, saying how to record it, "
        "instead of being recorded, and unused snapshot entries fail the run (default: on "
        "when the CI or BUILD_NUMBER environment variable is non-empty, as pytest reads them; "
        "ini false records there too)",
    )
    latency_p95_ms: float | None = setting(
        None, "p95 latency budget in ms (enables latency tests)", check=_non_negative
    )
    latency_p99_ms: float | None = setting(
        None, "p99 latency budget in ms (enables latency tests)", check=_non_negative
    )
    latency_rounds: int = setting(200, "requests per latency test", check=_positive)
    latency_profiles: tuple[str, ...] | None = setting(
        None,
        "comma-separated profiles timed against the latency budgets, one test_latency each "
        "(default: the gated profile)",
        check=_split_names,
    )
    latency_budgets: tuple[str, ...] | None = setting(
        None,
        "comma-separated per-profile budgets that replace latency_p95_ms/latency_p99_ms for "
        "that profile wherever either is set, PROFILE=P95 or PROFILE=P95/P99 in ms, e.g. "
        "hybrid_rerank=250/400 (a reranking profile does more work per request than the one "
        "it reranks); each profile named once, and timed (latency_profiles)",
        check=_latency_budgets,
    )
    embedding_fallback_tolerance: int = setting(
        0,
        "listings the gate rule 'no embedding fallback' allows to have failed to embed or be "
        "served without their embedding (the target's embedding counts)",
        check=_non_negative,
    )
    rerank_tolerance: float | None = setting(
        None,
        "nDCG@10 a reranked profile may fall below its base profile before the gate rule "
        "'reranking matches or improves hybrid' fails (the report's reranker lift; default: "
        "the tolerance of the comparisons with the baseline)",
        check=_non_negative,
    )
    bootstrap_samples: int = setting(1000, "bootstrap resamples", check=_positive)
    permutations: int = setting(10000, "randomization test permutations", check=_positive)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    # --- derived ---------------------------------------------------------------------------

    @property
    def history_path(self) -> Path | None:
        """The history file: :func:`build` resolves the setting's text to a path, or to
        ``None`` for ``off``; a config made without :func:`build` keeps no history."""
        history: object = self.history
        return history if isinstance(history, Path) else None

    @property
    def grade_scale(self) -> list[int] | None:
        """The declared grade scale, or ``None`` when the qrels' own grades are the scale."""
        from pytest_searcheval.collection.model import parse_grades

        return None if self.grades is None else parse_grades(self.grades)

    @property
    def latency_enabled(self) -> bool:
        """A latency budget is set, so the latency tests run."""
        return (
            self.latency_p95_ms is not None
            or self.latency_p99_ms is not None
            or bool(self.latency_budgets)
        )

    def latency_budget(self, profile: str) -> dict[str, float | None]:
        """The p95 and p99 budgets (ms) of ``profile``: its ``latency_budgets`` entry where it
        has one, else ``latency_p95_ms`` and ``latency_p99_ms``."""
        budget = {"p95": self.latency_p95_ms, "p99": self.latency_p99_ms}
        for item in self.latency_budgets or ():
            name, p95, p99, has_p99 = parse_latency_budget(item)
            if name == profile:
                if p95 is not None:
                    budget["p95"] = p95
                if has_p99 and p99 is not None:
                    budget["p99"] = p99
        return budget

    @property
    def timeout_s(self) -> float:
        return self.timeout

    @property
    def gated(self) -> str:
        """The gated profile (resolved against the target's profiles by the plugin)."""
        return self.gated_profile or (self.profiles or ("default",))[0]


# ------------------------------------------------------------------------------ declarations


@dataclass(frozen=True)
class Declared:
    """One setting as the option machinery sees it."""

    name: str
    kind: Any  # the annotation: str, int, float, bool, Path, tuple[str, ...], X | None
    default: Any
    help: str
    check: Check | None
    cli: bool = True
    ini: bool = True

    @property
    def option(self) -> str:
        return "--search-eval-" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        return "search_eval" if self.name == "enabled" else PREFIX + self.name

    @property
    def base(self) -> Any:
        """The type without ``| None``."""
        args = [a for a in typing.get_args(self.kind) if a is not type(None)]
        if isinstance(self.kind, types.UnionType) and len(args) == 1:
            return args[0]
        return self.kind

    @property
    def flag(self) -> bool:
        return self.base is bool

    @property
    def many(self) -> bool:
        return typing.get_origin(self.base) is tuple

    def expected(self) -> str:
        if self.flag:
            return "true or false"
        if self.many:
            return "a comma-separated list"
        return {int: "an integer", float: "a number", Path: "a path", str: "a string"}.get(
            self.base, "a value"
        )

    def shown_default(self) -> str:
        if self.default is None:
            return "-"
        if isinstance(self.default, tuple):
            return ",".join(self.default) or "-"
        if isinstance(self.default, bool):
            return str(self.default).lower()
        return str(self.default)


def declared(cls: type = SearchEvalConfig, prefix: str = "") -> list[Declared]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if "help" not in f.metadata:
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            raise TypeError(f"{cls.__name__}.{f.name}: a setting needs a default")
        out.append(
            Declared(
                prefix + f.name,
                hints[f.name],
                default,
                f.metadata["help"],
                f.metadata.get("check"),
                f.metadata.get("cli", True),
                f.metadata.get("ini", True),
            )
        )
    return out


def _invariant_declared() -> list[Declared]:
    from pytest_searcheval.invariants.base import InvariantSettings

    return declared(InvariantSettings, "invariant_")


def all_declared() -> list[Declared]:
    return declared() + _invariant_declared()


def add_options(parser: pytest.Parser) -> None:
    """Register the CLI group and the ini keys; imports nothing heavy."""
    group = parser.getgroup("searcheval", "search quality evaluation (pytest-searcheval)")
    for d in all_declared():
        text = d.help + ("" if d.flag else f" (default: {d.shown_default()})")
        if d.cli:
            if d.name == "enabled":
                group.addoption(
                    "--search-eval",
                    action="store_true",
                    default=None,
                    dest=d.dest,
                    help="evaluate search quality: query tests, report, baseline gate",
                )
            elif d.flag:
                group.addoption(d.option, action="store_true", default=None, dest=d.dest, help=text)
            elif d.many:
                group.addoption(d.option, action="append", default=None, dest=d.dest, help=text)
            else:
                group.addoption(d.option, action="store", default=None, dest=d.dest, help=text)
        if d.ini:
            ini_type: Literal["bool", "string"] = "bool" if d.flag else "string"
            parser.addini(d.dest, text, type=ini_type, default=None)


# ------------------------------------------------------------------------------ resolution


def _raw(config: pytest.Config, d: Declared) -> tuple[Any, str]:
    """Value and its source ("--option" or "ini key") with CLI > ini precedence."""
    if d.cli:
        cli = config.getoption(d.dest, default=None)
        if cli is not None:
            return cli, "--search-eval" if d.name == "enabled" else d.option
    if d.ini:
        try:
            ini = config.getini(d.dest)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"ini {d.dest}: {exc}") from None
        if ini is not None and ini != "" and ini != []:
            return ini, f"ini {d.dest}"
    return None, ""


def parse(d: Declared, value: Any, source: str) -> Any:
    """``value`` (a string, a bool, or a list of strings) as ``d``'s type, checked."""
    base = d.base
    try:
        if d.flag:
            if isinstance(value, bool):
                out: Any = value
            else:
                text = str(value).strip().lower()
                if text in ("1", "true", "yes", "on"):
                    out = True
                elif text in ("0", "false", "no", "off"):
                    out = False
                else:
                    raise ValueError
        elif d.many:
            items = value if isinstance(value, list | tuple) else [value]
            out = tuple(p.strip() for item in items for p in str(item).split(",") if p.strip())
        elif base is Path:
            out = Path(str(value))
        else:
            out = base(str(value).strip())
    except ValueError:
        raise ConfigError(f"{source}: expected {d.expected()}, got {value!r}") from None
    if d.check is not None:
        wanted = d.check(out)
        if wanted is not None:
            got = wanted.item if isinstance(wanted, Rejected) else value
            raise ConfigError(f"{source}: expected {wanted}, got {got!r}")
    return out


def resolve(config: pytest.Config, items: list[Declared]) -> tuple[dict[str, Any], dict[str, str]]:
    """The values set on the command line or in the ini file, and where each came from."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for d in items:
        raw, source = _raw(config, d)
        if raw is None:
            continue
        values[d.name] = parse(d, raw, source)
        sources[d.name] = source
    return values, sources


def _absolute(root: Path, p: Path | None) -> Path | None:
    if p is None:
        return None
    return p if p.is_absolute() else root / p


def build(config: pytest.Config) -> SearchEvalConfig:
    """Resolve every setting once; raises :class:`ConfigError` naming the bad option."""
    root = Path(config.rootpath)
    items = declared()
    switches = [d for d in items if d.name in ("enabled", "update_baseline", "snapshot_update")]
    values, sources = resolve(config, switches)
    enabled = any(bool(values.get(d.name)) for d in switches)
    if not enabled:
        # Nothing else is read: a plain pytest run (or --help) pays for two lookups.
        return SearchEvalConfig(enabled=False)
    values, sources = resolve(config, items)
    values["enabled"] = enabled
    for key in ("collection", "qrels", "topics", "corpus", "baseline", "report_dir"):
        if key in values:
            values[key] = _absolute(root, values[key])
    values.setdefault("baseline", root / "baselines" / "baseline.json")
    values.setdefault("report_dir", root / "searcheval-report")
    history = str(values.get("history", "")).strip()
    values["history"] = (
        None
        if history.lower() == "off"
        else _absolute(root, Path(history))
        if history
        else values["report_dir"] / "history.jsonl"
    )
    if "run" in values:
        values["run"] = tuple(str(_absolute(root, Path(r))) for r in values["run"])
    _check_collection(values, sources, root)
    gated = values.get("gated_profile")
    profiles = values.get("profiles")
    if gated is not None and profiles is not None and gated not in profiles:
        raise ConfigError(
            f"{sources['gated_profile']}: {gated!r} is not among the profiles {list(profiles)}"
        )
    _one_profile(values, sources)
    _budgets_timed(values, sources)
    _follow_depth(values, sources)
    inv_values, inv_sources = resolve(config, _invariant_declared())
    values["extra"] = {"invariants": _invariant_settings(inv_values, inv_sources, root)}
    return SearchEvalConfig(**values)


def _one_profile(values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
    """A URL template without ``{profile}`` serves one profile, ``default``: naming another
    would send the same requests under two names."""
    url = values.get("url")
    if not url or "{query}" not in url or "{profile}" in url:
        return
    for key in ("profiles", "gated_profile", "gate_over", "latency_profiles"):
        named = values.get(key)
        names = (named,) if isinstance(named, str) else tuple(named or ())
        other = [n for n in names if n != "default"]
        if other:
            from pytest_searcheval.targets.http import HttpTarget

            raise ConfigError(f"{sources[key]}: {HttpTarget.one_profile_error(url, other[0])}")


def _budgets_timed(values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
    """A per-profile latency budget names a profile that is timed: one that is not would never
    be checked, silently."""
    budgets = values.get("latency_budgets") or ()
    timed = values.get("latency_profiles") or (
        (values["gated_profile"],) if values.get("gated_profile") else ()
    )
    if budgets and not timed:
        # the gated profile is otherwise resolved against the target's profiles at run time
        raise ConfigError(
            f"{sources['latency_budgets']}: a per-profile budget needs the timed profiles "
            "named: set search_eval_latency_profiles (or search_eval_gated_profile)"
        )
    for item in budgets:
        name = parse_latency_budget(item)[0]
        if name not in timed:
            raise ConfigError(
                f"{sources['latency_budgets']}: {name!r} is not timed; the latency tests time "
                f"{', '.join(timed)} (add it to search_eval_latency_profiles)"
            )


def _follow_depth(values: dict[str, Any], sources: Mapping[str, str]) -> None:
    """A measure is never cut below its own cut-off: without a limit set, the limit is the
    deepest cut-off the measures need when that exceeds the default; a limit set below one is a
    usage error naming both."""
    from pytest_searcheval.metrics import parse_measure

    fields = {f.name: f for f in dataclasses.fields(SearchEvalConfig)}
    measures = values.get("measures", fields["measures"].default)
    query_measure = values.get("query_measure", fields["query_measure"].default)
    cuts = {str(m): parse_measure(m).k or 0 for m in (*measures, query_measure)}
    deepest = max(cuts.values(), default=0)
    limit = values.get("limit")
    if limit is None:
        if deepest > int(fields["limit"].default):  # type: ignore[arg-type]
            values["limit"] = deepest
        return
    deeper = [m for m, k in cuts.items() if k > limit]
    if deeper:
        named = sources.get("measures") if any(m in measures for m in deeper) else None
        named = named or sources.get("query_measure") or "the default measures"
        raise ConfigError(
            f"{sources['limit']}={limit} is below the cut-off of {', '.join(deeper)} "
            f"({named}): those measures would be computed on {limit} results. Set the limit "
            f"to at least {deepest}, or leave it unset (it then follows the deepest cut-off)"
        )


def _check_collection(values: dict[str, Any], sources: Mapping[str, str], root: Path) -> None:
    if values.get("qrels") is not None:
        for key in ("qrels", "topics", "corpus"):
            p = values.get(key)
            if p is not None and not p.is_file():
                raise ConfigError(f"{sources[key]}: {p} is not a file")
        if values.get("topics") is None:
            raise ConfigError(
                f"{sources['qrels']}: TREC qrels need topics too "
                "(--search-eval-topics=FILE or ini search_eval_topics)"
            )
        return
    coll = values.get("collection")
    if coll is None:
        from pytest_searcheval.collection.load import layout

        if (root / "collection.yaml").is_file() or layout(root) == "beir":
            values["collection"] = root  # as collection/load.py reads it
            return
        raise ConfigError(
            f"{root}: no collection here (no collection.yaml, nor BEIR's corpus.jsonl and "
            "queries.jsonl); pass --search-eval-collection=DIR (native or BEIR) or "
            "--search-eval-qrels=FILE --search-eval-topics=FILE (TREC), or set "
            "search_eval_collection in the ini file"
        )
    if not coll.is_dir():
        raise ConfigError(f"{sources['collection']}: {coll} is not a directory")


def _invariant_settings(
    values: Mapping[str, Any], sources: Mapping[str, str], root: Path
) -> dict[str, Any]:
    """The invariant settings given (typed), checked against ``InvariantSettings`` so that a
    bad value names its option."""
    out = {k.removeprefix("invariant_"): v for k, v in values.items()}
    if "conformance_dir" in out and out["conformance_dir"] is not None:
        p = Path(str(out["conformance_dir"]))
        out["conformance_dir"] = str(p if p.is_absolute() else root / p)
    if out:
        from pytest_searcheval.invariants.base import settings_from

        try:
            settings_from(out)
        except (ValueError, TypeError) as exc:
            named = [sources["invariant_" + k] for k in sorted(out) if k in str(exc)]
            raise ConfigError(f"{', '.join(named or sources.values())}: {exc}") from None
    return out


def markdown_table() -> str:
    """The settings table of docs/configuration.md, generated from the declarations."""
    lines = [
        "| option | ini key | default | meaning |",
        "| --- | --- | --- | --- |",
    ]
    for d in all_declared():
        option = "`--search-eval`" if d.name == "enabled" else f"`{d.option}`"
        lines.append(
            f"| {option if d.cli else '-'} | {f'`{d.dest}`' if d.ini else '-'} | "
            f"`{d.shown_default()}` | {d.help} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
