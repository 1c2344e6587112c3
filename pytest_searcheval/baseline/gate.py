"""The baseline gate (DESIGN section 7): rules -> passed / failed / skipped / unverified.

Each :class:`Rule` carries the numbers it compared, so the terminal, the reports and CI logs say
why the gate opened or closed. A rule that cannot be evaluated (no baseline, partial run,
profile not configured) is ``skipped`` with the reason, never silently passed. ``unverified``
(no git, no tag) fails the gate only with ``strict_baseline``.

Baseline file (``baselines/baseline.json``, ``schema_version`` 2)::

    {"schema_version": 2, "tool": {"name", "version"}, "tag": "searcheval-v0.1.0",
     "collection": {"name", "version", "hashes": {"corpus", "queries", "judgments"}},
     "model": {"id", "revision", ...} | null,
     "run": {"split", "gain", "relevance_level", "limit", "measures", "trec_compat",
             "gated_profile"},
     "profiles": {name: {"aggregates": {measure: mean}, "no_result_accuracy": float | null,
                         "hard_filter_violations": int,
                         "queries": {qid: {measure: value, ..., "ids": [top 10]}}}},
     "invariants": {case id: true | false},
     "known_failures": {"queries": {qid: {"reasons": [...], "summary": str}},
                        "invariants": {case id: {"reasons": [...], "summary": str}}}}

It holds no timestamp, so regenerating it from an unchanged system gives an identical file.

Known-failure ledger: ``known_failures`` records which query tests and invariant cases failed
when the baseline was written, each with its *reasons*: the failure lines cut before the
evidence they list (the first ``": "`` outside quotes and brackets) with every free-standing
number replaced by ``#`` (``known item 'x' expected at rank <= #, found at rank #``), so a known
item that slips from rank 2 to rank 4 keeps its reason while a different missing item is a new
one. A later failure whose reasons are all recorded is a known failure (xfail); a new reason, a
hard-filter violation (never excused) or a test that passed in the baseline fails normally.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_searcheval import __version__
from pytest_searcheval.baseline.ledger import ledger_profile_differs, make_ledger
from pytest_searcheval.settings import GATED_MEASURES, SearchEvalConfig

BASELINE_SCHEMA_VERSION = 2
HASH_KEYS: tuple[str, ...] = ("corpus", "queries", "judgments")
MODEL_KEYS: tuple[str, ...] = ("id", "revision")


@dataclass(frozen=True)
class Rule:
    name: str
    status: str  # passed | failed | skipped | unverified
    detail: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def _mean(report: Mapping[str, Any], profile: str, measure: str) -> float | None:
    entry = report["profiles"].get(profile) or {}
    if not entry.get("available"):
        return None
    value = (entry.get("measures") or {}).get(measure, {}).get("mean")
    return None if value is None else float(value)


def _base_mean(baseline: Mapping[str, Any], profile: str, measure: str) -> float | None:
    prof = (baseline.get("profiles") or {}).get(profile) or {}
    value = (prof.get("aggregates") or {}).get(measure)
    return None if value is None else float(value)


def evaluate(
    report: Mapping[str, Any],
    baseline: Mapping[str, Any] | None,
    cfg: SearchEvalConfig,
    *,
    integrity: Rule,
    baseline_error: str | None = None,
) -> list[Rule]:
    """Every gate rule for this run, in a fixed order."""
    rules: list[Rule] = []
    gated = cfg.gated
    complete = bool(report["run"]["complete"])
    entry = report["profiles"].get(gated) or {}
    if entry.get("available"):
        rules.append(Rule("gated profile available", "passed", f"{gated} answered"))
    else:
        rules.append(Rule("gated profile available", "failed", f"{gated}: {entry.get('reason')}"))

    if baseline_error:
        rules.append(Rule("baseline readable", "failed", baseline_error))
    no_base = "no baseline" if baseline is None else ""
    partial = "" if complete else "partial run (selected queries only)"
    if baseline is not None:
        rules.append(_conventions(report, baseline))

    for m in GATED_MEASURES:
        name = f"{gated} {m} vs baseline"
        why = no_base or partial
        now = _mean(report, gated, m)
        before = _base_mean(baseline, gated, m) if baseline else None
        if why:
            rules.append(Rule(name, "skipped", why))
        elif now is None or before is None:
            rules.append(Rule(name, "skipped", f"not measured (now {now}, baseline {before})"))
        else:
            floor = before - cfg.tolerance
            ok = now >= floor - 1e-12
            rules.append(
                Rule(
                    name,
                    "passed" if ok else "failed",
                    f"{now:.4f} vs baseline {before:.4f} (floor {floor:.4f}, "
                    f"tolerance {cfg.tolerance:g}, change {now - before:+.4f})",
                )
            )

    over = cfg.gate_over
    if over and over != gated and over in (cfg.profiles or ()):
        for m in GATED_MEASURES:
            name = f"{gated} >= {over} on {m}"
            if partial:
                rules.append(Rule(name, "skipped", partial))
                continue
            h, lx = _mean(report, gated, m), _mean(report, over, m)
            if h is None or lx is None:
                rules.append(Rule(name, "skipped", f"not measured now ({gated} {h}, {over} {lx})"))
                continue
            ok = h >= lx
            parts = [f"now {h:.4f} vs {lx:.4f}"]
            if baseline:
                bh, bl = _base_mean(baseline, gated, m), _base_mean(baseline, over, m)
                if bh is not None and bl is not None:
                    ok = ok and bh >= bl
                    parts.append(f"baseline {bh:.4f} vs {bl:.4f}")
            rules.append(Rule(name, "passed" if ok else "failed", "; ".join(parts)))

    total = 0
    checked = 0
    per_profile = []
    for p, e in report["profiles"].items():
        if e.get("available"):
            total += int(e["hard_filter_violations"])
            checked += int(e["results_checked"])
            if e["hard_filter_violations"]:
                per_profile.append(f"{p} {e['hard_filter_violations']}")
    detail = f"{total} violations in {checked} returned results (independent oracle)"
    filtered = sum(
        1
        for q in (report.get("queries") or {}).values()
        for e in (q.get("profiles") or {}).values()
        if e.get("applied_filters")
    )
    if checked and not filtered:
        # No answer came under a hard filter: the oracle could only check corpus membership,
        # and without a corpus (TREC qrels and topics alone) not even that.
        if (report.get("collection") or {}).get("documents") == 0:
            detail += "; no query applied a hard filter and there is no corpus: nothing checked"
        else:
            detail += (
                "; no query applied a hard filter: checked only that each is a corpus document"
            )
    if per_profile:
        detail += ": " + ", ".join(per_profile)
    rules.append(Rule("hard filters respected", "passed" if total == 0 else "failed", detail))

    conformance = {
        k: v for k, v in report.get("invariants", {}).items() if "conformance" in k.lower()
    }
    if conformance:
        bad = sorted(
            k
            for k, v in conformance.items()
            if v.get("status") == "failed" or ("status" not in v and not v.get("passed"))
        )
        ran = [k for k, v in conformance.items() if v.get("status") != "skipped"]
        if not ran:
            rules.append(Rule("filter conformance", "skipped", "every conformance case skipped"))
        else:
            rules.append(
                Rule(
                    "filter conformance",
                    "failed" if bad else "passed",
                    f"{len(ran) - len(bad)}/{len(ran)} cases"
                    + (f"; failing: {', '.join(bad[:10])}" if bad else ""),
                )
            )

    nra_now = (entry.get("no_result") or {}).get("accuracy") if entry.get("available") else None
    nra_base = ((baseline or {}).get("profiles") or {}).get(gated, {}).get("no_result_accuracy")
    name = f"{gated} no-result accuracy vs baseline"
    if no_base or partial:
        rules.append(Rule(name, "skipped", no_base or partial))
    elif nra_now is None or nra_base is None:
        rules.append(Rule(name, "skipped", f"not measured (now {nra_now}, baseline {nra_base})"))
    else:
        ok = float(nra_now) >= float(nra_base) - 1e-12
        rules.append(
            Rule(name, "passed" if ok else "failed", f"{nra_now:.4f} vs {float(nra_base):.4f}")
        )

    invariants = report.get("invariants") or {}
    if invariants:
        base_inv = (baseline or {}).get("invariants") or {}
        # A skipped case (target cannot be changed, nothing to check) is not a failure.
        failed = {k for k, v in invariants.items() if v.get("status", "") == "failed"} | {
            k for k, v in invariants.items() if "status" not in v and not v.get("passed")
        }
        # Below its baseline = failing now, passing in the baseline. A case the baseline does
        # not know fails its own test but cannot regress.
        regressed = sorted(k for k in failed if base_inv.get(k) is True)
        skipped = sum(1 for v in invariants.values() if v.get("status") == "skipped")
        checked = len(invariants) - skipped
        counts = f"{checked - len(failed)}/{checked} pass" + (
            f", {skipped} skipped" if skipped else ""
        )
        other = ledger_profile_differs(baseline, str(report["run"].get("gated_profile")))
        if baseline is None:
            rules.append(Rule("invariants not below baseline", "skipped", f"no baseline; {counts}"))
        elif other is not None:
            rules.append(Rule("invariants not below baseline", "skipped", f"{counts}; {other}"))
        else:
            rules.append(
                Rule(
                    "invariants not below baseline",
                    "failed" if regressed else "passed",
                    counts + (f"; newly failing: {', '.join(regressed[:10])}" if regressed else ""),
                )
            )

    if baseline is None:
        rules.append(Rule("dataset and model unchanged", "skipped", "no baseline"))
    else:
        changed = []
        now_hashes = report["collection"]["hashes"]
        base_hashes = (baseline.get("collection") or {}).get("hashes") or {}
        for key in HASH_KEYS:
            if base_hashes.get(key) != now_hashes.get(key):
                changed.append(f"{key} {base_hashes.get(key)} -> {now_hashes.get(key)}")
        now_model = report.get("model")
        base_model = baseline.get("model") or {}
        unseen = now_model is None and not report["queries"]
        for key in MODEL_KEYS if not unseen else ():
            if base_model.get(key) != (now_model or {}).get(key):
                changed.append(f"model {key} {base_model.get(key)} -> {(now_model or {}).get(key)}")
        detail = "hashes match" + ("; model not seen (no query test ran)" if unseen else "")
        rules.append(
            Rule(
                "dataset and model unchanged",
                "failed" if changed else "passed",
                "; ".join(changed) + " (re-baseline deliberately)" if changed else detail,
            )
        )

    rules.append(_latency_rule(report, cfg))

    if integrity.status == "unverified" and cfg.strict_baseline:
        rules.append(Rule(integrity.name, "failed", integrity.detail + " (strict)"))
    else:
        rules.append(integrity)
    return rules


#: The conventions a baseline's numbers were measured under; a run under others is not
#: comparable with it (DESIGN section 7).
CONVENTIONS: tuple[str, ...] = (
    "split",
    "limit",
    "gain",
    "relevance_level",
    "measures",
    "trec_compat",
)


def conventions(cfg: SearchEvalConfig) -> dict[str, Any]:
    return {
        "split": cfg.split,
        "limit": cfg.limit,
        "gain": cfg.gain,
        "relevance_level": cfg.relevance_level,
        "measures": list(cfg.measures),
        "trec_compat": cfg.trec_compat,
    }


def _conventions(report: Mapping[str, Any], baseline: Mapping[str, Any]) -> Rule:
    now = report["run"].get("conventions") or {}
    before = dict(baseline.get("run") or {})
    before.setdefault("trec_compat", False)
    diffs = [
        f"{key} {before.get(key)!r} in the baseline, {now.get(key)!r} now"
        for key in CONVENTIONS
        if before.get(key) != now.get(key)
    ]
    # The invariant outcomes and known failures a baseline holds are the gated profile's; a
    # baseline written before it recorded that profile is compared as before.
    recorded = before.get("gated_profile")
    gated = report["run"].get("gated_profile")
    if ledger_profile_differs(baseline, str(gated)) is not None:
        diffs.append(
            f"gated profile {recorded!r} in the baseline (its invariant outcomes and known "
            f"failures are that profile's), {gated!r} now"
        )
    if diffs:
        return Rule(
            "conventions match the baseline",
            "failed",
            "; ".join(diffs) + " (re-baseline deliberately to change them)",
        )
    same = "split, limit, gain, relevance level, measures and trec mode"
    if recorded is None:
        detail = f"{same} as in the baseline (it does not record its gated profile)"
    else:
        detail = f"{same}, and the gated profile {gated!r}, as in the baseline"
    return Rule("conventions match the baseline", "passed", detail)


def _latency_rule(report: Mapping[str, Any], cfg: SearchEvalConfig) -> Rule:
    name = "latency budgets"
    budgets = {"p95": cfg.latency_p95_ms, "p99": cfg.latency_p99_ms}
    if all(v is None for v in budgets.values()):
        return Rule(name, "skipped", "no budget set")
    every = report.get("latency_tests") or {}
    tests = {p: lat for p, lat in every.items() if "not_measured" not in lat}
    if not tests:
        why = next(
            (str(lat["not_measured"]) for lat in every.values() if "not_measured" in lat),
            "no latency test ran (deselected, or pytest-benchmark is not installed: "
            "pip install pytest-searcheval[latency])",
        )
        status = "failed" if cfg.strict_baseline else "skipped"
        return Rule(
            name, status, f"not measured: {why}" + (" (strict)" if status == "failed" else "")
        )
    over = []
    parts = []
    for profile, lat in sorted(tests.items()):
        for pct, budget in budgets.items():
            if budget is None:
                continue
            value = float(lat[f"{pct}_ms"])
            parts.append(f"{profile} {pct} {value:.2f} ms (budget {budget:g})")
            if value > budget:
                over.append(f"{profile} {pct}")
    return Rule(name, "failed" if over else "passed", "; ".join(parts))


def passed(rules: list[Rule]) -> bool:
    return not any(r.status == "failed" for r in rules)


# --- baseline integrity (tamper check) -------------------------------------------------------


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False, timeout=30)


def verify_baseline(path: Path, baseline: Mapping[str, Any] | None) -> Rule:
    """The baseline must equal, byte for byte, ``git show TAG:path`` for the tag it names."""
    name = "baseline matches its git tag"
    if baseline is None:
        return Rule(name, "skipped", f"no baseline at {path}")
    tag = baseline.get("tag")
    if not tag:
        return Rule(name, "unverified", "the baseline names no tag")
    if shutil.which("git") is None:
        return Rule(name, "unverified", "git is not installed")
    top = _git(path.parent, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        return Rule(name, "unverified", f"{path} is not in a git repository")
    root = Path(top.stdout.decode().strip())
    rel = path.resolve().relative_to(root.resolve()).as_posix()
    if _git(root, "rev-parse", "-q", "--verify", f"refs/tags/{tag}").returncode != 0:
        return Rule(name, "unverified", f"tag {tag} not found in {root}")
    shown = _git(root, "show", f"{tag}:{rel}")
    if shown.returncode != 0:
        return Rule(name, "failed", f"{rel} does not exist at tag {tag}")
    if shown.stdout != path.read_bytes():
        return Rule(
            name,
            "failed",
            f"{rel} differs from the copy at tag {tag} (git diff {tag} -- {rel}); "
            "a baseline change needs --search-eval-update-baseline and a new tag",
        )
    return Rule(name, "passed", f"{rel} equals the copy at tag {tag}")


def make_baseline(
    report: Mapping[str, Any], cfg: SearchEvalConfig, tag: str | None
) -> dict[str, Any]:
    """The baseline that this run's report implies (aggregates, per-query values, hashes)."""
    profiles: dict[str, Any] = {}
    for p, e in report["profiles"].items():
        if not e.get("available"):
            continue
        queries: dict[str, Any] = {}
        for qid, q in report["queries"].items():
            d = q["profiles"].get(p)
            if d is None:
                continue
            entry = {m: v for m, v in d["measures"].items() if v is not None}
            entry["ids"] = list(d["ids"][:10])
            queries[qid] = entry
        profiles[p] = {
            "aggregates": {m: c["mean"] for m, c in e["measures"].items() if c["mean"] is not None},
            "no_result_accuracy": e["no_result"]["accuracy"],
            "hard_filter_violations": e["hard_filter_violations"],
            "queries": queries,
        }
    return {
        "schema_version": BASELINE_SCHEMA_VERSION,
        "tool": {"name": "pytest-searcheval", "version": __version__},
        "tag": tag,
        "collection": {
            "name": report["collection"]["name"],
            "version": report["collection"]["version"],
            "hashes": report["collection"]["hashes"],
        },
        "model": report.get("model"),
        # The invariants' outcomes and the ledger were measured on the gated profile.
        "run": {**conventions(cfg), "gated_profile": cfg.gated},
        "profiles": profiles,
        # A skipped case checked nothing: it is left out, as a case the baseline lacks is read.
        "invariants": {
            k: bool(v.get("passed"))
            for k, v in report.get("invariants", {}).items()
            if v.get("status") != "skipped"
        },
        "known_failures": make_ledger(report),
    }


def baseline_text(baseline: Mapping[str, Any]) -> str:
    return json.dumps(baseline, indent=2, sort_keys=True, allow_nan=False) + "\n"
