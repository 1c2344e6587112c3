"""The maintenance invariants: they pass on a correct target and each catches its flaw."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import invariants_data as fx
import pytest

from pytest_searcheval import invariants as inv
from pytest_searcheval.collection.model import Collection
from pytest_searcheval.settings import SearchEvalConfig
from pytest_searcheval.targets import MutableTarget, SearchResponse, SearchTarget
from pytest_searcheval.x402.conformance import load_conformance
from pytest_searcheval.x402.testing import (
    FLAWS,
    BrokenTarget,
    Forwarding,
    MemoryTarget,
    simple_extract,
)

SETTINGS = inv.InvariantSettings(split="test", profile="hybrid", limit=20)


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    inv.clear_caches()
    yield
    inv.clear_caches()


@pytest.fixture
def coll(tmp_path: Path) -> Collection:
    return fx.collection(tmp_path)


@pytest.fixture
def memory(coll: Collection) -> MemoryTarget:
    return MemoryTarget(coll.documents, coll.assets)


def outcomes(
    cases: list[inv.InvariantCase], target: SearchTarget
) -> dict[str, inv.InvariantOutcome]:
    return {c.id: c.outcome(target) for c in cases}


class ReadOnly(Forwarding):
    """A target without upsert/delete/reindex/isolated (like an HTTP service)."""

    def describe(self) -> Mapping[str, Any]:
        return {}


# ------------------------------------------------------------------------------ the fixture


def test_fixture_conformance_expectations_agree_with_the_oracle(coll: Collection) -> None:
    assert coll.root is not None
    conf = load_conformance(Path(coll.root) / "conformance", coll.assets, check_oracle=True)
    assert [c.id for c in conf.cases] == ["c01", "c02", "c03", "c04"]


def test_cases_have_stable_unique_ids(coll: Collection) -> None:
    first = [c.id for c in inv.cases(coll, SETTINGS)]
    again = [c.id for c in inv.cases(coll, SETTINGS)]
    assert first == again
    assert len(set(first)) == len(first)
    counts = Counter(c.invariant for c in inv.cases(coll, SETTINGS))
    assert counts == {
        "known-item-stability": 6,  # q001-q005 (q005 inherits from q001) + reindex
        "paraphrase-churn": 1,
        "filter-monotonicity": 4,
        "threshold-compliance": 12,
        "duplicate-resistance": 4,
        "deletion-isolation": 3,
        "filter-conformance": 4,
        "constraint-extraction": 7,
    }
    assert "filter-monotonicity-q021" in first
    assert "filter-conformance-c03" in first
    assert "known-item-stability-reindex" in first


def test_known_items_from_judgments_and_typo_sources(coll: Collection) -> None:
    known = inv.known_items(coll)
    assert known["q001"] == ("skyline-daily", None)
    assert known["q005"] == ("skyline-daily", None)  # typo inherits its source's item
    assert "q010" not in known  # paraphrase: no known item
    ambiguous = dataclasses.replace(
        coll, judgments={**coll.judgments, "q002": {"polyglot-translate": 3, "lingua-bridge": 3}}
    )
    assert "q002" not in inv.known_items(ambiguous)  # two top-grade documents: ambiguous
    declared = dataclasses.replace(
        coll,
        queries={
            **coll.queries,
            "q010": dataclasses.replace(
                coll.queries["q010"], expect={"known_item": "stratus-hourly", "max_rank": 3}
            ),
        },
    )
    assert inv.known_items(declared)["q010"] == ("stratus-hourly", 3)


def test_enabled_selects_invariants(coll: Collection) -> None:
    only = dataclasses.replace(SETTINGS, enabled=("paraphrase-churn",))
    assert [c.id for c in inv.cases(coll, only)] == ["paraphrase-churn-p01"]


def test_the_registry_is_the_one_list_of_invariant_names(coll: Collection) -> None:
    from pytest_searcheval.invariants import registry

    names = registry.names()
    assert names == tuple(registry.FAMILIES)
    assert names[:8] == (
        "known-item-stability",
        "paraphrase-churn",
        "filter-monotonicity",
        "threshold-compliance",
        "duplicate-resistance",
        "deletion-isolation",
        "filter-conformance",
        "constraint-extraction",
    )
    # the cases come in the registry's order
    families = list(dict.fromkeys(c.invariant for c in inv.cases(coll, SETTINGS)))
    assert families == [n for n in names if n in families]


@pytest.fixture
def own_family() -> Iterator[str]:
    from pytest_searcheval.invariants import registry

    saved = dict(registry.FAMILIES)
    yield "top-title"
    registry.FAMILIES.clear()
    registry.FAMILIES.update(saved)


def test_a_family_of_a_conftest_is_named_like_the_built_in_ones(own_family: str) -> None:
    from pytest_searcheval.invariants import registry

    @inv.invariant(own_family, before="paraphrase-churn")
    def make(collection: Collection, settings: inv.InvariantSettings) -> list[inv.InvariantCase]:
        return []

    names = registry.names()
    assert names.index(own_family) == names.index("paraphrase-churn") - 1
    assert inv.family_of(f"{own_family}-all") == own_family
    assert inv.family_of("paraphrase-churn-p01") == "paraphrase-churn"
    assert inv.family_of("made-up-1") is None
    assert inv.InvariantSettings(enabled=(own_family,)).runs(own_family)
    summary = inv.summarize([{"id": f"{own_family}-all", "passed": True}])
    assert summary["invariants"][own_family]["passed"] == 1
    # registered again, it keeps its place
    inv.invariant(own_family)(make)
    assert registry.names() == names


SHOP_DOMAIN = """
class Shop:
    name = "shop"
    filter_keys = ("color",)
    record_key = None

    def violations(self, document, filters, collection):
        want, have = filters.get("color"), document.fields.get("color")
        return [] if want is None or have == want else [f"color {have!r} is not {want!r}"]

    def applied(self, filters):
        return {k: v for k, v in filters.items() if k == "color" and v is not None}
"""


def test_threshold_compliance_judges_filters_by_the_collections_own_domain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_searcheval import domain
    from pytest_searcheval.collection.model import Document, Query
    from pytest_searcheval.targets import CallableTarget, Hit

    (tmp_path / "shop_domain.py").write_text(SHOP_DOMAIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(domain, "_LOADED", {k: v for k, v in domain._LOADED.items() if k != "shop"})
    monkeypatch.setitem(domain._REGISTRY, "shop", "shop_domain:Shop")
    shop = Collection(
        documents={
            "red": Document("red", "red shirt", "a shirt", fields={"color": "red"}),
            "blue": Document("blue", "blue shirt", "a shirt", fields={"color": "blue"}),
        },
        queries={"q1": Query("q1", "red shirt", "filtered", "test", constraints={"color": "red"})},
        judgments={"q1": {"red": 2}},
        manifest={"domain": "shop"},
    )

    def search(query: str, **_: Any) -> SearchResponse:
        return SearchResponse(hits=(Hit("red", 2.0), Hit("blue", 1.0)))

    target = CallableTarget(search, profiles=("hybrid",))
    by_id = {c.id: c for c in inv.cases(shop, SETTINGS)}
    assert not any(
        c.invariant in ("filter-monotonicity", "filter-conformance") for c in by_id.values()
    )
    outcome = by_id["threshold-compliance-q1"].outcome(target)
    assert outcome.status == "failed"
    assert [r.code for r in outcome.reasons] == ["filter-violation"]
    assert "color 'blue' is not 'red'" in outcome.message


X402_LATE = """
import sys
import pytest_searcheval.invariants as inv
from pytest_searcheval.invariants import registry
import invariants_data as fx

print("BEFORE", ",".join(registry.names()))
if sys.argv[1] == "settings":  # naming a family of a domain not loaded yet
    print("ENABLED", ",".join(inv.InvariantSettings(enabled=("filter-conformance",)).enabled))
else:
    print("CASES", ",".join(dict.fromkeys(c.invariant for c in inv.cases(fx.collection()))))
print("AFTER", ",".join(registry.names()))
"""


@pytest.mark.slow  # fresh interpreters
@pytest.mark.parametrize("first", ["cases", "settings"])
def test_the_x402_families_register_from_x402_when_the_domain_loads(first: str) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {"PYTHONPATH": f"{root}:{root / 'tests'}", "PATH": ""}
    out = subprocess.run(
        [sys.executable, "-c", X402_LATE, first],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    lines = dict(line.split(" ", 1) for line in out.splitlines())
    generic = "known-item-stability,paraphrase-churn,threshold-compliance,duplicate-resistance"
    assert lines["BEFORE"] == generic + ",deletion-isolation"
    # the x402 families take the places the built-in ones always had
    order = (
        "known-item-stability,paraphrase-churn,filter-monotonicity,threshold-compliance,"
        "duplicate-resistance,deletion-isolation,filter-conformance,constraint-extraction"
    )
    assert lines["AFTER"] == order
    if first == "cases":
        assert lines["CASES"] == order
    else:
        assert lines["ENABLED"] == "filter-conformance"


# ------------------------------------------------------------------------------ settings


def test_settings_from_plugin_config_and_overrides() -> None:
    cfg = SearchEvalConfig(
        gated_profile="lexical",
        split="dev",
        limit=7,
        extra={"invariants": {"churn_k": 5, "max_inversions": 2}},
    )
    s = inv.settings_from(cfg)
    assert (s.profile, s.split, s.limit, s.churn_k, s.max_inversions) == ("lexical", "dev", 7, 5, 2)
    assert inv.settings_from(None) == inv.InvariantSettings()
    assert inv.settings_from({"limit": 3}).limit == 3


def test_settings_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match="unknown key"):
        inv.settings_from({"churn_kk": 5})
    with pytest.raises(ValueError, match="churn_rbo_p"):
        inv.InvariantSettings(churn_rbo_p=1.0)
    with pytest.raises(ValueError, match="unknown invariant"):
        inv.InvariantSettings(enabled=("made-up",))


# ------------------------------------------------------------------------------ correct target


def test_every_invariant_holds_on_the_correct_memory_target(
    coll: Collection, memory: MemoryTarget
) -> None:
    results = outcomes(inv.cases(coll, SETTINGS), memory)
    failed = {k: o.message for k, o in results.items() if o.status == "failed"}
    assert failed == {}
    skipped = {k: o.message for k, o in results.items() if o.status == "skipped"}
    # No query of the fixture labels a scheme or an extension; everything else ran.
    assert list(skipped) == ["constraint-extraction-scheme", "constraint-extraction-extension"]
    assert "no query of the split labels scheme" in skipped["constraint-extraction-scheme"]
    assert "labels extension" in skipped["constraint-extraction-extension"]


def test_mutating_invariants_skip_on_a_read_only_target(
    coll: Collection, memory: MemoryTarget
) -> None:
    target = ReadOnly(memory)
    assert not isinstance(target, MutableTarget)
    results = outcomes(inv.cases(coll, SETTINGS), target)
    mutating = {"duplicate-resistance", "deletion-isolation", "filter-conformance"}
    for case_id, o in results.items():
        if o.invariant in mutating or case_id == "known-item-stability-reindex":
            assert o.status == "skipped", case_id
            assert "not a MutableTarget" in o.message
        elif case_id not in ("constraint-extraction-scheme", "constraint-extraction-extension"):
            assert o.status == "passed", (case_id, o.message)


def test_run_raises_assertion_and_skips(coll: Collection, memory: MemoryTarget) -> None:
    by_id = {c.id: c for c in inv.cases(coll, SETTINGS)}
    assert by_id["paraphrase-churn-p01"].run(memory).passed
    with pytest.raises(pytest.skip.Exception, match="not a MutableTarget"):
        by_id["deletion-isolation-q001"].run(ReadOnly(memory))
    broken = BrokenTarget(memory, "ignore-delete")
    with pytest.raises(AssertionError) as info:
        by_id["deletion-isolation-q001"].run(broken)
    assert isinstance(info.value, inv.InvariantFailure)
    assert info.value.outcome.status == "failed"


# ------------------------------------------------------------------------------ broken targets

#: flaw -> the invariant that must catch it ("test_query": the query test's expectations, which
#: judge the result of a query searched without filters).
CAUGHT_BY = {
    "leak-filtered": "threshold-compliance",
    "ignore-delete": "deletion-isolation",
    "stuffing-wins": "duplicate-resistance",
    "reorder-filtered": "filter-monotonicity",
    "answer-unanswerable": "test_query",
    "drift-after-reindex": "known-item-stability",
    "drop-last-filtered": "filter-conformance",
    "churn": "paraphrase-churn",
    "spurious-extract": "constraint-extraction",
}


def test_every_flaw_has_a_catching_invariant() -> None:
    assert set(CAUGHT_BY) == set(FLAWS)


@pytest.mark.parametrize("flaw", sorted(CAUGHT_BY))
def test_each_flaw_is_caught(flaw: str, coll: Collection, memory: MemoryTarget) -> None:
    if CAUGHT_BY[flaw] == "test_query":
        from pytest_searcheval.evaluation.expectations import check_expectations

        target = BrokenTarget(memory, flaw)
        unmet = [
            reason
            for q in coll.queries_in("test")
            for reason in check_expectations(
                q, target.search(q.text, profile="hybrid", limit=20, filters=None).ids
            )
        ]
        assert unmet, flaw
        return
    results = outcomes(inv.cases(coll, SETTINGS), BrokenTarget(memory, flaw))
    failing = {k for k, o in results.items() if o.status == "failed"}
    assert any(k.startswith(CAUGHT_BY[flaw] + "-") for k in failing), failing


def test_leak_message_names_query_document_and_filter(
    coll: Collection, memory: MemoryTarget
) -> None:
    by_id = {c.id: c for c in inv.cases(coll, SETTINGS)}
    o = by_id["threshold-compliance-q020"].outcome(BrokenTarget(memory, "leak-filtered"))
    assert o.status == "failed"
    assert "q020" in o.message and "'weather forecast on testnet'" in o.message
    assert "rank 1:" in o.message and "breaks the requested filters" in o.message
    assert "network 'stellar:pubnet' != 'stellar:testnet'" in o.message


def test_threshold_compliance_judges_an_answer_no_query_test_judged() -> None:
    """The standalone API has no query test: an unconstrained query's answer gets every check."""
    from pytest_searcheval.collection.model import Document, Query
    from pytest_searcheval.targets.callable import CallableTarget

    generic = Collection(
        documents={"d1": Document("d1", "t", "x")},
        queries={"q1": Query("q1", "nothing here", "no-result", "test")},
        judgments={},
    )
    target = CallableTarget(lambda q, **kw: ["ghost-doc", "d1"], profiles=["hybrid"])
    (case,) = inv.cases(generic, {"split": "test", "profile": "hybrid"})
    o = case.outcome(target)
    assert o.status == "failed"
    assert "rank 1: 'ghost-doc' is not a document of the collection" in o.message
    assert "unanswerable query returned 2 result(s); expected none" in o.message


def test_threshold_compliance_leaves_an_answer_the_query_test_judged_to_it(
    coll: Collection, memory: MemoryTarget
) -> None:
    from pytest_searcheval.invariants.base import remember

    # q030 has no labelled constraints: its search is the query test's own request.
    broken = BrokenTarget(memory, "answer-unanswerable")
    case = {c.id: c for c in inv.cases(coll, SETTINGS)}["threshold-compliance-q030"]
    q030 = coll.queries["q030"]
    request = {"profile": "hybrid", "text": q030.text, "limit": 20}
    answer = broken.search(q030.text, profile="hybrid", limit=20, filters={}, extract=True)
    assert answer.ids
    # The answer shared by a search made elsewhere, no query test having judged it: checked.
    remember(broken, answer, **request)
    unjudged = case.outcome(broken)
    assert unjudged.status == "failed"
    assert "unanswerable query returned 3 result(s); expected none" in unjudged.message
    # A query test judged another answer than the one held: still checked.
    other = dataclasses.replace(answer, hits=answer.hits[:1])
    remember(broken, other, **request, judged=True)
    assert case.outcome(broken).status == "failed"
    # The query test judged this very answer: it fails the answered query once, not twice.
    remember(broken, answer, **request, judged=True)
    assert case.outcome(broken).passed
    # With explicit filters it is another request, and the invariant judges its result.
    filtered = dataclasses.replace(q030, constraints={"network": "stellar:testnet"})
    o = inv.check_threshold_compliance(broken, coll, filtered, SETTINGS)
    assert o.status == "failed"
    assert "unanswerable query returned 3 result(s); expected none" in o.message


def test_deletion_message_names_the_listing(coll: Collection, memory: MemoryTarget) -> None:
    by_id = {c.id: c for c in inv.cases(coll, SETTINGS)}
    o = by_id["deletion-isolation-q001"].outcome(BrokenTarget(memory, "ignore-delete"))
    assert "deleted 'skyline-daily' still returned at rank 1" in o.message
    # the clone was used: the shared target still holds the listing
    assert "skyline-daily" in memory.documents


def test_duplicate_resistance_reports_ranks(coll: Collection, memory: MemoryTarget) -> None:
    by_id = {c.id: c for c in inv.cases(coll, SETTINGS)}
    good = by_id["duplicate-resistance-skyline-daily"].outcome(memory)
    assert good.passed
    assert good.details["rank_after"] == 1 and good.details["copies_in_top_k"] == 2
    bad = by_id["duplicate-resistance-skyline-daily"].outcome(BrokenTarget(memory, "stuffing-wins"))
    assert "genuine 'skyline-daily' expected at rank <= 1" in bad.message
    assert "skyline-daily~stuffed" in bad.message
    assert not any(d.endswith("~stuffed") for d in memory.documents)  # the shared one is clean


def test_conformance_counts_violations_and_misses(coll: Collection, memory: MemoryTarget) -> None:
    by_id = {c.id: c for c in inv.cases(coll, SETTINGS)}
    ok = by_id["filter-conformance-c04"].outcome(memory)
    assert ok.passed and ok.details["expected"] == 4 and ok.details["returned"] == 4
    inv.clear_caches()
    miss = by_id["filter-conformance-c04"].outcome(BrokenTarget(memory, "drop-last-filtered"))
    assert miss.details["misses"] == 1 and miss.details["violations"] == 0
    assert "miss: " in miss.message
    inv.clear_caches()
    leak = by_id["filter-conformance-c01"].outcome(BrokenTarget(memory, "leak-filtered"))
    assert leak.details["violations"] == 1
    assert "no single payment option satisfies all option filters" in leak.message


def test_extraction_accuracy_per_field(coll: Collection, memory: MemoryTarget) -> None:
    by_id = {c.id: c for c in inv.cases(coll, SETTINGS)}
    net = by_id["constraint-extraction-network"].outcome(memory)
    assert net.details["labelled"] == 2 and net.details["correct"] == 2
    price = by_id["constraint-extraction-price"].outcome(memory)
    assert price.details["correct"] == 1 and price.details["accuracy"] == 1.0
    asset = by_id["constraint-extraction-asset"].outcome(memory)
    assert asset.details["labelled"] == 1 and asset.passed
    inv.clear_caches()
    spurious = by_id["constraint-extraction-spurious"].outcome(
        BrokenTarget(memory, "spurious-extract")
    )
    assert spurious.details["spurious"] == 12  # every query of the split
    assert "12 spurious filter(s) over 12 queries" in spurious.message


def test_extraction_skips_when_the_target_never_extracts(coll: Collection) -> None:
    target = MemoryTarget(coll.documents, coll.assets, extract=False)
    by_id = {c.id: c for c in inv.cases(coll, SETTINGS)}
    o = by_id["constraint-extraction-network"].outcome(target)
    assert o.status == "skipped" and "extracted no filter" in o.message


def test_simple_extract() -> None:
    found = simple_extract("translate text under $0.01 on testnet paid in EURC", fx.ASSETS)
    assert found == {"network": "stellar:testnet", "asset": "EURC", "max_price_usd": "0.01"}


# ------------------------------------------------------------------------------ monotonicity


def test_monotonic_step_definitions() -> None:
    # not full: anything new is added
    assert inv.check_monotonic_step(["a", "b"], ["a", "c"], limit=5) == (["c"], [])
    # full: a newcomer below every shared listing came from beyond the cut
    assert inv.check_monotonic_step(["a", "b"], ["a", "b", "c"], limit=2) == ([], [])
    assert inv.check_monotonic_step(["a", "b"], ["b", "c"], limit=2) == ([], [])
    # full: a newcomer above a shared listing was added above it
    assert inv.check_monotonic_step(["a", "b"], ["c", "b"], limit=2) == (["c"], [])
    # inversions of shared listings
    assert inv.check_monotonic_step(["a", "b", "c"], ["c", "a"], limit=5) == ([], [("a", "c")])
    assert inv.inversions(["a", "b", "c"], ["c", "b", "a"]) == [
        ("b", "c"),
        ("a", "c"),
        ("a", "b"),
    ]


def test_ties_are_not_inversions_or_additions() -> None:
    tied = {"a": 1.0, "b": 1.0, "c": 0.5}
    assert inv.check_monotonic_step(["a", "b", "c"], ["b", "a"], 5, tied, tied) == ([], [])
    assert inv.check_monotonic_step(["a", "b", "c"], ["b", "a"], 5) == ([], [("a", "b")])
    # full wider answer: a newcomer tied with the shared listing it outranks is not added
    assert inv.check_monotonic_step(["a", "b"], ["x", "b"], 2, None, {"x": 1.0, "b": 1.0}) == (
        [],
        [],
    )
    assert inv.check_monotonic_step(["a", "b"], ["x", "b"], 2, None, {"x": 2.0, "b": 1.0}) == (
        ["x"],
        [],
    )


def test_monotonicity_tolerance(coll: Collection, memory: MemoryTarget) -> None:
    broken = BrokenTarget(memory, "reorder-filtered")
    strict = {c.id: c for c in inv.cases(coll, SETTINGS)}["filter-monotonicity-q020"]
    o = strict.outcome(broken)
    assert o.status == "failed" and "reordered" in o.message
    lenient = dataclasses.replace(SETTINGS, max_inversions=1000)
    case = {c.id: c for c in inv.cases(coll, lenient)}["filter-monotonicity-q020"]
    inv.clear_caches()
    assert case.outcome(broken).passed
    steps = o.details["steps"]
    assert steps[0]["filters"] == {"network": fx.TEST}
    assert [sorted(s["filters"]) for s in steps[1:]] == [
        ["network", "scheme"],
        ["asset", "network", "scheme"],
        ["asset", "max_price_usd", "network", "scheme"],
    ]


# ------------------------------------------------------------------------------ summary


def test_summarize_counts_per_invariant(coll: Collection, memory: MemoryTarget) -> None:
    cases = inv.cases(coll, SETTINGS)
    broken = BrokenTarget(memory, "drop-last-filtered")
    records = [c.outcome(broken).record() for c in cases]
    summary = inv.summarize(records)
    conf = summary["conformance"]
    assert conf == {"cases": 4, "violations": 0, "misses": 4}
    row = summary["invariants"]["filter-conformance"]
    assert row["failed"] == 4 and row["failing"][0] == "filter-conformance-c01"
    extraction = summary["extraction"]
    assert extraction["fields"]["network"] == {"labelled": 2, "correct": 2, "accuracy": 1.0}
    assert extraction["spurious"] == 0
    # plugin rows without details still count
    plain = inv.summarize([{"id": "paraphrase-churn-p01", "passed": False}])
    assert plain["invariants"]["paraphrase-churn"]["failed"] == 1
    assert plain["conformance"] is None


def test_deletion_without_judgments_deletes_the_rank_1_result(
    coll: Collection, memory: MemoryTarget
) -> None:
    unjudged = dataclasses.replace(coll, judgments={})
    cases = {c.id: c for c in inv.cases(unjudged, SETTINGS) if c.invariant == "deletion-isolation"}
    assert sorted(cases) == [
        "deletion-isolation-q001",
        "deletion-isolation-q002",
        "deletion-isolation-q003",
    ]
    assert cases["deletion-isolation-q001"].outcome(memory).passed
    o = cases["deletion-isolation-q001"].outcome(BrokenTarget(memory, "ignore-delete"))
    assert "deleted listing: 'skyline-daily'" in o.message
    assert "deleted 'skyline-daily' still returned at rank 1" in o.message
    # no known items: no known-item or duplicate cases
    assert not [c for c in inv.cases(unjudged, SETTINGS) if c.invariant == "duplicate-resistance"]


def test_deletion_message_shows_the_first_difference(coll: Collection) -> None:
    class Shuffles(MemoryTarget):
        """Deleting anything reverses every later answer (a stale statistic gone wrong)."""

        deleted = False

        def delete(self, doc_id: str) -> None:
            super().delete(doc_id)
            self.deleted = True

        def search(self, query: str, **kw: Any) -> SearchResponse:
            r = super().search(query, **kw)
            if not self.deleted:
                return r
            hits = tuple(reversed(r.hits))
            return SearchResponse(hits=hits, applied_filters=r.applied_filters)

        @contextmanager
        def isolated(self) -> Iterator[MutableTarget]:
            yield Shuffles(dict(self.documents), self.assets)

    target = Shuffles(coll.documents, coll.assets)
    case = {c.id: c for c in inv.cases(coll, SETTINGS)}["deletion-isolation-q001"]
    o = case.outcome(target)
    assert "q010 'weather forecast for my city': ranking changed beyond the removal" in o.message
    assert "from rank 1: expected ['stratus-hourly'," in o.message


def test_generic_collection_gets_only_generic_invariants(coll: Collection) -> None:
    generic_docs = {d.id: dataclasses.replace(d, x402=None) for d in coll.documents.values()}
    generic = dataclasses.replace(coll, documents=generic_docs, root=None)
    families = {c.invariant for c in inv.cases(generic, SETTINGS)}
    assert families == {
        "known-item-stability",
        "paraphrase-churn",
        "threshold-compliance",
        "duplicate-resistance",
        "deletion-isolation",
    }
    target = MemoryTarget(generic_docs, [], extract=False)
    failed = {
        c.id: c.outcome(target).message
        for c in inv.cases(generic, SETTINGS)
        if c.outcome(target).status == "failed"
    }
    assert failed == {}


def test_missing_conformance_set_is_one_skipped_case(
    coll: Collection, memory: MemoryTarget
) -> None:
    elsewhere = dataclasses.replace(coll, root="/nonexistent")
    conf = [c for c in inv.cases(elsewhere, SETTINGS) if c.invariant == "filter-conformance"]
    assert [c.id for c in conf] == ["filter-conformance-set"]
    o = conf[0].outcome(memory)
    assert o.status == "skipped" and "no conformance set at /nonexistent/conformance" in o.message


def test_a_remembered_answer_is_not_searched_again_for_the_same_request(
    memory: MemoryTarget,
) -> None:
    from pytest_searcheval.invariants.base import Searcher, remember

    sent: list[tuple[str, str, int, bool]] = []

    class Counting:
        def search(self, text: str, *, profile: str, limit: int, filters: Any, extract: bool):
            sent.append((text, profile, limit, extract))
            return memory.search(
                text, profile=profile, limit=limit, filters=filters, extract=extract
            )

    target = Counting()
    given = memory.search("weather", profile="hybrid", limit=20)
    remember(target, given, profile="hybrid", text="weather", limit=20)
    assert Searcher(target, "hybrid", cache=True)("weather", limit=20) is given
    assert sent == []
    # Another profile, limit, filter or extraction setting is another request.
    Searcher(target, "lexical", cache=True)("weather", limit=20)
    Searcher(target, "hybrid", cache=True)("weather", limit=10)
    Searcher(target, "hybrid", cache=True)("weather", limit=20, extract=False)
    Searcher(target, "hybrid", cache=True)("weather", limit=20, filters={"type": "http"})
    assert [s[1:] for s in sent] == [
        ("lexical", 20, True),
        ("hybrid", 10, True),
        ("hybrid", 20, False),
        ("hybrid", 20, True),
    ]
    inv.clear_caches()
