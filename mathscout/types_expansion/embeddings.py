"""Type embeddings: word2vec over text in which every type is one token (Stathopoulos & Teufel 2016 §4.1).

Sentences are rewritten by the detector (types joined, `abelian_group`; formulas → "@@@") and passed to
gensim's word2vec in skip-gram mode with negative sampling and a window of 10, as in Stathopoulos & Teufel 2016 §4.1. Nearest
neighbours are looked up among types only, by cosine similarity (Stathopoulos & Teufel 2016 §4.3.1).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mathscout.errors import DamagedIndexError, MathScoutError
from mathscout.index.arrays import load_array
from mathscout.index.layout import write_json_atomic
from mathscout.index.stored import StoredFile
from mathscout.types_expansion.detect import TypeDetector, read_terms, type_token

VECTORS = "vectors.npy"  # the types' unit vectors, one row per type (float32, no pickle)
VOCABULARY = "vocabulary.json"  # {"types": [the type of each row]}
OLD_VECTORS = "vectors.kv"  # gensim's pickle (before issue 42): never opened, it could run code
TERMS = "terms.tsv"
SKIP_GRAM, NEGATIVE, WINDOW = 1, 5, 10  # Stathopoulos & Teufel 2016 §4.1: skip-gram, negative sampling, window size 10
VECTOR_SIZE = 100
MIN_COUNT = 5
EPOCHS = 5
WORKERS = 2  # the machine's cores are shared; word2vec scales with threads when they are free
SEED = 1


@dataclass
class SentenceStats:
    documents: int = 0
    sentences: int = 0
    tokens: int = 0
    type_mentions: int = 0
    seconds: float = 0.0


def write_sentences(
    texts: Iterable[str], detector: TypeDetector, path: Path, on_types: Callable[[int, list[str]], None] | None = None
) -> SentenceStats:
    """Detect types in `texts` and write one training sentence per line (gensim's LineSentence format);
    `on_types(n, tokens)` receives the type tokens of the n-th text (0-based), in order."""
    stats = SentenceStats()
    started = time.perf_counter()
    with open(path, "w", encoding="utf-8") as out:
        for n, text in enumerate(texts):
            stats.documents += 1
            types: list[str] = []
            for sentence in detector.sentences(text):
                stats.sentences += 1
                stats.tokens += len(sentence)
                types += [t for t in sentence if t in detector.tokens]
                out.write(" ".join(sentence))
                out.write("\n")
            stats.type_mentions += len(types)
            if on_types is not None:
                on_types(n, types)
    stats.seconds = time.perf_counter() - started
    return stats


def train_word2vec(
    sentences_file: Path,
    min_count: int = MIN_COUNT,
    vector_size: int = VECTOR_SIZE,
    epochs: int = EPOCHS,
    workers: int = WORKERS,
):
    """Skip-gram word2vec with negative sampling over a sentences file; returns the gensim model
    (input vectors in `.wv`, output vectors in `.syn1neg`)."""
    from gensim.models import Word2Vec

    try:
        return Word2Vec(
            corpus_file=str(sentences_file),
            sg=SKIP_GRAM,
            negative=NEGATIVE,
            hs=0,
            window=WINDOW,
            vector_size=vector_size,
            min_count=min_count,
            epochs=epochs,
            workers=workers,
            seed=SEED,
        )
    except RuntimeError as exc:  # gensim: an empty vocabulary (every word below min_count)
        raise MathScoutError(f"too little text to train word embeddings (min_count {min_count}): {exc}") from exc


def train_vectors(
    sentences_file: Path,
    min_count: int = MIN_COUNT,
    vector_size: int = VECTOR_SIZE,
    epochs: int = EPOCHS,
    workers: int = WORKERS,
):
    """The type embeddings: train_word2vec's input vectors (gensim KeyedVectors)."""
    return train_word2vec(sentences_file, min_count, vector_size, epochs, workers).wv


class TypeEmbeddings:
    """Unit vectors of the types of one dictionary, and the detector for that dictionary. Stored as a plain array and a
    JSON list of types: an index is read, never executed (gensim's `.load` unpickles)."""

    def __init__(self, types: list[str], matrix: np.ndarray, detector: TypeDetector):
        self.types = types  # the types that have a vector
        self._matrix = matrix  # their unit vectors, row n is types[n]
        self._row = {term: n for n, term in enumerate(types)}
        self.detector = detector

    @classmethod
    def from_vectors(cls, vectors, detector: TypeDetector) -> TypeEmbeddings:
        """The types of `detector` among trained gensim KeyedVectors (word2vec's vocabulary has every word)."""
        by_token = {type_token(t): t for t in detector.terms}
        rows = [(i, by_token[key]) for i, key in enumerate(vectors.index_to_key) if key in by_token]
        normed = vectors.get_normed_vectors()
        matrix = normed[[i for i, _ in rows]] if rows else np.zeros((0, vectors.vector_size), np.float32)
        return cls([term for _, term in rows], np.asarray(matrix, dtype=np.float32), detector)

    def __contains__(self, term: str) -> bool:
        return term in self._row

    def neighbours(self, term: str, n: int = 5, exclude: Iterable[str] = ()) -> list[tuple[str, float]]:
        """The `n` types nearest to `term` by cosine (Stathopoulos & Teufel 2016 §4.3.1), best first, skipping `exclude`; [] when
        `term` has no vector."""
        row = self._row.get(term)
        if row is None or n <= 0:
            return []
        skip = {term, *exclude}
        similarity = self._matrix @ self._matrix[row]
        wanted = min(len(similarity), n + len(skip))
        best = np.argpartition(-similarity, wanted - 1)[:wanted]
        ranked = sorted(best, key=lambda i: -similarity[i])
        found = [(self.types[i], float(similarity[i])) for i in ranked if self.types[i] not in skip]
        return found[:n]

    def save(self, folder: Path) -> None:
        with open(folder / VECTORS, "wb") as f:
            np.save(f, self._matrix, allow_pickle=False)
        write_json_atomic(folder / VOCABULARY, {"types": self.types})
        (folder / TERMS).write_text("".join(t + "\n" for t in self.detector.terms), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> TypeEmbeddings:
        """The embeddings stored in `folder`; one line naming the rebuild when they are unreadable, inconsistent or in
        the old pickled format."""
        rebuild = f"rebuild them with 'mathscout index --index {folder.parent} --components types'"
        if not (folder / VECTORS).is_file() and (folder / OLD_VECTORS).is_file():
            raise DamagedIndexError(
                f"the type embeddings in {folder} are in the old format ({OLD_VECTORS}, a Python pickle, which "
                f"MathScout no longer opens because loading it can run code): {rebuild}"
            )
        file = StoredFile(folder / VOCABULARY, "the type vocabulary", rebuild)
        types = [file.text(t, "a type") for t in file.items(file.load().get("types"), "types")]
        file.require(len(set(types)) == len(types), "a type is listed twice")
        try:
            stored = load_array(folder / VECTORS, mmap=True)  # mapped: a header claiming more than the file is refused
        except (OSError, ValueError) as exc:
            raise DamagedIndexError(f"the type vectors {folder / VECTORS} are unreadable ({exc}): {rebuild}") from None
        if stored.dtype != np.float32 or stored.ndim != 2 or stored.shape[0] != len(types) or stored.shape[1] < 1:
            raise DamagedIndexError(
                f"the type vectors {folder / VECTORS} hold a {stored.dtype} array of shape {stored.shape}, not one "
                f"float32 row for each of the {len(types):,} types of {VOCABULARY}: {rebuild}"
            )
        matrix = np.array(stored)
        if not np.isfinite(matrix).all():
            raise DamagedIndexError(f"the type vectors {folder / VECTORS} hold numbers that are not finite: {rebuild}")
        return cls(types, matrix, TypeDetector(read_terms(folder / TERMS)))


def train_type_embeddings(
    texts: Iterable[str],
    detector: TypeDetector,
    workdir: Path,
    on_types: Callable[[int, list[str]], None] | None = None,
    **options,
):
    """Train type embeddings over `texts` (sentences written to `workdir`, removed afterwards);
    returns the embeddings, the sentence stats and the training seconds."""
    sentences_file = workdir / "sentences.txt"
    try:
        stats = write_sentences(texts, detector, sentences_file, on_types)
        if stats.tokens == 0:
            raise MathScoutError("no text to train type embeddings on")
        started = time.perf_counter()
        vectors = train_vectors(sentences_file, **options)
        seconds = time.perf_counter() - started
    finally:
        sentences_file.unlink(missing_ok=True)
    return TypeEmbeddings.from_vectors(vectors, detector), stats, seconds
