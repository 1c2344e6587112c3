"""Judge agreement and merging of two judgment sets over the same pairs.

Merge rule: equal grades are kept; grades one apart take the LOWER grade (a pair is only as
relevant as its stricter judge says); grades two or more apart are "pending" until an
adjudication file resolves them. On a two-grade scale (``--grades 0,1``) one apart is the whole
scale, relevant against not relevant: every disagreement is pending there.

Adjudication file (TSV, UTF-8, header required)::

    query_id<TAB>doc_id<TAB>grade_a<TAB>grade_b<TAB>grade<TAB>note

``grade_a``/``grade_b`` repeat the two judges' grades (a stale file whose grades no longer match
is refused); ``grade`` is the adjudicated grade, empty while unresolved; ``note`` is free text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pytest_searcheval.collection.io import Problems, iter_lines

__all__ = [
    "ADJUDICATION_HEADER",
    "Adjudication",
    "Disagreement",
    "MergeResult",
    "merge_judgments",
    "read_adjudication",
    "write_adjudication",
    "write_judgments_tsv",
]

ADJUDICATION_HEADER = ("query_id", "doc_id", "grade_a", "grade_b", "grade", "note")


@dataclass(frozen=True, slots=True)
class Disagreement:
    query_id: str
    doc_id: str
    grade_a: int
    grade_b: int


@dataclass(frozen=True, slots=True)
class Adjudication:
    grade_a: int
    grade_b: int
    grade: int | None
    note: str
    line: int


@dataclass
class MergeResult:
    """``merged`` holds every pair that is settled (agreed, one apart, or adjudicated);
    ``pending`` the pairs two or more apart that no adjudication resolves yet."""

    merged: dict[str, dict[str, int]]
    pending: list[Disagreement]
    severe: list[Disagreement]
    one_apart: int
    adjudicated: int
    agreement: Any  # stats.Agreement
    pairs: list[tuple[str, str]] = field(default_factory=list)


def merge_judgments(
    a: Mapping[str, Mapping[str, int]],
    b: Mapping[str, Mapping[str, int]],
    adjudication: Mapping[tuple[str, str], Adjudication] | None = None,
    *,
    grades: Sequence[int] | None = None,
) -> MergeResult:
    """Compare and merge two judgment sets that cover exactly the same pairs.

    Agreement statistics come from ``stats.agreement`` over the pairs in sorted order, with
    ``grades`` (the declared scale) as the kappa labels.
    Raises ValueError when the pair sets differ or an adjudication is stale or names a pair
    that is not a two-apart disagreement.
    """
    from pytest_searcheval.stats import agreement

    pa = {(q, d) for q, docs in a.items() for d in docs}
    pb = {(q, d) for q, docs in b.items() for d in docs}
    if pa != pb:
        only_a, only_b = sorted(pa - pb), sorted(pb - pa)
        raise ValueError(
            "the two judgment sets do not cover the same pairs: "
            f"{len(only_a)} only in A (e.g. {only_a[:3]}), {len(only_b)} only in B "
            f"(e.g. {only_b[:3]})"
        )
    pairs = sorted(pa)
    ga = [a[q][d] for q, d in pairs]
    gb = [b[q][d] for q, d in pairs]
    stats = agreement(ga, gb, labels=grades)
    adjudication = adjudication or {}
    merged: dict[str, dict[str, int]] = {}
    pending: list[Disagreement] = []
    severe: list[Disagreement] = []
    one_apart = adjudicated = 0
    # Grades closer than this are merged to the lower one; the rest await adjudication. On a
    # two-grade scale one apart is the largest disagreement there is: nothing is merged.
    merged_within = 0 if grades is not None and len(set(grades)) == 2 else 1
    for (q, d), x, y in zip(pairs, ga, gb, strict=True):
        if abs(x - y) <= merged_within:
            one_apart += x != y
            merged.setdefault(q, {})[d] = min(x, y)
            continue
        dis = Disagreement(q, d, x, y)
        severe.append(dis)
        adj = adjudication.get((q, d))
        if adj is None or adj.grade is None:
            pending.append(dis)
            continue
        if (adj.grade_a, adj.grade_b) != (x, y):
            raise ValueError(
                f"adjudication line {adj.line} for {q} {d} was made for grades "
                f"{adj.grade_a}/{adj.grade_b} but the judges now say {x}/{y}: re-adjudicate"
            )
        merged.setdefault(q, {})[d] = adj.grade
        adjudicated += 1
    needed = {(s.query_id, s.doc_id) for s in severe}
    extra = sorted(k for k in adjudication if k not in needed)
    if extra:
        raise ValueError(
            f"the adjudication names {len(extra)} pairs that are not disagreements awaiting "
            f"adjudication ({'any' if merged_within == 0 else 'two or more grades'} apart; "
            f"e.g. {extra[:3]})"
        )
    return MergeResult(merged, pending, severe, one_apart, adjudicated, stats, pairs)


def read_adjudication(
    path: Path, problems: Problems, name: str, grades: Sequence[int]
) -> dict[tuple[str, str], Adjudication]:
    out: dict[tuple[str, str], Adjudication] = {}
    header = False
    for line, text in iter_lines(path, problems, name):
        if not text.strip():
            continue
        parts = text.split("\t")
        if not header:
            header = True
            if tuple(p.strip() for p in parts) != ADJUDICATION_HEADER:
                problems.add(
                    name, line, None, "expected the header " + "<TAB>".join(ADJUDICATION_HEADER)
                )
            continue
        if len(parts) not in (5, 6):
            problems.add(
                name, line, None, f"expected 5 or 6 tab-separated fields, got {len(parts)}"
            )
            continue
        q, d = parts[0].strip(), parts[1].strip()
        try:
            ga, gb = int(parts[2]), int(parts[3])
        except ValueError:
            problems.add(name, line, "grade_a", "expected integer grades in grade_a and grade_b")
            continue
        g: int | None = None
        if parts[4].strip():
            try:
                g = int(parts[4])
            except ValueError:
                problems.add(name, line, "grade", f"expected an integer or empty, got {parts[4]!r}")
                continue
            if g not in grades:
                problems.add(name, line, "grade", f"grade {g} outside the scale {list(grades)}")
                continue
        if (q, d) in out:
            problems.add(
                name, line, None, f"duplicate pair {q} {d} (first on line {out[q, d].line})"
            )
            continue
        out[q, d] = Adjudication(ga, gb, g, parts[5].strip() if len(parts) == 6 else "", line)
    return out


def write_adjudication(
    pending: Sequence[Disagreement],
    out: IO[str],
    existing: Mapping[tuple[str, str], Adjudication] | None = None,
) -> None:
    """Write the adjudication file for ``pending`` (keeping notes already written)."""
    out.write("\t".join(ADJUDICATION_HEADER) + "\n")
    for p in pending:
        note = ""
        if existing and (p.query_id, p.doc_id) in existing:
            note = existing[p.query_id, p.doc_id].note
        out.write(f"{p.query_id}\t{p.doc_id}\t{p.grade_a}\t{p.grade_b}\t\t{note}\n")


def write_judgments_tsv(judgments: Mapping[str, Mapping[str, int]], out: IO[str]) -> None:
    """The native judgments TSV, rows sorted by query id then document id."""
    out.write("query_id\tdoc_id\tgrade\n")
    for q in sorted(judgments):
        for d in sorted(judgments[q]):
            out.write(f"{q}\t{d}\t{judgments[q][d]}\n")
