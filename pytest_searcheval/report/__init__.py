"""The session report: one JSON-safe dict (schema in docs/report.md) and its renderings.

:mod:`~pytest_searcheval.report.model` builds it (``build``); :mod:`~.text` renders the terminal
summary and the Markdown page (``terminal_lines``, ``markdown``, ``to_json``); :mod:`~.html` the
HTML page with plots; :mod:`~.tradeoff` computes the no-result trade-off, :mod:`~.history` the
run history, :mod:`~.query_table` the per-query drill-down. Files are written atomically
(:mod:`pytest_searcheval.files`). The names below are re-exported for the plugin and the CLI.
"""

from __future__ import annotations

from pytest_searcheval.report.model import (
    CLASS_MEASURE,
    EVALUATED_RULE,
    EVALUATED_RULE_TREC,
    QUALITY_K,
    SCHEMA_VERSION,
    SEED,
    against_baseline,
    build,
    evaluated,
    evaluated_rule,
    quality,
)
from pytest_searcheval.report.text import (
    conformance_line,
    extraction_line,
    format_interval,
    format_number,
    invariant_lines,
    ledger_lines,
    markdown,
    quality_lines,
    relevance_lines,
    shown_measures,
    shows_latency,
    terminal_lines,
    to_json,
)
from pytest_searcheval.stats import nearest_rank

__all__ = [
    "CLASS_MEASURE",
    "EVALUATED_RULE",
    "EVALUATED_RULE_TREC",
    "QUALITY_K",
    "SCHEMA_VERSION",
    "SEED",
    "against_baseline",
    "build",
    "conformance_line",
    "evaluated",
    "evaluated_rule",
    "extraction_line",
    "format_interval",
    "format_number",
    "invariant_lines",
    "ledger_lines",
    "markdown",
    "nearest_rank",
    "quality",
    "quality_lines",
    "relevance_lines",
    "shown_measures",
    "shows_latency",
    "terminal_lines",
    "to_json",
]
