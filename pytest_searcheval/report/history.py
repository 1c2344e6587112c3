"""The run history: one JSON line per full run, appended at session end, plotted as a trend.

A line holds what a trend needs and nothing that identifies a person: when, which commit (when
the project is a git checkout), the run's conventions, the collection's content hashes, the
aggregate mean of every measure per available profile, no-result accuracy, and the gate's
verdict. Partial runs (a ``-k`` selection, ``--lf``) are never appended: their means describe a
subset and would break the trend. Two lines compare only when their conventions and hashes are
equal; the plot marks every run where they changed.

The file is appended with one ``write`` of one line (O_APPEND), so a crash never leaves half a
record followed by a good one; a torn last line is skipped on reading with a note naming its
line, like any other malformed line.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_searcheval.types import Report

HISTORY_VERSION = 1
#: The run settings that must be equal for two history lines to compare.
CONVENTIONS: tuple[str, ...] = (
    "split",
    "gain",
    "relevance_level",
    "limit",
    "measures",
    "trec_compat",
    "gated_profile",
)


def git_commit(cwd: Path) -> dict[str, Any] | None:
    """``{"commit": sha, "dirty": bool}`` of the checkout at ``cwd``; None outside git."""
    if shutil.which("git") is None:
        return None
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


def entry(report: Report, *, git: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The history line of a finished report (its gate included)."""
    run = report["run"]
    profiles: dict[str, Any] = {}
    for name, e in report["profiles"].items():
        if not e.get("available"):
            continue
        no_result = e.get("no_result")
        profiles[name] = {
            "measures": {m: cell.get("mean") for m, cell in (e.get("measures") or {}).items()},
            "evaluated": e.get("evaluated"),
            "no_result_accuracy": no_result.get("accuracy") if no_result else None,
        }
    gate = report.get("gate")
    return {
        "history_version": HISTORY_VERSION,
        "created": report.get("created"),
        "tool_version": (report.get("tool") or {}).get("version"),
        "git": dict(git) if git else None,
        "run": {key: run.get(key) for key in CONVENTIONS} | dict(run.get("conventions") or {}),
        "queries": run.get("queries_run"),
        "collection": {
            "name": (report.get("collection") or {}).get("name"),
            "hashes": dict((report.get("collection") or {}).get("hashes") or {}),
        },
        "profiles": profiles,
        "gate": gate.get("passed") if gate else None,
    }


def append(path: Path, line: Mapping[str, Any]) -> None:
    """Append one line; a previous torn write (no final newline) is closed off first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(line, allow_nan=False, sort_keys=True, separators=(",", ":")) + "\n"
    with path.open("ab") as handle:
        if handle.tell() > 0:
            with path.open("rb") as tail:
                tail.seek(-1, 2)
                if tail.read(1) != b"\n":
                    text = "\n" + text
        handle.write(text.encode("utf-8"))


@dataclass
class History:
    entries: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def read(path: Path) -> History:
    """Every well-formed line of the file; each bad line becomes a note ``file:line: why``."""
    out = History()
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return out
    except (OSError, UnicodeDecodeError) as exc:
        out.problems.append(f"{path}: cannot read the history: {exc}")
        return out
    for number, text in enumerate(raw.splitlines(), 1):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            out.problems.append(f"{path}:{number}: not a JSON line ({exc.msg}); skipped")
            continue
        if not isinstance(value, dict) or value.get("history_version") != HISTORY_VERSION:
            out.problems.append(
                f"{path}:{number}: expected an object with history_version {HISTORY_VERSION}; "
                "skipped"
            )
            continue
        if not isinstance(value.get("profiles"), dict) or not isinstance(value.get("run"), dict):
            out.problems.append(
                f"{path}:{number}: fields run and profiles must be objects; skipped"
            )
            continue
        out.entries.append(value)
    return out


def _key(line: Mapping[str, Any]) -> str:
    return json.dumps(
        [line.get("run"), (line.get("collection") or {}).get("hashes")], sort_keys=True
    )


def changes(entries: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indexes of the runs whose conventions or collection hashes differ from the run before."""
    return [i for i in range(1, len(entries)) if _key(entries[i]) != _key(entries[i - 1])]


def series(
    entries: Sequence[Mapping[str, Any]], profile: str, measure: str
) -> list[tuple[int, float]]:
    """``(run index, mean)`` of one profile's measure, over the runs that have it."""
    out: list[tuple[int, float]] = []
    for i, line in enumerate(entries):
        value = ((line["profiles"].get(profile) or {}).get("measures") or {}).get(measure)
        if isinstance(value, int | float) and math.isfinite(value):
            out.append((i, float(value)))
    return out
