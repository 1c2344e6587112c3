"""Developer sessions: tests, eval, latency, lint, typecheck, bench, schemathesis, load.

Every session installs the project into its own virtual environment. torch is pinned to the
CPU-only 2.13.0 build where one is available, so that sentence-transformers does not pull a
multi-gigabyte CUDA build on machines without a GPU.
"""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True

TORCH = "torch==2.13.0"


def _install(session: nox.Session) -> None:
    session.install(TORCH)
    session.install("-e", ".[engine,test]")


@nox.session
def tests(session: nox.Session) -> None:
    """The project's own test suite (unit, engine, plugin), two xdist workers."""
    _install(session)
    session.run("pytest", "-n", "2", *session.posargs)


#: The tests that need nothing beyond the core install: the plugin end to end, and the measures,
#: statistics, collections, gate, reports and invariants it is made of.
CORE_TESTS = [
    "tests/plugin/test_compat.py",
    "tests/plugin/test_plugin.py",
    "tests/plugin/test_plugin_ledger.py",
    "tests/plugin/test_plugin_phases.py",
    "tests/plugin/test_plugin_runs.py",
    "tests/plugin/test_report_cli.py",
    "tests/unit/test_metrics.py",
    "tests/unit/test_collection.py",
    "tests/unit/test_records.py",
    "tests/unit/test_input_limits.py",
    "tests/unit/test_gate.py",
    "tests/unit/test_report.py",
    "tests/unit/test_report_history.py",
    "tests/unit/test_report_query_table.py",
    "tests/unit/test_files.py",
    "tests/unit/test_invariants.py",
    "tests/unit/test_compare.py",
    "tests/unit/test_pooling.py",
    "tests/unit/test_evaluation.py",
    "tests/unit/test_http_retries.py",
]


@nox.session
def floor(session: nox.Session) -> None:
    """The core tests on the floor versions of pytest and the core dependencies (what
    pyproject.toml promises), with the core install alone."""
    session.install("pytest==8.4.0", "numpy==1.26.4", "pyyaml==6.0", "httpx==0.27.0")
    session.install("--no-deps", ".")
    session.run("pytest", "-p", "no:cacheprovider", "-m", "not slow", *CORE_TESTS, *session.posargs)


@nox.session
def eval(session: nox.Session) -> None:
    """Evaluate the reference engine on the shipped collection and apply the gate."""
    _install(session)
    session.run("pytest", "--search-eval", *session.posargs)


@nox.session
def latency(session: nox.Session) -> None:
    """Per-request latency percentiles of the reference engine, gated against the budgets in
    pyproject.toml (override with --search-eval-latency-p95-ms=N, and
    --search-eval-latency-budgets=hybrid_rerank=N for the reranking profile)."""
    _install(session)
    session.run(
        "pytest", "--search-eval", "-m", "searcheval_latency", "-p", "no:xdist", *session.posargs
    )


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "pytest_searcheval", "tests", "benchmarks", "construction")
    session.run("ruff", "format", "--check", "pytest_searcheval", "tests", "benchmarks")


@nox.session
def typecheck(session: nox.Session) -> None:
    _install(session)
    session.run("mypy")


@nox.session
def bench(session: nox.Session) -> None:
    """Speed benchmarks: metrics against pytrec_eval and ranx, engine latency, plugin overhead."""
    _install(session)
    session.run("python", "benchmarks/bench_metrics.py", *session.posargs)
    session.run("python", "benchmarks/bench_engine.py")
    session.run("python", "benchmarks/bench_plugin.py")


@nox.session
def schemathesis(session: nox.Session) -> None:
    """schemathesis against the engine's published OpenAPI document (/openapi.json): the
    server on 127.0.0.1, a token of its own, bounded by --max-examples per operation and a
    timeout for the run (benchmarks/fuzz_openapi.py --help)."""
    _install(session)
    session.install("schemathesis>=4.0")
    session.run("python", "benchmarks/fuzz_openapi.py", *session.posargs)


@nox.session
def load(session: nox.Session) -> None:
    """Load on the served engine: 16 clients for 60 s on 127.0.0.1 (throughput, p50/p95/p99,
    errors; benchmarks/load_engine.py --help). docs/reliability.md quotes a run."""
    _install(session)
    session.run("python", "benchmarks/load_engine.py", *session.posargs)
