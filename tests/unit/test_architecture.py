"""The house rules of docs/architecture.md, checked on the source: what may import what.

Module-level imports decide what a plain ``import`` costs and drags in; imports inside a
function are how an optional layer (x402, the engine) is reached only when a collection or a
target needs it, so the rules on layers are checked at module level, and the rules on the
plugin at every level.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "pytest_searcheval"


def _module(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache  # every rule reads every module: parse each once
def _imports(path: Path) -> list[tuple[str, bool]]:
    """(imported module, at module level) for every import of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = set()
    typing_only: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.If):  # TYPE_CHECKING blocks import nothing at run time
            typing_only |= {id(n) for n in ast.walk(node)}
            continue
        top.add(id(node))
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if name.startswith("pytest_searcheval"):
                out.append((name, id(node) in top))
    return out


SOURCES = sorted(PKG.rglob("*.py"))


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _violations(rule: str, allowed: callable, level_only: bool) -> list[str]:  # type: ignore[valid-type]
    bad = []
    for path in SOURCES:
        mod = _module(path)
        for imported, at_top in _imports(path):
            if level_only and not at_top:
                continue
            if not allowed(mod, imported):
                bad.append(f"{mod} imports {imported} ({rule})")
    return bad


CORE = (
    "metrics",
    "stats",
    "collection",
    "reasons",
    "domain",
    "settings",
    "baseline",
    "report",
    "files",
    "types",
    "assertions",
)


def test_the_types_import_nothing_of_the_package() -> None:
    # Every layer annotates with pytest_searcheval.types, so it must sit below all of them.
    def allowed(mod: str, imported: str) -> bool:
        return mod != "pytest_searcheval.types"

    assert _violations("the types are the base", allowed, level_only=False) == []


def test_the_core_does_not_import_the_engine_the_plugin_or_x402_at_module_level() -> None:
    def allowed(mod: str, imported: str) -> bool:
        if _layer(mod) not in CORE:
            return True
        return _layer(imported) not in ("engine", "plugin", "x402")

    assert _violations("core layer", allowed, level_only=True) == []


def test_metrics_stats_and_collection_import_no_domain_engine_or_plugin_at_any_level() -> None:
    # DESIGN's direction, lazy imports included: a collection reaches a domain (x402) only
    # through the registry in pytest_searcheval.domain, by name.
    def allowed(mod: str, imported: str) -> bool:
        if _layer(mod) not in ("metrics", "stats", "collection"):
            return True
        return _layer(imported) not in ("engine", "plugin", "x402")

    assert _violations("pure core", allowed, level_only=False) == []


def test_nothing_but_the_plugin_imports_the_plugin() -> None:
    def allowed(mod: str, imported: str) -> bool:
        return _layer(imported) != "plugin" or _layer(mod) == "plugin"

    assert _violations("the plugin is the top", allowed, level_only=False) == []


def test_engine_and_x402_never_import_the_plugin_and_x402_never_the_engine() -> None:
    def allowed(mod: str, imported: str) -> bool:
        if _layer(mod) == "x402":
            return _layer(imported) not in ("plugin", "engine")
        if _layer(mod) == "engine":
            return _layer(imported) != "plugin"
        return True

    assert _violations("layers", allowed, level_only=False) == []


def test_the_invariants_import_nothing_of_x402_or_the_engine_at_any_level() -> None:
    # The generic families only: a domain's families (x402's in x402/invariants/) plug into
    # the registry from the domain's side, and the filters are judged through the domain.
    def allowed(mod: str, imported: str) -> bool:
        if _layer(mod) != "invariants":
            return True
        return _layer(imported) not in ("x402", "engine", "plugin")

    assert _violations("generic invariants", allowed, level_only=False) == []


def test_targets_reach_x402_only_when_used() -> None:
    # bazaar.py is the x402 Bazaar target: x402 by nature, imported only by whoever wants it.
    exempt = {"pytest_searcheval.targets.bazaar"}

    def allowed(mod: str, imported: str) -> bool:
        if _layer(mod) != "targets" or mod in exempt:
            return True
        return _layer(imported) not in ("x402", "engine")

    assert _violations("optional layers", allowed, level_only=True) == []


@functools.cache
def _private_imports(path: Path) -> list[str]:
    """``module._name`` for every private name ``path`` imports by name (any level)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    out.append(f"{node.module}.{alias.name}")
    return out


def test_no_private_name_is_imported_across_packages() -> None:
    # What one package offers another is its public API: a private name stays in its package.
    bad = [
        f"{_module(path)} imports {name}"
        for path in SOURCES
        for name in _private_imports(path)
        if name.startswith("pytest_searcheval.") and _layer(name) != _layer(_module(path))
    ]
    assert bad == []


TARGETS = "pytest_searcheval.targets"


def test_the_target_protocol_imports_nothing_of_the_package() -> None:
    def allowed(mod: str, imported: str) -> bool:
        return mod != f"{TARGETS}.protocol"

    assert _violations("the protocol is the base", allowed, level_only=False) == []


def test_target_modules_import_each_other_directly_never_through_the_package() -> None:
    # targets/__init__ imports every implementation to re-export it: an implementation that
    # imported the package back would depend on the order of that file.
    def allowed(mod: str, imported: str) -> bool:
        if _layer(mod) != "targets" or mod == TARGETS:
            return True
        return imported != TARGETS

    assert _violations("targets import modules, not the hub", allowed, level_only=False) == []


def test_the_package_re_exports_every_public_target_name() -> None:
    import pytest_searcheval.targets as targets
    from pytest_searcheval.targets import callable, engine, http, protocol

    for module in (protocol, http, callable, engine):
        public = {
            name
            for name, value in vars(module).items()
            if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
        }
        assert public <= set(targets.__all__), (module.__name__, public - set(targets.__all__))
    for name in targets.__all__:
        assert getattr(targets, name).__module__.startswith(f"{TARGETS}."), name


@pytest.mark.slow  # a fresh interpreter
def test_plain_help_imports_nothing_heavy(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import subprocess, sys
        import pytest
        pytest.main(["--help", "-p", "pytest_searcheval.plugin"])
        heavy = [m for m in ("numpy", "psycopg", "torch", "sentence_transformers", "fastapi",
                 "matplotlib", "pytest_searcheval.x402", "pytest_searcheval.engine")
                 if m in sys.modules]
        print("HEAVY", heavy)
        """
    )
    import os

    # Third-party plugins are off: what they import is theirs (pytest-postgresql imports
    # psycopg); this checks that ours imports nothing heavy. It runs outside the repository:
    # from its root, pytest would load tests/conftest.py, which imports numpy for the suite.
    path = os.pathsep.join(p for p in (str(PKG.parent), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONPATH=path)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env=env,
        cwd=tmp_path,
    ).stdout
    assert "HEAVY []" in out, out[-400:]


BEIR_CONFTEST = """
import pytest
from pytest_searcheval.targets import CallableTarget, Hit, SearchResponse

DOCS = {"d1": "red apples", "d2": "green pears", "d3": "red cherries"}


def search(query, *, profile, limit, filters=None, extract=True):
    words = set(query.split())
    ranked = sorted(DOCS, key=lambda d: (-len(words & set(DOCS[d].split())), d))
    return SearchResponse(hits=tuple(Hit(d, 1.0) for d in ranked[:limit]))


@pytest.fixture(scope="session")
def searcheval_target():
    return CallableTarget(search, profiles=("default",))


def pytest_sessionfinish(session):
    import sys
    loaded = sorted(m for m in sys.modules if m.startswith(("pytest_searcheval.x402",
                                                            "pytest_searcheval.engine")))
    print("\\nLOADED", loaded)
"""


@pytest.mark.slow  # a fresh interpreter
def test_a_beir_collection_with_a_callable_target_never_loads_x402_or_the_engine(
    tmp_path: Path,
) -> None:
    (tmp_path / "corpus.jsonl").write_text(
        '{"_id": "d1", "title": "", "text": "red apples"}\n'
        '{"_id": "d2", "title": "", "text": "green pears"}\n'
        '{"_id": "d3", "title": "", "text": "red cherries"}\n'
    )
    (tmp_path / "queries.jsonl").write_text(
        '{"_id": "1", "text": "red fruit"}\n{"_id": "2", "text": "green pears"}\n'
    )
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n1\td1\t1\n1\td3\t1\n2\td2\t1\n"
    )
    (tmp_path / "conftest.py").write_text(BEIR_CONFTEST)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nsearch_eval_collection = .\nsearch_eval_profiles = default\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--search-eval",
            "-p",
            "no:cacheprovider",
            "-s",
            "-p",
            "no:randomly",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    out = proc.stdout
    assert "LOADED []" in out, out[-2000:]
    assert "gate: PASSED" in out, out[-2000:]
    # Binary BEIR judgments: the relevance level is 1, so the measures are not empty.
    assert "relevance>=1" in out and "relevance measures over 2 of 2 queries" in out, out[-2000:]
    assert proc.returncode == 0, out[-2000:]


@pytest.mark.parametrize("layer", ["metrics", "stats", "collection"])
def test_the_pure_layers_import_no_pytest_plugin_code_at_all(layer: str) -> None:
    def allowed(mod: str, imported: str) -> bool:
        if _layer(mod) != layer:
            return True
        return _layer(imported) not in ("plugin", "engine", "targets", "invariants")

    assert _violations(f"{layer} is pure", allowed, level_only=True) == []
