"""docs/architecture.md stays true: its package tree names every module of the package."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "pytest_searcheval"


def _tree_entries() -> dict[str, str]:
    """Entry (``plugin/``, ``settings.py``) -> its text in docs/architecture.md's tree block."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("## The packages", 1)[1].split("```", 2)[1]
    entries: dict[str, str] = {}
    current = None
    for line in block.splitlines():
        match = re.match(r"^  (\S+)", line)
        if match:
            # one line may name several top-level modules: "compare.py ...; pooling.py ..."
            current = match.group(1)
            entries[current] = line
            for extra in re.findall(r"\b(\w+\.py)\b", line):
                entries.setdefault(extra, line)
        elif current is not None:
            entries[current] += " " + line
    return entries


def _modules() -> list[tuple[str, str]]:
    """(tree entry, module name) of every module: ``("engine/", "bm25")``."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        if len(rel.parts) == 1:
            if rel.name != "__init__.py":
                out.append((rel.name, rel.stem))
            continue
        name = rel.stem if rel.name != "__init__.py" else "__init__"
        if len(rel.parts) > 2:  # a subpackage of a package: named by its folder
            name = rel.parts[1]
        out.append((f"{rel.parts[0]}/", name))
    return out


def test_the_package_tree_names_every_module() -> None:
    entries = _tree_entries()
    missing = []
    for entry, module in _modules():
        text = entries.get(entry)
        if text is None:
            missing.append(f"{entry} (no entry)")
        elif module != "__init__" and not re.search(rf"\b{re.escape(module)}\b", text):
            missing.append(f"{entry}{module}")
    assert missing == [], "docs/architecture.md's tree leaves out: " + ", ".join(
        sorted(set(missing))
    )


BEIR_CONFTEST = """
import pytest
from pytest_searcheval.targets import CallableTarget, Hit, SearchResponse

DOCS = {"d1": "red apples", "d2": "green pears", "d3": "nothing"}


def search(query, *, profile, limit, filters=None, extract=True):
    words = set(query.split())
    ranked = sorted(DOCS, key=lambda d: (-len(words & set(DOCS[d].split())), d))
    return SearchResponse(hits=tuple(Hit(d, 1.0) for d in ranked[:limit]))


@pytest.fixture(scope="session")
def searcheval_target():
    return CallableTarget(search, profiles=("default",))
"""


def test_the_newcomers_conftest_example_runs(pytester: Any) -> None:
    """The measure and the invariant the page shows, pasted into a conftest, run as it says."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    path = text.split("## A newcomer's path through the code", 1)[1]
    example = path.split("```python\n", 1)[1].split("```", 1)[0]
    docs = {"d1": "red apples", "d2": "green pears", "d3": "nothing"}
    (pytester.path / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": d, "title": "" if d == "d3" else t, "text": t}) + "\n"
            for d, t in docs.items()
        )
    )
    queries = {"1": "red apples", "2": "green pears", "3": "nothing"}
    (pytester.path / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items())
    )
    (pytester.path / "qrels").mkdir()
    (pytester.path / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n1\td1\t1\n2\td1\t1\n3\td3\t1\n"
    )
    pytester.makeconftest(example.replace("# conftest.py\n", "") + BEIR_CONFTEST)
    pytester.makeini(
        "[pytest]\nsearch_eval_collection = .\nsearch_eval_profiles = default\n"
        "search_eval_measures = nDCG@10,FirstRelevant\nsearch_eval_bootstrap_samples = 50\n"
        "search_eval_permutations = 50\n"
    )
    # a subprocess: the example registers a measure and a family in process-wide registries
    result = pytester.runpytest_subprocess("--search-eval", "-p", "no:cacheprovider", "-rA")
    out = result.stdout.str()
    # query 3's top result d3 has no title: the invariant fails and says which
    assert "FAILED" in out and "test_invariant[top-result-has-title-all]" in out
    assert "3: d3 has no title" in out
    report = json.loads((pytester.path / "searcheval-report" / "report.json").read_text())
    per_query = {q: r["profiles"]["default"]["measures"] for q, r in report["queries"].items()}
    # 1: d1 first and relevant; 2: d2 first, d1 is the relevant one; 3: d3 first and relevant
    assert [per_query[q]["FirstRelevant"] for q in ("1", "2", "3")] == [1.0, 0.0, 1.0]
