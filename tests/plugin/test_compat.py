"""The plugin's use of pytest internals (plugin/compat.py) and its per-session state: what
configure registers, unconfigure takes back; nothing of one session stays for the next."""

from __future__ import annotations

import pytest
from plugin_helpers import make_project


def test_the_items_of_a_kind_share_one_fixture_closure(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    items, _ = pytester.inline_genitems("--search-eval", "-p", "no:cacheprovider")
    queries = [i for i in items if i.name.startswith("test_query[")]
    assert len(queries) == 4
    assert len({id(i._fixtureinfo) for i in queries}) == 1  # type: ignore[attr-defined]
    assert all("searcheval_target" in i.fixturenames for i in queries)


def test_unconfigure_takes_back_what_configure_registered(pytester: pytest.Pytester) -> None:
    from pytest_searcheval.plugin import REGISTERED
    from pytest_searcheval.plugin.state import STATE_KEY

    make_project(pytester)
    config = pytester.parseconfigure("--search-eval", "-p", "no:cacheprovider")
    assert config.pluginmanager.get_plugin("searcheval-session") is not None
    state = config.stash[STATE_KEY]
    state.invariant_context.shared[(1, "x")] = object()
    config._ensure_unconfigure()
    assert [n for n in REGISTERED if config.pluginmanager.get_plugin(n) is not None] == []
    assert STATE_KEY not in config.stash and state.invariant_context.shared == {}


def test_a_second_run_in_the_same_process_starts_afresh(pytester: pytest.Pytester) -> None:
    from pytest_searcheval.invariants.base import current_context

    make_project(pytester)
    for _ in range(2):
        result = pytester.inline_run("--search-eval", "-p", "no:cacheprovider")
        result.assertoutcome(passed=4)
    # the invariants' process context was never used by the plugin's runs
    assert current_context().caches == {} and current_context().gated is None


def test_a_case_a_family_skip_stands_for_is_torn_down_for_the_next_test(
    pytester: pytest.Pytester,
) -> None:
    # The last generated test is one the family's skip stands for (run unreported); the next
    # test, in another file, is set up on a torn-down stack as after any test.
    make_project(pytester, invariants=True)
    pytester.makepyfile(test_after="def test_plain():\n    assert True\n")
    result = pytester.runpytest(
        "--search-eval", "-p", "no:cacheprovider", "-k", "deletion-isolation or test_plain", "-v"
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped") == 1 and outcomes.get("passed") == 1, outcomes
    assert "error" not in outcomes, outcomes
    out = result.stdout.str()
    assert "test_invariant[deletion-isolation-q1] SKIPPED" in out
    assert "deletion-isolation-q4" not in out  # collected last in its file, run unreported
    result.stdout.fnmatch_lines(["*test_after.py::test_plain PASSED*"])
