"""Text analysis and field extraction for the lexical index.

Analyzer (the same chain for documents and queries):

1. Unicode NFKC normalisation, then ``str.casefold`` (lowercase that also folds German sharp s);
   combining marks are dropped after an NFKD pass so ``café`` and ``cafe`` meet.
2. Drop English possessives (``'s``, as Lucene's EnglishPossessiveFilter), then split on every
   run of characters that are not letters or digits (``[^\\w]|_``), so URL paths, snake_case
   tool names and kebab-case ids split into words.
3. Drop English stopwords (the classic 33-word Lucene/Elasticsearch ``_english_`` list plus a few
   query fillers) and tokens longer than 40 characters (hashes, addresses).
4. Stem with the Porter (1980) algorithm (PyStemmer's ``porter``: the original rules, no Snowball
   revisions), so ``forecasts`` / ``forecasting`` -> ``forecast``.

Fields (generic documents have ``id``, ``title``, ``text``, free ``fields``; x402 listings add):

- ``title``: the title.
- ``text``: the description prose (``text``; ``x402.description`` when it differs and adds words).
- ``meta``: tags and provider from ``fields`` (any string or list-of-strings value of ``fields``).
- ``url``: path segments of ``x402.resource`` (host words included, the ``.example`` TLD dropped).
- ``tool``: the MCP tool name (``toolName`` of the listing's Bazaar discovery extension,
  ``x402.extensions.bazaar.info.input``) and its server (scheme and host of ``x402.resource``).

The sidecar is never indexed: it carries ground-truth-adjacent labels.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

FIELDS: tuple[str, ...] = ("title", "text", "meta", "url", "tool")

_LUCENE_STOP = (
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with"
)
_QUERY_FILLERS = "i me my we our you your can could would should please want need find some any"
#: Lucene EnglishAnalyzer / Elasticsearch ``_english_`` stop set plus query fillers.
STOPWORDS: frozenset[str] = frozenset(_LUCENE_STOP.split() + _QUERY_FILLERS.split())

_SPLIT = re.compile(r"[\W_]+", re.UNICODE)
_POSSESSIVE = re.compile(r"(?<=\w)['\u2019]s\b")
_MAX_TOKEN = 40


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def tokenize(text: str) -> list[str]:
    """Normalised tokens before stopping and stemming."""
    folded = _POSSESSIVE.sub("", _fold(text))
    return [t for t in _SPLIT.split(folded) if t and len(t) <= _MAX_TOKEN]


def analyze(text: str) -> list[str]:
    """The full analyzer chain: normalise, split, stop, stem. Order is preserved."""
    return [stem(t) for t in tokenize(text) if t not in STOPWORDS]


# --- Porter stemmer (M.F. Porter, "An algorithm for suffix stripping", 1980) -----------------

# Snowball's ``porter`` is the original algorithm; one stemmer per thread, since a PyStemmer
# object keeps state between calls (uvicorn's workers and the lexical pool stem concurrently).
_STEMMERS = threading.local()


def _porter() -> Any:
    try:
        return _STEMMERS.porter
    except AttributeError:
        import Stemmer

        _STEMMERS.porter = Stemmer.Stemmer("porter")
        return _STEMMERS.porter


# Snowball's porter keeps a doubled c, h, j, k, q, v, w or x left by -ed/-ing (its one departure
# from the paper, "trekking" -> "trekk"); the paper's step 1b drops the suffix and one letter.
_KEPT_DOUBLE = re.compile(r"([chjkqvwx])\1(?:ed|ing)$")


def _has_vowel(stem_: str) -> bool:
    """Porter's *v*: a vowel, where y is one after a consonant."""
    prev_cons = False
    for i, c in enumerate(stem_):
        if c in "aeiou" or (c == "y" and i > 0 and prev_cons):
            return True
        prev_cons = True
    return False


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """Porter stem of a lowercase word; words of 1-2 letters and non-ASCII words are kept."""
    if len(word) <= 2 or not word.isascii() or not word.isalpha():
        return word
    if word.endswith(("ed", "ing")):
        double = _KEPT_DOUBLE.search(word)
        if double is not None and _has_vowel(word[: double.start() + 2]):
            # what step 1b leaves (suffix and one letter gone); no later step of Snowball's
            # porter can then see -ed/-ing, so it finishes exactly as the paper does
            word = word[: double.start() + 1]
    stemmed: str = _porter().stemWord(word)
    return stemmed


# --- field extraction ---------------------------------------------------------------------


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, str):
                yield item


def _url_words(resource: str) -> str:
    try:
        parts = urlsplit(resource)
    except ValueError:
        return resource
    host = [h for h in (parts.hostname or "").split(".") if h not in ("www", "example", "com")]
    return " ".join([*host, parts.path])


def _mcp_tool(x402: Mapping[str, Any]) -> str:
    """ "<tool name> <scheme>://<host>" of an MCP listing's Bazaar extension, else ""."""
    extensions = x402.get("extensions")
    bazaar = extensions.get("bazaar") if isinstance(extensions, Mapping) else None
    info = bazaar.get("info") if isinstance(bazaar, Mapping) else None
    declared = info.get("input") if isinstance(info, Mapping) else None
    if not isinstance(declared, Mapping) or declared.get("type") != "mcp":
        return ""
    name = declared.get("toolName")
    words = [name] if isinstance(name, str) and name else []
    resource = x402.get("resource")
    if isinstance(resource, str):
        try:
            parts = urlsplit(resource)
        except ValueError:
            parts = None
        if parts is not None and parts.scheme and parts.netloc:
            words.append(f"{parts.scheme}://{parts.netloc}")
    return " ".join(words)


def field_texts(
    title: str, text: str, fields: Mapping[str, Any], x402: Mapping[str, Any] | None
) -> dict[str, str]:
    """Raw text per indexed field (see the module docstring)."""
    meta = " ".join(s for value in fields.values() for s in _strings(value))
    body = text
    url = ""
    tool = ""
    if x402:
        description = x402.get("description")
        if isinstance(description, str) and description.strip() and description not in text:
            body = f"{text}\n{description}"
        resource = x402.get("resource")
        if isinstance(resource, str):
            url = _url_words(resource)
        tool = _mcp_tool(x402)
    return {"title": title, "text": body, "meta": meta, "url": url, "tool": tool}


def field_terms(texts: Mapping[str, str]) -> dict[str, Counter[str]]:
    """Term frequencies per field after analysis; empty fields are omitted."""
    out: dict[str, Counter[str]] = {}
    for name, raw in texts.items():
        terms = analyze(raw) if raw else []
        if terms:
            out[name] = Counter(terms)
    return out


def query_terms(query: str) -> Counter[str]:
    """Analyzed query terms with their query frequency."""
    return Counter(analyze(query))
