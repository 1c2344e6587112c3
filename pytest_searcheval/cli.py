"""``searcheval`` command: re-render a saved report, compare two reports, verify a baseline.

    searcheval report --json searcheval-report/report.json [--format terminal|markdown|html]
                      [--out FILE] [--history searcheval-report/history.jsonl]
    searcheval compare A.json B.json [--profile P] [--profile-b Q] [--measures M,...]
                      [--mover-measure M] [--movers N] [--out FILE] [--fail-if-worse ALPHA]
    searcheval baseline-verify [--baseline baselines/baseline.json] [--strict]

Exit status: 0 ok, 1 the baseline failed verification (or is unverified with --strict) or B
is significantly worse than A (compare --fail-if-worse), 2 bad input (the message names the
file and what was expected).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pytest_searcheval.baseline.gate import verify_baseline
from pytest_searcheval.files import write_atomic
from pytest_searcheval.report import SCHEMA_VERSION, markdown, terminal_lines

if TYPE_CHECKING:
    from pytest_searcheval.types import Baseline, Report

GRADES_HELP = (
    "grade scale of a BEIR or TREC collection, e.g. 0,1 or 0-3 (default: the grades the "
    "qrels hold; qrels listing only positives need it)"
)


def _load_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SystemExit(f"searcheval: {path}: cannot read the {what}: {exc.strerror}") from None
    except ValueError as exc:
        raise SystemExit(f"searcheval: {path}: the {what} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SystemExit(f"searcheval: {path}: expected a JSON object ({what})")
    return data


def _load_report(path: Path) -> Report:
    data = _load_json(path, "report")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise SystemExit(
            f"searcheval: {path}: field schema_version: expected {SCHEMA_VERSION}, got {version!r}"
        )
    return cast("Report", data)  # a report of the schema version this release writes


def _report(args: argparse.Namespace) -> int:
    data = _load_report(Path(args.json))
    if args.format == "terminal":
        text = "\n".join(terminal_lines(data)) + "\n"
    elif args.format == "markdown":
        text = markdown(data)
    else:
        from pytest_searcheval.report import history
        from pytest_searcheval.report.html import html

        text = html(data, history.read(Path(args.history)) if args.history else None)
    if args.out:
        write_atomic(Path(args.out), text)
        print(f"searcheval: wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def grade_scale(text: str) -> list[int]:
    """``--grades``: a declared scale (``0,1``, ``0-3``), as the ini key search_eval_grades."""
    from pytest_searcheval.collection.model import parse_grades

    try:
        return parse_grades(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _verify(args: argparse.Namespace) -> int:
    path = Path(args.baseline)
    baseline = cast("Baseline", _load_json(path, "baseline")) if path.exists() else None
    rule = verify_baseline(path, baseline)
    print(f"[{rule.status}] {rule.name}: {rule.detail}")
    if rule.status == "failed" or (args.strict and rule.status != "passed"):
        return 1
    return 0


def _compare(args: argparse.Namespace) -> int:
    from pytest_searcheval.compare import CompareError, compare, lines, worse

    a, b = _load_report(Path(args.a)), _load_report(Path(args.b))
    measures = [m.strip() for m in args.measures.split(",") if m.strip()] if args.measures else None
    try:
        result = compare(
            a,
            b,
            profile_a=args.profile,
            profile_b=args.profile_b,
            measures=measures,
            mover_measure=args.mover_measure,
            movers=args.movers,
            permutations=args.permutations,
        )
    except CompareError as exc:
        raise SystemExit(f"searcheval compare: {exc}") from None
    print("\n".join(lines(result, name_a=args.a, name_b=args.b)))
    if args.out:
        write_atomic(Path(args.out), json.dumps(result.as_dict(), indent=1) + "\n")
        print(f"searcheval: wrote {args.out}")
    if args.fail_if_worse is not None:
        bad = worse(result, args.fail_if_worse)
        if bad:
            names = ", ".join(
                f"{m.measure} {m.mean_diff:+.4f} (p_holm {m.p_holm:.4f})" for m in bad
            )
            print(f"searcheval compare: B is worse than A at alpha {args.fail_if_worse}: {names}")
            return 1
    return 0


def _load_collection(args: argparse.Namespace, reports: Sequence[Report]) -> Any:
    from pytest_searcheval.collection import CollectionError, load, load_trec

    try:
        if args.trec_qrels or args.trec_topics:
            if not (args.trec_qrels and args.trec_topics):
                raise SystemExit("searcheval pool: --trec-qrels and --trec-topics go together")
            return load_trec(
                qrels=args.trec_qrels,
                topics=args.trec_topics,
                corpus=args.trec_corpus,
                grades=args.grades,
            )
        path = args.collection
        if not path and reports:
            named = (reports[0].get("collection") or {}).get("path")
            if not named or named == "None" or not Path(named).is_dir():
                raise SystemExit(
                    f"searcheval pool: {args.reports[0]} names no collection directory "
                    f"(collection.path {named!r}); pass --collection DIR, or --trec-qrels and "
                    "--trec-topics (and --trec-corpus: judges need the documents' text)"
                )
            path = named
        if not path:
            raise SystemExit(
                "searcheval pool: which collection? pass --collection DIR (or a report, whose "
                "collection.path names it)"
            )
        return load(path, grades=args.grades)
    except CollectionError as exc:
        raise SystemExit(str(exc)) from None


def _pool(args: argparse.Namespace) -> int:
    from pytest_searcheval.collection import read_run
    from pytest_searcheval.collection.model import CollectionError
    from pytest_searcheval.pooling import (
        PoolError,
        build_pool,
        rubric_for,
        runs_of_report,
        runs_of_trec,
        write_packs,
        write_recipe,
    )

    if not args.reports and not args.run:
        raise SystemExit("searcheval pool: name at least one report.json or --run FILE")
    reports = [_load_report(Path(r)) for r in args.reports]
    collection = _load_collection(args, reports)
    profiles = [p.strip() for p in args.profiles.split(",") if p.strip()] if args.profiles else None
    judges = [j.strip() for j in args.judges.split(",") if j.strip()]
    out = Path(args.out)
    runs: dict[str, Any] = {}
    try:
        for name, report in zip(args.reports, reports, strict=True):
            hashes = (report.get("collection") or {}).get("hashes") or {}
            checked = (
                ("corpus", "queries")
                if (report.get("collection") or {}).get("documents")
                else ("queries",)
            )
            for part in checked:  # a run without a corpus (TREC qrels + topics) hashed none
                if hashes.get(part) and hashes.get(part) != collection.hashes.get(part):
                    print(
                        f"searcheval pool: note: {name} was run on other {part} than the "
                        f"collection's ({hashes.get(part)} vs {collection.hashes.get(part)})"
                    )
            runs.update(runs_of_report(report, name, profiles))
        for path in args.run or []:
            try:
                runs.update(runs_of_trec(read_run(path), Path(path).name))
            except CollectionError as exc:
                raise SystemExit(str(exc)) from None
        pool = build_pool(collection, runs, args.depth)
        rubric = rubric_for(collection, Path(args.rubric) if args.rubric else None)
        started = [j for j in judges if (out / j / "answers.tsv").exists()]
        if started and not args.force:
            raise SystemExit(
                f"searcheval pool: {out / started[0] / 'answers.tsv'} exists (a judge may have "
                "started grading); choose another --out or pass --force to overwrite"
            )
        queries = len(pool.pairs)
        print(
            f"pool: {pool.size} unjudged pairs over {queries} queries from the top {pool.depth} "
            f"of {len(runs)} runs ({pool.judged} candidates already judged, left out)"
        )
        if not pool.size:
            print("nothing to judge: every candidate is judged already")
            return 0
        for judge in judges:
            packs = write_packs(
                collection,
                pool,
                judge,
                out,
                rubric=rubric,
                pairs_per_pack=args.pairs_per_pack,
                seed=args.seed,
            )
            print(
                f"  {judge}: {len(packs.packs)} packs, {packs.pairs} documents -> "
                f"{out / judge}/ (answers: {packs.answers}); key: {packs.key}"
            )
        recipe = write_recipe(pool, out, [*args.reports, *(args.run or [])], collection.hashes)
        print(f"  recipe: {recipe} (keep keys/ away from the judges)")
    except PoolError as exc:
        raise SystemExit(f"searcheval pool: {exc}") from None
    return 0


def _pool_collect(args: argparse.Namespace) -> int:
    from pytest_searcheval.collection.agree import write_judgments_tsv
    from pytest_searcheval.pooling import PoolError, collect

    answers = [Path(a) for a in args.answers]
    try:
        judgments = collect(Path(args.key), answers, args.grades)
    except PoolError as exc:
        raise SystemExit(f"searcheval pool-collect: {exc}") from None
    import io

    buffer = io.StringIO()
    write_judgments_tsv(judgments, buffer)
    write_atomic(Path(args.out), buffer.getvalue())
    n = sum(len(v) for v in judgments.values())
    print(f"searcheval: wrote {args.out}: {n} grades over {len(judgments)} queries")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="searcheval",
        description="re-render a saved report; compare two reports; verify a baseline",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="render a saved report.json")
    rep.add_argument("--json", required=True, help="report.json written by pytest --search-eval")
    rep.add_argument("--format", choices=("terminal", "markdown", "html"), default="terminal")
    rep.add_argument("--out", help="write to this file (atomically) instead of stdout")
    rep.add_argument("--history", help="history.jsonl to plot as a trend (html format)")
    rep.set_defaults(func=_report)
    cmp = sub.add_parser(
        "compare", help="paired per-query comparison of two saved reports (B against A)"
    )
    cmp.add_argument("a", help="report.json of the reference run (A)")
    cmp.add_argument("b", help="report.json of the run compared with it (B)")
    cmp.add_argument("--profile", help="profile of A (and of B); default: B's gated profile")
    cmp.add_argument("--profile-b", help="profile of B when it differs from A's")
    cmp.add_argument("--measures", help="comma-separated measures (default: every shared one)")
    cmp.add_argument(
        "--mover-measure", help="measure of the biggest movers (default: B's query_measure)"
    )
    cmp.add_argument("--movers", type=_positive, default=10, help="movers shown each way (10)")
    cmp.add_argument("--permutations", type=_positive, help="default: B's report setting")
    cmp.add_argument("--out", help="also write the comparison as JSON to this file")
    cmp.add_argument(
        "--fail-if-worse",
        type=float,
        metavar="ALPHA",
        help="exit 1 when B is below A on a measure with Holm-corrected p <= ALPHA",
    )
    cmp.set_defaults(func=_compare)
    pool = sub.add_parser(
        "pool", help="blind judging packs for the unjudged top results of the current runs"
    )
    pool.add_argument("reports", nargs="*", help="report.json files whose profiles are runs")
    pool.add_argument("--run", action="append", help="a TREC run file (repeatable)")
    pool.add_argument("--collection", help="collection directory (default: the first report's)")
    pool.add_argument("--trec-qrels", help="TREC qrels file (instead of --collection)")
    pool.add_argument("--trec-topics", help="TREC topics file (with --trec-qrels)")
    pool.add_argument("--trec-corpus", help="TREC corpus (.jsonl or SGML <DOC> file)")
    pool.add_argument("--depth", type=_positive, default=10, help="top k of each run (10)")
    pool.add_argument("--profiles", help="comma-separated profiles of the reports (default: all)")
    pool.add_argument("--judges", default="a,b", help="comma-separated judge names (a,b)")
    pool.add_argument("--out", default="judging", help="output directory (judging/)")
    pool.add_argument("--pairs-per-pack", type=_positive, default=250)
    pool.add_argument("--rubric", help="rubric file (default: qrels/rubric.md or built-in)")
    pool.add_argument("--grades", type=grade_scale, help=GRADES_HELP)
    pool.add_argument("--seed", default="", help="extra seed of the shuffles")
    pool.add_argument("--force", action="store_true", help="overwrite started answer files")
    pool.set_defaults(func=_pool)
    col = sub.add_parser("pool-collect", help="a judge's answers -> judgments TSV")
    col.add_argument("--key", required=True, help="judging/keys/<judge>.json")
    col.add_argument("--answers", action="append", required=True, help="answers file(s)")
    col.add_argument("--out", required=True, help="judgments TSV to write (e.g. qrels/raw/a.tsv)")
    col.add_argument(
        "--grades", type=grade_scale, help="grade scale of the answers (default: the key's)"
    )
    col.set_defaults(func=_pool_collect)
    from pytest_searcheval.collection.cli import AGREE_HELP, agree_arguments

    agree_arguments(sub.add_parser("agree", help=AGREE_HELP))
    ver = sub.add_parser("baseline-verify", help="compare the baseline with its git tag's copy")
    ver.add_argument("--baseline", default="baselines/baseline.json")
    ver.add_argument("--strict", action="store_true", help="unverified (no git/tag) fails too")
    ver.set_defaults(func=_verify)
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 2
        raise
    return result


if __name__ == "__main__":
    raise SystemExit(main())
