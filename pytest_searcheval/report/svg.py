"""Inline SVG charts for the HTML report: bars with interval whiskers, lines and steps, points,
reference lines and horizontal box plots on linear or log axes, with ticks and a legend.

Written here rather than drawn with matplotlib: the report's five figures take a few
milliseconds as SVG text, where importing matplotlib and rendering them as PNG took 1.5-1.9 s of
a warm evaluation (docs/performance.md), and every install (the core one too) gets its plots.
Bars of one colour are a single path, so a figure with thousands of queries stays small; the
page stays self-contained (no script, no external asset).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: matplotlib's default colour cycle ("tab10"), so colours read as they did in the PNG plots
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)

_FONT = "font-family='system-ui,sans-serif' font-size='11'"


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".") if math.isfinite(v) else "0"


def nice_ticks(low: float, high: float, target: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart, about ``target`` intervals)
    inside [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    raw = (high - low) / max(1, target)
    power = 10 ** math.floor(math.log10(raw))
    span = high - low
    step = min((m * power for m in (1, 2, 5, 10)), key=lambda c: abs(span / c - target))
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    t = first
    while t <= high + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    return ticks


def log_ticks(low: float, high: float) -> list[float]:
    """1, 2 and 5 times the powers of ten inside [low, high] (powers only if that is many)."""
    if low <= 0 or high <= low:
        return [max(low, 1e-9)]
    lo, hi = math.floor(math.log10(low)), math.ceil(math.log10(high))
    mults = (1,) if hi - lo > 4 else (1, 2, 5)
    ticks = [m * 10.0**e for e in range(lo, hi + 1) for m in mults]
    return [t for t in ticks if low <= t <= high] or [low, high]


def _tick_label(v: float) -> str:
    if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
        return f"{v:.0e}"
    return f"{v:.6f}".rstrip("0").rstrip(".") if v != int(v) else str(int(v))


@dataclass
class Chart:
    """One set of axes. Data go in with the methods below; :meth:`render` lays them out."""

    width: float = 640
    height: float = 260
    xlabel: str = ""
    ylabel: str = ""
    title: str = ""
    xlim: tuple[float, float] | None = None
    ylim: tuple[float, float] | None = None
    xlog: bool = False
    #: category labels under the x axis at these positions (replaces numeric x ticks)
    xcategories: list[tuple[float, str]] = field(default_factory=list)
    xrotate: float = 0.0
    #: category labels beside the y axis (horizontal box plots)
    ycategories: list[tuple[float, str]] = field(default_factory=list)
    integer_x: bool = False
    _marks: list[tuple[str, Any]] = field(default_factory=list)
    _legend: list[tuple[str, str, str]] = field(default_factory=list)  # label, colour, kind
    _xs: list[float] = field(default_factory=list)
    _ys: list[float] = field(default_factory=list)

    # -- data -------------------------------------------------------------------------------

    def bars(
        self,
        xs: Sequence[float],
        heights: Sequence[float],
        width: float,
        *,
        colours: Sequence[str] | str,
        label: str | None = None,
        low: Sequence[float] | None = None,
        high: Sequence[float] | None = None,
    ) -> None:
        """Bars centred on ``xs``; ``low``/``high``: whisker ends (absolute values)."""
        fill = [colours] * len(xs) if isinstance(colours, str) else list(colours)
        self._marks.append(("bars", (list(xs), list(heights), width, fill, low, high)))
        self._xs += [x - width / 2 for x in xs] + [x + width / 2 for x in xs]
        self._ys += [0.0, *heights, *(low or []), *(high or [])]
        if label is not None:
            swatch = colours if isinstance(colours, str) else (fill[0] if fill else colour(0))
            self._legend.append((label, swatch, "box"))

    def line(
        self,
        xs: Sequence[float],
        ys: Sequence[float],
        *,
        colour: str,
        label: str | None = None,
        marker: bool = False,
        step: bool = False,
    ) -> None:
        """A polyline (``step``: horizontal then vertical, as matplotlib's ``where="post"``)."""
        self._marks.append(("line", (list(xs), list(ys), colour, marker, step)))
        self._xs += list(xs)
        self._ys += list(ys)
        if label is not None:
            self._legend.append((label, colour, "line"))

    def point(self, x: float, y: float, *, colour: str, label: str | None = None) -> None:
        self._marks.append(("point", (x, y, colour)))
        self._xs.append(x)
        self._ys.append(y)
        if label is not None:
            self._legend.append((label, colour, "dot"))

    def hline(self, y: float, *, dash: str = "4 3", colour: str = "#888") -> None:
        self._marks.append(("hline", (y, dash, colour)))
        self._ys.append(y)

    def vline(self, x: float, *, dash: str = "4 3", colour: str = "#888") -> None:
        self._marks.append(("vline", (x, dash, colour)))

    def boxes(self, series: Sequence[tuple[str, Sequence[float]]]) -> None:
        """Horizontal box plots, one row per series: box p25-p75, median line, whiskers p1-p99
        (nearest-rank percentiles; outliers not drawn)."""
        for row, (name, values) in enumerate(series, start=1):
            ordered = sorted(values)
            if not ordered:
                continue
            q = [_rank(ordered, p) for p in (1, 25, 50, 75, 99)]
            self._marks.append(("box", (row, q)))
            self._xs += [q[0], q[4]]
            self.ycategories.append((row, name))
        self._ys += [0.4, len(series) + 0.6]

    # -- layout -----------------------------------------------------------------------------

    def _limits(self) -> tuple[float, float, float, float]:
        xs = [x for x in self._xs if math.isfinite(x) and (x > 0 or not self.xlog)] or [0.0, 1.0]
        ys = [y for y in self._ys if math.isfinite(y)] or [0.0, 1.0]
        x0, x1 = self.xlim or (min(xs), max(xs))
        y0, y1 = self.ylim or (min(ys), max(ys))
        if self.xlim is None:
            if self.xlog:
                x0, x1 = x0 / 1.3, x1 * 1.3
            else:
                pad = (x1 - x0) * 0.03 or 0.5
                x0, x1 = x0 - pad, x1 + pad
        if self.ylim is None:
            pad = (y1 - y0) * 0.06 or 0.5
            y0, y1 = (y0 - pad if y0 < 0 else y0), y1 + pad
        return x0, x1, y0, y1

    def render(self) -> str:
        x0, x1, y0, y1 = self._limits()
        ycats = [(pos, _short(name, 40)) for pos, name in self.ycategories]
        xcats = [(pos, _short(name, 28)) for pos, name in self.xcategories]
        left = 56 + (max((len(n) for _, n in ycats), default=0) * 6.2)
        if xcats and self.xrotate:
            # a rotated label ends under its bar: the first one must not run off the left
            first = 6.2 * len(xcats[0][1]) * math.cos(math.radians(self.xrotate))
            left = max(left, first - 10)
        width = max(self.width, left + 12 + 160)  # room for the axes whatever the labels
        bottom = 40 + (34 if self.xrotate else 0)
        rows = self._legend_rows(width - 20)
        top = (22 if self.title else 10) + 16 * len(rows)
        right = 12
        pw, ph = width - left - right, self.height - top - bottom

        def sx(x: float) -> float:
            if self.xlog:
                lx0, lx1 = math.log10(x0), math.log10(x1)
                return left + (math.log10(max(x, 1e-12)) - lx0) / (lx1 - lx0) * pw
            return left + (x - x0) / ((x1 - x0) or 1) * pw

        def sy(y: float) -> float:
            return top + ph - (y - y0) / ((y1 - y0) or 1) * ph

        out = [
            f"<svg xmlns='http://www.w3.org/2000/svg' role='img' width='{_num(width)}' "
            f"height='{_num(self.height)}' viewBox='0 0 {_num(width)} "
            f"{_num(self.height)}' {_FONT}>",
            f"<title>{html.escape(self.title or self.ylabel or 'plot')}</title>",
        ]
        if self.title:
            out.append(
                f"<text x='{_num(left + pw / 2)}' y='14' text-anchor='middle' "
                f"font-weight='bold'>{html.escape(self.title)}</text>"
            )
        # grid and ticks
        yticks = [] if self.ycategories else [t for t in nice_ticks(y0, y1) if y0 <= t <= y1]
        for t in yticks:
            y = sy(t)
            out.append(
                f"<line x1='{_num(left)}' x2='{_num(left + pw)}' y1='{_num(y)}' y2='{_num(y)}' "
                f"stroke='#eee'/><text x='{_num(left - 4)}' y='{_num(y + 4)}' "
                f"text-anchor='end'>{_tick_label(t)}</text>"
            )
        for pos, name in ycats:
            out.append(
                f"<text x='{_num(left - 4)}' y='{_num(sy(pos) + 4)}' text-anchor='end'>"
                f"{html.escape(name)}</text>"
            )
        if xcats:
            for pos, name in xcats:
                x, y = sx(pos), top + ph + 14
                rot = f" transform='rotate(-{_num(self.xrotate)} {_num(x)} {_num(y)})'"
                anchor = "end" if self.xrotate else "middle"
                out.append(
                    f"<text x='{_num(x)}' y='{_num(y)}' text-anchor='{anchor}'"
                    f"{rot if self.xrotate else ''}>{html.escape(name)}</text>"
                )
        else:
            xticks = log_ticks(x0, x1) if self.xlog else nice_ticks(x0, x1)
            if self.integer_x:
                xticks = [t for t in xticks if float(t).is_integer()]
            for t in xticks:
                if not (x0 <= t <= x1):
                    continue
                x = sx(t)
                out.append(
                    f"<line x1='{_num(x)}' x2='{_num(x)}' y1='{_num(top + ph)}' "
                    f"y2='{_num(top + ph + 4)}' stroke='#444'/><text x='{_num(x)}' "
                    f"y='{_num(top + ph + 15)}' text-anchor='middle'>{_tick_label(t)}</text>"
                )
        for kind, args in self._marks:
            out.append(_mark(kind, args, sx, sy, left, pw, top, ph))
        out.append(
            f"<rect x='{_num(left)}' y='{_num(top)}' width='{_num(pw)}' height='{_num(ph)}' "
            f"fill='none' stroke='#444'/>"
        )
        if self.xlabel:
            out.append(
                f"<text x='{_num(left + pw / 2)}' y='{_num(self.height - 6)}' "
                f"text-anchor='middle'>{html.escape(self.xlabel)}</text>"
            )
        if self.ylabel:
            cy = top + ph / 2
            out.append(
                f"<text x='12' y='{_num(cy)}' text-anchor='middle' "
                f"transform='rotate(-90 12 {_num(cy)})'>{html.escape(self.ylabel)}</text>"
            )
        out.append(self._legend_svg(rows, 10, (22 if self.title else 10)))
        out.append("</svg>")
        return "".join(out)

    def _legend_rows(self, room: float) -> list[list[tuple[str, str, str]]]:
        """The legend's entries in rows that fit ``room`` pixels (one row above the axes,
        more when needed), so that no entry covers data."""
        rows: list[list[tuple[str, str, str]]] = []
        used = room
        for entry in self._legend:
            w = _entry_width(entry[0])
            if used + w > room:
                rows.append([])
                used = 0.0
            rows[-1].append(entry)
            used += w
        return rows

    def _legend_svg(self, rows: list[list[tuple[str, str, str]]], x0: float, y0: float) -> str:
        parts = []
        for r, row in enumerate(rows):
            x, y = x0, y0 + 12 + 16 * r
            for label, c, kind in row:
                if kind == "box":
                    swatch = (
                        f"<rect x='{_num(x)}' y='{_num(y - 8)}' width='12' height='9' fill='{c}'/>"
                    )
                elif kind == "dot":
                    swatch = f"<circle cx='{_num(x + 6)}' cy='{_num(y - 4)}' r='3.5' fill='{c}'/>"
                else:
                    swatch = (
                        f"<line x1='{_num(x)}' x2='{_num(x + 14)}' y1='{_num(y - 4)}' "
                        f"y2='{_num(y - 4)}' stroke='{c}' stroke-width='2'/>"
                    )
                text = f"<text x='{_num(x + 17)}' y='{_num(y)}'>{html.escape(label)}</text>"
                parts.append(swatch + text)
                x += _entry_width(label)
        return "".join(parts)


def _short(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "\u2026"


def _entry_width(label: str) -> float:
    return 30 + 6.2 * len(label)


def _rank(ordered: Sequence[float], p: float) -> float:
    return ordered[max(0, math.ceil(p / 100.0 * len(ordered)) - 1)]


def _mark(
    kind: str,
    args: Any,
    sx: Callable[[float], float],
    sy: Callable[[float], float],
    left: float,
    pw: float,
    top: float,
    ph: float,
) -> str:
    """The SVG of one mark, ``args`` as the Chart method that added it stored them."""
    if kind == "bars":
        xs, heights, width, fill, low, high = args
        paths: dict[str, list[str]] = {}
        base = sy(0.0)
        for x, h, c in zip(xs, heights, fill, strict=True):
            a, b = sx(x - width / 2), sx(x + width / 2)
            paths.setdefault(c, []).append(
                f"M{_num(a)} {_num(base)}V{_num(sy(h))}H{_num(max(b, a + 0.6))}V{_num(base)}Z"
            )
        svg = "".join(f"<path fill='{c}' d='{''.join(d)}'/>" for c, d in paths.items())
        if low is not None and high is not None:
            d = []
            for x, lo, hi in zip(xs, low, high, strict=True):
                cx = sx(x)
                d.append(
                    f"M{_num(cx)} {_num(sy(lo))}V{_num(sy(hi))}M{_num(cx - 3)} {_num(sy(lo))}"
                    f"h6M{_num(cx - 3)} {_num(sy(hi))}h6"
                )
            svg += f"<path stroke='#222' fill='none' d='{''.join(d)}'/>"
        return svg
    if kind == "line":
        xs, ys, c, marker, step = args
        if not xs:
            return ""
        pts = [(sx(x), sy(y)) for x, y in zip(xs, ys, strict=True)]
        d = [f"M{_num(pts[0][0])} {_num(pts[0][1])}"]
        for qx, qy in pts[1:]:
            d.append(f"H{_num(qx)}V{_num(qy)}" if step else f"L{_num(qx)} {_num(qy)}")
        svg = f"<path fill='none' stroke='{c}' stroke-width='1.8' d='{''.join(d)}'/>"
        if marker:
            svg += "".join(
                f"<circle cx='{_num(px)}' cy='{_num(py)}' r='3' fill='{c}'/>" for px, py in pts
            )
        return svg
    if kind == "point":
        x, y, c = args
        return f"<circle cx='{_num(sx(x))}' cy='{_num(sy(y))}' r='4.5' fill='{c}' stroke='#222'/>"
    if kind == "hline":
        y, dash, c = args
        return (
            f"<line x1='{_num(left)}' x2='{_num(left + pw)}' y1='{_num(sy(y))}' "
            f"y2='{_num(sy(y))}' stroke='{c}' stroke-dasharray='{dash}'/>"
        )
    if kind == "vline":
        x, dash, c = args
        return (
            f"<line x1='{_num(sx(x))}' x2='{_num(sx(x))}' y1='{_num(top)}' "
            f"y2='{_num(top + ph)}' stroke='{c}' stroke-dasharray='{dash}'/>"
        )
    row, (p1, p25, p50, p75, p99) = args
    y = sy(row)
    half = min(12.0, abs(sy(row - 0.25) - sy(row + 0.25)) / 2)
    return (
        f"<path stroke='#222' fill='none' d='M{_num(sx(p1))} {_num(y)}H{_num(sx(p25))}"
        f"M{_num(sx(p75))} {_num(y)}H{_num(sx(p99))}M{_num(sx(p1))} {_num(y - half / 2)}"
        f"V{_num(y + half / 2)}M{_num(sx(p99))} {_num(y - half / 2)}V{_num(y + half / 2)}'/>"
        f"<rect x='{_num(sx(p25))}' y='{_num(y - half)}' width='{_num(sx(p75) - sx(p25))}' "
        f"height='{_num(2 * half)}' fill='#dbe9f6' stroke='#222'/>"
        f"<line x1='{_num(sx(p50))}' x2='{_num(sx(p50))}' y1='{_num(y - half)}' "
        f"y2='{_num(y + half)}' stroke='#ff7f0e' stroke-width='2'/>"
    )
