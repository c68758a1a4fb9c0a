"""Detecting mathematical types in text: longest match of dictionary terms over normalised words.

Stathopoulos & Teufel 2016 §4.1: types are found by longest sequence matching over the words of a
sentence, with every formula replaced by one placeholder token ("@@@"). Here words are lower-cased,
accent-folded, hyphens read as spaces, possessives dropped and plurals reduced to the singular, so
"Abelian groups", "abelian-group" and "Stokes' theorem" match the dictionary's "abelian group" and
"stokes theorem". A formula, a LaTeX command or punctuation (other than a hyphen) ends a match.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from mathscout.corpus import find_math
from mathscout.errors import MathScoutError

TERMS_FILE = Path(__file__).resolve().parents[1] / "data" / "types_terms.tsv"
FORMULA_TOKEN = "@@@"  # Stathopoulos & Teufel 2016 §4.1: a formula becomes one placeholder token
MAX_SENTENCE_TOKENS = 10_000  # gensim ignores tokens past this many in one sentence

_TOKEN = re.compile(
    r"(?P<cmd>\\[A-Za-z]+\*?)"
    r"|(?P<word>[^\W_]+(?:['’][^\W_]+)*)"
    r"|(?P<stop>[.!?](?=\s|$)|\n[ \t]*\n)"
    r"|(?P<join>[-‐‑–'’])"  # hyphens and dashes join words ("well-defined", "Hahn–Banach"); quotes vanish
    r"|(?P<boundary>[^\s\w])"
)

# Plural → singular for words that the suffix rules below get wrong.
IRREGULAR = {
    "matrices": "matrix",
    "vertices": "vertex",
    "indices": "index",
    "simplices": "simplex",
    "bases": "basis",
    "axes": "axis",
    "analyses": "analysis",
    "hypotheses": "hypothesis",
    "theses": "thesis",
    "parentheses": "parenthesis",
    "radii": "radius",
    "tori": "torus",
    "loci": "locus",
    "foci": "focus",
    "moduli": "modulus",
    "polyhedra": "polyhedron",
    "lemmata": "lemma",
    "criteria": "criterion",
    "phenomena": "phenomenon",
    "automata": "automaton",
    "maxima": "maximum",
    "minima": "minimum",
    "extrema": "extremum",
    "spectra": "spectrum",
    "leaves": "leaf",
    "halves": "half",
    "zeroes": "zero",
    "children": "child",
    "appendices": "appendix",
}
INVARIANT = frozenset({"series", "species", "gauss", "lens", "news", "always", "various", "previous"})


@lru_cache(maxsize=1 << 18)
def singular(word: str) -> str:
    """The singular of a lower-cased word by suffix rules (S-stemmer style), e.g. properties → property."""
    if word in IRREGULAR:
        return IRREGULAR[word]
    if len(word) <= 3 or not word.endswith("s") or word in INVARIANT or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zzes")):
        return word[:-2]
    return word[:-1]


@lru_cache(maxsize=1 << 18)
def _fold(word: str) -> tuple[str, str]:
    """(surface, key) of a word: lower-case ASCII with the possessive dropped, and its singular."""
    word = word.lower()
    if not word.isascii():
        word = "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))
        word = word.replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    return word, singular(word)


@dataclass(frozen=True)
class TypeMention:
    """A type found in a text: the dictionary term and the character span it covers."""

    term: str
    start: int
    end: int


@dataclass
class _Scan:
    """A text as word tokens. `keys[i]` is None where a match must stop (formula, punctuation);
    `surfaces[i]` is the word as written out for training (None for punctuation, "@@@" for formulas)."""

    keys: list[str | None]
    surfaces: list[str | None]
    starts: list[int]
    ends: list[int]
    sentence_starts: list[int]


def _scan_prose(text: str, start: int, end: int, scan: _Scan) -> None:
    for m in _TOKEN.finditer(text, start, end):
        kind = m.lastgroup
        if kind == "word":
            surface, key = _fold(m.group())
            scan.keys.append(key)
            scan.surfaces.append(surface)
        elif kind == "join":
            continue
        else:
            if kind == "stop":
                scan.sentence_starts.append(len(scan.keys) + 1)
            scan.keys.append(None)
            scan.surfaces.append(None)
        scan.starts.append(m.start())
        scan.ends.append(m.end())


def scan(text: str) -> _Scan:
    """Tokenise `text` for type matching; each formula becomes one placeholder token."""
    result = _Scan([], [], [], [], [0])
    position = 0
    for formula in find_math(text):
        _scan_prose(text, position, formula.start, result)
        result.keys.append(None)
        result.surfaces.append(FORMULA_TOKEN)
        result.starts.append(formula.start)
        result.ends.append(formula.end)
        position = formula.end
    _scan_prose(text, position, len(text), result)
    return result


def term_key(term: str) -> tuple[str, ...]:
    """The matching key of a dictionary term: its normalised words (empty when it has a formula or
    punctuation inside, so it could never match running text)."""
    found = scan(term)
    if any(k is None for k in found.keys):
        return ()
    return tuple(found.keys)  # type: ignore[arg-type]


def term_display(term: str) -> str:
    """The display form of a dictionary term: lower-case ASCII words, hyphens read as spaces."""
    return " ".join(s for s in scan(term).surfaces if s)


def type_token(term: str) -> str:
    """A type as one token for word2vec and the type index (Stathopoulos & Teufel 2016 §4.1): `abelian group` → `abelian_group`."""
    return term.replace(" ", "_")


_END = ""  # trie key marking the end of a term (never a word key)


class TypeDetector:
    """Longest-match type detection with a word trie built from dictionary terms."""

    def __init__(self, terms: Iterable[str]):
        self._trie: dict = {}
        self.terms: list[str] = []
        for term in terms:
            key = term_key(term)
            if not key:
                continue
            node = self._trie
            for word in key:
                node = node.setdefault(word, {})
            if _END not in node:  # the first spelling of a key names it
                node[_END] = term_display(term)
                self.terms.append(node[_END])
        self._token = {t: type_token(t) for t in self.terms}
        self.tokens = frozenset(self._token.values())  # the types as word2vec tokens

    def __len__(self) -> int:
        return len(self.terms)

    def _matches(self, keys: list[str | None]) -> list[tuple[int, int, str]]:
        """(first token, token after the last, term) of each longest match, left to right."""
        found, i, n, root = [], 0, len(keys), self._trie
        while i < n:
            node, j, best = root, i, None
            while j < n and (child := node.get(keys[j])) is not None:
                node = child
                j += 1
                if _END in node:
                    best = (j, node[_END])
            if best is None:
                i += 1
            else:
                found.append((i, best[0], best[1]))
                i = best[0]
        return found

    def detect(self, text: str) -> list[TypeMention]:
        """Every type mention in `text`, in order, none overlapping."""
        s = scan(text)
        return [TypeMention(term, s.starts[i], s.ends[j - 1]) for i, j, term in self._matches(s.keys)]

    def types_of(self, text: str) -> list[str]:
        """The type of each mention in `text`, in order (repeats kept)."""
        return [term for _, _, term in self._matches(scan(text).keys)]

    def sentences(self, text: str) -> list[list[str]]:
        """Training sentences for word2vec (Stathopoulos & Teufel 2016 §4.1): words, each type as one token, formulas as "@@@"."""
        s = scan(text)
        matches = {i: (j, term) for i, j, term in self._matches(s.keys)}
        bounds = s.sentence_starts + [len(s.keys)]
        sentences = []
        for start, end in itertools.pairwise(bounds):
            tokens, i = [], start
            while i < end:
                if i in matches:
                    j, term = matches[i]
                    tokens.append(self._token[term])
                    i = j
                    continue
                surface = s.surfaces[i]
                if surface:
                    tokens.append(surface)
                i += 1
            for at in range(0, len(tokens), MAX_SENTENCE_TOKENS):
                if len(tokens) - at > 1:
                    sentences.append(tokens[at : at + MAX_SENTENCE_TOKENS])
        return sentences


def read_terms(path: Path | str = TERMS_FILE) -> list[str]:
    """The terms of a type dictionary file: one per line, `#` lines are comments."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise MathScoutError(
            f"the type dictionary {path} is unreadable ({exc}); rebuild it with "
            "'python -m mathscout.types_expansion.dictionary --build'"
        ) from exc
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@lru_cache(maxsize=1)
def default_detector() -> TypeDetector:
    """The detector over the shipped dictionary (mathscout/data/types_terms.tsv)."""
    return TypeDetector(read_terms(TERMS_FILE))


def detect_types(text: str) -> list[TypeMention]:
    """The type mentions of `text` under the shipped dictionary."""
    return default_detector().detect(text)
