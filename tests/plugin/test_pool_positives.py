"""Pooling a BEIR collection whose qrels list only positives (most TREC and BEIR sets), end to
end: the scale is declared (`--grades`, ini `search_eval_grades`), judges answer 0 and 1, the
merged qrels load and are evaluated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_searcheval.cli import main
from pytest_searcheval.collection import CollectionError, load
from pytest_searcheval.collection.model import parse_grades

pytest_plugins = ["pytester"]

DOCS = {
    "d1": "daily weather forecast for any city",
    "d2": "real time stock quotes",
    "d3": "historical weather archive",
    "d4": "stock screener with charts",
    "d5": "rain radar and forecast",
}
QUERIES = {"1": "weather forecast", "2": "stock prices"}
POSITIVES = "query-id\tcorpus-id\tscore\n1\td1\t1\n2\td2\t1\n"
RUN = "".join(
    f"{q} Q0 {d} {i + 1} {10 - i} bm25\n"
    for q, ids in {"1": ["d1", "d3", "d5"], "2": ["d4", "d2", "d3"]}.items()
    for i, d in enumerate(ids)
)


def _beir(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in DOCS.items())
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items())
    )
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / "test.tsv").write_text(POSITIVES)
    (root / "bm25.run").write_text(RUN)


def test_grade_scales_as_written() -> None:
    assert parse_grades("0,1") == [0, 1]
    assert parse_grades("0-3") == [0, 1, 2, 3]
    assert parse_grades("-1, 0-2") == [-1, 0, 1, 2]
    for bad in ("", "a", "3-0", "0,,1", "1.5", "0-"):
        with pytest.raises(ValueError, match=r"expected a grade scale: .* such as 0,1 or 0-3"):
            parse_grades(bad)


def test_positives_only_qrels_pool_with_the_declared_scale(
    tmp_path: Path, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    root = pytester.path
    _beir(root)
    out = tmp_path / "judging"
    pool = ["pool", "--run", str(root / "bm25.run"), "--collection", str(root), "--out", str(out)]
    pool += ["--judges", "a", "--depth", "3"]
    assert main(pool) == 2
    err = capsys.readouterr().err
    assert "the grade scale [1] has no grade for a document that is not relevant" in err
    assert "searcheval pool --grades 0,1" in err and "--search-eval-grades" in err
    assert main([*pool, "--grades", "0-1"]) == 0
    assert "pool: 4 unjudged pairs over 2 queries" in capsys.readouterr().out
    assert "1: relevant." in (out / "a" / "rubric.md").read_text()
    key = json.loads((out / "keys" / "a.json").read_text())
    assert key["grades"] == [0, 1]
    graded = {h: int(d == "d5") for h, (_, d) in key["pairs"].items()}
    (out / "a" / "answers.tsv").write_text("".join(f"{h}\t{g}\n" for h, g in graded.items()))
    merged = tmp_path / "a.tsv"
    collect = ["pool-collect", "--key", str(out / "keys" / "a.json")]
    collect += ["--answers", str(out / "a" / "answers.tsv"), "--out", str(merged)]
    assert main(collect) == 0
    assert main([*collect, "--grades", "1"]) == 2  # a scale without 0 refuses every 0
    assert "expected a grade in 1, got '0'" in capsys.readouterr().err
    rows = merged.read_text().splitlines()
    assert rows[0] == "query_id\tdoc_id\tgrade" and len(rows) == 5
    with (root / "qrels" / "test.tsv").open("a") as fh:  # the documented append
        fh.write("\n".join(rows[1:]) + "\n")

    with pytest.raises(CollectionError, match=r"grade 0 outside the declared scale 1"):
        load(root, grades=[1])
    assert load(root).grades == [0, 1]
    collection = load(root, grades=parse_grades("0-1"))
    assert collection.judgments == {
        "1": {"d1": 1, "d3": 0, "d5": 1},
        "2": {"d2": 1, "d4": 0, "d3": 0},
    }
    pytester.makeini(
        "[pytest]\nsearch_eval_run = bm25.run\nsearch_eval_grades = 0,1\n"
        "search_eval_measures = P@3,ERR@3,Judged@3\nsearch_eval_bootstrap_samples = 50\n"
        "search_eval_permutations = 50\n"
    )
    result = pytester.runpytest_subprocess("--search-eval", "-p", "no:cacheprovider")
    assert result.ret in (0, 1), result.stdout.str()[-3000:]
    report = json.loads((root / "searcheval-report" / "report.json").read_text())
    manifest = report["metric_manifest"]
    # the declared scale's positive grades set the level, its top is ERR's g_max
    assert manifest["relevance_level"] == 1 and manifest["err_stopping_probability"].endswith(
        "g_max = 1"
    )
    measures = report["profiles"]["bm25"]["measures"]
    # query 1: d1, d3, d5 -> 2 of 3 relevant; query 2: d4, d2, d3 -> 1 of 3; all judged
    assert measures["P@3"]["mean"] == pytest.approx(0.5)
    assert measures["Judged@3"]["mean"] == pytest.approx(1.0)
    # ERR, stopping at a grade 1 with probability 1/2: (1/2 + 1/3 * 1/4 + 1/2 * 1/2) / 2
    assert measures["ERR@3"]["mean"] == pytest.approx((0.5 + 1 / 12 + 0.25) / 2)


def test_a_bad_or_foreign_scale_is_a_usage_error(pytester: pytest.Pytester) -> None:
    _beir(pytester.path)
    pytester.makeini("[pytest]\nsearch_eval_run = bm25.run\nsearch_eval_grades = 3-0\n")
    result = pytester.runpytest_subprocess("--search-eval", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*ini search_eval_grades: expected a grade scale: *such as 0,1 or 0-3, got '3-0'*"]
    )
    result = pytester.runpytest_subprocess(
        "--search-eval", "--search-eval-grades=2-3", "-p", "no:cacheprovider"
    )
    assert result.ret != 0
    assert "grade 1 outside the declared scale 2, 3" in result.stdout.str() + result.stderr.str()


def test_a_native_collection_keeps_the_scale_of_its_manifest(tmp_path: Path) -> None:
    (tmp_path / "collection.yaml").write_text("name: tiny\nversion: 1\ngrades: [0, 1, 2]\n")
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "docs.jsonl").write_text('{"id": "d1", "text": "weather"}\n')
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "queries.yaml").write_text(
        "- {id: q1, text: weather, class: generic, split: test}\n"
    )
    (tmp_path / "qrels" / "judgments.tsv").write_text("query_id\tdoc_id\tgrade\nq1\td1\t2\n")
    assert load(tmp_path, grades=[0, 1, 2]).grades == [0, 1, 2]
    with pytest.raises(CollectionError, match=r"collection.yaml \[grades\]: the declared grade"):
        load(tmp_path, grades=parse_grades("0,1"))


def test_trec_files_take_the_declared_scale_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _beir(tmp_path)
    (tmp_path / "qrels.txt").write_text("1 0 d1 1\n2 0 d2 1\n")
    (tmp_path / "topics.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()))
    args = [
        "pool",
        "--run",
        str(tmp_path / "bm25.run"),
        "--trec-qrels",
        str(tmp_path / "qrels.txt"),
    ]
    args += ["--trec-topics", str(tmp_path / "topics.tsv"), "--trec-corpus"]
    args += [str(tmp_path / "corpus.jsonl"), "--judges", "a", "--out", str(tmp_path / "judging")]
    assert main(args) == 2
    assert "searcheval pool --grades 0,1" in capsys.readouterr().err
    assert main([*args, "--grades", "0,1"]) == 0
    key = json.loads((tmp_path / "judging" / "keys" / "a.json").read_text())
    assert key["grades"] == [0, 1] and len(key["pairs"]) == 4
    with pytest.raises(SystemExit) as info:  # argparse's usage error
        main([*args, "--grades", "0-1,x"])
    assert info.value.code == 2
    assert "argument --grades: expected a grade scale" in capsys.readouterr().err
