"""The generated tests' common base and the collector that makes them.

One Item class per kind of test (:class:`~pytest_searcheval.plugin.query.QueryItem`,
:class:`~pytest_searcheval.plugin.invariant.InvariantItem`,
:class:`~pytest_searcheval.plugin.latency.LatencyItem`); they share what this base holds: how
an item is built cheaply, where it points in the IDE (the query's line in its file), how its
failure is shown (the triage message, no traceback) and how the baseline's known-failure ledger
judges it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

import pytest

from pytest_searcheval.baseline.ledger import (
    LedgerVerdict,
    judge_failure,
    ledger,
    ledger_profile_differs,
)
from pytest_searcheval.plugin.compat import function_item, parametrized_node_id
from pytest_searcheval.plugin.state import STATE_KEY, EvalState
from pytest_searcheval.reasons import Reason

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr, TracebackStyle

    from pytest_searcheval.collection.model import Query


class SearchEvalFailure(AssertionError):
    """A generated test failed; the message is the whole triage report (no traceback)."""


class KnownFailure(SearchEvalFailure):
    """A failure whose reasons the baseline's known-failure ledger records: the test's
    ``xfail(raises=KnownFailure, strict=False)`` marker turns it into an xfail; any other
    exception still fails the test."""


class SearchError(SearchEvalFailure):
    """The target's search failed for this test's query (after every attempt): the message
    names the error, the URL and the attempts. Never judged by the known-failure ledger."""


class SearchEvalItem(pytest.Function):
    """Base of the generated tests."""

    kind: ClassVar[str] = ""
    ledger_kind: ClassVar[str] = ""
    function: ClassVar[Callable[..., None]]
    key: str = ""
    payload: Any = None
    line: int = 0
    file: Path | None = None

    @classmethod
    def build(
        cls,
        parent: pytest.Collector,
        *,
        key: str,
        name: str,
        payload: Any,
        file: Path,
        line: int,
        marks: Sequence[pytest.MarkDecorator] = (),
    ) -> SearchEvalItem:
        # Every item of a kind shares one function and parent, hence one fixture closure:
        # resolving it once instead of per item is most of the collection cost.
        item = function_item(cls, parent, name=name, callobj=cls.function)
        item.key, item.payload, item.file, item.line = key, payload, file, line
        parametrized_node_id(item)
        marks_of_kind = item.config.stash[STATE_KEY].kind_marks
        mark = marks_of_kind.get(cls.kind)
        if mark is None:
            mark = marks_of_kind[cls.kind] = getattr(pytest.mark, f"searcheval_{cls.kind}")
        item.add_marker(mark)
        for m in marks:
            item.add_marker(m)
        return item

    def setup(self) -> None:
        # ``request`` is in the closure (searcheval_target takes it); its value is this
        # item's own request, given here: pytest would make a fixture definition for it per
        # test (a signature inspection each, 0.2 s over 5,000 tests).
        if "request" in self.fixturenames:
            self.funcargs.setdefault("request", self._request)
        super().setup()
        target = self.funcargs.get("searcheval_target")
        if target is None:
            return
        from pytest_searcheval.targets import SearchTarget, TargetUnreachable

        try:
            self.state.prepare(cast(SearchTarget, target))
        except TargetUnreachable as exc:
            # One clear stop before the first test, not one failure per query.
            pytest.exit(
                f"searcheval: the target does not answer: {exc}. No generated test ran; "
                "check --search-eval-url (or the searcheval_target fixture) and that the "
                "service is up",
                returncode=pytest.ExitCode.TESTS_FAILED,
            )

    @property
    def state(self) -> EvalState:
        return self.config.stash[STATE_KEY]

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return (self.file or self.path), self.line, self.name

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: TracebackStyle | None = None,
    ) -> str | TerminalRepr:
        # ``style`` is Node's parameter; pytest.Function, the base, has none and follows --tb.
        if isinstance(excinfo.value, SearchEvalFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    # --- the known-failure ledger --------------------------------------------------------------

    def passed_before(self) -> bool:
        """Whether the baseline records this test as passing (present and not in the ledger)."""
        return False

    def verdict(self, reasons: Sequence[Reason]) -> LedgerVerdict:
        other = ledger_profile_differs(self.state.baseline, self.state.cfg.gated)
        if other is not None:
            return LedgerVerdict("new", other)
        recorded = ledger(self.state.baseline, self.ledger_kind).get(self.key)
        return judge_failure(reasons, recorded, self.passed_before())

    def raise_failure(self, message: str, verdict: LedgerVerdict) -> None:
        if verdict.status == "known":
            raise KnownFailure(f"{message}\n{verdict.note}")
        raise SearchEvalFailure(f"{message}\n{verdict.note}" if verdict.note else message)

    def ledger_status(self, failed: bool, verdict: LedgerVerdict | None) -> str | None:
        if verdict is not None:
            return verdict.status
        if ledger_profile_differs(self.state.baseline, self.state.cfg.gated) is not None:
            return None  # another profile's pass fixes none of the baseline's known failures
        if not failed and self.key in ledger(self.state.baseline, self.ledger_kind):
            return "fixed"
        return None


def known_failure_marker(state: EvalState, kind: str, key: str) -> pytest.MarkDecorator | None:
    """``xfail(raises=KnownFailure, strict=False)`` for a test the ledger records as failing:
    a failure for recorded reasons becomes an xfail, a pass an XPASS, anything else fails."""
    entry = ledger(state.baseline, kind).get(key)
    if entry is None:
        return None
    chosen = state.cfg.gated_profile  # resolved against the target later, when not set
    if chosen is not None and ledger_profile_differs(state.baseline, chosen) is not None:
        return None
    return pytest.mark.xfail(
        reason=f"known failure recorded in the baseline: {entry.get('summary', '')}",
        raises=KnownFailure,
        strict=False,
    )


def _marks(mark: pytest.MarkDecorator | None) -> tuple[pytest.MarkDecorator, ...]:
    return () if mark is None else (mark,)


class SearchEvalFile(pytest.File):
    """The collection's anchor file; its children are the generated tests."""

    def collect(self) -> Iterator[pytest.Item]:
        from pytest_searcheval.collection.model import CollectionError
        from pytest_searcheval.invariants.registry import cases_for
        from pytest_searcheval.plugin.invariant import InvariantItem
        from pytest_searcheval.plugin.latency import LatencyItem
        from pytest_searcheval.plugin.query import QueryItem
        from pytest_searcheval.settings import ConfigError

        state = self.config.stash[STATE_KEY]
        state.collected = True
        try:
            queries = state.selected_queries()
        except (CollectionError, KeyError) as exc:
            # The problems name file, line and field; a traceback would only hide them.
            raise self.CollectError(str(exc)) from None
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
        qpath = state.queries_file()
        lines = query_lines(qpath) if qpath is not None else {}
        qfile = qpath if qpath is not None else self.path
        classed = has_classes(queries)
        for query in queries:
            yield QueryItem.build(
                self,
                key=query.id,
                name=query_test_name(query.id, query.query_class if classed else None),
                payload=query,
                file=qfile,
                line=lines.get(query.id, 0),
                marks=_marks(known_failure_marker(state, "queries", query.id)),
            )
        cases = cases_for(state.collection, state.cfg, self.config)
        cannot = _cannot_run(state, self)
        if cannot is not None:
            runnable, reason = cannot
            left = [c for c in cases if not runnable(c)]
            cases = [c for c in cases if runnable(c)]
            if left:
                families = sorted({c.invariant for c in left})
                state.left_out = (len(left), families, reason)
        for case in cases:
            yield InvariantItem.build(
                self,
                key=str(case.id),
                name=f"test_invariant[{case.id}]",
                payload=case,
                file=qfile if case.query_id in lines else self.path,
                line=lines.get(case.query_id or "", 0),
                marks=_marks(known_failure_marker(state, "invariants", str(case.id))),
            )
        cfg = state.cfg
        if cfg.latency_enabled:
            if self.config.pluginmanager.hasplugin("benchmark"):
                timed: tuple[str | None, ...] = cfg.latency_profiles or (cfg.gated_profile,)
                for profile in timed:
                    name = profile or "gated"
                    yield LatencyItem.build(
                        self,
                        key=name,
                        name=f"test_latency[{name}]",
                        payload=profile,
                        file=self.path,
                        line=0,
                    )
            else:
                state.phases.setdefault("latency_not_measured", 0.0)


#: Why no invariant runs on run files.
RUN_FILES = "run files are fixed rankings; the invariants need a live system"


def _cannot_run(
    state: EvalState, collector: pytest.Collector
) -> tuple[Callable[[Any], bool], str] | None:
    """Which invariant cases can run on the target, when that is known at collection time.

    It is known when the plugin's own ``searcheval_target`` serves: the settings name the
    target (run files, an HTTP service, the reference engine). A ``searcheval_target`` of the
    user's conftest is known only when it is built, at run time: every case is collected, and
    the first case of a family that needs more than the target offers skips with the reason
    for the whole family; its other such cases are not run (plugin/invariant.py).
    """
    try:
        defs = collector.session._fixturemanager.getfixturedefs("searcheval_target", collector)
    except Exception:  # pragma: no cover - a pytest without the fixture manager's lookup
        return None
    if not defs or getattr(defs[-1].func, "__module__", None) != "pytest_searcheval.plugin":
        return None
    cfg = state.cfg
    kind = cfg.target
    if kind == "auto":
        kind = "run" if cfg.run else "http" if cfg.url else "engine"
    if kind == "run":
        return lambda case: False, RUN_FILES
    if kind in ("http", "bazaar"):
        return (
            lambda case: not case.mutates,
            "an HTTP service is read-only; these invariants write to an isolated copy "
            "(a MutableTarget)",
        )
    return None


def has_classes(queries: Sequence[Query]) -> bool:
    """Whether the queries carry classes of their own: a BEIR or TREC collection gives every
    query the loader's generic class, which would only lengthen each test id."""
    from pytest_searcheval.collection import GENERIC_CLASS

    return any(q.query_class != GENERIC_CLASS for q in queries)


def query_test_name(qid: str, query_class: str | None) -> str:
    """``test_query[<qid>-<class>]``, or ``test_query[<qid>]`` for a collection without classes."""
    return f"test_query[{qid}-{query_class}]" if query_class else f"test_query[{qid}]"


_ID_LINE = re.compile(r"^\s*-?\s*id:\s*['\"]?([^'\"\s#]+)")
_JSON_ID = re.compile(r"\"_id\"\s*:\s*\"([^\"]+)\"")
_TOPIC_ID = re.compile(r"^\s*(?:<num>\s*(?:Number:)?\s*(\S+)|(\S+)\t)")


def query_lines(path: Path) -> dict[str, int]:
    """Line of each query's id in its file (queries.yaml, queries.jsonl, TREC topics), so IDEs
    and reports point at the query. 0-based, as ``reportinfo`` wants."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    out: dict[str, int] = {}
    for number, line in enumerate(text.splitlines()):
        match = _ID_LINE.match(line) or _JSON_ID.search(line)
        qid = match.group(1) if match else None
        if qid is None:
            topic = _TOPIC_ID.match(line)
            qid = (topic.group(1) or topic.group(2)) if topic else None
        if qid and qid not in out:
            out[qid] = number
    return out
