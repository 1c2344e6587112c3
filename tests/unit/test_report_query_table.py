"""The per-query table of the HTML report: its rows, and its script run under node on a small
stand-in for the page's DOM (the table as the page has it, parsed from the rendered HTML)."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_searcheval.report.query_table import SCRIPT, judged_at, judged_k, query_table


def _report() -> dict[str, Any]:
    def prof(ids: list[str], grades: list[int | None], **measures: float) -> dict[str, Any]:
        return {"ids": ids, "grades": grades, "measures": measures}

    return {
        "run": {
            "measures": ["nDCG@10", "R@20", "Judged@5"],
            "query_measure": "nDCG@10",
            "gated_profile": "hybrid",
        },
        "profiles": {
            "lexical": {"available": True},
            "hybrid": {"available": True},
            "semantic": {"available": False},
        },
        "queries": {
            "q1": {
                "class": "exact",
                "split": "test",
                "text": "weather <forecast>",
                "failures": [],
                "ledger": None,
                "profiles": {
                    "lexical": prof(["d2", "d1"], [0, 3], **{"nDCG@10": 0.6, "R@20": 1.0}),
                    "hybrid": prof(["d1", "d9"], [3, None], **{"nDCG@10": 0.9, "R@20": 1.0}),
                },
                "baseline": {"nDCG@10": 0.8, "R@20": 1.0, "ids": ["d1"]},
            },
            "q2": {
                "class": "paraphrase",
                "split": "test",
                "text": "stock prices",
                "failures": ["nDCG@10 dropped"],
                "ledger": None,
                "profiles": {
                    "lexical": prof(["d4"], [2], **{"nDCG@10": 0.7, "R@20": 0.5}),
                    "hybrid": prof(["d4", "d2"], [2, 3], **{"nDCG@10": 0.4, "R@20": 0.5}),
                },
                "baseline": {"nDCG@10": 0.5, "R@20": 0.5},
            },
            "q3": {
                "class": "no-result",
                "split": "test",
                "text": "unicorn rentals",
                "failures": ["unanswerable query returned 1 results (expected none)"],
                "ledger": "known",
                "profiles": {
                    "lexical": prof([], [], **{}),
                    "hybrid": prof(["d7"], [None], **{}),
                },
                "baseline": None,
            },
        },
    }


class _Table(HTMLParser):
    """The table's header and rows as the page's DOM would have them (attributes and text)."""

    def __init__(self) -> None:
        super().__init__()
        self.heads: list[dict[str, Any]] = []
        self.rows: list[dict[str, Any]] = []
        self.controls: dict[str, dict[str, Any]] = {}
        self.table: dict[str, str] = {}
        self.data = ""
        self._cell: dict[str, Any] | None = None
        self._in_data = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "table" and a.get("id") == "queries":
            self.table = a
        elif tag == "th":
            self._cell = {"attrs": a, "text": ""}
            self.heads.append(self._cell)
        elif tag == "tr" and "data-q" in a:
            self.rows.append({"attrs": a, "cells": []})
        elif tag == "td" and self.rows:
            self._cell = {"attrs": a, "text": ""}
            self.rows[-1]["cells"].append(self._cell)
        elif tag in ("select", "input") and a.get("id", "").startswith("q-"):
            self.controls[a["id"]] = a
        elif tag == "option" and "selected" in a:
            self.controls[list(self.controls)[-1]]["value"] = "__selected__"
        elif tag == "script" and a.get("id") == "q-data":
            self._in_data = True

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td"):
            self._cell = None
        if tag == "script":
            self._in_data = False

    def handle_data(self, data: str) -> None:
        if self._in_data:
            self.data += data
        elif self._cell is not None:
            self._cell["text"] += data


def _parse(page: str) -> _Table:
    parser = _Table()
    parser.feed(page)
    return parser


def test_rows_carry_every_query_grades_and_unjudged_marks() -> None:
    page = query_table(_report())
    table = _parse(page)
    heads = [h["text"] for h in table.heads]
    assert heads == [
        "query",
        "class",
        "split",
        "outcome",
        "lexical",
        "hybrid",
        "change vs baseline (hybrid)",
        "Judged@5 (hybrid)",
        "top results (hybrid)",
    ]
    by_id = {r["attrs"]["data-q"]: r for r in table.rows}
    assert list(by_id) == ["q1", "q2", "q3"]
    q1 = [c["text"] for c in by_id["q1"]["cells"]]
    assert q1[3:8] == ["passed", "0.600", "0.900", "+0.100", "0.200"]
    assert "d1 (3)" in q1[8] and "d9 (?)" in q1[8]
    assert "weather &lt;forecast&gt;" in page  # the query text is escaped
    q2 = [c["text"] for c in by_id["q2"]["cells"]]
    assert q2[3] == "failed" and q2[6] == "-0.100"
    assert by_id["q2"]["cells"][6]["attrs"]["class"] == "num delta down"
    q3 = [c["text"] for c in by_id["q3"]["cells"]]
    # an unanswerable query: no measure, no baseline, but Judged@5 is defined (0 of 5 judged)
    assert q3[3:8] == ["known", "", "", "", "0.000"]
    assert by_id["q3"]["attrs"]["data-unjudged"] == "1"
    assert by_id["q2"]["attrs"]["data-unjudged"] == "0"
    data = json.loads(table.data)
    assert data["q1"]["b"] == {"nDCG@10": 0.8, "R@20": 1.0}
    assert data["q2"]["m"]["hybrid"]["R@20"] == 0.5
    assert "src=" not in page and "href=" not in page  # nothing loaded from elsewhere


def test_judged_at_and_its_k() -> None:
    assert judged_k(["nDCG@10", "Judged@20"]) == 20
    assert judged_k(["nDCG@10"]) == 10
    assert judged_at([3, None, 0], 10) == pytest.approx(0.2)
    assert judged_at([3, None, 0, 1], 2) == pytest.approx(0.5)
    assert judged_at(None, 10) is None


def test_a_report_without_grades_says_so() -> None:
    report = _report()
    for q in report["queries"].values():
        for d in q["profiles"].values():
            del d["grades"]
    page = query_table(report)
    assert "carries no grades" in page
    assert "(?)" not in page.split("<table", 1)[1]


_HARNESS = r"""
const fs = require("fs");
const spec = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
function el(attrs, text) {
  const e = {attrs: Object.assign({}, attrs), textContent: text, style: {}, listeners: {},
             className: attrs["class"] || "",
             getAttribute(k) { return k in this.attrs ? this.attrs[k] : null; },
             setAttribute(k, v) { this.attrs[k] = String(v); },
             removeAttribute(k) { delete this.attrs[k]; },
             addEventListener(k, f) { (this.listeners[k] = this.listeners[k] || []).push(f); },
             fire(k) { (this.listeners[k] || []).forEach(f => f()); }};
  return e;
}
const heads = spec.heads.map(h => el(h.attrs, h.text));
const rows = spec.rows.map(r => {
  const cells = r.cells.map(c => el(c.attrs, c.text));
  const tr = el(r.attrs, cells.map(c => c.textContent).join(" "));
  tr.cells = cells;
  return tr;
});
const body = {rows: rows.slice(), appendChild(tr) {
  this.rows.splice(this.rows.indexOf(tr), 1); this.rows.push(tr); }};
const table = el(spec.table, "");
table.tBodies = [body];
table.tHead = {rows: [{cells: heads}]};
const controls = {};
for (const [id, a] of Object.entries(spec.controls)) {
  controls[id] = el(a, "");
  controls[id].value = a.value === "__selected__" ? spec.measure : "";
  controls[id].checked = false;
}
controls["q-count"] = el({}, "");
controls["q-data"] = el({}, spec.data);
controls["queries"] = table;
global.document = {getElementById: id => controls[id]};
eval(spec.script);
const out = {};
const snap = () => ({order: body.rows.map(r => r.getAttribute("data-q")),
                     shown: body.rows.filter(r => r.style.display !== "none")
                                 .map(r => r.getAttribute("data-q")),
                     count: controls["q-count"].textContent,
                     cells: body.rows.map(r => r.cells.map(c => c.textContent))});
out.start = snap();
heads[5].fire("click"); out.hybridAsc = snap();
heads[5].fire("click"); out.hybridDesc = snap();
heads[0].fire("click"); out.byId = snap();
controls["q-measure"].value = "R@20"; controls["q-measure"].fire("change"); out.r20 = snap();
controls["q-status"].value = "failed"; controls["q-status"].fire("change"); out.failed = snap();
controls["q-status"].value = ""; controls["q-unjudged"].checked = true;
controls["q-unjudged"].fire("change"); out.unjudged = snap();
controls["q-unjudged"].checked = false; controls["q-find"].value = "D4";
controls["q-find"].fire("input"); out.found = snap();
console.log(JSON.stringify(out));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the page's script")
def test_the_script_sorts_filters_and_switches_measure(tmp_path: Path) -> None:
    table = _parse(query_table(_report()))
    spec = {
        "heads": table.heads,
        "rows": table.rows,
        "table": table.table,
        "controls": table.controls,
        "data": table.data,
        "measure": "nDCG@10",
        "script": SCRIPT,
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    (tmp_path / "harness.js").write_text(_HARNESS)
    done = subprocess.run(
        ["node", str(tmp_path / "harness.js"), str(tmp_path / "spec.json")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["start"]["count"] == "3 of 3 queries shown"
    # hybrid nDCG@10: q2 0.4, q1 0.9, q3 undefined (last in both directions)
    assert out["hybridAsc"]["order"] == ["q2", "q1", "q3"]
    assert out["hybridDesc"]["order"] == ["q1", "q2", "q3"]
    assert out["byId"]["order"] == ["q1", "q2", "q3"]
    r20 = dict(zip(out["r20"]["order"], out["r20"]["cells"], strict=True))
    assert r20["q1"][4:7] == ["1.000", "1.000", "+0.000"]
    assert r20["q2"][4:7] == ["0.500", "0.500", "+0.000"]
    assert r20["q3"][4:7] == ["", "", ""]
    assert out["failed"]["shown"] == ["q2"]
    assert out["failed"]["count"] == "1 of 3 queries shown"
    assert out["unjudged"]["shown"] == ["q1", "q3"]
    assert out["found"]["shown"] == ["q2"]


def test_a_long_table_keeps_the_failing_then_the_worst_queries_and_says_so() -> None:
    report = _report()
    report["run"]["complete"] = True
    queries = report["queries"]
    for i, value in enumerate([0.95, 0.1, 0.3, None]):  # four more passing queries
        queries[f"q{4 + i}"] = json.loads(json.dumps(queries["q1"]))
        queries[f"q{4 + i}"]["profiles"]["hybrid"]["measures"]["nDCG@10"] = value
    full = _parse(query_table(report))
    assert len(full.rows) == 7 and "href=" not in query_table(report)
    page = query_table(report, limit=4)
    table = _parse(page)
    # failing q2 and known q3 first, then the lowest nDCG@10 of the gated profile (q5, q6);
    # q4 (0.95), q1 (0.9) and q7 (undefined) are left to report.json; report order kept
    assert [r["attrs"]["data-q"] for r in table.rows] == ["q2", "q3", "q5", "q6"]
    assert set(json.loads(table.data)) == {"q2", "q3", "q5", "q6"}
    assert "Queries (7)" in page
    assert "holds 4 of the 7 queries" in page and "<a href='report.json'>" in page
    report["run"]["complete"] = False
    assert "<a href='report-partial.json'>" in query_table(report, limit=4)
