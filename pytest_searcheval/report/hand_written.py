"""The report's section of hand-written search tests (those using the ``searcheval`` or
``ranking_snapshot`` fixture): their outcomes, the golden queries they touched, the ranking
snapshots they recorded. They are ordinary pytest tests; the gate counts them only when they
are marked ``searcheval_gated`` (``baseline.gate.rule_hand_written``).

The section is ``report["hand_written"]``::

    {"tests": {nodeid: {"outcome", "gated", "queries", "searches", "snapshots_recorded",
                        "snapshots_compared"}},
     "counts": {outcome: n}, "gated": {"tests": n, "not_passed": [nodeid, ...]}}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from pytest_searcheval.types import HandWrittenSection, HandWrittenTest

TITLE = "hand-written search tests"
#: Outcomes that fail a gated test (an xfail or a skip is what the user asked for).
NOT_PASSED = ("failed", "error")


def section(outcomes: Mapping[str, Mapping[str, Any]]) -> HandWrittenSection | None:
    """The section from the tests' outcomes by node id (``None`` when none ran)."""
    if not outcomes:
        return None
    tests = {nodeid: cast(HandWrittenTest, dict(outcomes[nodeid])) for nodeid in sorted(outcomes)}
    counts: dict[str, int] = {}
    for entry in tests.values():
        counts[entry["outcome"]] = counts.get(entry["outcome"], 0) + 1
    gated = [n for n, e in tests.items() if e.get("gated")]
    return {
        "tests": tests,
        "counts": dict(sorted(counts.items())),
        "gated": {
            "tests": len(gated),
            "not_passed": [n for n in gated if tests[n]["outcome"] in NOT_PASSED],
        },
    }


def _counts(data: HandWrittenSection) -> str:
    return ", ".join(f"{n} {outcome}" for outcome, n in data["counts"].items())


def lines(data: HandWrittenSection | None) -> list[str]:
    """Terminal lines: counts, each test that did not pass, each snapshot written."""
    if not data:
        return []
    gated = data["gated"]["tests"]
    out = [
        f"{TITLE}: {_counts(data)}"
        + (f" ({gated} gated)" if gated else " (none gated: the gate does not count them)")
    ]
    for nodeid, entry in data["tests"].items():
        if entry["outcome"] != "passed":
            gated_mark = " [gated]" if entry.get("gated") else ""
            out.append(f"  {entry['outcome']}: {nodeid}{gated_mark}")
    for entry in data["tests"].values():
        for path in entry.get("snapshots_recorded") or ():
            out.append(f"searcheval: recorded ranking snapshot {path}")
    return out


def markdown_lines(data: HandWrittenSection | None) -> list[str]:
    if not data:
        return []
    out = ["", f"Hand-written search tests: {_counts(data)}", ""]
    out += ["| test | outcome | gated | queries |", "|---|---|---|---|"]
    for nodeid, entry in data["tests"].items():
        out.append(
            f"| `{nodeid}` | {entry['outcome']} | {'yes' if entry.get('gated') else 'no'} | "
            + (", ".join(entry.get("queries") or ()) or "-")
            + " |"
        )
    return out


def html_parts(data: HandWrittenSection | None) -> list[str]:
    """The HTML page's table: one row per test."""
    if not data:
        return []
    from html import escape

    parts = [
        f"<h2 id='hand-written'>Hand-written search tests ({escape(_counts(data))})</h2>",
        "<table><tr><th>test</th><th>outcome</th><th>gated</th><th>queries</th>"
        "<th>snapshots recorded</th></tr>",
    ]
    for nodeid, entry in data["tests"].items():
        parts.append(
            f"<tr><td><code>{escape(nodeid)}</code></td><td>{escape(entry['outcome'])}</td>"
            f"<td>{'yes' if entry.get('gated') else 'no'}</td>"
            f"<td>{escape(', '.join(entry.get('queries') or ()) or '-')}</td>"
            f"<td>{escape(', '.join(entry.get('snapshots_recorded') or ()) or '-')}</td></tr>"
        )
    parts.append("</table>")
    return parts
