"""Pooling unjudged results into blind judging packs, collecting the grades, merging judges."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_searcheval.cli import main
from pytest_searcheval.collection import load, read_judgments
from pytest_searcheval.collection.model import Collection
from pytest_searcheval.pooling import (
    RUBRICS,
    PoolError,
    build_pool,
    collect,
    rubric_for,
    runs_of_report,
    runs_of_trec,
    write_packs,
)

DOCS = {
    "d1": ("Skyline forecast", "daily weather forecast for any city"),
    "d2": ("Ticker quotes", "real time stock quotes"),
    "d3": ("Almanac", "historical weather archive"),
    "d4": ("Bolt screener", "stock screener with charts"),
    "d5": ("Rainfall", "rain radar and forecast"),
}
QUERIES = {"q1": "weather forecast", "q2": "stock prices"}
QRELS = [("q1", "d1", 1), ("q2", "d2", 1), ("q2", "d5", 0)]


def _collection(root: Path) -> Collection:
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": d, "title": t, "text": x, "metadata": {"tag": d.upper()}}) + "\n"
            for d, (t, x) in DOCS.items()
        )
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items())
    )
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in QRELS)
    )
    return load(root)


RUNS = {
    "sysA": {"q1": ["d1", "d3", "d5", "d2"], "q2": ["d2", "d4"]},
    "sysB": {"q1": ["d5", "d1"], "q2": ["d5", "d4", "d3"]},
}


def test_pool_is_the_unjudged_top_k_of_every_run(tmp_path: Path) -> None:
    c = _collection(tmp_path / "c")
    pool = build_pool(c, RUNS, depth=2)
    assert pool.pairs == {"q1": {"d3": ["sysA"], "d5": ["sysB"]}, "q2": {"d4": ["sysA", "sysB"]}}
    # judged candidates: (q1,d1) twice, (q2,d2), (q2,d5): an inspected 0 counts as judged
    assert pool.judged == 3 and pool.size == 3
    assert build_pool(c, RUNS, depth=3).pairs["q2"] == {"d4": ["sysA", "sysB"], "d3": ["sysB"]}


def test_runs_that_cannot_be_pooled_are_named(tmp_path: Path) -> None:
    c = _collection(tmp_path / "c")
    with pytest.raises(PoolError) as err:
        build_pool(c, {"x": {"q9": ["d1"], "q1": ["d1", "zz"]}}, depth=5)
    assert "x: query 'q9' is not in the collection" in str(err.value)
    assert "x: query 'q1' returned 'zz', which is not in the corpus" in str(err.value)
    with pytest.raises(PoolError, match="depth: expected a positive integer"):
        build_pool(c, RUNS, depth=0)


def test_runs_from_reports_and_trec_scores() -> None:
    report = {
        "profiles": {"lex": {"available": True}, "sem": {"available": False}},
        "queries": {"q1": {"profiles": {"lex": {"ids": ["d2", "d1"]}}}},
    }
    assert runs_of_report(report, "r.json") == {"r.json:lex": {"q1": ["d2", "d1"]}}
    with pytest.raises(PoolError, match="profile 'sem' is not an available profile"):
        runs_of_report(report, "r.json", ["sem"])
    # trec_eval's order: score descending, ties by doc id descending
    ranked = runs_of_trec({"q1": {"a": 1.0, "c": 2.0, "b": 1.0}}, "run.txt")
    assert ranked == {"run.txt": {"q1": ["c", "b", "a"]}}


def _packs(tmp_path: Path, judge: str) -> tuple[Collection, str, dict[str, list[str]]]:
    c = _collection(tmp_path / "c")
    pool = build_pool(c, RUNS, depth=4)
    packs = write_packs(c, pool, judge, tmp_path / "out", rubric=RUBRICS[(0, 1)])
    text = "".join(p.read_text() for p in packs.packs)
    key = json.loads(packs.key.read_text())["pairs"]
    return c, text, key


def test_packs_are_blind_shuffled_per_judge_and_keyed_apart(tmp_path: Path) -> None:
    c, text, key = _packs(tmp_path, "alice")
    pool = build_pool(c, RUNS, depth=4)
    assert sorted(map(tuple, key.values())) == sorted(
        (q, d) for q, docs in pool.pairs.items() for d in docs
    )
    # no document id, system name, rank or score reaches the judge; the content does
    assert not re.search(r"\bd[1-5]\b", text)
    assert "sysA" not in text and "sysB" not in text and "rank" not in text.lower()
    assert "historical weather archive" in text and "tag: D3" in text
    assert "'weather forecast'" in text and "q1" not in text
    handles = re.findall(r"- `([0-9a-f]{10})`", text)
    assert sorted(handles) == sorted(key)
    answers = (tmp_path / "out" / "alice" / "answers.tsv").read_text().splitlines()
    assert [line.split("\t")[0] for line in answers[1:]] == handles
    assert (tmp_path / "out" / "alice" / "rubric.md").read_text() == RUBRICS[(0, 1)]
    # the same judge gets the same packs again; another judge another order and other handles
    _, again, _ = _packs(tmp_path, "alice")
    assert again == text
    _, other, other_key = _packs(tmp_path, "bob")
    assert set(other_key).isdisjoint(key)
    order = [key[h][1] for h in handles]
    other_order = [other_key[h][1] for h in re.findall(r"- `([0-9a-f]{10})`", other)]
    assert sorted(order) == sorted(other_order)


def test_sidecar_never_reaches_a_pack(tmp_path: Path) -> None:
    from pytest_searcheval.collection.model import Document
    from pytest_searcheval.pooling import card

    doc = Document("x", "T", "body", {"provider": "P"}, None, {"category": "weather-secret"})
    shown = card(doc, [])
    assert "weather-secret" not in shown and "provider: P" in shown and "body" in shown


def test_rubric_choice(tmp_path: Path) -> None:
    c = _collection(tmp_path / "c")
    assert rubric_for(c, None) == RUBRICS[(0, 1)]
    (tmp_path / "c" / "qrels" / "rubric.md").write_text("own rubric")
    assert rubric_for(c, None) == "own rubric"
    (tmp_path / "r.md").write_text("given")
    assert rubric_for(c, tmp_path / "r.md") == "given"
    (tmp_path / "c" / "qrels" / "rubric.md").unlink()
    c.manifest["grades"] = [0, 1, 2]
    assert rubric_for(c, None) == RUBRICS[(0, 1, 2)]
    (tmp_path / "c" / "qrels" / "rubric.md").write_text("own rubric")
    c.manifest["grades"] = [0, 1, 2, 3, 4]
    (tmp_path / "c" / "qrels" / "rubric.md").unlink()
    with pytest.raises(
        PoolError, match=r"no built-in rubric for the grade scale \[0, 1, 2, 3, 4\]"
    ):
        rubric_for(c, None)


def test_collect_round_trip_and_every_bad_answer(tmp_path: Path) -> None:
    _, _, key = _packs(tmp_path, "alice")
    key_path = tmp_path / "out" / "keys" / "alice.json"
    answers = tmp_path / "out" / "alice" / "answers.tsv"
    lines = answers.read_text().splitlines()
    truth = {h: (1 if key[h][1] in ("d3", "d5") else 0) for h in key}
    answers.write_text("\n".join([lines[0]] + [f"{h}\t{truth[h]}" for h in key]) + "\n")
    got = collect(key_path, [answers])
    assert got == {
        q: {d: truth[h] for h, (q2, d) in key.items() if q2 == q}
        for q in {q for q, _ in key.values()}
    }
    handles = list(key)
    bad = tmp_path / "bad.tsv"
    bad.write_text(
        f"{handles[0]}\t7\nffffffffff\t1\n{handles[1]}\t1\n{handles[1]}\t0\n{handles[2]}\t1 extra\n"
    )
    with pytest.raises(PoolError) as err:
        collect(key_path, [bad])
    message = str(err.value)
    assert f"{bad}:1 [grade]: expected a grade in 0, 1, got '7'" in message
    assert f"{bad}:2 [handle]: unknown handle 'ffffffffff'" in message
    assert f"{bad}:4 [handle]: {handles[1]} graded 0 here and 1 at {bad}:3" in message
    assert f"{bad}:5 [grade]: expected 'handle<TAB>grade'" in message
    assert "documents have no grade yet" in message
    answers.write_text("\n".join(lines) + "\n")  # the template as written: nothing graded
    with pytest.raises(PoolError, match=f"{len(key)} of {len(key)} documents have no grade yet"):
        collect(key_path, [answers])


def _write_runs(folder: Path) -> list[Path]:
    paths = []
    for system, run in RUNS.items():
        lines = [
            f"{q} Q0 {d} {i + 1} {10 - i} {system}"
            for q, ids in run.items()
            for i, d in enumerate(ids)
        ]
        paths.append(folder / f"{system}.run")
        paths[-1].write_text("\n".join(lines) + "\n")
    return paths


def test_cli_pool_collect_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    c = _collection(tmp_path / "c")
    run_a, run_b = _write_runs(tmp_path)
    out = tmp_path / "judging"
    args = ["pool", "--run", str(run_a), "--run", str(run_b), "--collection", str(tmp_path / "c")]
    args += ["--out", str(out)]
    assert main([*args, "--depth", "3"]) == 0
    printed = capsys.readouterr().out
    assert "pool: 4 unjudged pairs over 2 queries from the top 3 of 2 runs" in printed
    recipe = json.loads((out / "keys" / "pool.json").read_text())
    assert recipe["recipe"]["depth"] == 3 and recipe["pool"]["q2"] == {
        "d3": ["sysB.run"],
        "d4": ["sysA.run", "sysB.run"],
    }
    assert main(args) == 2  # answers exist: a judge may have started
    assert "exists (a judge may have started grading)" in capsys.readouterr().err
    for judge, flip in (("a", None), ("b", "d4")):
        key = json.loads((out / "keys" / f"{judge}.json").read_text())["pairs"]
        grades = {h: int(d in ("d3", "d5")) for h, (_, d) in key.items()}
        grades = {h: (1 - g if key[h][1] == flip else g) for h, g in grades.items()}
        (out / judge / "answers.tsv").write_text("".join(f"{h}\t{g}\n" for h, g in grades.items()))
        assert (
            main(
                [
                    "pool-collect",
                    "--key",
                    str(out / "keys" / f"{judge}.json"),
                    "--answers",
                    str(out / judge / "answers.tsv"),
                    "--out",
                    str(tmp_path / f"{judge}.tsv"),
                ]
            )
            == 0
        )
    assert read_judgments(tmp_path / "a.tsv", [0, 1])["q2"] == {"d3": 1, "d4": 0}
    capsys.readouterr()
    merged = tmp_path / "merged.tsv"
    adjudication = tmp_path / "adjudication.tsv"
    agree = [
        "agree",
        str(tmp_path / "a.tsv"),
        str(tmp_path / "b.tsv"),
        "--grades",
        "0,1",
        "--out",
        str(merged),
        "--adjudicate",
        str(adjudication),
    ]
    code = main(agree)
    printed = capsys.readouterr().out
    # On a two-grade scale one apart is relevant against not: adjudicated, never merged.
    assert code == 3 and "pairs:            4" in printed
    assert "one apart, merged to the lower grade: 0" in printed
    assert "pending adjudication: 1" in printed and not merged.exists()
    head, row = adjudication.read_text(encoding="utf-8").splitlines()[:2]
    cells = row.split("\t")
    assert sorted(cells[2:4]) == ["0", "1"]
    cells[4] = "1"
    adjudication.write_text(head + "\n" + "\t".join(cells) + "\n", encoding="utf-8")
    assert main(agree) == 0  # the adjudicated grade, not the lower one
    assert read_judgments(merged, [0, 1]) == {"q1": {"d3": 1, "d5": 1}, "q2": {"d3": 1, "d4": 1}}
    assert main(["pool", "--collection", str(tmp_path / "c")]) == 2
    assert "name at least one report.json or --run FILE" in capsys.readouterr().err
    from pytest_searcheval.report import SCHEMA_VERSION

    report = tmp_path / "report.json"
    report.write_text(
        json.dumps({"schema_version": SCHEMA_VERSION, "collection": {"path": "None"}})
    )
    assert main(["pool", str(report)]) == 2
    assert f"{report} names no collection directory (collection.path 'None')" in (
        capsys.readouterr().err
    )
    assert c.judgments["q1"] == {"d1": 1}
