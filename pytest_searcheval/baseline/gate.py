"""The baseline gate (DESIGN section 7): rules -> passed / failed / skipped / unverified.

Each :class:`Rule` carries the numbers it compared, so the terminal, the reports and CI logs say
why the gate opened or closed. A rule that cannot be evaluated (no baseline, partial run,
profile not configured) is ``skipped`` with the reason, never silently passed. ``unverified``
(no git, no tag) fails the gate only with ``strict_baseline``.

Baseline file (``baselines/baseline.json``, ``schema_version`` 1)::

    {"schema_version": 1, "tool": {"name", "version"}, "tag": "searcheval-v0.1.0",
     "collection": {"name", "version", "hashes": {"corpus", "queries", "judgments"}},
     "model": {"id", "revision", ...} | null,
     "run": {"split", "gain", "relevance_level", "limit", "measures"},
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
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_searcheval import __version__
from pytest_searcheval.settings import GATED_MEASURES, SearchEvalConfig

BASELINE_SCHEMA_VERSION = 1
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
    gated = cfg.gated_profile
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

    if "hybrid" in cfg.profiles and "lexical" in cfg.profiles:
        for m in GATED_MEASURES:
            name = f"hybrid >= lexical on {m}"
            if partial:
                rules.append(Rule(name, "skipped", partial))
                continue
            h, lx = _mean(report, "hybrid", m), _mean(report, "lexical", m)
            parts, ok = [], True
            if h is None or lx is None:
                rules.append(Rule(name, "skipped", f"not measured now (hybrid {h}, lexical {lx})"))
                continue
            ok = h >= lx
            parts.append(f"now {h:.4f} vs {lx:.4f}")
            if baseline:
                bh, bl = _base_mean(baseline, "hybrid", m), _base_mean(baseline, "lexical", m)
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
        if baseline is None:
            rules.append(Rule("invariants not below baseline", "skipped", f"no baseline; {counts}"))
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
        now_model = report.get("model") or {}
        base_model = baseline.get("model") or {}
        for key in MODEL_KEYS:
            if base_model.get(key) != now_model.get(key):
                changed.append(f"model {key} {base_model.get(key)} -> {now_model.get(key)}")
        rules.append(
            Rule(
                "dataset and model unchanged",
                "failed" if changed else "passed",
                "; ".join(changed) + " (re-baseline deliberately)" if changed else "hashes match",
            )
        )

    if integrity.status == "unverified" and cfg.strict_baseline:
        rules.append(Rule(integrity.name, "failed", integrity.detail + " (strict)"))
    else:
        rules.append(integrity)
    return rules


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
        "run": {
            "split": cfg.split,
            "gain": cfg.gain,
            "relevance_level": cfg.relevance_level,
            "limit": cfg.limit,
            "measures": list(cfg.measures),
        },
        "profiles": profiles,
        "invariants": {k: bool(v.get("passed")) for k, v in report.get("invariants", {}).items()},
        "known_failures": make_ledger(report),
    }


# --- known-failure ledger ---------------------------------------------------------------------

#: A number standing alone (not part of an id like q031 or a measure like nDCG@10).
_NUMBER = re.compile(r"(?<![\w@.#-])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.])")
#: Failure lines that are never recorded as excusable: they compare against the old baseline
#: (meaningless once it is rewritten) or are hard-filter violations (never excused).
DROP_PREFIX = "per-query drop: "
VIOLATION_PREFIX = "hard-filter violation"
KNOWN_PREFIX = "known failure recorded in the baseline: "


def _head(line: str) -> str:
    """``line`` up to its first ``": "`` outside quotes, brackets and braces: what failed, not
    the evidence listed after it (which documents reordered, which ranks), so that a failure
    with the same cause but other examples keeps its reason. The whole line when unbalanced."""
    depth = 0
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        elif ch == ":" and depth == 0 and line[i + 1 : i + 2] == " ":
            return line[:i]
    return line


def reason_key(line: str) -> str:
    """The comparable form of one failure line: its head (before the first top-level
    ``": "``), numbers as ``#``, spaces collapsed."""
    return " ".join(_NUMBER.sub("#", _head(line.strip())).split())


def excusable(line: str) -> bool:
    return not line.startswith(VIOLATION_PREFIX)


def invariant_reasons(message: str) -> list[str]:
    """The failure lines of an invariant message (its ``  - ...`` bullets under ``failed:``),
    else its first line."""
    lines = message.splitlines()
    bullets: list[str] = []
    inside = False
    for line in lines:
        if line.strip() == "failed:":
            inside = True
            continue
        if inside:
            if line.startswith("  - "):
                bullets.append(line[4:])
            elif not line.startswith("    "):
                inside = False
    return bullets or [lines[0] if lines else message]


def ledger_entry(lines: Iterable[str]) -> dict[str, Any] | None:
    """What the baseline records for one failing test (``None`` when nothing is recordable)."""
    kept = [line for line in lines if not line.startswith(DROP_PREFIX)]
    if not kept:
        return None
    summary = "; ".join(kept)
    return {
        "reasons": sorted({reason_key(line) for line in kept}),
        "summary": summary if len(summary) <= 300 else summary[:297] + "...",
    }


@dataclass(frozen=True)
class LedgerVerdict:
    """How one failing test relates to the ledger: ``known`` (xfail) or ``new`` (fails)."""

    status: str  # known | new
    note: str


def judge_failure(
    lines: Iterable[str], recorded: Mapping[str, Any] | None, passed_before: bool
) -> LedgerVerdict:
    """Compare a test's failure lines now with its ledger entry in the baseline."""
    lines = list(lines)
    if recorded is None:
        if passed_before:
            return LedgerVerdict("new", "regression: this test passed in the baseline")
        return LedgerVerdict("new", "")
    known = set(recorded.get("reasons") or [])
    violations = [line for line in lines if not excusable(line)]
    fresh = [
        line
        for line in lines
        if excusable(line) and reason_key(line) not in known and not line.startswith(DROP_PREFIX)
    ]
    drops = [line for line in lines if line.startswith(DROP_PREFIX)]
    if violations:
        return LedgerVerdict("new", "hard-filter violations are never excused by the baseline")
    if fresh or drops:
        shown = "; ".join(fresh + drops)
        return LedgerVerdict(
            "new",
            f"failing for a reason the baseline does not record: {shown} "
            f"(recorded: {recorded.get('summary', '')})",
        )
    return LedgerVerdict("known", KNOWN_PREFIX + str(recorded.get("summary", "")))


def ledger(baseline: Mapping[str, Any] | None, kind: str) -> dict[str, Mapping[str, Any]]:
    """``known_failures[kind]`` of a baseline (``queries`` or ``invariants``), or empty."""
    entries = ((baseline or {}).get("known_failures") or {}).get(kind) or {}
    return {str(k): v for k, v in entries.items() if isinstance(v, Mapping)}


def make_ledger(report: Mapping[str, Any]) -> dict[str, Any]:
    """The known failures of a report: failing query tests and failing invariant cases."""
    queries: dict[str, Any] = {}
    for qid, q in report["queries"].items():
        entry = ledger_entry(q.get("failures") or [])
        if entry is not None:
            queries[qid] = entry
    invariants: dict[str, Any] = {}
    for cid, rec in (report.get("invariants") or {}).items():
        failed = rec.get("status") == "failed" or ("status" not in rec and not rec.get("passed"))
        if failed:
            entry = ledger_entry(invariant_reasons(str(rec.get("message") or cid)))
            if entry is not None:
                invariants[cid] = entry
    return {"queries": queries, "invariants": invariants}


def baseline_text(baseline: Mapping[str, Any]) -> str:
    return json.dumps(baseline, indent=2, sort_keys=True, allow_nan=False) + "\n"
