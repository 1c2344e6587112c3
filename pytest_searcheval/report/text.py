"""Text renderings of the report: the terminal summary and the Markdown page (and its JSON)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_searcheval.baseline.gate import verdict
from pytest_searcheval.report import hand_written, tradeoff
from pytest_searcheval.report.model import CLASS_MEASURE, NO_RANKING
from pytest_searcheval.types import Report


def quality_lines(q: Mapping[str, Any] | None) -> list[str]:
    if not q or not q.get("profiles"):
        return []
    cols = [
        ("grade0_rate_at_10", "grade-0@10"),
        ("adversarial_top1_rate", "adv. top-1"),
        ("adversarial_resistance_rate", "adv. resisted"),
        ("provider_top_share", "top provider share"),
        ("warm_share", "warm share"),
    ]
    used = [(k, h) for k, h in cols if any(k in e for e in q["profiles"].values())]
    body = [[p, *[format_number(e.get(k)) for k, _ in used]] for p, e in q["profiles"].items()]
    lines = ["", f"result quality (top {q['k']}):"]
    lines += _table(["profile", *[h for _, h in used]], body)
    lift = q.get("reranker_lift")
    if lift:
        lines.append(
            f"reranker lift: {lift['profile']} - {lift['over']} nDCG@10 {lift['nDCG@10']:+.4f} "
            f"(n={lift['n']})"
        )
    emb = q.get("embeddings")
    if emb:
        lines.append(embedding_line(emb))
    for key, reason in sorted((q.get("not_measured") or {}).items()):
        lines.append(f"not measured: {key}: {reason}")
    return lines


def embedding_line(emb: Mapping[str, Any]) -> str:
    """``embeddings: 525 of 525 listings embedded, 0 failed, 0 served without one`` and the
    failures' reason classes; a count the target left out is not shown."""
    parts: list[str] = []
    if "embedded" in emb and "listings" in emb:
        parts.append(f"{emb['embedded']} of {emb['listings']} listings embedded")
    if "failed" in emb:
        parts.append(f"{emb['failed']} failed")
    if "fallback" in emb:
        parts.append(f"{emb['fallback']} served without one")
    reasons = emb.get("reasons")
    if isinstance(reasons, Mapping) and reasons:
        parts.append("reasons: " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())))
    return "embeddings: " + (", ".join(parts) or "no counts")


def invariant_lines(summary: Mapping[str, Any] | None) -> list[str]:
    """Terminal/Markdown-neutral lines: a per-invariant table, conformance, extraction."""
    if not summary:
        return []
    rows = summary["invariants"]
    errored = any(r.get("errored") for r in rows.values())  # a column only when any errored
    body = [
        [name, str(r["cases"]), str(r["passed"]), str(r["failed"]), str(r["skipped"])]
        + ([str(r.get("errored", 0))] if errored else [])
        for name, r in rows.items()
    ]
    lines = ["invariants:"]
    head = ["invariant", "cases", "passed", "failed", "skipped"] + (["errored"] if errored else [])
    lines += _table(head, body)
    lines += [line for line in (conformance_line(summary), extraction_line(summary)) if line]
    return lines


def conformance_line(summary: Mapping[str, Any]) -> str:
    c = summary.get("conformance")
    if not c:
        return ""
    return (
        f"filter conformance: {c['cases']} cases, {c['violations']} violations "
        f"(a listing returned that breaks the filters), {c['misses']} misses (a matching "
        "listing not returned)"
    )


def extraction_line(summary: Mapping[str, Any]) -> str:
    e = summary.get("extraction")
    if not e:
        return ""
    parts = [
        f"{name} {f['correct']}/{f['labelled']}"
        + ("" if f.get("accuracy") is None else f" ({float(f['accuracy']):.3f})")
        for name, f in sorted(e["fields"].items())
    ]
    spurious = e.get("spurious")
    return (
        "constraint extraction (correct/labelled per field): "
        + (", ".join(parts) or "no labelled field")
        + f"; spurious filters: {'-' if spurious is None else spurious}"
    )


def ledger_lines(report: Report) -> list[str]:
    kf = report.get("known_failures") or {}
    if not kf:
        return []
    q, i = kf.get("queries") or {}, kf.get("invariants") or {}
    known = len(q.get("known", [])) + len(i.get("known", []))
    fixed = sorted(q.get("fixed", []) + i.get("fixed", []))
    lines: list[str] = []
    if known:
        lines.append(
            f"known failures (xfail, recorded in the baseline): {len(q.get('known', []))} query "
            f"tests, {len(i.get('known', []))} invariant cases"
        )
    if fixed:
        shown = ", ".join(fixed[:10]) + (f", ... ({len(fixed)} in all)" if len(fixed) > 10 else "")
        lines.append(
            f"fixed since the baseline (XPASS): {shown}; re-baseline with "
            "--search-eval-update-baseline to record it"
        )
    return lines


def format_number(v: Any, digits: int = 3) -> str:
    return "-" if v is None else f"{float(v):.{digits}f}"


def _short(v: float) -> str:
    text = f"{v:.3f}"
    return text[1:] if text.startswith("0.") else text


def format_interval(cell: Mapping[str, Any]) -> str:
    """``.734 [.690,.781]``: mean and 95% interval, leading zeros dropped to keep tables narrow."""
    if cell.get("mean") is None:
        return "-"
    return f"{_short(cell['mean'])} [{_short(cell['low'])},{_short(cell['high'])}]"


def _table(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *body]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    lines = [fmt.format(*header), "  ".join("-" * w for w in widths)]
    lines += [fmt.format(*r) for r in body]
    return lines


def shown_measures(measures: Sequence[str]) -> list[str]:
    """The table's columns: one measure per name (the last listed: nDCG@10 over nDCG@5)."""
    last: dict[str, str] = {}
    for m in measures:
        last[m.split("@")[0]] = m
    return [m for m in measures if last[m.split("@")[0]] == m]


def relevance_lines(report: Report) -> list[str]:
    """How many queries entered the relevance aggregates, and why the others did not."""
    run = report["run"]
    level = run["relevance_level"]
    queries = report["queries"]
    if not queries:
        return []
    if run.get("trec_compat"):
        judged = [q for q, d in queries.items() if d.get("judged", True)]
        scored, errored = _scored(report, judged)
        return [
            f"relevance measures over {scored} of {len(queries)} queries: every judged "
            "query counts (trec-compat), a query without a relevant document scores 0" + errored
        ]
    inside = [q for q, d in queries.items() if d.get("relevant", 0) > 0]
    outside = [q for q, d in queries.items() if d.get("relevant", 0) <= 0]
    scored, errored = _scored(report, inside)
    line = (
        f"relevance measures over {scored} of {len(queries)} queries (a judged document "
        f"of grade >= {level}){errored}"
    )
    if outside:
        unanswerable = [q for q in outside if queries[q].get("unanswerable")]
        other = [q for q in outside if not queries[q].get("unanswerable")]
        parts = []
        if unanswerable:
            parts.append(f"{len(unanswerable)} unanswerable (scored by no-result accuracy)")
        if other:
            shown = ", ".join(other[:8]) + (", ..." if len(other) > 8 else "")
            parts.append(f"{len(other)} with no document of grade >= {level}: {shown}")
        line += "; left out: " + "; ".join(parts)
    return [line]


def _scored(report: Report, inside: Sequence[str]) -> tuple[int, str]:
    """How many of the ``inside`` queries the gated profile scored, and the note naming the
    ones whose search errored (per profile; left out of that profile's means)."""
    queries = report["queries"]
    gated = str(report["run"].get("gated_profile") or "")
    by_profile: dict[str, list[str]] = {}
    for q in inside:
        for profile in queries[q].get("errors") or {}:
            by_profile.setdefault(str(profile), []).append(q)
    if not by_profile:
        return len(inside), ""
    lists = {tuple(v) for v in by_profile.values()}
    if len(lists) == 1 and len(by_profile) == len(report["profiles"]):
        qids = next(iter(lists))
        shown = ", ".join(qids[:8]) + (", ..." if len(qids) > 8 else "")
        note = f"; {len(qids)} errored, not scored: {shown}"
    else:
        note = "; errored, not scored: " + "; ".join(
            f"{p} {len(v)} ({', '.join(v[:8])}{', ...' if len(v) > 8 else ''})"
            for p, v in sorted(by_profile.items())
        )
    return len(inside) - len(by_profile.get(gated, [])), note


def shows_latency(report: Report) -> bool:
    """Whether the profile tables have a latency column: not for run files, whose "searches"
    are lookups in a file read at start (their timings say nothing about a search system)."""
    return ((report.get("environment") or {}).get("target") or {}).get("target") != "run"


def terminal_lines(report: Report) -> list[str]:
    """The terminal section: profile x measure (95% CI), per-class table, comparisons, gate."""
    run = report["run"]
    lines = [
        f"collection {report['collection']['name'] or report['collection']['path']} "
        f"split={run['split']} queries={run['queries_run']}/{run['queries_expected']} "
        f"gain={run['gain']} relevance>={run['relevance_level']} "
        f"(mean [95% bootstrap CI], n={run['bootstrap']['samples']})"
    ]
    measures = shown_measures(run["measures"])
    latency = shows_latency(report)
    body: list[list[str]] = []
    for p, entry in report["profiles"].items():
        if not entry["available"]:
            body.append([p, *(["-"] * (len(measures) + 1 + latency)), "unavailable"])
            continue
        nra = entry["no_result"]["accuracy"]
        p95 = entry["latency_ms"]["p95"]
        body.append(
            [
                p,
                *[format_interval(entry["measures"][m]) for m in measures],
                format_number(nra),
                *(["-" if p95 is None else f"{p95:.1f}"] if latency else []),
                str(entry["hard_filter_violations"]),
            ]
        )
    header = ["profile", *measures, "no-result", *(["p95 ms"] if latency else []), "viol."]
    lines += _table(header, body)
    lines += relevance_lines(report)
    lines += [n for n in report["limitations"] if NO_RANKING in n]
    for p, entry in report["profiles"].items():
        if not entry["available"]:
            lines.append(f"unavailable: {p}: {entry['reason']}")
    gated = run["gated_profile"]
    if gated in report["classes"]:
        lines.append("")
        lines.append(f"per class ({gated}, {CLASS_MEASURE}):")
        cbody = [
            [
                cls,
                str(c["queries"]),
                str(c.get("evaluated", "-")),
                format_interval(c[CLASS_MEASURE]),
                format_number(c["no_result_accuracy"]),
            ]
            for cls, c in report["classes"][gated].items()
        ]
        lines += _table(["class", "n", "rel. n", CLASS_MEASURE, "no-result acc."], cbody)
    if report["comparisons"]:
        lines.append("")
        lines.append("paired randomization tests (two-sided, Holm-corrected):")
        for c in report["comparisons"]:
            lines.append(
                f"  {c['a']} - {c['b']} {c['measure']}: {c['mean_diff']:+.4f} "
                f"(n={c['n']}) p={c['p']:.4f} p_holm={c['p_holm']:.4f}"
            )
    against = report.get("vs_baseline") or []
    if against:
        lines.append("")
        lines.append("this run vs the baseline, per query (paired randomization, Holm-corrected):")
        for v in against:
            lines.append(
                f"  {v['profile']} {v['measure']}: {v['mean_diff']:+.4f} (n={v['n']}, "
                f"{v['wins']} up, {v['losses']} down) p={v['p']:.4f} p_holm={v['p_holm']:.4f}"
            )
    lines += quality_lines(report.get("quality"))
    trade = tradeoff.lines(report.get("no_result_tradeoff"))
    if trade:
        lines.append("")
        lines += trade
    inv = invariant_lines(report.get("invariant_summary"))
    if inv:
        lines.append("")
        lines += inv
    for name, lat in report["latency_tests"].items():
        if "not_measured" in lat:
            lines.append(f"latency {name}: not measured: {lat['not_measured']}")
            continue
        lines.append(
            f"latency {name}: p50 {lat['p50_ms']:.2f} ms, p95 {lat['p95_ms']:.2f} ms, "
            f"p99 {lat['p99_ms']:.2f} ms over {lat['n']} requests"
        )
    known = ledger_lines(report)
    if known:
        lines.append("")
        lines += known
    hand = hand_written.lines(report.get("hand_written"))
    if hand:
        lines += ["", *hand]
    gate = report.get("gate")
    if gate:
        lines.append("")
        word, why = verdict(report)
        lines.append(f"gate: {word} ({why})" if word == "NOT JUDGED" else f"gate: {word}")
        for rule in gate["rules"]:
            lines.append(f"  [{rule['status']}] {rule['name']}: {rule['detail']}")
    return lines


def markdown(report: Report) -> str:
    """GitHub-flavoured Markdown for the CI step summary."""
    run = report["run"]
    out = [
        f"## Search evaluation: {report['collection']['name'] or 'collection'} "
        f"({run['split']} split, {run['queries_run']} queries)",
        "",
    ]
    gate = report.get("gate")
    if gate:
        word, why = verdict(report)
        shown = {"PASSED": "passed", "FAILED": "FAILED", "NOT JUDGED": "not judged"}[word]
        out.append(f"**Gate: {shown}** ({why})" if word == "NOT JUDGED" else f"**Gate: {shown}**")
        out.append("")
        for rule in gate["rules"]:
            out.append(f"- `{rule['status']}` {rule['name']}: {rule['detail']}")
        out.append("")
    measures = shown_measures(run["measures"])
    latency = shows_latency(report)
    out.append(
        "| profile | "
        + " | ".join(measures)
        + (
            " | no-result acc. | p95 ms | violations |"
            if latency
            else " | no-result acc. | violations |"
        )
    )
    out.append("|---" * (len(measures) + 3 + latency) + "|")
    for p, e in report["profiles"].items():
        if not e["available"]:
            out.append(
                f"| {p} | unavailable: {e['reason']} |" + " |" * (len(measures) + 1 + latency)
            )
            continue
        cells = [format_interval(e["measures"][m]) for m in measures]
        p95 = e["latency_ms"]["p95"]
        out.append(
            f"| {p} | "
            + " | ".join(cells)
            + f" | {format_number(e['no_result']['accuracy'])}"
            + (f" | {'-' if p95 is None else f'{p95:.1f}'}" if latency else "")
            + f" | {e['hard_filter_violations']} |"
        )
    gated = run["gated_profile"]
    if gated in report["classes"]:
        out += ["", f"Per class ({gated}, {CLASS_MEASURE}, mean [95% CI]):", ""]
        out += [
            "| class | n | rel. n | " + CLASS_MEASURE + " | no-result acc. |",
            "|---|---|---|---|---|",
        ]
        for cls, c in report["classes"][gated].items():
            out.append(
                f"| {cls} | {c['queries']} | {c.get('evaluated', '-')} | "
                f"{format_interval(c[CLASS_MEASURE])} | {format_number(c['no_result_accuracy'])} |"
            )
    summary = report.get("invariant_summary")
    if summary:
        out += ["", "Invariants:", "", "| invariant | cases | passed | failed | skipped |"]
        out.append("|---|---|---|---|---|")
        for name, r in summary["invariants"].items():
            out.append(
                f"| {name} | {r['cases']} | {r['passed']} | {r['failed']} | {r['skipped']} |"
            )
        extra = [line for line in (conformance_line(summary), extraction_line(summary)) if line]
        if extra:
            out += [""] + [f"- {line}" for line in extra]
    quality_ = quality_lines(report.get("quality"))
    if quality_:
        out += ["", "Result quality:", "", "```", *quality_[2:], "```"]
    trade = tradeoff.lines(report.get("no_result_tradeoff"))
    if trade:
        out += ["", *[f"- {line}" for line in trade]]
    known = ledger_lines(report)
    if known:
        out += [""] + [f"- {line}" for line in known]
    failing = [(q, d) for q, d in report["queries"].items() if d["failures"]]
    if failing:
        out += ["", f"Failing queries ({len(failing)}):", ""]
        for qid, d in failing[:50]:
            tag = " (known failure)" if d.get("ledger") == "known" else ""
            out.append(f"- `{qid}`{tag}: " + "; ".join(d["failures"]))
    out += hand_written.markdown_lines(report.get("hand_written"))
    if report["limitations"]:
        out += ["", "Limitations:", ""] + [f"- {n}" for n in report["limitations"]]
    return "\n".join(out) + "\n"


def to_json(report: Report) -> str:
    """Compact JSON (``jq .`` pretty-prints it): with ``indent`` the stdlib falls back to its
    pure-Python encoder, which costs seconds on a few thousand queries."""
    return json.dumps(report, allow_nan=False, default=str, separators=(",", ":")) + "\n"
