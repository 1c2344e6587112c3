"""The HTML report's SVG charts (report/svg.py): well-formed, escaped, scaled, and small."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from pytest_searcheval.report.svg import Chart, log_ticks, nice_ticks

NS = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize(
    ("low", "high", "want"),
    [
        (0.0, 1.05, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (-0.02, 0.0, [-0.02, -0.015, -0.01, -0.005, 0.0]),
        (3.0, 97.0, [20.0, 40.0, 60.0, 80.0]),
        (1.0, 1.0, [1.0]),
    ],
)
def test_linear_ticks_are_round_and_inside(low: float, high: float, want: list[float]) -> None:
    assert nice_ticks(low, high) == pytest.approx(want)


def test_log_ticks_are_one_two_five_per_decade() -> None:
    assert log_ticks(3.0, 120.0) == pytest.approx([5, 10, 20, 50, 100])
    assert log_ticks(0.5, 5e6) == pytest.approx([1, 10, 100, 1e3, 1e4, 1e5, 1e6])


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def test_a_chart_is_well_formed_with_escaped_text_and_its_marks() -> None:
    fig = Chart(xlabel="queries <sorted> & 'changed'", ylabel="nDCG@10", ylim=(0, 1.05))
    fig.bars(
        [0, 1, 2],
        [0.2, 0.9, 0.5],
        0.8,
        colours="#1f77b4",
        label="a&b",
        low=[0.1, 0.8, 0.4],
        high=[0.3, 1.0, 0.6],
    )
    fig.line([0, 1, 2], [0.1, 0.5, 0.4], colour="#ff7f0e", label="line", marker=True, step=True)
    fig.point(1, 0.5, colour="#2ca02c", label="dot")
    fig.hline(0.9)
    fig.vline(1.5)
    root = _parse(fig.render())
    texts = ["".join(t.itertext()) for t in root.iter(f"{NS}text")]
    assert "queries <sorted> & 'changed'" in texts and "a&b" in texts
    assert {"0", "0.2", "0.4", "0.6", "0.8", "1"} <= set(texts)
    paths = [p.get("d", "") for p in root.iter(f"{NS}path")]
    assert sum(d.count("Z") for d in paths) == 3  # three bars, one path
    assert len(list(root.iter(f"{NS}circle"))) >= 4  # three markers and the point


def test_bar_heights_follow_the_y_scale() -> None:
    fig = Chart(width=300, height=200, ylim=(0, 1))
    fig.bars([0, 1], [0.5, 1.0], 0.5, colours=["#111111", "#222222"])
    root = _parse(fig.render())
    bars = {p.get("fill"): p.get("d", "") for p in root.iter(f"{NS}path") if p.get("fill")}

    def span(d: str) -> float:
        # M x base V top H ... V base Z
        base = float(d.split("V")[0].split(" ")[1])
        top = float(d.split("V")[1].split("H")[0])
        return base - top

    assert span(bars["#222222"]) == pytest.approx(2 * span(bars["#111111"]), abs=0.2)


def test_thousands_of_bars_stay_small_and_boxes_need_no_data_of_their_own() -> None:
    fig = Chart()
    fig.bars(list(range(5000)), [((i % 7) - 3) / 10 for i in range(5000)], 0.8, colours="#cf222e")
    svg = fig.render()
    assert len(svg) < 250_000 and svg.count("<path") == 1
    boxes = Chart(xlog=True)
    boxes.boxes([("hybrid", [5.0, 7.5, 9.0, 30.0]), ("empty", [])])
    root = _parse(boxes.render())
    assert "hybrid" in ["".join(t.itertext()) for t in root.iter(f"{NS}text")]
    assert _parse(Chart().render()).tag == f"{NS}svg"  # nothing to draw: still a chart


def test_long_labels_keep_the_axes_and_an_empty_series_keeps_its_colour() -> None:
    fig = Chart(width=300, xlog=True)
    fig.boxes([("p" * 110, [1.0, 2.0, 3.0]), ("hybrid", [0.001, 5.0])])
    root = _parse(fig.render())
    frame = next(r for r in root.iter(f"{NS}rect") if r.get("fill") == "none")
    assert float(frame.get("width", "0")) >= 150
    assert any("\u2026" in "".join(t.itertext()) for t in root.iter(f"{NS}text"))
    bars = Chart()
    bars.bars([], [], 0.4, colours="#ff7f0e", label="no data")
    swatches = [r.get("fill") for r in _parse(bars.render()).iter(f"{NS}rect")]
    assert "#ff7f0e" in swatches
