"""The misspellings the relevance model's training script makes (construction/relevance_train.py):
a typing slip in one word (two in a long text), the first letter kept, reproducible by seed."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "construction"))

import relevance_train  # noqa: E402


def _distance(a: str, b: str) -> int:
    """Optimal string alignment distance (a swap of neighbours costs 1)."""
    d = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        d[i][0] = i
    for j in range(len(b) + 1):
        d[0][j] = j
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(
                d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])
            )
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("weather forecast for my delivery route tomorrow", 1),
        ("turn a scanned invoice into structured fields for the finance team today", 2),
    ],
)
@pytest.mark.parametrize("seed", range(20))
def test_a_slip_per_word_the_first_letter_kept(text: str, words: int, seed: int) -> None:
    slipped = relevance_train.misspelt(text, np.random.default_rng(seed))
    before, after = text.split(" "), slipped.split(" ")
    assert len(before) == len(after)
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert 1 <= len(changed) <= words
    for a, b in changed:
        assert len(a) >= 4 and b[0] == a[0] and _distance(a, b) == 1


def test_the_same_seed_gives_the_same_slips_and_short_words_are_kept() -> None:
    text = "book a table at a restaurant near me tonight"
    first = relevance_train.misspelt(text, np.random.default_rng(7))
    assert first == relevance_train.misspelt(text, np.random.default_rng(7))
    assert relevance_train.misspelt("a b to of", np.random.default_rng(7)) == "a b to of"


def test_with_typos_adds_labelled_copies_for_a_share_of_the_needs() -> None:
    import relevance_data as rd

    needs = [
        rd.Need(
            id=f"n{k}",
            kind="plain",
            text=f"convert currency amounts number {k}",
            capability="fx",
            positives={"d1"},
        )
        for k in range(200)
    ]
    assert relevance_train.with_typos(needs, 0.0) is needs
    more = relevance_train.with_typos(needs, 0.3)
    copies = more[len(needs) :]
    assert more[: len(needs)] == needs and 40 <= len(copies) <= 80
    for copy in copies:
        original = needs[int(copy.id.removesuffix("~typo")[1:])]
        assert copy.text != original.text and copy.positives == original.positives
