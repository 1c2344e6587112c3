"""``searcheval`` command: re-render a saved report, verify a baseline against its git tag.

    searcheval report --json searcheval-report/report.json [--format terminal|markdown|html]
                      [--out FILE]
    searcheval baseline-verify [--baseline baselines/baseline.json] [--strict]

Exit status: 0 ok, 1 the baseline failed verification (or is unverified with --strict),
2 bad input (the message names the file and what was expected).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_searcheval.baseline.gate import verify_baseline
from pytest_searcheval.report import SCHEMA_VERSION, markdown, terminal_lines, write_atomic


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


def _report(args: argparse.Namespace) -> int:
    path = Path(args.json)
    data = _load_json(path, "report")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        print(
            f"searcheval: {path}: field schema_version: expected {SCHEMA_VERSION}, got {version!r}",
            file=sys.stderr,
        )
        return 2
    if args.format == "terminal":
        text = "\n".join(terminal_lines(data)) + "\n"
    elif args.format == "markdown":
        text = markdown(data)
    else:
        from pytest_searcheval.report.html import html

        text = html(data)
    if args.out:
        write_atomic(Path(args.out), text)
        print(f"searcheval: wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def _verify(args: argparse.Namespace) -> int:
    path = Path(args.baseline)
    baseline = _load_json(path, "baseline") if path.exists() else None
    rule = verify_baseline(path, baseline)
    print(f"[{rule.status}] {rule.name}: {rule.detail}")
    if rule.status == "failed" or (args.strict and rule.status != "passed"):
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="searcheval",
        description="re-render a saved report; verify a baseline against its git tag",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="render a saved report.json")
    rep.add_argument("--json", required=True, help="report.json written by pytest --search-eval")
    rep.add_argument("--format", choices=("terminal", "markdown", "html"), default="terminal")
    rep.add_argument("--out", help="write to this file (atomically) instead of stdout")
    rep.set_defaults(func=_report)
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
