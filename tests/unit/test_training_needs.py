"""The training needs' checker: what the writers deliver is checked before it is committed."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "training_needs", ROOT / "construction" / "training_needs.py"
)
assert _spec and _spec.loader
needs = importlib.util.module_from_spec(_spec)
sys.modules["training_needs"] = needs
_spec.loader.exec_module(needs)


@pytest.fixture(scope="module")
def view() -> dict[str, dict]:
    return {v["id"]: v for v in needs.catalog_view(ROOT)}


def test_the_view_hides_what_writers_must_not_see(view: dict[str, dict]) -> None:
    assert len(view) == 525
    keys = {k for v in view.values() for k in v}
    assert keys == {
        "id", "title", "text", "type", "provider", "category", "capability", "price_usd",
        "networks", "extensions",
    }  # fmt: skip
    assert not any("absent" in json.dumps(v) for v in view.values())


def test_the_plan_gives_every_category_to_two_writers_or_more() -> None:
    plan = needs.plan(ROOT)
    taxonomy = yaml.safe_load((ROOT / "construction/taxonomy.yaml").read_text(encoding="utf-8"))
    for category in (c["id"] for c in taxonomy["categories"]):
        assert sum(category in w["categories"] for w in plan.values()) >= 2, category
    assert len(plan) >= 20


def _good_file(writer: dict, view: dict[str, dict], name: str = "t01") -> list[dict]:
    mine = [v for v in view.values() if v["category"] in writer["categories"]]
    caps = sorted({v["capability"] for v in mine})
    out: list[dict] = []
    for kind, n in needs.KINDS.items():
        for i in range(n):
            cap = caps[(len(out)) % len(caps)]
            listing = next(v for v in mine if v["capability"] == cap)
            filters = {"type": listing["type"]} if kind == "constrained" else {}
            out.append(
                {
                    "id": f"{name}-{needs.PREFIX[kind]}{i + 1:03d}",
                    "kind": kind,
                    "text": f"{name} needs {kind} {i} about {cap}",
                    "capability": cap,
                    "target": None if kind == "unanswerable" else listing["id"],
                    "filters": filters,
                    "note": "n",
                }
            )
    return out


def test_a_file_as_the_brief_asks_passes_and_each_defect_is_named(
    tmp_path: Path, view: dict[str, dict]
) -> None:
    writer = needs.plan(ROOT)["t01"]
    caps = {c for v in view.values() for c in [v["capability"]]}
    entries = _good_file(writer, view)
    path = tmp_path / "t01.yaml"
    path.write_text(yaml.safe_dump(entries), encoding="utf-8")
    assert needs.check_writer(path, writer, view, caps)[0] == []

    bad = [dict(e) for e in entries]
    bad[0]["target"] = "no-such-listing"
    bad[1]["filters"] = {"type": "http"}
    c = next(i for i, e in enumerate(bad) if e["kind"] == "constrained")
    bad[c]["filters"] = {"type": "mcp" if bad[c]["filters"]["type"] == "http" else "http"}
    u = next(i for i, e in enumerate(bad) if e["kind"] == "unanswerable")
    bad[u]["target"] = entries[0]["target"]
    del bad[-1]
    path.write_text(yaml.safe_dump(bad), encoding="utf-8")
    problems = needs.check_writer(path, writer, view, caps)[0]
    text = "\n".join(problems)
    assert "entry 1 [target]: expected a listing id of the corpus" in text
    assert "entry 2 [filters]: only constrained needs state filters" in text
    assert f"entry {c + 1} [target]: the target does not satisfy type" in text
    assert f"entry {u + 1} [target]: an unanswerable need has target null" in text
    assert "49 needs of kind unanswerable, the brief asks 50" in text


def test_the_delivered_files_pass() -> None:
    assert needs.check(ROOT) == 0


def test_a_text_twice_in_one_file_is_refused_across_writers_listed(
    tmp_path: Path, view: dict[str, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    plan = needs.plan(ROOT)
    (tmp_path / "training/writers").mkdir(parents=True)
    (tmp_path / "construction").mkdir()
    (tmp_path / "corpus").mkdir()
    for name in ("training/writers/writers.yaml", "construction/taxonomy.yaml"):
        (tmp_path / name).write_text((ROOT / name).read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "corpus/catalog.jsonl").write_text(
        (ROOT / "corpus/catalog.jsonl").read_text(encoding="utf-8"), encoding="utf-8"
    )
    first = _good_file(plan["t01"], view)
    second = _good_file(plan["t08"], view, "t08")
    second[0]["text"] = first[0]["text"]
    for name, entries in (("t01", first), ("t08", second)):
        text = yaml.safe_dump(entries)
        (tmp_path / f"training/writers/{name}.yaml").write_text(text, encoding="utf-8")
    assert needs.check(tmp_path) == 0
    assert (
        "1 written by two writers alike (kept once): t08-p001 = t01-p001" in capsys.readouterr().out
    )

    first[1]["text"] = first[0]["text"]
    (tmp_path / "training/writers/t01.yaml").write_text(yaml.safe_dump(first), encoding="utf-8")
    assert needs.check(tmp_path) == 1
    assert "t01-p002 repeats the text of t01-p001" in capsys.readouterr().err
