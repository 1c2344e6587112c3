"""The fixtures of hand-written search tests: ``searcheval`` and ``ranking_snapshot``.

``searcheval`` (session) searches the configured target, the one the golden queries measure,
with the run's profiles, limit and timeout, and measures a golden query or a ranking against
the collection's judgments with the run's measures and conventions. ``ranking_snapshot``
(function) keeps rankings in files beside the test (:mod:`pytest_searcheval.assertions.snapshot`).

The tests that use them stay ordinary pytest tests; :class:`HandWrittenRecorder` only watches
their reports: it adds the rankings a failed test searched to its report, and carries each
outcome (an attribute of the report, which pytest-xdist sends to the controller with it) into
the session report's "hand-written search tests" section. They change the gate only when
marked ``searcheval_gated``. It also notes which tests were collected and which passed with
which snapshot checks (each pytest-xdist worker sends its notes in ``workeroutput``), so that
the session's end lists the snapshot entries no test checks any more and an update removes
them (:func:`pytest_searcheval.assertions.snapshot.unused`).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_searcheval.collection.model import title_of
from pytest_searcheval.evaluation import Evaluation
from pytest_searcheval.plugin.state import STATE_KEY
from pytest_searcheval.targets import SearchResponse, SearchTarget, TargetUnavailable

if TYPE_CHECKING:
    from pytest_searcheval.assertions.result import Context, Measures, SearchResult
    from pytest_searcheval.collection.model import Query

#: The attribute of a TestReport that carries a hand-written test's facts.
REPORT_ATTR = "searcheval_hand_written"
FIXTURES = ("searcheval", "ranking_snapshot")
GATED_MARK = "searcheval_gated"
OFF = (
    "the search evaluation is off: run pytest with --search-eval (or set search_eval = true "
    "in the ini file) to search the configured target"
)


@dataclass
class HandWrittenFacts:
    """What one hand-written test did, sent with its reports."""

    searches: list[SearchResult] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    recorded: list[str] = field(default_factory=list)
    compared: int = 0
    #: snapshot file -> the names the test checked in it
    checked: dict[str, list[str]] = field(default_factory=dict)


FACTS_KEY = pytest.StashKey[HandWrittenFacts]()


class Searcheval:
    """The ``searcheval`` fixture: the configured target, searched and measured."""

    def __init__(self, state: Evaluation, target: SearchTarget, recorder: HandWrittenRecorder):
        self._state = state
        self._target = target
        self._recorder = recorder
        state.describe_target(target)

    # --- what the run is configured with ----------------------------------------------------

    @property
    def target(self) -> SearchTarget:
        return self._target

    @property
    def profiles(self) -> tuple[str, ...]:
        return tuple(self._state.cfg.profiles or ())

    @property
    def gated_profile(self) -> str:
        return self._state.cfg.gated

    @property
    def measures(self) -> tuple[str, ...]:
        """The run's measures, named as the report names them (``AP@20`` when cut at 20)."""
        return tuple(self._state.cfg.measures)

    @property
    def collection(self) -> Any:
        return self._state.collection

    # --- searching --------------------------------------------------------------------------

    def search(
        self,
        text: str,
        *,
        profile: str | None = None,
        limit: int | None = None,
        filters: Mapping[str, Any] | None = None,
        extract: bool = True,
    ) -> SearchResult:
        """Search ``text`` on ``profile`` (default: the gated profile), up to ``limit``
        results (default: the run's ``--search-eval-limit``). An unavailable profile, a
        failing target or a search slower than ``--search-eval-timeout`` raises
        :class:`~pytest_searcheval.targets.TargetUnavailable` with the reason.

        A target that answers golden queries by id (TREC run files, ``--search-eval-run``)
        answers the text of one of the collection's queries (case and spacing aside) with
        that query's ranking, as :meth:`query` does; any other text, or filters, raise
        ``TargetUnavailable`` saying so."""
        cfg = self._state.cfg
        chosen = profile or cfg.gated
        wanted = cfg.limit if limit is None else int(limit)
        if wanted < 1:
            raise ValueError(f"searcheval.search: limit must be a positive integer, got {limit!r}")
        self._available(chosen)
        by_id = getattr(self._target, "search_query", None) is not None
        if by_id and not filters:
            golden = self._golden_ids(text)
            if len(golden) == 1:
                query = self._state.collection.queries[golden[0]]
                return self._answer(query, chosen, text, None if limit is None else wanted)
        start = time.perf_counter()
        try:
            response = self._target.search(
                text, profile=chosen, limit=wanted, filters=dict(filters or {}), extract=extract
            )
        except TargetUnavailable as exc:
            if by_id:
                raise TargetUnavailable(self._by_id_only(text, chosen, filters)) from exc
            raise TargetUnavailable(f"profile {chosen!r}: {exc or 'target unavailable'}") from exc
        elapsed = (time.perf_counter() - start) * 1000.0
        self._in_time(chosen, text, elapsed)
        qid = self._golden_id(text)
        return self._result(text, chosen, wanted, response, qid, filters, elapsed)

    def query(self, qid: str | None = None, *, profile: str | None = None) -> SearchResult:
        """Golden query ``qid`` searched as its generated test searches it (the same cached
        answer); ``qid`` defaults to the test's ``searcheval_query("<id>")`` mark."""
        query = self._golden(qid)
        chosen = profile or self._state.cfg.gated
        self._available(chosen)
        return self._answer(query, chosen, query.text, None)

    def _answer(self, query: Query, profile: str, text: str, limit: int | None) -> SearchResult:
        """The golden query's cached answer; cut at ``limit`` when one is asked for."""
        response = self._state.search(self._target, query, profile)
        if response is None:
            why = self._state.unavailable.get(profile, "no response")
            raise TargetUnavailable(f"profile {profile!r} unavailable: {why}")
        elapsed = self._state.latency_ms.get((query.id, profile))
        wanted = self._state.cfg.limit if limit is None else limit
        return self._result(
            text, profile, wanted, response, query.id, None, elapsed, cut=limit is not None
        )

    def _by_id_only(self, text: str, profile: str, filters: Mapping[str, Any] | None) -> str:
        head = (
            f"profile {profile!r}: a run file (--search-eval-run) holds a fixed ranking for "
            "each of the collection's queries and searches nothing else"
        )
        golden = self._golden_ids(text)
        if filters and golden:
            return (
                f"{head}: it cannot apply filters to the ranking of {golden[0]!r}; search "
                f"without filters=, or use searcheval.query({golden[0]!r})"
            )
        if len(golden) > 1:
            named = ", ".join(golden)
            return (
                f"{head}: {text!r} is the text of several queries ({named}); name one: "
                f"searcheval.query({golden[0]!r})"
            )
        return (
            f"{head}: {text!r} is not the text of one of them; use searcheval.query('<id>') "
            "with a query id, or search the text of a query as the collection gives it"
        )

    # --- measuring ------------------------------------------------------------------------

    def measure(
        self,
        query: str | SearchResult | None = None,
        *,
        ranking: SearchResult | Sequence[str] | None = None,
        profile: str | None = None,
    ) -> Measures:
        """Every measure of the run for a golden query against the collection's judgments.

        ``measure("q017")`` searches the golden query (as :meth:`query`); ``measure(result)``
        scores a result whose text is a golden query's; ``measure("q017", ranking=[...])``
        scores any ranking (ids, best first) against q017's judgments. The relevance level,
        gain and trec-compat mode are the run's."""
        from pytest_searcheval.assertions.result import Measures, SearchResult

        if isinstance(query, SearchResult):
            if ranking is not None:
                raise TypeError("searcheval.measure: give a result or ranking=, not both")
            ranking, query = query, query.qid
            if query is None:
                raise LookupError(
                    f"searcheval.measure: {ranking.query!r} is not the text of a golden query; "
                    "name the query whose judgments apply: measure('<qid>', ranking=result)"
                )
        golden = self._golden(query)
        if ranking is None:
            result = self.query(golden.id, profile=profile)
        elif isinstance(ranking, SearchResult):
            result = ranking
        else:
            ids = tuple(str(d) for d in ranking)
            if len(set(ids)) != len(ids):
                raise ValueError("searcheval.measure: a document id appears twice in the ranking")
            scores = tuple(float(-i) for i in range(len(ids)))
            result = SearchResult(
                query=golden.text,
                profile=profile or "ad hoc",
                limit=len(ids),
                ids=ids,
                scores=scores,
                context=self._context(golden.id, ids, None),
            )
        if result.qid != golden.id:
            result = _with_context(result, self._context(golden.id, result.ids, result.profile))
        return self._measures(golden.id, result, Measures)

    def _measures(self, qid: str, result: SearchResult, kind: type[Measures]) -> Measures:
        from pytest_searcheval.evaluation import measure_one, relevant_count

        state = self._state
        cfg = state.cfg
        names = tuple(cfg.measures)
        values = measure_one(state, qid, result.ids, names)
        judged = state.collection.judgments.get(qid, {})
        level = cfg.relevance_level or 1
        undefined = None
        if not values:
            if cfg.trec_compat:
                undefined = "the query has no judgments (trec-compat scores judged queries only)"
            elif relevant_count(judged, level) == 0:
                undefined = (
                    f"no judged document of grade >= {level} (the relevance level): the query "
                    "is left out of the relevance measures and scored by no-result accuracy"
                )
        base: dict[str, float] = {}
        entry = state.baseline_query(qid, result.profile)
        if entry is None and result.profile == cfg.gated:
            entry = state.baseline_query(qid)
        if entry is not None:
            base = {k: float(v) for k, v in entry.items() if k in names and _number(v)}
        self._facts().queries.append(qid)
        return kind(
            measured=values,
            qid=qid,
            result=result,
            names=names,
            conventions={
                "relevance_level": level,
                "gain": cfg.gain,
                "trec_compat": cfg.trec_compat,
                "depth": cfg.limit,
            },
            undefined=undefined,
            baseline=base,
        )

    # --- helpers -----------------------------------------------------------------------------

    def _available(self, profile: str) -> None:
        from pytest_searcheval.targets.http import HttpTarget

        target = self._target
        if isinstance(target, HttpTarget) and target.one_profile and profile != "default":
            # a usage error, as a bad limit is: the template cannot send another profile
            raise ValueError(
                f"searcheval.search: {target.one_profile_error(target.base_url, profile)}"
            )
        reason = self._state.availability(profile)
        if reason is not None:
            raise TargetUnavailable(f"profile {profile!r} unavailable: {reason}")

    def _in_time(self, profile: str, text: str, elapsed_ms: float) -> None:
        timeout = self._state.cfg.timeout
        if elapsed_ms > timeout * 1000.0:
            raise TargetUnavailable(
                f"profile {profile!r}: {text!r} took {elapsed_ms / 1000:.1f} s > timeout "
                f"{timeout:g} s (--search-eval-timeout)"
            )

    def _golden(self, qid: str | None) -> Query:
        if qid is None:
            qid = self._recorder.marked_query()
            if qid is None:
                raise LookupError(
                    "searcheval: name a golden query (measure('q017')) or mark the test with "
                    "@pytest.mark.searcheval_query('q017')"
                )
        queries = self._state.collection.queries
        if qid not in queries:
            known = ", ".join(sorted(queries)[:8]) + (", ..." if len(queries) > 8 else "")
            raise LookupError(f"searcheval: no golden query {qid!r} in the collection ({known})")
        return queries[qid]

    def _golden_id(self, text: str) -> str | None:
        golden = self._golden_ids(text)
        return golden[0] if golden else None

    def _golden_ids(self, text: str) -> list[str]:
        """The golden queries whose text is ``text``, case and spacing aside."""
        wanted = " ".join(text.split()).casefold()
        return [
            query.id
            for query in self._state.collection.queries.values()
            if " ".join(query.text.split()).casefold() == wanted
        ]

    def _context(self, qid: str | None, ids: Sequence[str], profile: str | None) -> Context:
        from pytest_searcheval.assertions.result import Context

        state = self._state
        docs = state.collection.documents
        base_ids = None
        if qid is not None and profile is not None:
            entry = state.baseline_query(qid, profile)
            if entry is not None and isinstance(entry.get("ids"), list):
                base_ids = tuple(str(d) for d in entry["ids"])
        shown = set(ids) | set(base_ids or ())
        return Context(
            titles={d: title_of(docs, d) for d in shown if d in docs},
            qid=qid,
            grades=dict(state.collection.judgments.get(qid, {})) if qid is not None else {},
            baseline_ids=base_ids,
            baseline_tag=state.baseline_tag,
        )

    def _result(
        self,
        text: str,
        profile: str,
        limit: int,
        response: SearchResponse,
        qid: str | None,
        filters: Mapping[str, Any] | None,
        elapsed: float | None,
        *,
        cut: bool = False,
    ) -> SearchResult:
        from pytest_searcheval.assertions.result import SearchResult

        # A duplicated id would count twice in every measure; the first occurrence is its rank.
        seen: dict[str, float] = {}
        for hit in response.hits:
            seen.setdefault(hit.id, hit.score)
        pairs = list(seen.items())
        if cut or not response.meta.get("whole"):
            pairs = pairs[:limit]
        ids = tuple(d for d, _ in pairs)
        result = SearchResult(
            query=text,
            profile=profile,
            limit=limit,
            ids=ids,
            scores=tuple(s for _, s in pairs),
            filters=dict(filters or {}),
            applied_filters=dict(response.applied_filters),
            extracted_filters=dict(response.extracted_filters),
            violations=tuple(self._violations(ids, response)),
            latency_ms=elapsed,
            context=self._context(qid, ids, profile),
        )
        self._facts().searches.append(result)
        return result

    def _violations(self, ids: Sequence[str], response: SearchResponse) -> list[str]:
        from pytest_searcheval.domain import domain_of

        coll = self._state.collection
        domain = domain_of(coll)
        applied = domain.applied(response.applied_filters) if domain is not None else {}
        out: list[str] = []
        for rank, doc_id in enumerate(ids, start=1):
            if doc_id not in coll.documents:
                if coll.documents:
                    out.append(f"rank {rank}: {doc_id!r} is not a document of the corpus")
                continue
            if domain is not None and applied:
                doc = coll.documents[doc_id]
                broken = domain.violations(doc, applied, coll)
                out += [f"rank {rank}: {doc_id}: {why}" for why in broken]
        return out

    def _facts(self) -> HandWrittenFacts:
        return self._recorder.facts()


def _with_context(result: SearchResult, context: Context) -> SearchResult:
    return dataclasses.replace(result, context=context)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class RankingSnapshot:
    """The ``ranking_snapshot`` fixture: rankings kept in a file beside the test."""

    def __init__(
        self,
        path: Path,
        test_name: str,
        update: bool,
        facts: HandWrittenFacts,
        rootpath: Path,
        titles: Mapping[str, str],
        strict: str | None = None,
        nodeid: str = "",
    ) -> None:
        self.path = path
        self.test_name = test_name
        self.update = update
        #: why a snapshot never recorded fails (``None``: it is recorded)
        self.strict = strict
        self.nodeid = nodeid or test_name
        self._facts = facts
        self._rootpath = rootpath
        #: every title of the corpus: a recorded document may be one this run did not return
        self._titles = titles

    def check(
        self,
        ranking: SearchResult | Sequence[str],
        name: str | None = None,
        *,
        min_rbo: float | None = None,
        rbo_p: float = 0.9,
        top_k: int | None = None,
        max_rank_shift: int | None = None,
        depth: int | None = None,
    ) -> None:
        """Compare ``ranking`` with its snapshot ``name`` (default: the result's query text),
        recording it when there is none yet or with ``--search-eval-snapshot-update``. In a
        strict run (CI, or ``--search-eval-snapshot-strict``) a snapshot never recorded fails
        instead, saying how to record it.

        With no bound the rankings must be equal; ``min_rbo`` (rank-biased overlap, ``rbo_p``
        its persistence), ``top_k`` (the same documents in the first k, in any order) and
        ``max_rank_shift`` (no recorded document moves further or drops out) loosen that, all
        of them holding together; ``depth`` compares only the first ``depth`` results."""
        __tracebackhide__ = True
        from pytest_searcheval.assertions import snapshot
        from pytest_searcheval.assertions.result import Context, SearchResult

        tolerance = snapshot.Tolerance(min_rbo, rbo_p, top_k, max_rank_shift, depth)
        now = snapshot.entry_of(ranking)
        if name is None:
            if now.query is None:
                raise TypeError("ranking_snapshot.check: name the snapshot of a list of ids")
            name = now.query
        self._facts.checked.setdefault(str(self.path), []).append(name)
        context = ranking.context if isinstance(ranking, SearchResult) else Context()
        try:
            entries = snapshot.read(self.path)
        except snapshot.SnapshotError as exc:
            if not self.update:
                raise
            entries = {}  # an unreadable file is what an update replaces
            del exc
        recorded = entries.get(name)
        if recorded is None and not self.update and self.strict is not None:
            raise AssertionError(snapshot.missing(name, self._shown(), self.strict, self.nodeid))
        if recorded is None or self.update:
            if recorded != now:
                entries[name] = now
                self._write(entries)
            return
        self._facts.compared += 1
        problems = snapshot.compare(recorded, now, tolerance)
        if problems:
            context = dataclasses.replace(
                context,
                titles={d: self._titles[d] for d in {*recorded.ids, *now.ids} if d in self._titles},
            )
            raise AssertionError(
                snapshot.diff(name, self._shown(), recorded, now, problems, tolerance, context)
            )

    def _write(self, entries: Mapping[str, Any]) -> None:
        from pytest_searcheval.assertions import snapshot
        from pytest_searcheval.files import write_atomic

        text = snapshot.render(self.test_name, entries, self._titles)
        old = self.path.read_text(encoding="utf-8") if self.path.is_file() else None
        if text != old:
            write_atomic(self.path, text)
            shown = self._shown()
            if shown not in self._facts.recorded:
                self._facts.recorded.append(shown)

    def _shown(self) -> str:
        try:
            return self.path.relative_to(self._rootpath).as_posix()
        except ValueError:
            return str(self.path)


class _Titles(Mapping[str, str]):
    """The corpus's titles, read when a diff or a file needs one."""

    def __init__(self, state: Evaluation) -> None:
        self._docs = state.collection.documents

    def __getitem__(self, doc_id: str) -> str:
        return title_of(self._docs, doc_id)

    def __iter__(self) -> Iterator[str]:
        return iter(self._docs)

    def __len__(self) -> int:
        return len(self._docs)


# --- the fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def searcheval(request: pytest.FixtureRequest) -> Searcheval:
    """Search the configured target and measure rankings against the collection's judgments.

    ``searcheval.search(text, profile=, limit=, filters=)``, ``searcheval.query("q017")``,
    ``searcheval.measure("q017")`` (see docs/assertions.md). Skips the test when the
    evaluation is off (no ``--search-eval``)."""
    state = request.config.stash.get(STATE_KEY, None)
    recorder = request.config.stash.get(RECORDER_KEY, None)
    if state is None or recorder is None:
        pytest.skip(OFF)
    target = request.getfixturevalue("searcheval_target")
    return Searcheval(state, target, recorder)


@pytest.fixture
def ranking_snapshot(request: pytest.FixtureRequest, searcheval: Searcheval) -> RankingSnapshot:
    """Rankings recorded beside the test, compared on later runs (see docs/assertions.md)."""
    import os

    from pytest_searcheval.assertions.snapshot import snapshot_path, strict_reason

    state = request.config.stash[STATE_KEY]
    node = request.node
    return RankingSnapshot(
        snapshot_path(Path(node.path), node.name),
        node.name,
        bool(state.cfg.snapshot_update),
        searcheval._facts(),
        Path(request.config.rootpath),
        _Titles(state),
        strict=strict_reason(state.cfg.snapshot_strict, os.environ),
        nodeid=node.nodeid,
    )


# --- the reports --------------------------------------------------------------------------------


def hand_written(item: pytest.Item) -> bool:
    return any(name in getattr(item, "fixturenames", ()) for name in FIXTURES)


class HandWrittenRecorder:
    """Watches the hand-written search tests (in every process that runs tests) and collects
    their outcomes (on the controller, or serially in the one process)."""

    def __init__(self, config: pytest.Config | None = None) -> None:
        from pytest_searcheval.assertions.snapshot import Usage

        self.config = config
        self.current: pytest.Item | None = None
        #: node id -> facts and outcome, filled from the reports
        self.outcomes: dict[str, dict[str, Any]] = {}
        #: the snapshot files the tests keep, for the unused entries (merged from the workers)
        self.usage = Usage()
        self.unused_lines: list[str] = []
        #: module node id -> the module's file, for every module a test was collected from
        self._modules: dict[str, Path] = {}
        self._partial_modules: set[str] = set()
        #: the modules that had a snapshot directory when collected, and their tests
        self._with_snapshots: set[str] = set()
        self._tracked: set[str] = set()
        #: node id -> whether every phase so far lets it count as passed
        self._clean: dict[str, bool] = {}

    def facts(self) -> HandWrittenFacts:
        item = self.current
        if item is None:  # a search from a session fixture: nothing to attach it to
            return HandWrittenFacts()
        return item.stash.setdefault(FACTS_KEY, HandWrittenFacts())

    def marked_query(self) -> str | None:
        item = self.current
        mark = item.get_closest_marker("searcheval_query") if item is not None else None
        return str(mark.args[0]) if mark is not None and mark.args else None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        self.current = item
        try:
            return (yield)
        finally:
            self.current = None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        self._snapshot_outcome(item, report)
        if not hand_written(item):
            return report
        facts = item.stash.get(FACTS_KEY, HandWrittenFacts())
        if report.failed and facts.searches:
            # The rankings the failure message does not show whole already: an id that was
            # not returned has no rank to explain, a plain assert on ids none at all, and
            # pytest cuts a long explanation to 8 lines unless -vv.
            shown = str(report.longrepr)
            lines: list[str] = []
            for result in facts.searches[-5:]:
                explained = result.explain()
                if not all(line.strip() in shown for line in explained):
                    lines += [*explained, ""]
            if lines:
                report.sections.append(
                    ("searcheval: rankings this test searched", "\n".join(lines).rstrip())
                )
        setattr(
            report,
            REPORT_ATTR,
            {
                "gated": item.get_closest_marker(GATED_MARK) is not None,
                "queries": sorted(set(facts.queries) | {r.qid for r in facts.searches if r.qid}),
                "searches": len(facts.searches),
                "snapshots_recorded": list(facts.recorded),
                "snapshots_compared": facts.compared,
            },
        )
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, REPORT_ATTR, None)
        if not isinstance(data, dict):
            return
        entry = self.outcomes.setdefault(report.nodeid, {"outcome": "passed"})
        entry.update(data)
        wasxfail = hasattr(report, "wasxfail")
        if report.when == "call":
            if report.passed:
                outcome = "xpassed" if wasxfail else "passed"
            elif report.skipped:
                outcome = "xfailed" if wasxfail else "skipped"
            else:
                outcome = "failed"
            if entry["outcome"] == "passed":
                entry["outcome"] = outcome
        elif report.failed:
            entry["outcome"] = "error"
        elif report.skipped and entry["outcome"] == "passed":
            entry["outcome"] = "xfailed" if wasxfail else "skipped"

    # --- unused snapshot entries ------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # tryfirst: every collected test, before -k, -m, --deselect or --lf leave some out.
        from pytest_searcheval.assertions.snapshot import snapshot_path

        for item in items:
            path = getattr(item, "path", None)
            if path is None or Path(path).suffix != ".py":
                continue
            module = item.nodeid.split("::", 1)[0]
            if module not in self._modules:
                self._modules[module] = Path(path)
                if _rankings(Path(path)).is_dir():
                    self._with_snapshots.add(module)
            if module in self._with_snapshots:
                file = str(snapshot_path(Path(path), item.name))
                self.usage.tests.setdefault(file, {})[item.nodeid] = item.name
                self._tracked.add(item.nodeid)

    def pytest_deselected(self, items: Sequence[pytest.Item]) -> None:
        for item in items:
            self._partial_modules.add(item.nodeid.split("::", 1)[0])

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._partial_modules.add(report.nodeid.split("::", 1)[0])

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # After every deselection: which modules were collected whole.
        config = session.config
        if config.getoption("lf", False) or config.getoption("pyargs", False):
            return  # --lf collects only the failed tests of a module
        invocation = Path(config.invocation_params.dir)
        named = {
            (invocation / arg.split("::", 1)[0]).resolve() for arg in config.args if "::" in arg
        }
        whole: set[str] = set()
        for module, path in self._modules.items():
            if module in self._partial_modules or path.resolve() in named:
                continue
            folder = _rankings(path)
            if folder.is_dir():
                whole.add(str(folder))
            # beside a module collected whole, the snapshots of modules that no longer exist
            if folder.parent.is_dir():
                for other in folder.parent.iterdir():
                    if other.is_dir() and not (path.parent / f"{other.name}.py").exists():
                        whole.add(str(other))
        self.usage.whole = sorted(whole)

    def _snapshot_outcome(self, item: pytest.Item, report: pytest.TestReport) -> None:
        nodeid = item.nodeid
        if nodeid not in self._tracked and FACTS_KEY not in item.stash:
            return
        # Passed: the call ran and passed (no skip, no xfail), and no phase failed.
        bad = report.failed or report.skipped or hasattr(report, "wasxfail")
        if report.when == "setup":
            self._clean[nodeid] = False  # until its call passes
        elif report.when == "call":
            self._clean[nodeid] = not bad
        elif self._clean.pop(nodeid, False) and not bad:
            facts = item.stash.get(FACTS_KEY, None)
            checked = facts.checked if facts is not None else {}
            self.usage.passed[nodeid] = {k: sorted(set(v)) for k, v in checked.items()}

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        config = session.config
        if config.option.collectonly:
            return
        if hasattr(config, "workerinput"):
            # pytest-xdist sets workeroutput on a worker's Config; pytest's does not declare it.
            config.workeroutput[USAGE_OUTPUT_KEY] = json.dumps(self.usage.as_json())  # type: ignore[attr-defined]
            return
        if exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR):
            return
        from pytest_searcheval.assertions import snapshot

        state = config.stash.get(STATE_KEY, None)
        if state is None:
            return
        import os

        found = snapshot.unused(self.usage)
        update = bool(state.cfg.snapshot_update)
        root = Path(config.rootpath)
        if update:
            snapshot.prune(found, _Titles(state))
        self.unused_lines = snapshot.unused_lines(found, update, lambda p: _relative(p, root))
        # In a strict run (CI), as a missing snapshot does, an unused entry fails the run:
        # the repository keeps rankings that no test checks.
        strict = None if update else snapshot.strict_reason(state.cfg.snapshot_strict, os.environ)
        if found and strict is not None:
            self.unused_lines.append(
                f"searcheval: unused ranking snapshots fail this run ({strict})"
            )
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        raw = (getattr(node, "workeroutput", {}) or {}).get(USAGE_OUTPUT_KEY)
        if raw is not None:
            self.usage.merge(json.loads(raw))

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for line in self.unused_lines:
            terminalreporter.write_line(line)


def _rankings(module: Path) -> Path:
    """The directory of a test module's snapshot files."""
    from pytest_searcheval.assertions.snapshot import SNAPSHOT_DIR

    return module.parent / SNAPSHOT_DIR / module.stem


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


RECORDER_KEY = pytest.StashKey[HandWrittenRecorder]()
#: The key of a worker's snapshot usage in pytest-xdist's ``workeroutput``.
USAGE_OUTPUT_KEY = "searcheval_snapshot_usage"


def register(config: pytest.Config) -> HandWrittenRecorder:
    recorder = HandWrittenRecorder(config)
    config.stash[RECORDER_KEY] = recorder
    config.pluginmanager.register(recorder, "searcheval-hand-written")
    return recorder


# --- assertion messages ------------------------------------------------------------------------


def assertrepr_compare(op: str, left: object, right: object) -> list[str] | None:
    """pytest's explanation of a comparison with a rank, a top k or a result: the ranking
    that was returned, with grades and the baseline's ranking."""
    from pytest_searcheval.assertions.result import Rank, SearchResult, Top

    for one in (left, right):
        if isinstance(one, Rank):
            return [
                f"{left!r} {op} {right!r}",
                f"{one.doc_id!r} is at rank {int(one)}",
                *one.result.explain(mark=[one.doc_id]),
            ]
    if isinstance(right, Top | SearchResult) and op in ("in", "not in"):
        result = right.result if isinstance(right, Top) else right
        where = f"the top {right.k}" if isinstance(right, Top) else "the results"
        rank = result.rank(str(left)) if isinstance(left, str) else None
        found = f"at rank {int(rank)}" if rank is not None else "not returned"
        return [
            f"{left!r} {op} {where}",
            f"{left!r} is {found}",
            *result.explain(mark=[str(left)]),
        ]
    for one in (left, right):
        if isinstance(one, Top):
            return [f"{left!r} {op} {right!r}", f"the top {one.k}:", *one.result.explain()]
    return None
