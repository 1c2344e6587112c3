"""The no-result trade-off: what a target's empty-answer threshold catches and what it silences.

A target that decides "nothing in this catalog does that" from a confidence value (the reference
engine's ``confidence = {value, threshold}``; any HTTP target may send the same object) is
answering with nothing whenever ``value < threshold``. Moving the threshold trades the
unanswerable queries it catches against the answerable ones it silences. For each profile whose
responses carry a finite confidence value on at least one unanswerable and one answerable query
of the run, the curve is every distinct threshold between the values seen:

    caught(t)   = |{unanswerable q : value(q) < t}| / |unanswerable|
    silenced(t) = |{answerable q : value(q) < t}| / |answerable|

where answerable means a query with a document at the relevance level. The point at the
target's own threshold is marked. The values are the confidence the target reported with its
answer, so an answer that was emptied still has one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_searcheval.types import QueryEntry


def _value(entry: Mapping[str, Any] | None) -> tuple[float | None, float | None]:
    if not isinstance(entry, Mapping):
        return None, None
    out: list[float | None] = []
    for key in ("value", "threshold"):
        v = entry.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            out.append(float(v))
        else:
            out.append(None)
    return out[0], out[1]


def curves(queries: Mapping[str, QueryEntry], profiles: Sequence[str]) -> dict[str, dict[str, Any]]:
    """profile -> {threshold, n_unanswerable, n_answerable, at_threshold, points, missing}."""
    out: dict[str, dict[str, Any]] = {}
    for profile in profiles:
        unanswerable: list[float] = []
        answerable: list[float] = []
        thresholds: set[float] = set()
        missing = 0
        for row in queries.values():
            d = (row.get("profiles") or {}).get(profile)
            if d is None:
                continue
            is_unanswerable = bool(row.get("unanswerable"))
            is_answerable = not is_unanswerable and row.get("relevant", 0) > 0
            if not (is_unanswerable or is_answerable):
                continue
            value, tau = _value(d.get("confidence"))
            if value is None:
                missing += 1
                continue
            if tau is not None:
                thresholds.add(tau)
            (unanswerable if is_unanswerable else answerable).append(value)
        if not unanswerable or not answerable:
            continue
        tau = thresholds.pop() if len(thresholds) == 1 else None
        cuts = sorted(set(unanswerable) | set(answerable))
        # below every value (nothing cut), between neighbours, and above every value
        grid = [cuts[0]] + [(a + b) / 2 for a, b in itertools.pairwise(cuts)]
        grid.append(math.nextafter(cuts[-1], math.inf))
        points = [_point(t, unanswerable, answerable) for t in grid]
        out[profile] = {
            "threshold": tau,
            "n_unanswerable": len(unanswerable),
            "n_answerable": len(answerable),
            "at_threshold": None if tau is None else _point(tau, unanswerable, answerable),
            "points": points,
            "missing": missing,
        }
    return out


def _point(t: float, unanswerable: Sequence[float], answerable: Sequence[float]) -> dict[str, Any]:
    caught = sum(v < t for v in unanswerable)
    silenced = sum(v < t for v in answerable)
    return {
        "threshold": round(t, 6),
        "caught": caught,
        "silenced": silenced,
        "caught_rate": round(caught / len(unanswerable), 6),
        "silenced_rate": round(silenced / len(answerable), 6),
    }


def cheapest(points: Sequence[Mapping[str, Any]], rate: float) -> Mapping[str, Any] | None:
    """The point that catches at least ``rate`` of the unanswerable queries while silencing
    the fewest answerable ones (None when no threshold does)."""
    able = [p for p in points if p["caught_rate"] >= rate]
    return min(able, key=lambda p: (p["silenced"], p["threshold"])) if able else None


def lines(tradeoff: Mapping[str, Mapping[str, Any]] | None) -> list[str]:
    """One line per profile for the terminal and Markdown."""
    out: list[str] = []
    for profile, c in (tradeoff or {}).items():
        nu, na = c["n_unanswerable"], c["n_answerable"]
        at = c["at_threshold"]
        head = f"no-result trade-off ({profile}, {nu} unanswerable, {na} answerable): "
        if at is None:
            head += "no single threshold reported"
        else:
            head += (
                f"at threshold {c['threshold']:g} catches {at['caught']}/{nu}, "
                f"silences {at['silenced']}/{na}"
            )
        target = cheapest(c["points"], 0.9)
        if target is not None:
            head += (
                f"; catching 90% would silence {target['silenced']}/{na} "
                f"(threshold {target['threshold']:g})"
            )
        out.append(head)
    return out


def chart(tradeoff: Mapping[str, Mapping[str, Any]]) -> Any:
    """Caught against silenced per profile, the target's own threshold marked (an
    ``report.svg.Chart``)."""
    from pytest_searcheval.report.svg import Chart, colour

    fig = Chart(
        width=440,
        height=340,
        xlabel="answerable queries silenced (share)",
        ylabel="unanswerable queries caught (share)",
        xlim=(-0.02, 1.02),
        ylim=(-0.02, 1.02),
    )
    for i, (profile, c) in enumerate(tradeoff.items()):
        xs = [p["silenced_rate"] for p in c["points"]]
        ys = [p["caught_rate"] for p in c["points"]]
        fig.line(xs, ys, colour=colour(i), label=profile, step=True)
        at = c["at_threshold"]
        if at is not None:
            fig.point(
                at["silenced_rate"],
                at["caught_rate"],
                colour=colour(i),
                label=f"{profile} at {c['threshold']:g}",
            )
    fig.hline(0.9, dash="1 3")
    return fig
