"""PyStemmer and rapidfuzz give exactly what the engine's former pure-Python code gave.

The oracle is tests/engine/text_reference.py (the stemmer and the OSA distance as the engine
implemented them). Words come from every text this repository ships (catalog, queries,
conformance set, outside query sets, docs) plus the Python standard library's sources, and
from each word with the suffixes Porter's rules strip; pairs from edits of those words.
"""

from __future__ import annotations

import itertools
import random
import re
import sysconfig
from pathlib import Path

import pytest
from text_reference import osa as reference_osa
from text_reference import stem as reference_stem

from pytest_searcheval.engine import index, title

ROOT = Path(__file__).resolve().parents[2]
SUFFIXES = (
    "s", "es", "ies", "sses", "ed", "ing", "eed", "ational", "tional", "enci", "anci", "izer",
    "abli", "alli", "entli", "eli", "ousli", "ization", "ation", "ator", "alism", "iveness",
    "fulness", "ousness", "aliti", "iviti", "biliti", "icate", "ative", "alize", "iciti",
    "ical", "ful", "ness", "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement",
    "ment", "ent", "ion", "sion", "tion", "ou", "ism", "ate", "iti", "ous", "ive", "ize", "e",
    "y", "ly", "li", "bli", "logi",
)  # fmt: skip


def _texts() -> list[str]:
    texts: list[str] = []
    for pattern in ("corpus/**/*", "qrels/**/*", "conformance/**/*", "outside/**/*", "docs/*.md"):
        for path in sorted(ROOT.glob(pattern)):
            if path.is_file() and path.suffix in (
                ".jsonl",
                ".yaml",
                ".yml",
                ".tsv",
                ".md",
                ".json",
            ):
                texts.append(path.read_text(encoding="utf-8", errors="replace"))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py"))[:400]:
        texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return texts


@pytest.fixture(scope="module")
def words() -> list[str]:
    found: set[str] = set()
    for text in _texts():
        found.update(t for t in index.tokenize(text) if t.isascii() and t.isalpha())
    roots = sorted(w for w in found if len(w) >= 3)[:6000]
    found.update(w + s for w in roots for s in SUFFIXES)
    return sorted(found)


def test_pystemmer_porter_equals_the_reference_stemmer(words: list[str]) -> None:
    assert len(words) > 50_000
    differ = [
        (w, reference_stem(w), index.stem(w)) for w in words if reference_stem(w) != index.stem(w)
    ]
    assert differ == []


def test_doubled_letters_before_ed_and_ing_follow_the_paper() -> None:
    # Snowball's porter alone would keep "trekk" and "revv"
    for word, stemmed in (("trekking", "trek"), ("revved", "rev"), ("fixxed", "fix")):
        assert index.stem(word) == stemmed == reference_stem(word)
    for word in ("xxing", "yyed", "skiing", "buzzed", "hissed", "fulfilled"):
        assert index.stem(word) == reference_stem(word)


def test_stemming_keeps_short_non_ascii_and_non_alphabetic_tokens() -> None:
    for token in ("is", "a", "café", "naïve", "x402", "v2", "usdc2"):
        assert index.stem(token) == token == reference_stem(token)


def _edits(word: str, rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    i = rng.randrange(len(word))
    out = [
        word[:i] + word[i + 1 :],
        word[:i] + rng.choice(letters) + word[i:],
        word[:i] + rng.choice(letters) + word[i + 1 :],
    ]
    if i + 1 < len(word):
        out.append(word[:i] + word[i + 1] + word[i] + word[i + 2 :])
    j = rng.randrange(len(word))
    out.append(out[rng.randrange(len(out))][:j] + rng.choice(letters) + word[j:])
    return out


def test_rapidfuzz_osa_equals_the_reference_distance_with_and_without_bound(
    words: list[str],
) -> None:
    rng = random.Random(15)
    sample = rng.sample([w for w in words if 3 <= len(w) <= 16], 3000)
    pairs = [(w, e) for w in sample for e in _edits(w, rng)]
    pairs += list(itertools.pairwise(sample))
    pairs += [("ca", "abc"), ("abcd", "acbd"), ("", "abc"), ("abc", ""), ("same", "same")]
    assert len(pairs) > 15_000
    for a, b in pairs:
        assert title.osa(a, b) == reference_osa(a, b), (a, b)
        for bound in (0, 1, 2):
            ref = reference_osa(a, b, bound)
            # both report a distance above the bound as something above it
            assert min(title.osa(a, b, bound), bound + 1) == min(ref, bound + 1), (a, b, bound)


def test_token_similarity_of_title_words_against_query_typos_is_unchanged() -> None:
    from pytest_searcheval.collection import load

    coll = load(ROOT)
    tokens = sorted({t for d in coll.documents.values() for t in title.name_tokens(d.title)})
    queries = sorted({t for q in coll.queries.values() for t in title.name_tokens(q.text)})

    def reference_sim(t: str, u: str) -> float:
        if t == u:
            return 1.0
        if min(len(t), len(u)) < title.MIN_FUZZY_LEN or abs(len(t) - len(u)) > 2:
            return 0.0
        longest = max(len(t), len(u))
        bound = int((1.0 - title.MIN_SIM) * longest + 1e-9)
        value = 1.0 - reference_osa(t, u, bound) / longest
        return value if value >= title.MIN_SIM else 0.0

    compared = 0
    for t in tokens:
        for u in queries:
            assert title.sim(t, u) == reference_sim(t, u), (t, u)
            compared += 1
    assert compared > 100_000
    assert re.fullmatch(r"[a-z0-9]+", tokens[0])
