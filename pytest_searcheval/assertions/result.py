"""What a hand-written search test holds: a ranked result, its ranks, its top k, its measures.

Everything here is plain data with no pytest in it. The plugin fills in the context a test
cannot see by itself (document titles, the collection's grades for a golden query, the
baseline's ranking of it), so that a failed ``assert r.rank("d1") == 1`` can show the ranking
that was returned. :class:`Rank` and :class:`Top` remember the result they came from for the
same reason: pytest hands only the two compared values to ``pytest_assertrepr_compare``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Results shown in a failure message; the rest is counted.
SHOWN = 10


@dataclass(frozen=True)
class Context:
    """What the collection and the baseline know about a ranking's query."""

    #: doc id -> title, for every document of the corpus that may be shown
    titles: Mapping[str, str] = field(default_factory=dict)
    #: the golden query this ranking answers, when it is one
    qid: str | None = None
    #: doc id -> grade of the golden query's judgments
    grades: Mapping[str, int] = field(default_factory=dict)
    #: the baseline's ranking of the golden query (gated profile), when it holds one
    baseline_ids: Sequence[str] | None = None
    baseline_tag: str | None = None


@dataclass(frozen=True)
class SearchResult:
    """One answer of the configured target to a hand-written search."""

    query: str
    profile: str
    limit: int
    ids: tuple[str, ...]
    scores: tuple[float, ...]
    #: the filters the test asked for
    filters: Mapping[str, Any] = field(default_factory=dict)
    #: the filters the target says it applied (its own extraction included)
    applied_filters: Mapping[str, Any] = field(default_factory=dict)
    extracted_filters: Mapping[str, Any] = field(default_factory=dict)
    #: why a returned document breaks an applied hard filter (the collection's domain oracle)
    violations: tuple[str, ...] = ()
    latency_ms: float | None = None
    context: Context = field(default_factory=Context)

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.scores):
            raise ValueError(f"SearchResult: {len(self.ids)} ids but {len(self.scores)} scores")

    # --- what a test asks -------------------------------------------------------------------

    def rank(self, doc_id: str) -> Rank | None:
        """1-based rank of ``doc_id``, ``None`` when it was not returned."""
        for position, found in enumerate(self.ids, start=1):
            if found == doc_id:
                return Rank(position, self, doc_id)
        return None

    def top(self, k: int) -> Top:
        """The ids of the first ``k`` results, best first."""
        if k < 1:
            raise ValueError(f"top(k): k must be a positive integer, got {k!r}")
        return Top(self.ids[:k], self, k)

    def score(self, doc_id: str) -> float | None:
        for found, value in zip(self.ids, self.scores, strict=True):
            if found == doc_id:
                return value
        return None

    @property
    def qid(self) -> str | None:
        return self.context.qid

    def grade(self, doc_id: str) -> int | None:
        return self.context.grades.get(doc_id)

    def title(self, doc_id: str) -> str | None:
        return self.context.titles.get(doc_id)

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self.ids

    def __repr__(self) -> str:
        # One line: pytest shows it in "where ... = <repr>.rank('x')" and keeps it short.
        shown = ", ".join(self.ids[:5]) + (", ..." if len(self.ids) > 5 else "")
        return (
            f"SearchResult({self.query!r}, profile={self.profile!r}, "
            f"{len(self.ids)} results: [{shown}])"
        )

    # --- what a failure shows -----------------------------------------------------------------

    def explain(self, mark: Sequence[str] = ()) -> list[str]:
        """The ranking with titles and grades, the filters, the baseline's ranking."""
        head = f"ranking of {self.query!r} (profile {self.profile}"
        if self.qid is not None:
            head += f", golden query {self.qid}"
        head += f", {len(self.ids)} returned"
        head += f", top {SHOWN} shown):" if len(self.ids) > SHOWN else "):"
        lines = [head, *ranking_lines(self.ids[:SHOWN], self.context, mark)]
        if self.filters:
            lines.append(f"requested filters: {_mapping(self.filters)}")
        if self.applied_filters:
            lines.append(f"applied filters: {_mapping(self.applied_filters)}")
        lines += [f"filter violation: {v}" for v in self.violations]
        base = self.context.baseline_ids
        if base is not None:
            tag = self.context.baseline_tag or "untagged"
            lines.append(f"baseline ranking ({tag}):")
            lines += ranking_lines(list(base)[:SHOWN], self.context, mark)
        elif self.qid is not None:
            lines.append("baseline: no ranking of this query")
        return lines


class Rank(int):
    """A rank (an ``int``) that remembers the result and the document it was read from."""

    result: SearchResult
    doc_id: str

    def __new__(cls, value: int, result: SearchResult, doc_id: str) -> Rank:
        self = super().__new__(cls, value)
        self.result = result
        self.doc_id = doc_id
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (int, (int(self),))


class Top(tuple[str, ...]):
    """The top k ids (a ``tuple``) that remember the result they were read from."""

    result: SearchResult
    k: int

    def __new__(cls, ids: Sequence[str], result: SearchResult, k: int) -> Top:
        self = super().__new__(cls, ids)
        self.result = result
        self.k = k
        return self

    def __eq__(self, other: object) -> bool:
        # ``r.top(3) == ["a", "b", "c"]`` is how a test writes it: a list compares too.
        if isinstance(other, list | tuple):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (tuple(self),))


def ranking_lines(ids: Sequence[str], context: Context, mark: Sequence[str] = ()) -> list[str]:
    """``rank  id  grade  title`` lines; ``mark``ed ids get an arrow."""
    if not ids:
        return ["    (no results)"]
    width = max(len(d) for d in ids)
    out = []
    for position, doc_id in enumerate(ids, start=1):
        arrow = "->" if doc_id in mark else "  "
        out.append(
            f"{arrow}{position:>3}  {doc_id:<{width}}  {grade_text(context, doc_id):<9}  "
            f"{context.titles.get(doc_id, '(not in corpus)')}".rstrip()
        )
    return out


def grade_text(context: Context, doc_id: str) -> str:
    if context.qid is None:
        return ""
    grade = context.grades.get(doc_id)
    return "unjudged" if grade is None else f"grade {grade}"


def _mapping(value: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={value[k]!r}" for k in sorted(value))


class MeasureUndefined(KeyError):
    """A measure that has no value for this query (and why)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Measures(Mapping[str, float]):
    """Every measure of one ranking against a golden query's judgments.

    A mapping ``{"nDCG@10": 0.81, ...}``; :meth:`explain` is the text to pass as an assertion's
    message. A measure the run computes but that has no value for this query (no judged
    document at the relevance level) raises :class:`MeasureUndefined` saying so.
    """

    measured: Mapping[str, float]
    qid: str
    result: SearchResult
    #: the run's measures, also those without a value here
    names: tuple[str, ...]
    conventions: Mapping[str, Any] = field(default_factory=dict)
    #: why the measures have no value, when they have none
    undefined: str | None = None
    baseline: Mapping[str, float] = field(default_factory=dict)

    def __getitem__(self, name: str) -> float:
        if name in self.measured:
            return self.measured[name]
        # The run names a measure cut at its limit so (RR@20 for RR): RR finds it.
        depth = self.conventions.get("depth")
        if "@" not in name and depth is not None and f"{name}@{depth}" in self.names:
            return self[f"{name}@{depth}"]
        if name in self.names:
            raise MeasureUndefined(f"{name} of query {self.qid}: {self.undefined or 'undefined'}")
        raise MeasureUndefined(
            f"{name}: not a measure of this run; measured: {', '.join(self.names)} "
            "(set --search-eval-measures)"
        )

    def __iter__(self) -> Iterator[str]:
        return iter(self.measured)

    def __len__(self) -> int:
        return len(self.measured)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k!r}: {v:.4f}" for k, v in self.measured.items())
        return f"Measures({self.qid}, {{{shown}}})"

    def explain(self) -> str:
        """Query, measures (with the baseline's), ranking with grades, relevant documents."""
        conv = self.conventions
        level = conv.get("relevance_level", 1)
        lines = [
            f"query {self.qid} {self.result.query!r} (profile {self.result.profile}, "
            f"relevance level {level}, gain {conv.get('gain')}"
            + (", trec-compat" if conv.get("trec_compat") else "")
            + ")"
        ]
        if self.measured:
            lines.append(
                "measures: "
                + ", ".join(
                    f"{k} {v:.4f}"
                    + (f" (baseline {self.baseline[k]:.4f})" if k in self.baseline else "")
                    for k, v in self.measured.items()
                )
            )
        else:
            lines.append(f"measures: none ({self.undefined or 'undefined'})")
        lines += self.result.explain()
        grades = self.result.context.grades
        relevant = sorted((d for d, g in grades.items() if g >= level), key=lambda d: -grades[d])
        missing = [d for d in relevant if d not in self.result.ids]
        lines.append(
            f"relevant (grade >= {level}): "
            + (", ".join(f"{d} ({grades[d]})" for d in relevant[:SHOWN]) or "none")
            + (f"; not returned: {', '.join(missing[:SHOWN])}" if missing else "")
        )
        return "\n".join(lines)
