"""The shapes of the data at the centre: a query row, the report, its parts, and the baseline.

Everything the plugin keeps per test, the report it writes (``report.json``) and the baseline
file are plain JSON-safe dicts; the ``TypedDict`` classes below say what each holds, so a reader
of ``report["profiles"][p]["measures"]`` needs no other page open, and mypy checks the writers
(``report.build``, ``baseline.gate.make_baseline``) and the readers (the gate's rules through
``GateContext``, the renderings).
The JSON schemas in ``pytest_searcheval/schemas/`` (``report.schema.json``,
``baseline.schema.json``) are generated from these classes by :func:`json_schema`; regenerate
them with ``python -m pytest_searcheval.types`` after changing a class (a test compares the
files with the classes, and every report the plugin tests write is validated against them).

A key marked ``NotRequired`` may be absent; ``X | None`` is a key that is always there and may
be ``null``. Statuses are ``Literal`` strings.
"""

from __future__ import annotations

import json
import sys
import types as _types
from pathlib import Path
from typing import (
    Any,
    Literal,
    NotRequired,
    Required,
    TypedDict,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

# ---------------------------------------------------------------------------------- statuses

#: A gate rule's verdict; ``unverified`` (no git, no tag) fails only with strict_baseline.
RuleStatus = Literal["passed", "failed", "skipped", "unverified"]
#: An invariant case's outcome.
InvariantStatus = Literal["passed", "failed", "skipped", "errored"]
#: How a test relates to the baseline's known-failure ledger (``fixed`` = XPASS).
LedgerStatus = Literal["known", "new", "fixed"]


class ReasonRecord(TypedDict):
    """One reason a test failed (:class:`pytest_searcheval.reasons.Reason` as JSON)."""

    code: str
    text: str
    subject: NotRequired[str]
    params: NotRequired[dict[str, Any]]


class SearchError(TypedDict):
    """A search that failed for one query and profile, after every attempt."""

    error: str
    url: str | None
    attempts: int


class Confidence(TypedDict):
    """The target's no-result confidence, as finite numbers."""

    value: float | None
    threshold: float | None


# ------------------------------------------------------------------------- the per-test row


class ProfileResult(TypedDict):
    """What one profile answered to one query, scored (``QueryRow["profiles"][p]``)."""

    ids: list[str]
    measures: dict[str, float]
    violations: list[ReasonRecord]
    constraint_breaks: int
    returned: int
    applied: Any
    extracted: Any
    expectations: list[ReasonRecord]
    latency_ms: float | None
    confidence: Confidence | None
    # trec-compat only: the ids put in trec_eval's order (score, then docid, descending), or
    # kept in the service's order because it sent no scores
    order: NotRequired[Literal["trec_eval", "service"]]
    # every measure is in ``measures`` already (a run file's, scored at first use over the
    # whole ranking): ``ids`` may hold only the report's depth then
    measures_complete: NotRequired[bool]


#: The record a query test keeps (plugin side, shipped from xdist workers), one per query.
QueryRow = TypedDict(
    "QueryRow",
    {
        "qid": str,
        "text": str,
        "class": str,
        "split": str,
        "relevant": int,
        "judged": bool,
        "evaluated": bool,
        "unanswerable": bool,
        "profiles": dict[str, ProfileResult],
        "unavailable": dict[str, str],
        "reasons": list[ReasonRecord],
        # profile -> the search error of this query on that profile
        "errors": NotRequired[dict[str, SearchError]],
        "ledger": NotRequired[LedgerStatus | None],
    },
)


class InvariantRecord(TypedDict):
    """One invariant case's outcome (``report["invariants"][case id]``)."""

    id: str
    invariant: str
    status: InvariantStatus
    passed: bool
    message: str
    details: dict[str, Any]
    reasons: NotRequired[list[ReasonRecord]]
    ledger: NotRequired[LedgerStatus | None]


class LatencyRecord(TypedDict, total=False):
    """The latency test of one profile: its percentiles, or why it measured nothing."""

    profile: Required[str]
    n: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    budget_p95_ms: float | None
    budget_p99_ms: float | None
    samples_ms: list[float]
    not_measured: str


# ------------------------------------------------------------------------------- the report


class Interval(TypedDict):
    """A mean with its 95% bootstrap interval over ``n`` queries (``null`` when n = 0)."""

    mean: float | None
    low: float | None
    high: float | None
    n: int


class NoResult(TypedDict):
    unanswerable: int
    correct_empty: int
    accuracy: float | None
    answerable: int
    false_empty: int
    false_empty_rate: float | None


class LatencySummary(TypedDict):
    n: int
    p50: float | None
    p95: float | None
    p99: float | None


class ProfileEntry(TypedDict):
    """One profile of the run (``report["profiles"][p]``); the numbers only when available."""

    available: bool
    reason: str | None
    # queries whose search on this profile errored (``report["queries"][q]["errors"]``)
    errored: NotRequired[int]
    measures: NotRequired[dict[str, Interval]]
    evaluated: NotRequired[int]
    no_result: NotRequired[NoResult]
    hard_filter_violations: NotRequired[int]
    #: results that are no document of the corpus (reason code unknown-document)
    unknown_documents: NotRequired[int]
    results_checked: NotRequired[int]
    constraint_breaks: NotRequired[int]
    latency_ms: NotRequired[LatencySummary]


class Conventions(TypedDict):
    """What a baseline's numbers were measured under (``baseline.gate.CONVENTIONS``)."""

    split: str
    limit: int
    gain: str | None
    relevance_level: int | None
    measures: list[str]
    trec_compat: bool


class Resampling(TypedDict):
    samples: int
    seed: int
    confidence: float


class Randomization(TypedDict):
    permutations: int
    seed: int
    correction: Literal["holm"]


class Run(TypedDict):
    split: str
    profiles: list[str]
    gated_profile: str
    gate_over: str | None
    trec_compat: bool
    conventions: Conventions
    relevance_level: int
    gain: str | None
    limit: int
    measures: list[str]
    tolerance: float
    query_tolerance: float
    query_measure: str
    queries_expected: int
    queries_run: int
    complete: bool
    partial: bool
    xdist_workers: int
    bootstrap: Resampling
    randomization: Randomization


class Tool(TypedDict):
    name: str
    version: str


class Environment(TypedDict):
    host: str
    platform: str
    machine: str
    cpus: int | None
    python: str
    pytest: str | None
    postgres: Any
    pgvector: Any
    target: dict[str, Any]


class CollectionInfo(TypedDict):
    name: str | None
    version: Any
    path: str
    documents: int
    queries: int
    hashes: dict[str, str]
    price_snapshot: Any


class MetricManifest(TypedDict):
    """The metric conventions as data (``metrics.manifest``), plus the evaluated-query rule."""

    measures: list[str]
    mode: Literal["default", "trec_compat"]
    gain: str
    discount: str
    ideal_ranking: str
    relevance_level: int
    binary_relevance: str
    cutoffs: str
    ties: str
    unjudged_documents: str
    negative_grades: str
    queries_absent_from_run: str
    queries_absent_from_qrels: str
    queries_without_relevant_documents: str
    aggregate: str
    #: a measure that names its own relevance level (``P(rel=2)@5``) -> that level
    measure_relevance_levels: NotRequired[dict[str, int]]
    #: with ERR among the measures: its stopping probability
    err_stopping_probability: NotRequired[str]
    evaluated_queries: NotRequired[str]
    # trec-compat only: the order each profile's results were scored in
    result_order: NotRequired[str]


#: One query class of one profile; the interval is of ``report.model.CLASS_MEASURE``.
ClassEntry = TypedDict(
    "ClassEntry",
    {
        "queries": int,
        "evaluated": int,
        "nDCG@10": Interval,
        "no_result_accuracy": float | None,
    },
)


class Comparison(TypedDict):
    """A paired randomization test of two profiles on one measure."""

    a: str
    b: str
    measure: str
    n: int
    mean_a: float
    mean_b: float
    mean_diff: float
    p: float
    p_holm: float


class BaselineComparison(TypedDict):
    """A paired randomization test of the gated profile now against its baseline values."""

    profile: str
    measure: str
    n: int
    mean_now: float
    mean_baseline: float
    mean_diff: float
    wins: int
    losses: int
    p: float
    p_holm: float


#: A baseline's per-query entry: the measures' values and ``"ids"``, the top 10.
BaselineQuery = dict[str, float | list[str]]


class QueryProfileEntry(TypedDict):
    """One profile's answer to one query as the report keeps it: ``ids`` the top of the
    ranking (``report_rankings``), ``returned`` how many results it had."""

    ids: list[str]
    grades: list[int | None]
    returned: int
    measures: dict[str, float]
    violations: list[str]
    constraint_breaks: int
    applied_filters: Any
    extracted_filters: Any
    expectations_unmet: list[str]
    latency_ms: float | None
    confidence: Confidence | None
    order: NotRequired[Literal["trec_eval", "service"]]


#: One query of the run (``report["queries"][qid]``).
QueryEntry = TypedDict(
    "QueryEntry",
    {
        "class": str,
        "split": str,
        "text": str,
        "unanswerable": bool,
        "failures": list[str],
        "reasons": list[ReasonRecord],
        "relevant": int,
        "judged": bool,
        "evaluated": bool,
        "unavailable": dict[str, str],
        "errors": NotRequired[dict[str, SearchError]],
        "profiles": dict[str, QueryProfileEntry],
        "baseline": BaselineQuery | None,
        "ledger": LedgerStatus | None,
    },
)


class Quality(TypedDict):
    k: int
    profiles: dict[str, dict[str, float | None]]
    reranker_lift: dict[str, Any] | None
    embeddings: dict[str, Any] | None
    not_measured: dict[str, str]


class LedgerLists(TypedDict):
    known: list[str]
    new: list[str]
    fixed: list[str]


class KnownFailures(TypedDict):
    baseline_ledger: bool
    queries: LedgerLists
    invariants: LedgerLists


class RuleRecord(TypedDict):
    """One gate rule as the report keeps it (``baseline.gate.Rule``)."""

    name: str
    status: RuleStatus
    detail: str


class GateBaseline(TypedDict):
    path: str
    tag: str | None
    integrity: RuleStatus


class GateRecord(TypedDict):
    passed: bool
    rules: list[RuleRecord]
    baseline: GateBaseline


#: A hand-written search test's outcome, as pytest reports it.
HandWrittenOutcome = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed"]


class HandWrittenTest(TypedDict):
    """One test that used the ``searcheval`` or ``ranking_snapshot`` fixture."""

    outcome: HandWrittenOutcome
    #: marked ``searcheval_gated``: its failure fails the gate
    gated: bool
    #: the golden queries it searched or measured
    queries: list[str]
    searches: int
    snapshots_recorded: list[str]
    snapshots_compared: int


class HandWrittenGated(TypedDict):
    tests: int
    not_passed: list[str]


class HandWrittenSection(TypedDict):
    """The report's "hand-written search tests" (``report.hand_written``)."""

    tests: dict[str, HandWrittenTest]
    counts: dict[str, int]
    gated: HandWrittenGated


class Report(TypedDict):
    """``report.json`` (docs/report.md)."""

    schema_version: int
    tool: Tool
    created: str
    run: Run
    environment: Environment
    collection: CollectionInfo
    model: dict[str, Any] | None
    metric_manifest: MetricManifest
    profiles: dict[str, ProfileEntry]
    unavailable: dict[str, str]
    classes: dict[str, dict[str, ClassEntry]]
    comparisons: list[Comparison]
    vs_baseline: list[BaselineComparison]
    queries: dict[str, QueryEntry]
    invariants: dict[str, InvariantRecord]
    latency_tests: dict[str, LatencyRecord]
    invariant_summary: dict[str, Any] | None
    quality: Quality
    no_result_tradeoff: dict[str, dict[str, Any]]
    known_failures: KnownFailures
    limitations: list[str]
    gate: GateRecord | None
    #: present when a hand-written search test ran
    hand_written: NotRequired[HandWrittenSection]


# ----------------------------------------------------------------------------- the baseline


class BaselineCollection(TypedDict):
    name: str | None
    version: Any
    hashes: dict[str, str]


class BaselineRun(TypedDict):
    """The conventions (``trec_compat`` and ``gated_profile`` are absent in older files)."""

    split: str
    limit: int
    gain: str | None
    relevance_level: int | None
    measures: list[str]
    trec_compat: NotRequired[bool]
    gated_profile: NotRequired[str]


class BaselineProfile(TypedDict):
    aggregates: dict[str, float]
    no_result_accuracy: float | None
    hard_filter_violations: int
    queries: dict[str, BaselineQuery]


class LedgerEntry(TypedDict):
    """A failing test the baseline records: its reason keys and a summary for people."""

    reasons: list[str]
    summary: str


class Ledger(TypedDict):
    queries: dict[str, LedgerEntry]
    invariants: dict[str, LedgerEntry]


class Baseline(TypedDict):
    """``baselines/baseline.json`` (schema version 2; ``known_failures`` absent in old files)."""

    schema_version: int
    tool: Tool
    tag: str | None
    collection: BaselineCollection
    model: dict[str, Any] | None
    run: BaselineRun
    profiles: dict[str, BaselineProfile]
    invariants: dict[str, bool]
    known_failures: NotRequired[Ledger]


# ------------------------------------------------------------------------- the JSON schemas

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
#: file name -> the class it describes
SCHEMAS: dict[str, Any] = {"report.schema.json": Report, "baseline.schema.json": Baseline}


def json_schema(tp: Any) -> dict[str, Any]:
    """The JSON schema (draft 2020-12) of a type built from the classes above: every
    ``TypedDict`` becomes a ``$defs`` entry closed to other keys."""
    defs: dict[str, Any] = {}
    root = _schema(tp, defs)
    out: dict[str, Any] = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    name = getattr(tp, "__name__", None)
    if name is not None and name in defs:
        out["title"] = name
        out.update(defs.pop(name))
    else:
        out.update(root)
    if defs:
        out["$defs"] = dict(sorted(defs.items()))
    return out


def required_keys(tp: Any) -> frozenset[str]:
    """The keys a ``TypedDict`` must have. Under ``from __future__ import annotations`` the
    class-syntax annotations stay strings, which Python 3.11's ``__required_keys__`` reads as
    required; the markers are read from the strings here."""
    out = set()
    for key, hint in tp.__annotations__.items():
        text = getattr(hint, "__forward_arg__", hint)
        if not isinstance(text, str):
            if key in tp.__required_keys__:
                out.add(key)
            continue
        text = text.replace("typing.", "")
        marked = text.startswith("Required[")
        if marked or (tp.__total__ and not text.startswith("NotRequired[")):
            out.add(key)
    return frozenset(out)


def _schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if tp is Any:
        return {}
    if tp is type(None) or tp is None:
        return {"type": "null"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    if is_typeddict(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # placeholder: a class that refers to itself stops here
            hints = get_type_hints(tp)
            defs[name] = {
                "type": "object",
                "properties": {k: _schema(v, defs) for k, v in hints.items()},
                "required": sorted(required_keys(tp)),
                "additionalProperties": False,
            }
        return {"$ref": f"#/$defs/{name}"}
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return {"enum": list(args)}
    if origin is Union or origin is _types.UnionType:
        return {"anyOf": [_schema(a, defs) for a in args]}
    if origin is list:
        return {"type": "array", "items": _schema(args[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema(args[1], defs)}
    raise TypeError(f"json_schema: no JSON form for {tp!r}")


def schema_text(tp: Any) -> str:
    return json.dumps(json_schema(tp), indent=2, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Rewrite the schema files from the classes (``--check``: exit 1 when they differ)."""
    args = sys.argv[1:] if argv is None else argv
    stale = []
    for name, tp in SCHEMAS.items():
        path = SCHEMA_DIR / name
        text = schema_text(tp)
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(name)
        if "--check" not in args:
            path.write_text(text, encoding="utf-8")
    if stale and "--check" in args:
        print(f"stale schemas: {', '.join(stale)} (python -m pytest_searcheval.types)")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
