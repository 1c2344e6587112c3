"""A self-contained HTML report: tables plus plots as inline SVG (report/svg.py).

Plots: per-class bars with 95% interval whiskers (one bar per available profile), per-query
change of the gated measure against the baseline, and the distribution of per-request latency.
No external assets: the page opens from a CI artifact without network access.
"""

from __future__ import annotations

import html as _html
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_searcheval.baseline.gate import verdict
from pytest_searcheval.report import (
    CLASS_MEASURE,
    conformance_line,
    extraction_line,
    format_interval,
    format_number,
    hand_written,
    history,
    ledger_lines,
    shown_measures,
    shows_latency,
)
from pytest_searcheval.report.query_table import query_table
from pytest_searcheval.settings import GATED_MEASURES
from pytest_searcheval.types import Report

#: Runs listed in the history table (the trend plot shows every run).
HISTORY_ROWS = 20

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.passed{color:#1a7f37}.failed{color:#cf222e;font-weight:bold}.skipped,.unverified{color:#9a6700}
details{margin:.5em 0}code{background:#f6f8fa;padding:0 .2em}
#queries th{cursor:pointer;user-select:none}#queries td{vertical-align:top}
#queries th[aria-sort=ascending]::after{content:" \\25B2"}
#queries th[aria-sort=descending]::after{content:" \\25BC"}.known{color:#9a6700}
.controls{display:flex;gap:1em;flex-wrap:wrap;align-items:center}
.panels{display:flex;flex-wrap:wrap;gap:1em}figure{margin:1em 0;overflow-x:auto}
.doc{display:inline-block;margin:0 .3em .1em 0;font-size:.85em;white-space:nowrap}
.g0{color:#6e7781}.g1{color:#9a6700}.g2{color:#0969da}.g3{color:#1a7f37;font-weight:bold}
.uj{color:#cf222e;font-style:italic}.up{color:#1a7f37}.down{color:#cf222e}
"""


def _e(value: Any) -> str:
    return _html.escape(str(value))


def _plots(report: Report) -> list[tuple[str, str]]:
    """(caption, inline SVG) of each figure the report has data for (report/svg.py)."""
    from pytest_searcheval.report.svg import Chart, colour

    out: list[tuple[str, str]] = []

    classes = report["classes"]
    if classes:
        profiles = list(classes)
        names = sorted({c for per in classes.values() for c in per})
        fig = Chart(
            width=max(520.0, 90.0 * len(names)),
            height=300,
            ylabel=f"{CLASS_MEASURE} (95% CI)",
            ylim=(0, 1.05),
            xrotate=20,
        )
        width = 0.8 / max(1, len(profiles))
        for i, p in enumerate(profiles):
            means, lows, highs, xs = [], [], [], []
            for j, cls in enumerate(names):
                entry = classes[p].get(cls)
                cell = entry[CLASS_MEASURE] if entry else None
                if cell is None:
                    continue
                mean, low, high = cell["mean"], cell["low"], cell["high"]
                if mean is None or low is None or high is None:  # n = 0: no interval
                    continue
                xs.append(j + i * width)
                means.append(mean)
                lows.append(low)
                highs.append(high)
            fig.bars(xs, means, width, colours=colour(i), label=p, low=lows, high=highs)
        fig.xcategories = [
            (j + width * (len(profiles) - 1) / 2, name) for j, name in enumerate(names)
        ]
        fig.xlim = (-0.6, len(names) - 0.4 + width * (len(profiles) - 1))
        out.append((f"{CLASS_MEASURE} per query class", fig.render()))

    gated = report["run"]["gated_profile"]
    measure = report["run"]["query_measure"]
    deltas = []
    for qid, q in report["queries"].items():
        answer = q["profiles"].get(gated)
        now = answer["measures"].get(measure) if answer else None
        before = (q.get("baseline") or {}).get(measure)
        if now is not None and isinstance(before, int | float):
            deltas.append((float(now) - float(before), qid))
    if deltas:
        deltas.sort()
        fig = Chart(
            width=680,
            height=260,
            xlabel="queries, sorted by change",
            ylabel=f"{measure} change vs baseline",
            integer_x=True,
        )
        fig.bars(
            list(range(len(deltas))),
            [d for d, _ in deltas],
            0.8,
            colours=["#cf222e" if d < 0 else "#1a7f37" for d, _ in deltas],
        )
        fig.hline(-report["run"]["query_tolerance"])
        out.append((f"Per-query change of {measure} ({gated}) against the baseline", fig.render()))

    trade = report.get("no_result_tradeoff") or {}
    if trade:
        from pytest_searcheval.report import tradeoff

        out.append(
            (
                "No-result trade-off: unanswerable queries caught against answerable ones "
                "silenced as the threshold moves (dot: the target's threshold)",
                tradeoff.chart(trade).render(),
            )
        )

    series = []
    for p, e in report["profiles"].items():
        if not e.get("available"):
            continue
        lat = [
            float(ms)
            for q in report["queries"].values()
            if p in q["profiles"] and (ms := q["profiles"][p].get("latency_ms")) is not None
        ]
        if lat:
            series.append((p, lat))
    for name, test in report.get("latency_tests", {}).items():
        if test.get("samples_ms"):
            series.append((f"{name} (latency test)", list(test["samples_ms"])))
    if series:
        # A log axis has no 0: a request measured under a microsecond is drawn at 0.001 ms.
        floored = [(n, [max(v, 0.001) for v in s]) for n, s in series]
        fig = Chart(
            width=680,
            height=70 + 34 * len(floored),
            xlog=True,
            xlabel="latency per request (ms, log scale; box p25-p75, whiskers p1-p99, "
            "outliers not drawn)",
        )
        fig.boxes(floored)
        out.append(("Latency distribution", fig.render()))
    return out


def _trend(report: Report, entries: Sequence[Mapping[str, Any]]) -> str:
    """Means of the gated measures per profile over the recorded runs (one panel a measure);
    a dashed line before every run whose conventions or collection hashes changed."""
    from pytest_searcheval.report.svg import Chart, colour

    measures = [m for m in GATED_MEASURES if m in report["run"]["measures"]] or [
        report["run"]["query_measure"]
    ]
    recorded = list((entries[-1].get("profiles") or {}).keys())
    # The report's profile order, as in the per-class figure.
    profiles = [p for p in report["profiles"] if p in recorded]
    profiles += [p for p in recorded if p not in profiles]
    panels = []
    for k, m in enumerate(measures):
        fig = Chart(
            width=420,
            height=260,
            title=m,
            xlabel="full run (oldest first)",
            ylim=(0, 1.05),
            xlim=(0.5, len(entries) + 0.5),
            integer_x=True,
        )
        for i, p in enumerate(profiles):
            points = history.series(entries, p, m)
            if points:
                fig.line(
                    [i + 1 for i, _ in points],
                    [v for _, v in points],
                    colour=colour(i),
                    marker=True,
                    label=p if k == 0 else None,
                )
        for i in history.changes(entries):
            fig.vline(i + 0.5)
        panels.append(fig.render())
    return "<div class='panels'>" + "".join(panels) + "</div>"


def _history_section(report: Report, hist: history.History | None) -> list[str]:
    if hist is None:
        return []
    entries = hist.entries
    parts = [f"<h2 id='history'>History ({len(entries)} full runs)</h2>"]
    parts += [f"<p class='skipped'>{_e(p)}</p>" for p in hist.problems]
    if not entries:
        parts.append("<p>No full run recorded yet.</p>")
        return parts
    if len(entries) > 1:
        parts.append(_trend(report, entries))
        if history.changes(entries):
            parts.append(
                "<p>A dashed line precedes each run whose conventions (split, gain, relevance "
                "level, limit, measures, trec mode, gated profile) or collection content "
                "differ from the run before: values across it do not compare.</p>"
            )
    gated = report["run"]["gated_profile"]
    measures = [m for m in GATED_MEASURES if m in report["run"]["measures"]]
    parts.append(
        "<table><tr><th>run</th><th>created</th><th>commit</th><th>queries</th><th>gate</th>"
        + "".join(f"<th>{_e(gated)} {_e(m)}</th>" for m in measures)
        + "</tr>"
    )
    start = max(0, len(entries) - HISTORY_ROWS)
    for i, line in enumerate(entries[start:], start + 1):
        git = line.get("git") or {}
        commit = str(git.get("commit") or "")[:10] + (" (dirty)" if git.get("dirty") else "")
        gate = line.get("gate")
        verdict = "-" if gate is None else "passed" if gate else "failed"
        values = ((line["profiles"].get(gated) or {}).get("measures")) or {}
        parts.append(
            f"<tr><td class='num'>{i}</td><td>{_e(line.get('created') or '-')}</td>"
            f"<td><code>{_e(commit or '-')}</code></td><td class='num'>{_e(line.get('queries'))}"
            f"</td><td class='{verdict}'>{verdict}</td>"
            + "".join(f"<td class='num'>{format_number(values.get(m), 4)}</td>" for m in measures)
            + "</tr>"
        )
    parts.append("</table>")
    if start:
        parts.append(f"<p>The table shows the last {HISTORY_ROWS} runs; the plot shows all.</p>")
    return parts


def html(report: Report, hist: history.History | None = None) -> str:
    """The page. ``hist``: the run history (its trend and last runs), when one is kept."""
    run = report["run"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>search evaluation: {_e(report['collection']['name'])}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Search evaluation: {_e(report['collection']['name'] or 'collection')}</h1>",
        f"<p>split <code>{_e(run['split'])}</code>, {run['queries_run']} of "
        f"{run['queries_expected']} queries, gain {_e(run['gain'])}, relevance &ge; "
        f"{run['relevance_level']}, gated profile <code>{_e(run['gated_profile'])}</code>. "
        f"Cells: mean [95% bootstrap interval].</p>",
    ]
    gate = report.get("gate")
    if gate:
        word, why = verdict(report)
        css = {"PASSED": "passed", "FAILED": "failed", "NOT JUDGED": "skipped"}[word]
        parts.append(
            f"<h2>Gate: <span class='{css}'>{word.lower()}</span></h2><p>{_e(why)}</p><ul>"
        )
        for r in gate["rules"]:
            parts.append(
                f"<li><span class='{_e(r['status'])}'>{_e(r['status'])}</span> "
                f"{_e(r['name'])}: {_e(r['detail'])}</li>"
            )
        parts.append("</ul>")
    known = ledger_lines(report)
    if known:
        parts.append("<ul>" + "".join(f"<li>{_e(line)}</li>" for line in known) + "</ul>")
    measures = shown_measures(run["measures"])
    parts.append("<h2>Profiles</h2><table><tr><th>profile</th>")
    parts += [f"<th>{_e(m)}</th>" for m in measures]
    latency = shows_latency(report)
    parts.append(
        "<th>no-result acc.</th>"
        + ("<th>p95 ms</th>" if latency else "")
        + "<th>violations</th></tr>"
    )
    for p, e in report["profiles"].items():
        if not e["available"]:
            parts.append(
                f"<tr><td>{_e(p)}</td><td colspan='{len(measures) + 2 + latency}'>unavailable: "
                f"{_e(e['reason'])}</td></tr>"
            )
            continue
        cells = "".join(
            f"<td class='num'>{_e(format_interval(e['measures'][m]))}</td>" for m in measures
        )
        p95 = e["latency_ms"]["p95"]
        parts.append(
            f"<tr><td>{_e(p)}</td>{cells}"
            f"<td class='num'>{format_number(e['no_result']['accuracy'])}</td>"
            + (f"<td class='num'>{'-' if p95 is None else f'{p95:.1f}'}</td>" if latency else "")
            + f"<td class='num'>{e['hard_filter_violations']}</td></tr>"
        )
    parts.append("</table>")
    if report["comparisons"]:
        parts.append(
            "<h2>Paired randomization tests</h2><table><tr><th>a</th><th>b</th><th>measure</th>"
            "<th>n</th><th>mean a - b</th><th>p</th><th>p (Holm)</th></tr>"
        )
        for c in report["comparisons"]:
            parts.append(
                f"<tr><td>{_e(c['a'])}</td><td>{_e(c['b'])}</td><td>{_e(c['measure'])}</td>"
                f"<td class='num'>{c['n']}</td><td class='num'>{c['mean_diff']:+.4f}</td>"
                f"<td class='num'>{c['p']:.4f}</td><td class='num'>{c['p_holm']:.4f}</td></tr>"
            )
        parts.append("</table>")
    for title, figure in _plots(report):
        parts.append(f"<h2>{_e(title)}</h2><figure>{figure}</figure>")
    from pytest_searcheval.report import tradeoff

    trade_lines = tradeoff.lines(report.get("no_result_tradeoff"))
    if trade_lines:
        parts.append("<h2>No-result trade-off</h2><ul>")
        parts.extend(f"<li>{_e(line)}</li>" for line in trade_lines)
        parts.append("</ul>")
    summary = report.get("invariant_summary")
    if summary:
        parts.append(
            "<h2>Invariants</h2><table><tr><th>invariant</th><th>cases</th><th>passed</th>"
            "<th>failed</th><th>skipped</th><th>failing cases</th></tr>"
        )
        for name, r in summary["invariants"].items():
            failing_ids = ", ".join(r["failing"][:10]) + (" ..." if len(r["failing"]) > 10 else "")
            parts.append(
                f"<tr><td>{_e(name)}</td><td class='num'>{r['cases']}</td>"
                f"<td class='num'>{r['passed']}</td><td class='num'>{r['failed']}</td>"
                f"<td class='num'>{r['skipped']}</td><td>{_e(failing_ids)}</td></tr>"
            )
        parts.append("</table>")
        extra = [line for line in (conformance_line(summary), extraction_line(summary)) if line]
        if extra:
            parts.append("<ul>" + "".join(f"<li>{_e(line)}</li>" for line in extra) + "</ul>")
    parts += _history_section(report, hist)
    parts.append(query_table(report))
    parts += hand_written.html_parts(report.get("hand_written"))
    failing = [(q, d) for q, d in report["queries"].items() if d["failures"]]
    parts.append(f"<h2>Failing queries ({len(failing)})</h2>")
    for qid, d in failing:
        parts.append(
            f"<details><summary><code>{_e(qid)}</code> [{_e(d['class'])}] {_e(d['text'])}"
            + (" <em>(known failure)</em>" if d.get("ledger") == "known" else "")
            + f"</summary><ul>{''.join(f'<li>{_e(f)}</li>' for f in d['failures'])}</ul></details>"
        )
    parts.append("<h2>Limitations</h2><ul>")
    parts += [f"<li>{_e(n)}</li>" for n in report["limitations"]]
    parts.append("</ul><h2>Environment, data and conventions</h2>")
    for key in ("environment", "collection", "model", "metric_manifest", "tool"):
        parts.append(
            f"<details><summary>{_e(key)}</summary><pre>"
            f"{_e(json.dumps(report.get(key), indent=2, default=str))}</pre></details>"
        )
    parts.append("</body></html>\n")
    return "".join(parts)
