"""The type dictionary: PlanetMath titles, defined terms and synonyms, normalised and filtered.

Stathopoulos & Teufel 2016 §3.1 take as types the technical terms of a corpus (C-Value, Frantzi et
al. 1998) that entirely match an encyclopedia title (Encyclopedia of Mathematics, Wikipedia). Here
PlanetMath (../shared/data/planetmath/types.tsv) plays the encyclopedia's part. Entries are
normalised (accents, parenthetical glosses), and those that cannot be a single type are dropped:
mostly-LaTeX entries, single stopwords or discourse words ("lemma"), clauses ("every X is a Y") and
long titles. With a corpus (the default), the C-Value step also runs: a multi-word term is kept only if
its C-Value over the corpus reaches MIN_C_VALUE, a single word only if it occurs in MIN_DOC_FREQ documents
and does not read as an adjective (`modifier_rates`).

    python -m mathscout.types_expansion.dictionary --build [--corpus docs.jsonl | --no-corpus]

writes mathscout/data/types_terms.tsv (terms only, PlanetMath attributed), which the package ships. The
shipped list is the PlanetMath terms filtered by C-Value over the shared collection (the default --corpus
when ../shared/data is present): 12,523 normalised terms, 8,714 kept. The paper's C-Value finds its
candidates with part-of-speech patterns; here the candidates are the dictionary's own terms, so only the
statistical (termhood) part is needed, and a corpus statistic stands in for the tagger on single words.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mathscout.config import SHARED_COLLECTION, SHARED_DATA
from mathscout.errors import MathScoutError
from mathscout.latex.tokens import STOPWORDS
from mathscout.types_expansion.detect import TERMS_FILE, TypeDetector, scan, term_display, term_key

SHARED_PLANETMATH = SHARED_DATA / "planetmath"
SHARED_DOCS = SHARED_COLLECTION / "docs.jsonl"
ATTRIBUTION = (
    "# Mathematical type terms derived from PlanetMath entry titles, defined terms and synonyms "
    "(https://planetmath.org, CC BY-SA 3.0); rebuild: python -m mathscout.types_expansion.dictionary --build"
)
MAX_TERM_WORDS = 5
MIN_SINGLE_WORD_CHARS = 3
MAX_C_VALUE_WORDS = 5  # longest candidate term counted by C-Value
MIN_C_VALUE = 2.0  # e.g. a two-word term seen at least twice on its own
MIN_DOC_FREQ = 2
MIN_NESTING_FREQ = 2  # longer candidates must occur this often to count as nesting terms
MAX_MODIFIER_RATE = 0.7  # a single word followed by a content word more often than this is an adjective
MIN_MODIFIER_EVIDENCE = 20  # occurrences needed before a word is judged a modifier

# Words that make an entry a clause or a list rather than one type ("every ε-automaton is equivalent …").
CLAUSE_WORDS = frozenset(
    "is are be was were been has have had does do can could may must should if then iff implies and or "
    "versus vs every all not no there how why what when which that this these those we you it its "
    "contain contains diverge diverges converge converges divide divides belong belongs exist exists "
    "satisfy satisfies hold holds".split()
)
# Discourse labels and procedures, not types (Stathopoulos & Teufel 2016 §3: "theorem 4.1", "proof by contradiction").
DISCOURSE_WORDS = frozenset(
    "definition lemma theorem corollary proposition proof example remark conjecture hypothesis notation "
    "exercise problem question answer solution introduction note observation fact claim case "
    "bibliography reference index".split()
)
_ACCENT = re.compile(r"\\[\"'`^~=.Hvuckrb]\s*\{?\s*([A-Za-z])\s*\}?")
_LETTER_MACRO = re.compile(r"\{?\\(O|o|L|l|ss|ae|AE|oe|OE|aa|AA|i|j)\b\}?")
_PARENTHETICAL = re.compile(r"\s*\([^()]*\)")
_LATEX = re.compile(r"[\\$^_{}=<>]")


def normalize_entry(raw: str) -> str | None:
    """The display form of a dictionary entry, or None when it cannot be a single type."""
    text = _LETTER_MACRO.sub(lambda m: m.group(1).lower(), raw)
    text = _ACCENT.sub(r"\1", text)
    text = _PARENTHETICAL.sub("", text).strip()
    if not text or _LATEX.search(text):
        return None
    display = term_display(text)
    words = display.split()
    if not words or len(words) > MAX_TERM_WORDS or not term_key(text):
        return None
    if any(w in CLAUSE_WORDS for w in words) or "planetmath" in words:
        return None
    if words[0] in STOPWORDS or words[-1] in STOPWORDS:
        return None
    if len(words) == 1:
        word = words[0]
        if len(word) < MIN_SINGLE_WORD_CHARS or not word.isalpha() or word in DISCOURSE_WORDS:
            return None
    elif all(w in DISCOURSE_WORDS or w in STOPWORDS for w in words):
        return None
    return display


@dataclass(frozen=True)
class Entry:
    term: str
    source: str  # title | defines | synonym


def read_planetmath_types(path: Path) -> Iterator[Entry]:
    """(term, source) rows of PlanetMath's types.tsv (term, source, pmtype, entry id)."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                if len(row) >= 2 and row[0].strip():
                    yield Entry(row[0].strip(), row[1].strip())
    except OSError as exc:
        raise MathScoutError(f"cannot read the PlanetMath type list {path}: {exc}") from exc


def normalized_terms(entries: Iterable[Entry]) -> tuple[list[str], Counter[str]]:
    """Distinct normalised terms (titles first, then defined terms, then synonyms) and drop counts."""
    order = {"title": 0, "defines": 1, "synonym": 2}
    kept: dict[tuple[str, ...], str] = {}
    dropped: Counter[str] = Counter()
    for entry in sorted(entries, key=lambda e: order.get(e.source, 3)):
        display = normalize_entry(entry.term)
        if display is None:
            dropped["not a single type"] += 1
            continue
        key = term_key(display)
        if key in kept:
            dropped["duplicate after normalisation"] += 1
            continue
        kept[key] = display
    return sorted(kept.values()), dropped


def _corpus_texts(path: Path) -> Iterator[str]:
    """The `text` of each JSONL record of `path` (unreadable lines skipped)."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    record = json.loads(line) if line.strip() else None
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("text"), str):
                    yield record["text"]
    except OSError as exc:
        raise MathScoutError(f"cannot read the corpus {path} for the C-Value filter: {exc}") from exc


def c_values(terms: list[str], texts: Iterable[str]) -> tuple[dict[str, float], Counter[str]]:
    """§3.1: C-Value termhood (Frantzi et al. 1998) of each multi-word term over `texts`, and each term's document
    frequency. C(a) = log2|a| · f(a) for a never nested in a longer candidate, else
    log2|a| · (f(a) − Σ_{b∈T_a} f(b) / |T_a|), where T_a are the longer candidate strings (runs of words
    without punctuation or formulas, ≤ MAX_C_VALUE_WORDS, no stopword at either end, seen at least
    MIN_NESTING_FREQ times) that contain a.
    """
    detector = TypeDetector(terms)
    ids = {term: n for n, term in enumerate(detector.terms)}
    keys = {term_key(t): ids[t] for t in detector.terms}
    longest = max(len(k) for k in keys)
    freq = np.zeros(len(ids), dtype=np.int64)
    doc_freq: Counter[str] = Counter()
    pairs_term: list[int] = []
    pairs_window: list[int] = []
    windows: list[int] = []
    for text in texts:
        words = scan(text).keys
        seen: set[int] = set()
        doc_windows: dict[tuple[int, int], int] = {}
        n = len(words)
        for i in range(n):
            if words[i] is None:
                continue
            for j in range(i + 1, min(n, i + longest) + 1):
                if words[j - 1] is None:
                    break
                term_id = keys.get(tuple(words[i:j]))  # type: ignore[arg-type]
                if term_id is None:
                    continue
                freq[term_id] += 1
                seen.add(term_id)
                if j - i < 2:
                    continue
                for left in range(i, max(-1, j - MAX_C_VALUE_WORDS - 1), -1):
                    if words[left] is None:
                        break
                    for right in range(j, min(n, left + MAX_C_VALUE_WORDS) + 1):
                        if right > j and words[right - 1] is None:
                            break
                        if (left, right) == (i, j) or words[left] in STOPWORDS or words[right - 1] in STOPWORDS:
                            continue
                        window = doc_windows.setdefault((left, right), hash(tuple(words[left:right])))
                        pairs_term.append(term_id)
                        pairs_window.append(window)
        windows.extend(doc_windows.values())
        doc_freq.update(detector.terms[t] for t in seen)
    window_ids, window_freq = np.unique(np.asarray(windows, dtype=np.int64), return_counts=True)
    nesting: dict[int, set[int]] = defaultdict(set)
    for term_id, window in zip(pairs_term, pairs_window):
        nesting[term_id].add(window)
    result: dict[str, float] = {}
    for term, term_id in ids.items():
        size = len(term.split())
        if size < 2:
            continue
        containers = np.fromiter(nesting.get(term_id, ()), dtype=np.int64)
        counts = window_freq[np.searchsorted(window_ids, containers)] if containers.size else containers
        counts = counts[counts >= MIN_NESTING_FREQ]
        nested = counts.sum() / counts.size if counts.size else 0.0
        result[term] = math.log2(size) * (freq[term_id] - nested)
    return result, doc_freq


def modifier_rates(words: Iterable[str], texts: Iterable[str]) -> dict[str, tuple[int, float]]:
    """(occurrences, share of them directly followed by a content word) of each word over `texts`.
    Stathopoulos & Teufel 2016 §3.1's C-Value candidates pass a part-of-speech filter, (Adj|Noun)+ Noun: a term ends in a noun. Without
    a tagger, a word that mostly modifies the next word ("finite group", "abelian variety") is taken as an
    adjective, i.e. a property rather than a type (Stathopoulos & Teufel 2016 §3.2: properties are not types)."""
    wanted = set(words)
    seen: Counter[str] = Counter()
    modifying: Counter[str] = Counter()
    for text in texts:
        keys = scan(text).keys
        for i, key in enumerate(keys):
            if key in wanted:
                seen[key] += 1
                following = keys[i + 1] if i + 1 < len(keys) else None
                if following is not None and following not in STOPWORDS:
                    modifying[key] += 1
    return {w: (n, modifying[w] / n) for w, n in seen.items()}


def filter_by_corpus(terms: list[str], corpus: Path) -> tuple[list[str], Counter[str]]:
    """The terms that behave as technical terms in `corpus` (C-Value for multi-word terms, document
    frequency for single words, which must also not read as adjectives), and counts of what was dropped."""
    scores, doc_freq = c_values(terms, _corpus_texts(corpus))
    single = [t for t in terms if " " not in t]
    rates = modifier_rates(single, _corpus_texts(corpus))
    kept: list[str] = []
    dropped: Counter[str] = Counter()
    for term in terms:
        if len(term.split()) >= 2:
            if scores.get(term, 0.0) >= MIN_C_VALUE:
                kept.append(term)
            else:
                dropped[f"C-Value below {MIN_C_VALUE}"] += 1
        elif doc_freq[term] < MIN_DOC_FREQ:
            dropped[f"in fewer than {MIN_DOC_FREQ} documents"] += 1
        elif _reads_as_modifier(*rates.get(term_key(term)[0], (0, 0.0))):
            dropped[f"a modifier (followed by a content word > {MAX_MODIFIER_RATE:.0%} of the time)"] += 1
        else:
            kept.append(term)
    return kept, dropped


def _reads_as_modifier(occurrences: int, rate: float) -> bool:
    return occurrences >= MIN_MODIFIER_EVIDENCE and rate > MAX_MODIFIER_RATE


def write_terms(terms: Iterable[str], path: Path, provenance: str = "") -> int:
    """Write the terms file (attribution line first, then `provenance` as a comment); returns the number of terms."""
    terms = list(terms)
    header = ATTRIBUTION + "\n" + (f"# {provenance}\n" if provenance else "")
    path.write_text(header + "".join(t + "\n" for t in terms), encoding="utf-8")
    return len(terms)


def build(planetmath_types: Path, output: Path, corpus: Path | None = None) -> int:
    """Derive the type dictionary from PlanetMath (and optionally a corpus) into `output`."""
    started = time.perf_counter()
    terms, dropped = normalized_terms(read_planetmath_types(planetmath_types))
    print(f"{len(terms):,} distinct terms after normalisation; dropped: {dict(dropped)}", file=sys.stderr)
    provenance = f"{len(terms):,} normalised PlanetMath terms"
    if corpus is not None:
        normalised = len(terms)
        terms, corpus_dropped = filter_by_corpus(terms, corpus)
        print(f"{len(terms):,} terms kept by the corpus filter; dropped: {dict(corpus_dropped)}", file=sys.stderr)
        provenance = (
            f"{normalised:,} normalised PlanetMath terms, {len(terms):,} kept by C-Value >= {MIN_C_VALUE} "
            f"(multi-word) / document frequency >= {MIN_DOC_FREQ} and not a modifier (single words) "
            f"over {corpus.parent.name}/{corpus.name}"
        )
    count = write_terms(terms, output, provenance)
    print(f"wrote {count:,} terms to {output} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the type dictionary (mathscout/data/types_terms.tsv).")
    parser.add_argument("--build", action="store_true", help="derive the dictionary and write it")
    parser.add_argument(
        "--planetmath",
        type=Path,
        default=SHARED_PLANETMATH / "types.tsv",
        help="PlanetMath types.tsv (term, source, pmtype, entry id)",
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        default=SHARED_DOCS if SHARED_DOCS.is_file() else None,
        help="a JSONL collection for the C-Value / frequency filter (default: the shared collection)",
    )
    parser.add_argument("--no-corpus", action="store_true", help="skip the C-Value filter (PlanetMath terms only)")
    parser.add_argument("--output", type=Path, default=TERMS_FILE)
    args = parser.parse_args(argv)
    if not args.build:
        parser.error("nothing to do: pass --build")
    try:
        build(args.planetmath, args.output, None if args.no_corpus else args.corpus)
    except MathScoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
