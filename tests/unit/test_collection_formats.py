from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import pytrec_eval

from pytest_searcheval.collection import (
    CollectionError,
    load,
    load_trec,
    read_run,
    write_trec_qrels,
    write_trec_run,
)
from pytest_searcheval.collection.hashing import hash_documents
from pytest_searcheval.collection.model import Document, title_of


def beir(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    docs = [
        {"_id": "d1", "title": "A", "text": "alpha"},
        {"_id": "d2", "title": "", "text": "b"},
        {"_id": 3, "text": "gamma", "metadata": {"url": "u"}},
    ]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    queries = [
        {"_id": "1", "text": "alpha?"},
        {"_id": "2", "text": "beta?"},
        {"_id": "3", "text": "gamma?", "metadata": {"class": "long"}},
        {"_id": "4", "text": "x"},
    ]
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n1\td1\t2\n1\td2\t0\n3\t3\t1\n"
    )
    (root / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n2\td2\t1\n")
    return root


def test_beir_directory_loads_with_splits_from_the_qrels_files(tmp_path: Path) -> None:
    c = load(beir(tmp_path))
    assert c.manifest["format"] == "beir"
    assert sorted(c.documents) == ["3", "d1", "d2"]
    assert c.documents["3"].fields == {"url": "u"}
    assert [q.id for q in c.queries_in("test")] == ["1", "3"]
    assert [q.id for q in c.queries_in("dev")] == ["2"]
    assert [q.id for q in c.queries_in("unjudged")] == ["4"]
    assert c.queries["3"].query_class == "long"
    assert c.judgments == {"1": {"d1": 2, "d2": 0}, "3": {"3": 1}, "2": {"d2": 1}}
    assert c.manifest["grades"] == [0, 1, 2]


def test_beir_problems_are_collected(tmp_path: Path) -> None:
    root = beir(tmp_path)
    with (root / "qrels" / "test.tsv").open("a") as fh:
        fh.write("9\td1\t1\n1\tzz\t1\n1\td1\t1\n2\td1\t1\n1\td3\tnan\n")
    with (root / "queries.jsonl").open("a") as fh:
        fh.write('{"_id": "5", "text": ""}\n{"_id": "1", "text": "dup"}\n')
    with pytest.raises(CollectionError) as info:
        load(root, grades=[0, 1, 2])
    got = {(p.file, p.line, p.field) for p in info.value.problems}
    assert {
        ("qrels/test.tsv", 5, "query_id"),
        ("qrels/test.tsv", 6, "doc_id"),
        ("qrels/test.tsv", 7, None),
        ("qrels/test.tsv", 9, "grade"),
        ("queries.jsonl", 5, "text"),
        ("queries.jsonl", 6, "_id"),
        ("qrels/test.tsv", None, "query-id"),  # query 2 judged in dev and test
    } <= got, got


def test_beir_corpus_reads_each_document_as_its_line_says(tmp_path: Path) -> None:
    root = beir(tmp_path)
    lines = [
        {"id": 7, "title": None, "text": "seven"},
        {"_id": " d9 ", "title": "Nine", "text": "n\u00e9uf", "metadata": {"tags": ["a"]}},
    ]
    with (root / "corpus.jsonl").open("a") as fh:
        fh.write("\n" + "".join(json.dumps(d) + "\n" for d in lines))
    raw = (root / "corpus.jsonl").read_bytes()
    (root / "corpus.jsonl").write_bytes(b"\xef\xbb\xbf" + raw)
    c = load(root)
    want = {
        "d1": Document("d1", "A", "alpha"),
        "d2": Document("d2", "", "b"),
        "3": Document("3", "", "gamma", {"url": "u"}),
        "7": Document("7", "", "seven"),
        "d9": Document("d9", "Nine", "n\u00e9uf", {"tags": ["a"]}),
    }
    assert dict(c.documents) == want
    assert list(c.documents.values()) == list(want.values())
    assert {d: c.documents[d] for d in want} == want
    assert [title_of(c.documents, d) for d in want] == ["A", "", "", "", "Nine"]
    assert c.hashes["corpus"] == hash_documents(want)


def test_beir_corpus_problems_name_file_line_and_field(tmp_path: Path) -> None:
    root = beir(tmp_path)
    with (root / "corpus.jsonl").open("a") as fh:
        fh.write('{"_id": "d1", "text": "again"}\n{"_id": "d4", "text": \n')
        fh.write('{"_id": "d5", "title": 5, "text": "t"}\n{"_id": "d6", "text": "t", ')
        fh.write('"metadata": [1]}\n[1]\n{"title": "no id", "text": "t"}\n')
    with pytest.raises(CollectionError) as info:
        load(root)
    got = {(p.file, p.line, p.field): p.message for p in info.value.problems}
    assert got[("corpus.jsonl", 4, "_id")] == "duplicate document id 'd1' (first on line 1)"
    assert got[("corpus.jsonl", 5, None)].startswith("malformed JSON at column")
    assert got[("corpus.jsonl", 6, "title")] == "expected a string"
    assert got[("corpus.jsonl", 7, "metadata")] == "expected an object"
    assert got[("corpus.jsonl", 8, None)] == "expected a JSON object, got list"
    assert got[("corpus.jsonl", 9, "_id")] == "expected a non-empty string id"


def test_beir_corpus_holds_only_the_judged_documents_parsed(tmp_path: Path) -> None:
    root = beir(tmp_path)
    with (root / "corpus.jsonl").open("a") as fh:
        fh.write(json.dumps({"_id": "d8", "title": "Eight", "text": "eight"}) + "\n")
    c = load(root)
    (root / "corpus.jsonl").unlink()
    # the judged documents (d1, d2, 3) and every title are held; nothing else is
    assert c.documents["d1"] == Document("d1", "A", "alpha")
    assert c.documents["3"].fields == {"url": "u"}
    assert title_of(c.documents, "d8") == "Eight"
    assert "d8" in c.documents and "zz" not in c.documents and len(c.documents) == 4
    with pytest.raises(KeyError):
        c.documents["zz"]
    with pytest.raises(CollectionError) as info:
        c.documents["d8"]
    (problem,) = info.value.problems
    assert (problem.file, problem.line) == ("corpus.jsonl", None)
    assert problem.message.startswith("cannot read a document: No such file or directory")


def test_beir_corpus_changed_after_loading_is_an_error_not_another_document(
    tmp_path: Path,
) -> None:
    root = beir(tmp_path)
    with (root / "corpus.jsonl").open("a") as fh:
        fh.write(json.dumps({"_id": "d8", "title": "Eight", "text": "eight"}) + "\n")
    c = load(root)
    assert c.documents["d8"].text == "eight"
    text = (root / "corpus.jsonl").read_text()
    (root / "corpus.jsonl").write_text(text.replace('"eight"', '"EIGHT"'))
    with pytest.raises(CollectionError) as info:
        c.documents["d8"]
    (problem,) = info.value.problems
    assert (problem.file, problem.line, problem.field) == ("corpus.jsonl", 4, None)
    assert "changed since the collection was loaded" in problem.message
    assert c.documents["d1"].text == "alpha"  # judged: held as loaded


TOPICS_SGML = """<top>
<num> Number: 301
<title> International Organized Crime
<desc> Description:
Identify organizations that participate in international criminal activity.
<narr> Narrative:
A relevant document must name the organization.
</top>

<top>
<num> Number: 302
<title> Poliomyelitis and Post-Polio
<desc> Description:
Is the disease under control?
</top>
"""


def test_trec_qrels_topics_and_sgml_corpus(tmp_path: Path) -> None:
    (tmp_path / "qrels.txt").write_text("301 0 FT1 2\n301 0 FT2 0\n302 0 FT1 -1\n")
    (tmp_path / "topics.txt").write_text(TOPICS_SGML)
    (tmp_path / "docs.sgml").write_text(
        "<DOC>\n<DOCNO> FT1 </DOCNO>\n<HEADLINE>Crime</HEADLINE>\n<TEXT>\nMafia news\n</TEXT>\n"
        "</DOC>\n<DOC>\n<DOCNO>FT2</DOCNO>\n<TEXT>polio</TEXT>\n</DOC>\n"
    )
    c = load_trec(
        qrels=tmp_path / "qrels.txt", topics=tmp_path / "topics.txt", corpus=tmp_path / "docs.sgml"
    )
    assert c.queries["301"].text == "International Organized Crime"
    assert c.queries["302"].split == "test"
    assert c.judgments["302"] == {"FT1": -1}  # negative TREC grades are kept
    assert c.documents["FT1"].title == "Crime" and c.documents["FT1"].text == "Mafia news"
    both = load_trec(
        qrels=tmp_path / "qrels.txt", topics=tmp_path / "topics.txt", topic_field="title+desc"
    )
    assert both.queries["302"].text == "Poliomyelitis and Post-Polio Is the disease under control?"
    assert both.documents == {}


def test_trec_tab_topics_and_problems(tmp_path: Path) -> None:
    (tmp_path / "q.txt").write_text("1 0 a 1\n1 0 b\n2 0 a x\n7 0 a 1\n")
    (tmp_path / "t.tsv").write_text("1\tfirst topic\n2\tsecond\nnotab\n1\tdup\n")
    with pytest.raises(CollectionError) as info:
        load_trec(qrels=tmp_path / "q.txt", topics=tmp_path / "t.tsv")
    got = {(Path(p.file).name, p.line, p.field) for p in info.value.problems}
    assert got == {
        ("q.txt", 2, None),
        ("q.txt", 3, "grade"),
        ("q.txt", 4, "query_id"),
        ("t.tsv", 3, None),
        ("t.tsv", 4, "num"),
    }


def test_trec_export_round_trips_through_pytrec_eval(tmp_path: Path) -> None:
    qrels = {"10": {"b": 1, "a": 0}, "9": {"c": 3}}
    buf = io.StringIO()
    assert write_trec_qrels(qrels, buf) == 3
    assert buf.getvalue() == "9 0 c 3\n10 0 a 0\n10 0 b 1\n"  # natural query order
    assert pytrec_eval.parse_qrel(io.StringIO(buf.getvalue())) == qrels
    run: dict[str, list[str] | dict[str, float]] = {
        "9": ["c", "x", "y"],
        "10": {"a": 0.5, "b": 0.5, "z": 2.0},
    }
    out = io.StringIO()
    write_trec_run(run, out, tag="mine")
    lines = out.getvalue().splitlines()
    assert lines[:3] == ["9 Q0 c 1 3.0 mine", "9 Q0 x 2 2.0 mine", "9 Q0 y 3 1.0 mine"]
    # Ties: doc id descending, as trec_eval orders them.
    assert [ln.split()[2] for ln in lines[3:]] == ["z", "b", "a"]
    path = tmp_path / "run.txt"
    path.write_text(out.getvalue())
    assert read_run(path)["10"] == {"z": 2.0, "b": 0.5, "a": 0.5}
    with pytest.raises(ValueError, match="whitespace"):
        write_trec_qrels({"q 1": {"d": 1}}, io.StringIO())


def test_bad_run_file_lists_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "run.txt"
    path.write_text("1 Q0 a 1 0.5 t\n1 Q0 a 2 0.4 t\n1 Q0 b x 0.3 t\n1 Q0 c 3 inf t\n1 Q0 d\n")
    with pytest.raises(CollectionError) as info:
        read_run(path)
    assert [(p.line, p.field) for p in info.value.problems] == [
        (2, "docid"),
        (3, "rank"),
        (4, "score"),
        (5, None),
    ]


def test_beir_and_trec_qrels_report_every_problem_with_file_line_and_field(
    tmp_path: Path,
) -> None:
    from pytest_searcheval.collection.io import Problems
    from pytest_searcheval.collection.trec import read_beir_qrels, read_trec_qrels

    beir_path, trec_path = tmp_path / "test.tsv", tmp_path / "qrels.txt"
    beir_path.write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\n\nq1\td2\nq1\td3\thigh\n"
        "\td4\t1\nq1\td1\t0\nq1\td5\t2.0\nq1\td6\t7\n"
    )
    trec_path.write_text("q1 0 d1 1\n\nq1 0 d2\nq1 0 d3 high\nq1 0 d1 0\nq1 0 d5 2.0\nq1 0 d6 7\n")
    expected = {
        beir_path: (
            [2, 8],
            [
                "test.tsv:4: expected 3 tab-separated fields, got 2",
                "test.tsv:5 [grade]: expected an integer grade, got 'high'",
                "test.tsv:6: empty query or document id",
                "test.tsv:7: duplicate judgment q1 d1 (first on line 2)",
                "test.tsv:9 [grade]: grade 7 outside the declared scale 0, 1, 2",
            ],
        ),
        trec_path: (
            [1, 6],
            [
                "qrels.txt:3: expected 'qid iter docid grade' (4 fields), got 3",
                "qrels.txt:4 [grade]: expected an integer grade, got 'high'",
                "qrels.txt:5: duplicate judgment q1 d1 (first on line 1)",
                "qrels.txt:7 [grade]: grade 7 outside the declared scale 0, 1, 2",
            ],
        ),
    }
    for reader, path in ((read_beir_qrels, beir_path), (read_trec_qrels, trec_path)):
        problems = Problems()
        judgments, where = reader(path, path.name, problems, [0, 1, 2])
        lines, shown = expected[path]
        assert judgments == {"q1": {"d1": 1, "d5": 2}}
        assert where == {("q1", "d1"): lines[0], ("q1", "d5"): lines[1]}
        assert [str(p) for p in problems.items] == shown
