"""Ranking snapshots: a ranking recorded in a file beside the test, compared on later runs.

One YAML file per test, ``<test dir>/__rankings__/<module>/<test name>.yaml``, one entry per
named ranking::

    # Ranking snapshots of test_checkout (pytest-searcheval).
    # Re-record: pytest --search-eval --search-eval-snapshot-update
    "usdc invoice api":
      query: "usdc invoice api"
      profile: "hybrid"
      limit: 20
      ranking:
        - "d7"  # Invoice API for USDC
        - "d2"  # Stablecoin checkout

The text is written by this module (sorted names, every string JSON-quoted, which YAML reads
as it is, titles as comments), so that one change to a ranking is one change of lines in a pull
request and two runs that rank alike write the same bytes.

A later run is compared with a :class:`Tolerance`: by default the rankings must be equal; with
``min_rbo`` their rank-biased overlap must reach it, with ``top_k`` the first k must hold the
same documents in any order, with ``max_rank_shift`` no recorded document may move further.

A snapshot never recorded is recorded, except in a strict run (:func:`strict_reason`: CI, or
``--search-eval-snapshot-strict``), where it fails. At the session's end :func:`unused` finds
the entries no test checks any more, judging only what the run can know (:class:`Usage`), and
:func:`prune` removes them under ``--search-eval-snapshot-update``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_searcheval.assertions.result import Context, SearchResult, grade_text

SNAPSHOT_DIR = "__rankings__"
UPDATE_OPTION = "--search-eval-snapshot-update"
STRICT_OPTION = "--search-eval-snapshot-strict"
STRICT_INI = "search_eval_snapshot_strict"
#: The variables that make a run a CI run, read as pytest reads them (set and non-empty).
CI_VARIABLES = ("CI", "BUILD_NUMBER")
#: Rows shown in a diff beyond the compared depth; the rest is counted.
DIFF_ROWS = 20


class SnapshotError(ValueError):
    """A snapshot file that cannot be read: the message names the file and the field."""


@dataclass(frozen=True)
class Entry:
    """One recorded ranking."""

    ids: tuple[str, ...]
    query: str | None = None
    profile: str | None = None
    limit: int | None = None


@dataclass(frozen=True)
class Tolerance:
    """How far a ranking may move from its snapshot. No bound set: it must be equal.

    ``depth`` cuts both rankings before any comparison (the default compares all of them).
    """

    min_rbo: float | None = None
    rbo_p: float = 0.9
    top_k: int | None = None
    max_rank_shift: int | None = None
    depth: int | None = None

    def __post_init__(self) -> None:
        if self.min_rbo is not None and not 0.0 <= self.min_rbo <= 1.0:
            raise ValueError(f"min_rbo: expected a number in [0, 1], got {self.min_rbo!r}")
        if not 0.0 < self.rbo_p < 1.0:
            raise ValueError(f"rbo_p: expected a number in (0, 1), got {self.rbo_p!r}")
        for name in ("top_k", "depth"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or int(value) != value or value < 1):
                raise ValueError(f"{name}: expected a positive integer, got {value!r}")
        shift = self.max_rank_shift
        if shift is not None and (isinstance(shift, bool) or int(shift) != shift or shift < 0):
            raise ValueError(f"max_rank_shift: expected an integer >= 0, got {shift!r}")

    @property
    def exact(self) -> bool:
        return self.min_rbo is None and self.top_k is None and self.max_rank_shift is None

    def describe(self) -> str:
        if self.exact:
            parts = ["equal rankings"]
        else:
            parts = []
            if self.min_rbo is not None:
                parts.append(f"rank-biased overlap >= {self.min_rbo:g} (p {self.rbo_p:g})")
            if self.top_k is not None:
                parts.append(f"same top-{self.top_k} set")
            if self.max_rank_shift is not None:
                parts.append(f"rank shift <= {self.max_rank_shift}")
        if self.depth is not None:
            parts.append(f"first {self.depth} compared")
        return ", ".join(parts)


def strict_reason(setting: bool | None, environ: Mapping[str, str]) -> str | None:
    """Why a missing snapshot fails in this run, or ``None`` when it is recorded.

    ``setting`` is ``--search-eval-snapshot-strict`` / ini ``search_eval_snapshot_strict``:
    true or false decides; unset, a CI run (``CI`` or ``BUILD_NUMBER`` non-empty) is strict."""
    if setting is not None:
        return f"{STRICT_OPTION} (or ini {STRICT_INI}) is on" if setting else None
    for variable in CI_VARIABLES:
        if environ.get(variable):
            return (
                f"the {variable} environment variable is set: a CI run records no snapshot "
                f"(ini {STRICT_INI} = false records there too)"
            )
    return None


def missing(name: str, path: Path | str, reason: str, nodeid: str) -> str:
    """The failure of a snapshot that was never recorded, in a strict run."""
    import shlex

    return (
        f"no ranking snapshot {name!r} in {path}, and a missing snapshot fails this run "
        f"({reason}).\n"
        f"Record it where the ranking is known to be right, review the file and commit it:\n"
        f"  pytest --search-eval {UPDATE_OPTION} {shlex.quote(nodeid)}"
    )


def snapshot_path(test_file: Path, test_name: str) -> Path:
    """Where a test's rankings are kept: beside its module, one file per test."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", test_name).strip("_") or "test"
    return test_file.parent / SNAPSHOT_DIR / test_file.stem / f"{safe}.yaml"


# --- the file -----------------------------------------------------------------------------------


def read(path: Path) -> dict[str, Entry]:
    """The entries of a snapshot file (none when it does not exist)."""
    import yaml

    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SnapshotError(f"{path}: not a readable YAML snapshot: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SnapshotError(f"{path}: expected a mapping of names to rankings at the top level")
    out: dict[str, Entry] = {}
    for name, raw in data.items():
        where = f"{path}: snapshot {str(name)!r}"
        if not isinstance(raw, dict):
            raise SnapshotError(f"{where}: expected a mapping with a 'ranking' list")
        ranking = raw.get("ranking")
        if not isinstance(ranking, list) or not all(isinstance(d, str) for d in ranking):
            raise SnapshotError(f"{where}, field 'ranking': expected a list of document ids")
        if len(set(ranking)) != len(ranking):
            raise SnapshotError(f"{where}, field 'ranking': a document id appears twice")
        limit = raw.get("limit")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise SnapshotError(f"{where}, field 'limit': expected an integer, got {limit!r}")
        for key in ("query", "profile"):
            if raw.get(key) is not None and not isinstance(raw[key], str):
                raise SnapshotError(f"{where}, field {key!r}: expected a string")
        out[str(name)] = Entry(tuple(ranking), raw.get("query"), raw.get("profile"), limit)
    return out


def render(test_name: str, entries: Mapping[str, Entry], titles: Mapping[str, str]) -> str:
    """The file's text: sorted names, quoted strings, titles as comments."""
    lines = [
        f"# Ranking snapshots of {test_name} (pytest-searcheval).",
        f"# Re-record: pytest --search-eval {UPDATE_OPTION}",
    ]
    for name in sorted(entries):
        entry = entries[name]
        lines.append(f"{_quote(name)}:")
        if entry.query is not None:
            lines.append(f"  query: {_quote(entry.query)}")
        if entry.profile is not None:
            lines.append(f"  profile: {_quote(entry.profile)}")
        if entry.limit is not None:
            lines.append(f"  limit: {entry.limit}")
        if not entry.ids:
            lines.append("  ranking: []")
            continue
        lines.append("  ranking:")
        for doc_id in entry.ids:
            title = " ".join(titles.get(doc_id, "").split())
            lines.append(f"    - {_quote(doc_id)}" + (f"  # {title}" if title else ""))
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    # A JSON string is a YAML double-quoted scalar: no key or id can be misread (yes, 1e3, ~).
    return json.dumps(text, ensure_ascii=False)


def entry_of(ranking: SearchResult | Sequence[str]) -> Entry:
    if isinstance(ranking, SearchResult):
        return Entry(ranking.ids, ranking.query, ranking.profile, ranking.limit)
    ids = tuple(str(d) for d in ranking)
    if len(set(ids)) != len(ids):
        raise ValueError("ranking_snapshot: a document id appears twice in the ranking")
    return Entry(ids)


# --- comparing ----------------------------------------------------------------------------------


def compare(recorded: Entry, now: Entry, tolerance: Tolerance) -> list[str]:
    """What breaks the tolerance, one sentence each (empty: the ranking is within it)."""
    from pytest_searcheval.metrics import rbo

    problems: list[str] = []
    was, now_profile = recorded.profile, now.profile
    if was is not None and now_profile is not None and was != now_profile:
        problems.append(f"recorded with profile {was!r}, searched with {now_profile!r}")
    before, after = _cut(recorded.ids, tolerance.depth), _cut(now.ids, tolerance.depth)
    if tolerance.exact and before != after:
        problems.append(f"the ranking changed ({tolerance.describe()} expected)")
    if tolerance.min_rbo is not None:
        overlap = rbo(before, after, p=tolerance.rbo_p)
        if overlap < tolerance.min_rbo - 1e-12:
            problems.append(
                f"rank-biased overlap {overlap:.4f} < min_rbo {tolerance.min_rbo:g} "
                f"(p {tolerance.rbo_p:g})"
            )
    if tolerance.top_k is not None:
        k = tolerance.top_k
        gone = [d for d in before[:k] if d not in after[:k]]
        came = [d for d in after[:k] if d not in before[:k]]
        if gone or came:
            problems.append(
                f"top-{k} sets differ: left it {', '.join(gone) or '-'}; "
                f"entered it {', '.join(came) or '-'}"
            )
    if tolerance.max_rank_shift is not None:
        limit = tolerance.max_rank_shift
        position = {d: i for i, d in enumerate(after, start=1)}
        for rank, doc_id in enumerate(before, start=1):
            new = position.get(doc_id)
            if new is None:
                problems.append(f"{doc_id} (recorded at rank {rank}) is no longer returned")
            elif abs(new - rank) > limit:
                problems.append(
                    f"{doc_id} moved {abs(new - rank)} ranks ({rank} -> {new}) > "
                    f"max_rank_shift {limit}"
                )
    return problems


def _cut(ids: Sequence[str], depth: int | None) -> list[str]:
    return list(ids if depth is None else ids[:depth])


def diff(
    name: str,
    path: Path | str,
    recorded: Entry,
    now: Entry,
    problems: Sequence[str],
    tolerance: Tolerance,
    context: Context,
) -> str:
    """The failure message: what broke, then the two rankings side by side."""
    lines = [
        f"ranking snapshot {name!r} in {path} is not within tolerance ({tolerance.describe()}):"
    ]
    lines += [f"  - {p}" for p in problems]
    if recorded.limit is not None and now.limit is not None and recorded.limit != now.limit:
        lines.append(f"  (recorded with limit {recorded.limit}, searched with limit {now.limit})")
    rows = max(len(recorded.ids), len(now.ids))
    shown = min(rows, max(tolerance.depth or 0, DIFF_ROWS))
    left = [_cell(d, context) for d in recorded.ids[:shown]]
    width = max([len("recorded"), *map(len, left)])
    before = {d: i for i, d in enumerate(recorded.ids, start=1)}
    lines.append(f"  rank  {'recorded':<{width}}  now")
    for i in range(shown):
        a = left[i] if i < len(left) else ""
        b = _cell(now.ids[i], context) if i < len(now.ids) else ""
        move = ""
        if i < len(now.ids):
            was = before.get(now.ids[i])
            move = "(new)" if was is None else "" if was == i + 1 else f"(was {was})"
        row = f"  {i + 1:>4}  {a:<{width}}  {b}" + (f"  {move}" if move else "")
        lines.append(row.rstrip())
    if rows > shown:
        lines.append(f"  ... {rows - shown} more rows")
    dropped = [d for d in recorded.ids if d not in now.ids]
    if dropped:
        lines.append(f"  no longer returned: {', '.join(dropped)}")
    lines.append(f"  if the change is intended, re-record with {UPDATE_OPTION}")
    return "\n".join(lines)


def _cell(doc_id: str, context: Context) -> str:
    grade = grade_text(context, doc_id)
    title = context.titles.get(doc_id, "(not in corpus)")
    if len(title) > 32:
        title = title[:31] + "~"
    return " ".join(p for p in (doc_id, f"[{grade}]" if grade else "", title) if p)


# --- unused entries -----------------------------------------------------------------------------


@dataclass
class Usage:
    """What a session saw of the snapshot files, to find the entries no test checks any more.

    Plain JSON-able data: each pytest-xdist worker sends its own and the controller merges
    them (every worker collects the same tests and runs some of them).
    """

    #: snapshot file -> {node id: test name} of the collected tests that keep rankings there
    tests: dict[str, dict[str, str]] = field(default_factory=dict)
    #: ``__rankings__/<module>`` directories judged whole: their module was collected whole
    #: (no node id, no --lf, no collection error, none of its tests deselected), or it no
    #: longer exists beside one that was
    whole: list[str] = field(default_factory=list)
    #: node id of a test that ran and passed -> {snapshot file: names it checked}
    passed: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"tests": self.tests, "whole": self.whole, "passed": self.passed}

    def merge(self, data: Mapping[str, Any]) -> None:
        for path, tests in (data.get("tests") or {}).items():
            self.tests.setdefault(str(path), {}).update(tests)
        self.whole = sorted({*self.whole, *(str(d) for d in data.get("whole") or ())})
        for nodeid, files in (data.get("passed") or {}).items():
            mine = self.passed.setdefault(str(nodeid), {})
            for path, names in files.items():
                mine[str(path)] = sorted({*mine.get(str(path), ()), *names})


@dataclass(frozen=True)
class Unused:
    """Entries of one snapshot file that no test checks any more."""

    path: Path
    names: tuple[str, ...]
    #: the whole file goes: no collected test keeps rankings there, or its tests checked none
    whole: bool
    #: the test the file belongs to (its header when the file is rewritten)
    test: str | None = None
    #: the file could not be read (a whole file only: its entries are not known)
    unreadable: bool = False


def unused(usage: Usage) -> list[Unused]:
    """The entries this session can judge unused, by file path.

    A file is judged when every collected test keeping rankings there ran and passed (its
    entries not checked by any of them are unused), or when it lies in a directory judged whole
    and no collected test keeps rankings there (all its entries are). Anything else, a test
    deselected, skipped or failed, a module collected in part, is not judged."""
    candidates = {str(p) for d in usage.whole for p in Path(d).glob("*.yaml")}
    candidates |= {
        path
        for path, tests in usage.tests.items()
        if tests and all(nodeid in usage.passed for nodeid in tests)
    }
    out: list[Unused] = []
    for path in sorted(candidates):
        file = Path(path)
        if not file.is_file():
            continue
        tests = usage.tests.get(path) or {}
        try:
            entries = read(file)
        except SnapshotError:
            if not tests:
                out.append(Unused(file, (), True, unreadable=True))
            continue  # a test of its own reads it, and fails saying why
        if not tests:
            out.append(Unused(file, tuple(sorted(entries)), True))
            continue
        if not all(nodeid in usage.passed for nodeid in tests):
            continue
        used = {name for nodeid in tests for name in usage.passed[nodeid].get(path, ())}
        names = tuple(sorted(set(entries) - used))
        if names:
            test = tests[min(tests)]
            out.append(Unused(file, names, not (set(entries) & used), test))
    return out


def prune(found: Sequence[Unused], titles: Mapping[str, str]) -> None:
    """Remove the unused entries: rewrite a file without them, delete a file left with none
    (and its ``__rankings__`` directories once empty)."""
    from pytest_searcheval.files import write_atomic

    for one in found:
        if one.whole:
            one.path.unlink(missing_ok=True)
            for folder in (one.path.parent, one.path.parent.parent):
                if folder.name != SNAPSHOT_DIR and folder.parent.name != SNAPSHOT_DIR:
                    break
                try:
                    folder.rmdir()
                except OSError:
                    break  # not empty
            continue
        entries = read(one.path)
        kept = {name: entry for name, entry in entries.items() if name not in one.names}
        write_atomic(one.path, render(one.test or one.path.stem, kept, titles))


def unused_lines(found: Sequence[Unused], removed: bool, shown: Callable[[Path], str]) -> list[str]:
    """The session's lines about unused entries (none when there are none)."""
    if not found:
        return []
    count = sum(len(one.names) or 1 for one in found)
    noun = "ranking snapshot" if count == 1 else "ranking snapshots"
    if removed:
        lines = [f"searcheval: removed {count} unused {noun}:"]
    else:
        pronoun = "it" if count == 1 else "them"
        lines = [f"searcheval: {count} {noun} unused; {UPDATE_OPTION} removes {pronoun}:"]
    for one in found:
        names = ", ".join(_quote(name) for name in one.names)
        orphan = f"the whole file: no test of {one.path.parent.name}.py keeps rankings in it"
        if one.unreadable:
            what = f"{orphan} (unreadable)"
        elif one.whole and one.test is None:
            what = f"{orphan}: {names}"
        elif one.whole:
            what = f"the whole file, as {one.test} checked none of it: {names}"
        else:
            what = names
        lines.append(f"  {shown(one.path)}: {what}")
    return lines
