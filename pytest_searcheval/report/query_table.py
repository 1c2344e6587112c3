"""The per-query table of the HTML report: every query, sortable and filterable in the page.

One row per query: id, class, split, test outcome, the chosen measure for every available
profile, its change against the baseline (gated profile), Judged@k of the gated profile, and
the top results of every profile with their grades (unjudged documents marked). The table is
rendered in full on the server side, so it reads without JavaScript; a small inline script
(no network, no library) adds sorting by any column, filters (text, class, outcome, unjudged
results) and the choice of the measure shown. The values of every measure travel in one JSON
block, so switching the measure does not need the page to be rebuilt.
"""

from __future__ import annotations

import html as _html
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_searcheval.types import QueryEntry, Report

#: Results shown per profile in a row (the gated profile's inline, every profile's on demand).
SHOWN_INLINE = 5
#: Rows of the table at most (about 2 KB each): the failing queries first, then the lowest
#: on the shown measure; report.json holds every query.
QUERY_ROWS = 1000
SHOWN_DETAILS = 10
JUDGED_DEFAULT_K = 10


def _e(value: Any) -> str:
    return _html.escape(str(value))


def judged_k(measures: Sequence[str]) -> int:
    """The k of the run's first ``Judged@k`` measure (10 when the run has none)."""
    for m in measures:
        found = re.fullmatch(r"Judged@(\d+)", m)
        if found:
            return int(found.group(1))
    return JUDGED_DEFAULT_K


def judged_at(grades: Sequence[int | None] | None, k: int) -> float | None:
    """Judged documents in the top k, divided by k (ir_measures' Judged@k): defined for every
    query, answerable or not, since it needs no relevant document. None without grades."""
    if grades is None:
        return None
    return sum(1 for g in grades[:k] if g is not None) / k


def outcome(entry: Mapping[str, Any]) -> str:
    """``failed``, ``known`` (failed for reasons the baseline's ledger records) or ``passed``."""
    if not entry.get("failures"):
        return "passed"
    return "known" if entry.get("ledger") == "known" else "failed"


class _Spans:
    """The ``<span>`` of each (document, grade), rendered once per page: a document returned
    for many queries and by several profiles is escaped and formatted one time."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, int | None, bool], str] = {}

    def one(self, doc_id: str, grade: int | None, graded: bool) -> str:
        key = (doc_id, grade, graded)
        span = self._cache.get(key)
        if span is None:
            if not graded:
                span = f"<span class='doc'>{_e(doc_id)}</span>"
            elif grade is None:
                span = f"<span class='doc uj' title='unjudged'>{_e(doc_id)} (?)</span>"
            else:
                css = min(max(int(grade), 0), 3)
                span = f"<span class='doc g{css}'>{_e(doc_id)} ({grade})</span>"
            self._cache[key] = span
        return span

    def top(self, data: Mapping[str, Any], shown: int) -> list[str]:
        ids = list(data.get("ids") or [])[:shown]
        grades = data.get("grades")
        if grades is None:
            return [self.one(d, None, False) for d in ids]
        return [
            self.one(d, grades[i] if i < len(grades) else None, True) for i, d in enumerate(ids)
        ]


def _num(value: Any) -> str:
    return "" if value is None else f"{float(value):.3f}"


def _delta(now: Any, before: Any) -> tuple[str, str]:
    if now is None or before is None:
        return "", ""
    d = float(now) - float(before)
    css = "up" if d > 1e-12 else "down" if d < -1e-12 else ""
    return f"{d:+.3f}", css


def rows_shown(
    queries: Mapping[str, QueryEntry], gated: str, measure: str, limit: int
) -> list[str]:
    """The ids of the rows a table of at most ``limit`` rows shows, in the report's order:
    every query when they fit; else the failing ones (known failures included), then the
    lowest on ``measure`` for the gated profile, then those where it is undefined."""
    if len(queries) <= limit:
        return list(queries)

    def worst_first(qid: str) -> tuple[int, int, float, str]:
        q = queries[qid]
        profile = q["profiles"].get(gated)
        value = (profile["measures"] if profile is not None else {}).get(measure)
        failed = 0 if outcome(q) != "passed" else 1
        return (failed, value is None, 0.0 if value is None else float(value), qid)

    keep = set(sorted(queries, key=worst_first)[:limit])
    return [qid for qid in queries if qid in keep]


def query_table(report: Report, limit: int = QUERY_ROWS) -> str:
    """The section (heading, controls, table, data, script); empty when no query ran. More
    than ``limit`` queries: the table holds :func:`rows_shown`, and says so."""
    every: Mapping[str, QueryEntry] = report.get("queries") or {}
    if not every:
        return ""
    run = report["run"]
    measures = [str(m) for m in run["measures"]]
    shown = str(run.get("query_measure") or measures[0])
    if shown not in measures:
        shown = measures[0]
    gated = str(run["gated_profile"])
    queries = {qid: every[qid] for qid in rows_shown(every, gated, shown, limit)}
    bounded = ""
    if len(queries) < len(every):
        json_name = "report.json" if run.get("complete", True) else "report-partial.json"
        bounded = (
            f"<p class='note'>This table holds {len(queries):,} of the {len(every):,} queries: "
            f"the failing ones first, then the lowest by {_e(shown)} on {_e(gated)}; sorting "
            f"and filters work on these rows. Every query, with its measures and top results, "
            f"is in <a href='{json_name}'>{json_name}</a> beside this page.</p>"
        )
    profiles = [p for p, e in report["profiles"].items() if e.get("available")]
    k = judged_k(measures)
    graded = any(
        "grades" in d for q in queries.values() for d in (q.get("profiles") or {}).values()
    )
    classes = sorted({str(q["class"]) for q in queries.values()})

    data: dict[str, Any] = {}
    rows: list[str] = []
    spans = _Spans()
    names = {p: _e(p) for p in profiles}
    for qid, q in queries.items():
        per = q.get("profiles") or {}
        base = q.get("baseline") or {}
        data[qid] = {
            "m": {p: per[p].get("measures") or {} for p in profiles if p in per},
            "b": {m: base[m] for m in measures if isinstance(base.get(m), int | float)},
        }
        status = outcome(q)
        top = per.get(gated)
        grades = top.get("grades") if top else None
        judged = judged_at(grades, k)
        unjudged = grades is not None and any(g is None for g in grades[:k])
        cells = [
            f"<td><code>{_e(qid)}</code><br><small>{_e(q.get('text', ''))}</small></td>",
            f"<td>{_e(q['class'])}</td>",
            f"<td>{_e(q.get('split', ''))}</td>",
            f"<td class='{status}' title='{_e('; '.join(q.get('failures') or []))}'>{status}</td>",
        ]
        for p in profiles:
            answer = per.get(p)
            value = (answer.get("measures") or {}).get(shown) if answer else None
            cells.append(f"<td class='num' data-p='{names[p]}'>{_num(value)}</td>")
        now = (top.get("measures") or {}).get(shown) if top else None
        text, css = _delta(now, base.get(shown))
        cells.append(f"<td class='num delta {css}'>{text}</td>")
        cells.append(f"<td class='num'>{_num(judged)}</td>")
        tops = {p: spans.top(per[p], SHOWN_DETAILS) for p in profiles if p in per}
        details = "".join(
            f"<div><b>{names[p]}</b>: {''.join(t) or '<em>nothing</em>'}</div>"
            for p, t in tops.items()
        )
        inline = "".join(tops.get(gated, [])[:SHOWN_INLINE])
        cells.append(
            f"<td>{inline or '<em>nothing returned</em>'}"
            f"<details><summary>top {SHOWN_DETAILS} per profile</summary>{details}</details></td>"
        )
        rows.append(
            f"<tr data-q='{_e(qid)}' data-class='{_e(q['class'])}' data-status='{status}' "
            f"data-unjudged='{1 if unjudged else 0}'>{''.join(cells)}</tr>"
        )

    head = ["query", "class", "split", "outcome"]
    head += [f"{p}" for p in profiles]
    head += [f"change vs baseline ({gated})", f"Judged@{k} ({gated})", f"top results ({gated})"]
    numeric = {4 + i for i in range(len(profiles) + 2)}
    ths = "".join(
        f"<th data-type='{'num' if i in numeric else 'text'}'"
        + (f" data-p='{_e(h)}'" if 4 <= i < 4 + len(profiles) else "")
        + f">{_e(h)}</th>"
        for i, h in enumerate(head)
    )
    options = "".join(
        f"<option{' selected' if m == shown else ''}>{_e(m)}</option>" for m in measures
    )
    class_options = "".join(f"<option>{_e(c)}</option>" for c in classes)
    legend = (
        "grades in parentheses; <span class='uj'>(?)</span> marks an unjudged document"
        if graded
        else "this report carries no grades for the returned documents (written by an older "
        "version); re-run to see them"
    )
    blob = json.dumps(data, allow_nan=False, separators=(",", ":")).replace("</", "<\\/")
    return (
        f"<h2 id='per-query'>Queries ({len(every)})</h2>{bounded}"
        f"<p>Profile columns show the selected measure per query; empty where it is undefined "
        f"(no judged document at the relevance level). Change vs baseline: the gated profile "
        f"now minus the baseline's value. Judged@{k}: judged documents in the gated profile's "
        f"top {k}, over {k}. Top results: {legend}. Click a column heading to sort.</p>"
        "<div class='controls'>"
        f"<label>measure <select id='q-measure'>{options}</select></label>"
        "<label>find <input id='q-find' type='search' placeholder='id, text, document'></label>"
        f"<label>class <select id='q-class'><option value=''>all</option>{class_options}"
        "</select></label>"
        "<label>outcome <select id='q-status'><option value=''>all</option>"
        "<option value='failed'>failed</option><option value='known'>known failure</option>"
        "<option value='passed'>passed</option></select></label>"
        f"<label><input id='q-unjudged' type='checkbox'> unjudged in the top {k}</label>"
        "<span id='q-count'></span></div>"
        f"<table id='queries' data-gated='{_e(gated)}'><thead><tr>{ths}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        f"<script type='application/json' id='q-data'>{blob}</script>"
        f"<script>{SCRIPT}</script>"
    )


#: Sorting and filtering. The pure part (``SE.key``, ``SE.compare``, ``SE.matches``) works
#: without a document, so the project's tests run it under node; the rest wires the page.
SCRIPT = r"""
var SE = {
  key: function (text, type) {
    if (type !== "num") return text.toLowerCase();
    var v = parseFloat(text);
    return isNaN(v) ? null : v;
  },
  compare: function (a, b, dir) {
    if (a === null && b === null) return 0;
    if (a === null) return 1;
    if (b === null) return -1;
    var c = a < b ? -1 : a > b ? 1 : 0;
    return dir === "descending" ? -c : c;
  },
  matches: function (row, f) {
    if (f.cls && row.cls !== f.cls) return false;
    if (f.status && row.status !== f.status) return false;
    if (f.unjudged && !row.unjudged) return false;
    return !f.text || row.text.indexOf(f.text.toLowerCase()) >= 0;
  },
  fmt: function (v) { return v === undefined || v === null ? "" : v.toFixed(3); }
};
if (typeof document !== "undefined") (function () {
  var table = document.getElementById("queries");
  var body = table.tBodies[0];
  var heads = table.tHead.rows[0].cells;
  var data = JSON.parse(document.getElementById("q-data").textContent);
  var rows = Array.prototype.slice.call(body.rows);
  var info = rows.map(function (tr) {
    return {tr: tr, q: tr.getAttribute("data-q"), cls: tr.getAttribute("data-class"),
            status: tr.getAttribute("data-status"),
            unjudged: tr.getAttribute("data-unjudged") === "1",
            text: tr.textContent.toLowerCase()};
  });
  var gated = heads.length - 3;
  function show() {
    var m = document.getElementById("q-measure").value;
    info.forEach(function (r) {
      var d = data[r.q], cells = r.tr.cells;
      for (var i = 4; i < gated; i++) {
        var p = heads[i].getAttribute("data-p");
        cells[i].textContent = SE.fmt((d.m[p] || {})[m]);
      }
      var now = (d.m[table.getAttribute("data-gated")] || {})[m], before = d.b[m];
      var cell = cells[gated], txt = "", css = "";
      if (now !== undefined && before !== undefined) {
        var delta = now - before;
        txt = (delta >= 0 ? "+" : "") + delta.toFixed(3);
        css = delta > 1e-12 ? "up" : delta < -1e-12 ? "down" : "";
      }
      cell.textContent = txt;
      cell.className = "num delta " + css;
    });
  }
  function filter() {
    var f = {text: document.getElementById("q-find").value,
             cls: document.getElementById("q-class").value,
             status: document.getElementById("q-status").value,
             unjudged: document.getElementById("q-unjudged").checked};
    var n = 0;
    info.forEach(function (r) {
      var ok = SE.matches(r, f);
      r.tr.style.display = ok ? "" : "none";
      if (ok) n++;
    });
    document.getElementById("q-count").textContent = n + " of " + info.length + " queries shown";
  }
  Array.prototype.forEach.call(heads, function (th, i) {
    th.addEventListener("click", function () {
      var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", dir);
      var type = th.getAttribute("data-type");
      var keyed = info.map(function (r, j) {
        return {r: r, j: j, k: SE.key(r.tr.cells[i].textContent.trim(), type)};
      });
      keyed.sort(function (a, b) { return SE.compare(a.k, b.k, dir) || a.j - b.j; });
      info = keyed.map(function (x) { return x.r; });
      info.forEach(function (r) { body.appendChild(r.tr); });
    });
  });
  document.getElementById("q-measure").addEventListener("change", show);
  ["q-find", "q-class", "q-status", "q-unjudged"].forEach(function (id) {
    document.getElementById(id).addEventListener("input", filter);
    document.getElementById(id).addEventListener("change", filter);
  });
  filter();
})();
"""
