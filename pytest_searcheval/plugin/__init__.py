"""pytest hooks of pytest-searcheval (registered through the ``pytest11`` entry point).

Without ``--search-eval`` the plugin only adds its options and markers: nothing heavy is imported
(numpy, psycopg, torch and the engine load inside fixtures and session hooks). With it:

1. configure: build :class:`SearchEvalConfig`, keep the state in ``config.stash``;
2. collect: one ``test_query[<qid>-<class>]`` per golden query of the split, one
   ``test_invariant[<case>]`` per invariant case, one ``test_latency[<profile>]`` when budgets are
   set; they belong to the collection's ``collection.yaml`` (node ids
   ``collection.yaml::test_query[q017-paraphrase]``), so ``-k`` and node ids select them;
3. ``searcheval_target`` (session fixture) is what gets measured;
4. controller, session finish: merge rows (serial or pytest-xdist), report, gate, exit status.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_searcheval.settings import ConfigError, SearchEvalConfig, add_options, build
from pytest_searcheval.plugin.items import (
    INVARIANT_KEY,
    LATENCY_KEY,
    ROW_KEY,
    EvalState,
    SearchEvalFile,
    SearchEvalItem,
)
from pytest_searcheval.targets import SearchTarget

STATE_KEY = pytest.StashKey[EvalState]()
OUTCOME_KEY = pytest.StashKey[dict[str, Any]]()
WORKER_OUTPUT_KEY = "searcheval"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for name, doc in (
        ("searcheval_query", "a generated golden-query test (pytest-searcheval)"),
        ("searcheval_invariant", "a generated maintenance-invariant test (pytest-searcheval)"),
        ("searcheval_latency", "a latency test gated on p95/p99 budgets (pytest-searcheval)"),
    ):
        config.addinivalue_line("markers", f"{name}: {doc}")
    if not (
        config.getoption("search_eval", False)
        or config.getoption("search_eval_update_baseline", False)
    ):
        return
    try:
        cfg = build(config)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    state = EvalState(cfg=cfg)
    _load_baseline(state)
    config.stash[STATE_KEY] = state
    config.pluginmanager.register(SessionHooks(state), "searcheval-session")
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(XdistCollector(state), "searcheval-xdist")


def _load_baseline(state: EvalState) -> None:
    path = state.cfg.baseline
    if not path.is_file():
        return
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        state.baseline_error = f"{path}: not readable JSON: {exc}"
        return
    if not isinstance(data, dict):
        state.baseline_error = f"{path}: expected a JSON object at the top level"
        return
    state.baseline = data


@pytest.fixture(scope="session")
def searcheval_target(request: pytest.FixtureRequest) -> Iterator[SearchTarget]:
    """The system under evaluation.

    Default: the reference engine on the configured collection, served over HTTP on 127.0.0.1
    (so the real service is what gets measured), or the service at ``--search-eval-url``.
    Override this fixture in a ``conftest.py`` at or above the collection directory to measure
    your own system (``HttpTarget``, ``CallableTarget`` or any ``SearchTarget``).
    """
    from pytest_searcheval.targets import HttpTarget

    cfg = _cfg(request.config)
    if cfg.url:
        target = HttpTarget(cfg.url, timeout=cfg.timeout_s)
        try:
            yield target
        finally:
            target.close()
        return
    from pytest_searcheval.engine.core import Engine
    from pytest_searcheval.engine.lifecycle import stop_on_signals
    from pytest_searcheval.engine.service import serve_in_thread
    from pytest_searcheval.targets import ServedEngineTarget

    state = request.config.stash[STATE_KEY]
    # SIGTERM and SIGHUP stop the run as Ctrl-C does (pytest then tears this fixture down, so
    # the schema is dropped and the embedded server removed) instead of ending it on the spot.
    with stop_on_signals(), Engine.start(state.collection, dsn=cfg.dsn) as engine:
        service = serve_in_thread(engine, admin=False)
        served = ServedEngineTarget(engine, service.url, timeout=cfg.timeout_s)
        try:
            yield served
        finally:
            served.close()
            service.stop()


def _cfg(config: pytest.Config) -> SearchEvalConfig:
    state = config.stash.get(STATE_KEY, None)
    if state is None:
        raise pytest.UsageError("searcheval_target needs --search-eval")
    return state.cfg


class SessionHooks:
    """Hooks active only with ``--search-eval``."""

    def __init__(self, state: EvalState) -> None:
        self.state = state
        self.lines: list[str] = []

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> Any:
        if file_path == self.state.anchor() and not self.state.collected:
            return SearchEvalFile.from_parent(parent, path=file_path)
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        # tryfirst: the generated tests must exist before -k/-m/--deselect filter the list.
        if self.state.collected:
            return
        anchor = SearchEvalFile.from_parent(session, path=self.state.anchor())
        items.extend(i for i in anchor.collect() if isinstance(i, pytest.Item))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs on the controller for xdist reports too, so rows merge the same way. Records
        # are added during the call phase; the teardown report repeats them.
        if report.when != "call":
            return
        for key, value in report.user_properties:
            if key == ROW_KEY:
                # Kept as JSON text until the session ends: strings are invisible to the
                # garbage collector, thousands of parsed rows are not (each collection would
                # walk them all).
                self.state.raw_rows.append(str(value))
            elif key == INVARIANT_KEY:
                inv = json.loads(str(value))
                self.state.invariants[inv["id"]] = inv
            elif key == LATENCY_KEY:
                lat = json.loads(str(value))
                self.state.latency_tests[lat["profile"]] = lat

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        config = session.config
        # The responses are scored already; dropping them now (one Hit per result, per query
        # and profile) spares the garbage collector that pytest runs at exit.
        self.state.cache.clear()
        if config.option.collectonly:
            return
        if hasattr(config, "workerinput"):
            payload = {"facts": self.state.facts, "unavailable": self.state.unavailable}
            config.workeroutput[WORKER_OUTPUT_KEY] = json.dumps(payload, default=str)  # type: ignore[attr-defined]
            return
        import gc

        from pytest_searcheval.plugin.finish import finish

        # Merging and reporting allocate many small objects that all stay alive until the
        # report is written: collection passes would only walk them again and again.
        collecting = gc.isenabled()
        gc.disable()
        # Never raise from a hook: a crash here would hide the test outcomes.
        try:
            outcome = finish(self.state, session)
        except Exception as exc:  # pragma: no cover - reported, not raised
            import traceback

            self.lines = [
                f"searcheval: report/gate failed: {type(exc).__name__}: {exc}",
                *traceback.format_exc().splitlines(),
            ]
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            return
        finally:
            if collecting:
                gc.enable()
        self.lines = outcome.lines
        config.stash[OUTCOME_KEY] = outcome.report
        if outcome.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(terminalreporter.config, "workerinput") or not self.lines:
            return
        terminalreporter.section("search evaluation")
        for line in self.lines:
            terminalreporter.write_line(line)


class XdistCollector:
    """Controller side of the pytest-xdist pipeline (registered only when xdist is present)."""

    def __init__(self, state: EvalState) -> None:
        self.state = state

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", {}) or {}
        raw = output.get(WORKER_OUTPUT_KEY)
        if raw is None:
            return
        worker = str(output.get("workerid", getattr(node.gateway, "id", "?")))
        self.state.worker_payloads[worker] = json.loads(raw)


__all__ = ["STATE_KEY", "SearchEvalItem", "searcheval_target"]
