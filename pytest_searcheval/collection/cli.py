"""Command line: ``python -m pytest_searcheval.collection {check,agree,export,overrides} ...``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pytest_searcheval.collection.agree import (
    merge_judgments,
    read_adjudication,
    write_adjudication,
    write_judgments_tsv,
)
from pytest_searcheval.collection.io import (
    Problems,
)
from pytest_searcheval.collection.load import load
from pytest_searcheval.collection.model import (
    CollectionError,
    parse_grades,
)
from pytest_searcheval.collection.native import (
    read_judgments_tsv,
)
from pytest_searcheval.collection.trec import (
    write_trec_qrels,
)
from pytest_searcheval.files import atomic_writer


def _agree(args: argparse.Namespace) -> int:
    problems = Problems()
    grades = parse_grades(args.grades)
    a, _ = read_judgments_tsv(Path(args.a), problems, args.a, grades)
    b, _ = read_judgments_tsv(Path(args.b), problems, args.b, grades)
    adjudication = {}
    adj_path = Path(args.adjudicate) if args.adjudicate else None
    if adj_path is not None and adj_path.exists():
        adjudication = read_adjudication(adj_path, problems, args.adjudicate, grades)
    problems.raise_if_any()
    result = merge_judgments(a, b, adjudication, grades=grades)
    s = result.agreement
    print(f"pairs:            {s.n}")
    print(f"exact agreement:  {s.exact:.4f}")
    print(f"within one grade: {s.within_one:.4f}")
    print(f"quadratic kappa:  {s.qwk:.4f}")
    print(f"severe (>=2 apart): {s.severe} ({s.severe_rate:.4f})")
    print(f"one apart, merged to the lower grade: {result.one_apart}")
    print(f"adjudicated: {result.adjudicated}; pending adjudication: {len(result.pending)}")
    for p in result.pending[:20]:
        print(f"  pending {p.query_id} {p.doc_id}: A={p.grade_a} B={p.grade_b}")
    if adj_path is not None and result.pending:
        with atomic_writer(adj_path) as fh:
            write_adjudication(result.pending, fh, adjudication)
        print(f"wrote {adj_path}: fill the grade column of {len(result.pending)} rows and rerun")
    if result.pending:
        if args.out:
            print(f"not writing {args.out}: {len(result.pending)} pairs await adjudication")
        return 3
    if args.out:
        with atomic_writer(Path(args.out)) as fh:
            write_judgments_tsv(result.merged, fh)
        print(f"wrote {args.out}")
    return 0


AGREE_HELP = "judge agreement of two judgment TSVs and their merge"


def agree_arguments(p: argparse.ArgumentParser) -> None:
    """The ``agree`` command's arguments (also ``searcheval agree``)."""
    p.add_argument("a", help="judge A's judgments TSV (query_id, doc_id, grade)")
    p.add_argument("b", help="judge B's judgments TSV, the same pairs")
    p.add_argument("--out", help="write the merged judgments TSV (only when nothing is pending)")
    p.add_argument("--adjudicate", help="adjudication TSV: read resolutions, write pending rows")
    p.add_argument("--grades", default="0-3", help="grade scale, e.g. 0,1 or 0-3 (default 0-3)")
    p.set_defaults(func=agree)


def agree(args: argparse.Namespace) -> int:
    """``agree``: exit 0 merged (and written), 3 pairs await adjudication, 2 bad input."""
    return _run(_agree, args)


def _run(func: Any, args: argparse.Namespace) -> int:
    """A command's exit status; bad input is reported on stderr with exit status 2."""
    try:
        return int(func(args))
    except CollectionError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _check(args: argparse.Namespace) -> int:
    from pytest_searcheval.collection.overrides import apply_constraint_overrides
    from pytest_searcheval.domain import domain_of

    c = load(args.path)
    print(
        f"{c.manifest.get('name', args.path)} ({c.manifest.get('format')}): "
        f"{len(c.documents)} documents, {len(c.queries)} queries, "
        f"{sum(len(v) for v in c.judgments.values())} judgments"
    )
    for split in c.manifest.get("splits", []):
        print(f"  split {split}: {len(c.queries_in(split))} queries")
    for key, value in c.hashes.items():
        print(f"  {key}: {value}")
    domain = domain_of(c)
    for line in domain.collection_checks(c, Path(args.path)) if domain is not None else ():
        print(f"  {line}")
    _, overrides = apply_constraint_overrides(c)
    print(f"  constraint overrides pending: {len(overrides)}")
    for o in overrides[:20]:
        print(f"    {o.query_id} {o.doc_id} grade {o.original_grade} -> 0: {o.reasons[0]}")
    return 1 if overrides else 0


def _export(args: argparse.Namespace) -> int:
    c = load(args.path)
    qrels = c.qrels(args.split)
    with atomic_writer(Path(args.out)) as fh:
        write_trec_qrels(qrels, fh)
    print(f"wrote {args.out}: {sum(len(v) for v in qrels.values())} judgments")
    return 0


def _overrides(args: argparse.Namespace) -> int:
    from pytest_searcheval.collection.overrides import apply_constraint_overrides

    c = load(args.path)
    new, overrides = apply_constraint_overrides(c)
    print(json.dumps([asdict(o) for o in overrides], indent=1))
    if args.write and overrides:
        assert c.root is not None
        with atomic_writer(Path(c.root) / "qrels" / "judgments.tsv") as fh:
            write_judgments_tsv(new, fh)
        print(f"rewrote qrels/judgments.tsv: {len(overrides)} grades forced to 0", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_searcheval.collection")
    sub = parser.add_subparsers(dest="command", required=True)
    agree_arguments(sub.add_parser("agree", help=AGREE_HELP))
    p = sub.add_parser("check", help="validate a collection directory and print its hashes")
    p.add_argument("path")
    p.set_defaults(func=_check)
    p = sub.add_parser("export", help="export judgments as TREC qrels")
    p.add_argument("path")
    p.add_argument("--out", required=True)
    p.add_argument("--split", default="all")
    p.set_defaults(func=_export)
    p = sub.add_parser("overrides", help="list judged pairs that break their query's constraints")
    p.add_argument("path")
    p.add_argument(
        "--write", action="store_true", help="rewrite qrels/judgments.tsv with them at 0"
    )
    p.set_defaults(func=_overrides)
    args = parser.parse_args(argv)
    return _run(args.func, args)
