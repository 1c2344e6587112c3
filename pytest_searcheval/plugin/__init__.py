"""pytest hooks of pytest-searcheval (registered through the ``pytest11`` entry point).

Without ``--search-eval`` (or ``search_eval = true`` in the ini file) the plugin only adds its
options and markers: nothing heavy is imported. With it:

1. configure: build :class:`~pytest_searcheval.settings.SearchEvalConfig`, keep the state in
   ``config.stash`` (:mod:`~pytest_searcheval.plugin.state`);
2. collect: one ``test_query[<qid>-<class>]`` per golden query of the split, one
   ``test_invariant[<case>]`` per invariant case, one ``test_latency[<profile>]`` when budgets
   are set (:mod:`~pytest_searcheval.plugin.items`); they belong to the collection's anchor file
   (``collection.yaml``), so ``-k`` and node ids select them;
3. ``searcheval_target`` (session fixture) is what gets measured;
4. controller, session finish: merge the records (serial or pytest-xdist,
   :mod:`~pytest_searcheval.plugin.transport`), report, gate, exit status
   (:mod:`~pytest_searcheval.plugin.finish`).

Hand-written search tests use the ``searcheval`` and ``ranking_snapshot`` fixtures
(:mod:`~pytest_searcheval.plugin.fixtures`); their outcomes are a section of the report.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

# Before anything imports it: the helpers' plain asserts get pytest's explanations.
pytest.register_assert_rewrite("pytest_searcheval.assertions.checks")

from pytest_searcheval.plugin.fixtures import (  # noqa: E402
    assertrepr_compare,
    ranking_snapshot,
    searcheval,
)
from pytest_searcheval.plugin.items import SearchEvalFile, SearchEvalItem  # noqa: E402
from pytest_searcheval.plugin.state import STATE_KEY, EvalState  # noqa: E402
from pytest_searcheval.settings import ConfigError, SearchEvalConfig, add_options, build  # noqa: E402
from pytest_searcheval.targets import SearchTarget  # noqa: E402
from pytest_searcheval.types import Baseline, Report  # noqa: E402

OUTCOME_KEY = pytest.StashKey[Report | None]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for name, doc in (
        (
            "searcheval_query",
            "a golden-query test: generated, or hand-written naming its query, e.g. "
            "searcheval_query('q017') (pytest-searcheval)",
        ),
        ("searcheval_invariant", "a generated maintenance-invariant test (pytest-searcheval)"),
        ("searcheval_latency", "a latency test gated on p95/p99 budgets (pytest-searcheval)"),
        (
            "searcheval_gated",
            "a hand-written search test whose failure also fails the gate (pytest-searcheval)",
        ),
    ):
        config.addinivalue_line("markers", f"{name}: {doc}")
    try:
        cfg = build(config)
    except ConfigError as exc:
        # build() reads past the switches only when one of them (flag or ini key) turns
        # the evaluation on, so any error here is a value the user set for a run they asked
        # for: `search_eval = true` in the ini is held to the same checks as --search-eval.
        # --help and --version must still answer, whatever the ini says.
        if config.option.help or config.option.version:
            return
        raise pytest.UsageError(str(exc)) from None
    if not cfg.enabled:
        return
    state = EvalState(cfg=cfg, rootpath=Path(config.rootpath).resolve(), inipath=config.inipath)
    _load_baseline(state)
    config.stash[STATE_KEY] = state
    config.pluginmanager.register(SessionHooks(state), "searcheval-session")
    from pytest_searcheval.plugin.fixtures import register

    register(config)
    if not hasattr(config, "workerinput"):
        from pytest_searcheval.plugin.phases import PhaseRecorder

        config.pluginmanager.register(
            PhaseRecorder(state.latency_ms, lambda: _facts(state)), "searcheval-phases"
        )
    if config.pluginmanager.hasplugin("xdist"):
        from pytest_searcheval.plugin.transport import XdistTransport

        config.pluginmanager.register(XdistTransport(state), "searcheval-xdist")


#: The plugin objects configure registers; unconfigure takes each back out.
REGISTERED = (
    "searcheval-session",
    "searcheval-hand-written",
    "searcheval-phases",
    "searcheval-xdist",
)


def pytest_unconfigure(config: pytest.Config) -> None:
    # A process that runs pytest.main more than once (an IDE, pytester in process) must not
    # carry one session's hooks, caches or answers into the next.
    for name in REGISTERED:
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin, name)
    state = config.stash.get(STATE_KEY, None)
    if state is not None:
        state.close()
        del config.stash[STATE_KEY]


def _facts(state: EvalState) -> dict[str, Any] | None:
    from pytest_searcheval.plugin.finish import merged_facts

    return merged_facts(state)


def _load_baseline(state: EvalState) -> None:
    from pytest_searcheval.baseline.gate import BASELINE_SCHEMA_VERSION

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
    if data.get("schema_version") != BASELINE_SCHEMA_VERSION:
        state.baseline_error = (
            f"{path}: schema_version {data.get('schema_version')!r}, expected "
            f"{BASELINE_SCHEMA_VERSION}; re-baseline with --search-eval-update-baseline"
        )
        return
    # a baseline of the schema version this release writes; its readers read it defensively
    state.baseline = cast("Baseline", data)


@pytest.fixture(scope="session")
def searcheval_target(request: pytest.FixtureRequest) -> Iterator[SearchTarget]:
    """The system under evaluation.

    Default: TREC run files when ``--search-eval-run`` is set; the service at
    ``--search-eval-url``; else the reference engine (the ``engine`` extra) on the configured
    collection, served over HTTP on 127.0.0.1 so that the real service is what gets measured.
    Override this fixture in a ``conftest.py`` at or above the collection to measure your own
    system (``HttpTarget``, ``CallableTarget`` or any ``SearchTarget``).
    """
    from pytest_searcheval.targets.default import default_target

    state = request.config.stash.get(STATE_KEY, None)
    if state is None:
        raise pytest.UsageError("searcheval_target needs --search-eval")
    with default_target(state) as target:
        yield target


@pytest.hookimpl(tryfirst=True)
def pytest_assertrepr_compare(
    config: pytest.Config, op: str, left: object, right: object
) -> list[str] | None:
    return assertrepr_compare(op, left, right)


def _by_kind(items: list[pytest.Item]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        if isinstance(item, SearchEvalItem):
            counts[item.kind] = counts.get(item.kind, 0) + 1
    return counts


def _selects(config: pytest.Config, anchor: Path) -> bool:
    """Whether this session's arguments select the anchor file, as pytest would read them.

    Without arguments (testpaths or the invocation directory) the evaluation runs even when
    the anchor lies outside those paths: ``pytest --search-eval`` must evaluate. Explicit
    arguments (paths, node ids) restrict it: ``pytest tests/test_unit.py::test_unit`` with
    ``search_eval = true`` in the ini runs that test alone, and writes no report. An argument
    that names the anchor or a directory above it selects it even where pytest would not
    visit the file (a collection under a directory in ``norecursedirs``).
    """
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return True
    anchor = anchor.resolve()
    invocation = Path(config.invocation_params.dir)
    for arg in config.args:
        path = (invocation / arg.split("::", 1)[0]).resolve()
        if path == anchor or path in anchor.parents:
            return True
    return False


def _cfg(config: pytest.Config) -> SearchEvalConfig:
    return config.stash[STATE_KEY].cfg


class SessionHooks:
    """Hooks active only with the evaluation on."""

    def __init__(self, state: EvalState) -> None:
        self.state = state
        self.lines: list[str] = []
        self.generated: dict[str, int] = {}

    def pytest_collection(self, session: pytest.Session) -> None:
        """Read the collection before pytest collects: a setting the collection contradicts
        (a grade scale its qrels do not fit) is then a usage error like any bad setting (a
        clean ``ERROR:`` line, exit status 4), not a collection error with a traceback. A
        pytest-xdist controller collects nothing and reads nothing here."""
        from pytest_searcheval.settings import ConfigError

        if not _selects(session.config, self.state.anchor()):
            return
        try:
            self.state.selected_queries()
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
        except Exception:  # CollectionError and the like: the collector reports them
            return

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> Any:
        if file_path == self.state.anchor() and not self.state.collected:
            return SearchEvalFile.from_parent(parent, path=file_path)
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        # tryfirst: the generated tests must exist before -k/-m/--deselect/--lf filter the list.
        if not self.state.collected and _selects(config, self.state.anchor()):
            anchor = SearchEvalFile.from_parent(session, path=self.state.anchor())
            generated = [i for i in anchor.collect() if isinstance(i, pytest.Item)]
            items.extend(generated)
            # Reported as a collector's result, so pytest's "collected N items" (and
            # "/ M deselected") counts the tests generated here, as it counts a test file's.
            report = pytest.CollectReport(anchor.nodeid, "passed", None, list(generated))
            anchor.ihook.pytest_collectreport(report=report)
        self.generated = _by_kind(items)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        selected = _by_kind(session.items)
        self.state.selected = sum(selected.values())
        # Which query tests run in this session: the same on every xdist worker, so threshold
        # compliance leaves to them what they judge whichever worker runs them.
        self.state.invariant_context.query_tests = frozenset(
            item.payload.id
            for item in session.items
            if isinstance(item, SearchEvalItem) and item.kind == "query"
        )
        # A deselection (-k, -m, --lf, node ids, --deselect) of any query test, or of some but
        # not all invariant cases, makes the run partial: its report goes beside the full one
        # and the gate judges only what it can. Leaving out a whole kind (-m searcheval_query)
        # is a complete run of the rest.
        q_all, q_sel = self.generated.get("query", 0), selected.get("query", 0)
        i_all, i_sel = self.generated.get("invariant", 0), selected.get("invariant", 0)
        self.state.partial = q_sel < q_all or 0 < i_sel < i_all

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        # A case of a family whose first case skipped for it (the target cannot run them)
        # stands for no check: it passes through setup and teardown unreported, and counts
        # as deselected, so a read-only conftest target gives one skip per family.
        from pytest_searcheval.plugin.compat import run_unreported
        from pytest_searcheval.plugin.invariant import drops

        if not drops(self.state, item) or not run_unreported(item, nextitem):
            return None
        item.ihook.pytest_deselected(items=[item])
        return True

    def pytest_report_collectionfinish(self, config: pytest.Config) -> list[str]:
        if self.state.left_out is None:
            return []
        count, families, reason = self.state.left_out
        return [
            f"searcheval: {count} invariant case(s) not collected ({', '.join(families)}): {reason}"
        ]

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        config = session.config
        # The responses are scored already; dropping them now (one Hit per result, per query
        # and profile) spares the garbage collector that pytest runs at exit.
        self.state.close()
        if config.option.collectonly:
            return
        if hasattr(config, "workerinput"):
            from pytest_searcheval.plugin.transport import send

            send(self.state, config)
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
            self._gate_test(session, None, f"{type(exc).__name__}: {exc}")
            return
        finally:
            if collecting:
                gc.enable()
        self.lines = outcome.lines
        config.stash[OUTCOME_KEY] = outcome.report
        if outcome.report is not None and outcome.report.get("gate") is not None:
            self._gate_test(session, outcome.report, None)
        if outcome.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _gate_test(self, session: pytest.Session, report: Any, error: str | None) -> None:
        """The gate's verdict as the test ``test_gate`` (plugin/gate_item.py)."""
        from pytest_searcheval.plugin.gate_item import outcome_of, run_gate_item

        outcome, message = outcome_of(report, error)
        if outcome != "failed":
            # A passing or partial gate adds no test: the counts stay those of the tests run,
            # and the section's verdict line says what a partial run could not judge.
            return
        try:
            run_gate_item(session, self.state.anchor(), outcome, message)
        except Exception as exc:  # pragma: no cover - the verdict is in the exit status anyway
            self.lines.append(f"searcheval: test_gate not reported: {type(exc).__name__}: {exc}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(terminalreporter.config, "workerinput") or not self.lines:
            return
        terminalreporter.section("search evaluation")
        for line in self.lines:
            terminalreporter.write_line(line)
        for family, (reason, _, left) in sorted(self.state.not_run.items()):
            if not left:
                continue
            terminalreporter.write_line(
                f"searcheval: {family}: 1 case skipped and {left} not run (deselected): {reason}"
            )


__all__ = ["STATE_KEY", "SearchEvalItem", "ranking_snapshot", "searcheval", "searcheval_target"]
