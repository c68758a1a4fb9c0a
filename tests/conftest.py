"""Shared fixtures, built once per test session from the real data in ../shared/data: the tiny index (a few hundred
documents: bm25 + structure), the small index (60 dev topics' judged documents and 3,000 others: every default
component), a copy of it with a tiny trained cross-encoder, and the dense index (MiniLM vectors of ~160 documents)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.corpora import DENSE_DISTRACTORS, DENSE_TOPICS, FORMULA_ONLY, write_tiny_corpus
from tests.support.page import CHROMIUM, CHROMIUM_FLAGS
from tests.support.paths import SHARED_DATA
from tests.support.training import TINY_CROSS_ENCODER

SUBSET_DEV_TOPICS = 60  # dev topics whose judged documents are all in the small index
SUBSET_EXTRA_DOCS = 3000  # plus this many other documents (distractors) from the collection


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "collection" / "docs.jsonl").is_file():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def dev_topic_ids(shared_data) -> list[str]:
    """The first SUBSET_DEV_TOPICS dev topic ids (in file order)."""
    ids = []
    with open(shared_data / "collection" / "topics.dev.jsonl", encoding="utf-8") as f:
        for line in f:
            ids.append(json.loads(line)["id"])
            if len(ids) == SUBSET_DEV_TOPICS:
                break
    return ids


@pytest.fixture(scope="session")
def small_collection(shared_data, dev_topic_ids, tmp_path_factory) -> Path:
    """A JSONL subset of the shared collection: every judged document of the subset's dev topics plus
    the first SUBSET_EXTRA_DOCS documents of docs.jsonl."""
    wanted = set()
    topics = set(dev_topic_ids)
    with open(shared_data / "collection" / "qrels.dev.txt", encoding="utf-8") as f:
        for line in f:
            qid, _, docid, _ = line.split()
            if qid in topics:
                wanted.add(docid)
    out = tmp_path_factory.mktemp("collection") / "small.jsonl"
    kept = 0
    with open(shared_data / "collection" / "docs.jsonl", encoding="utf-8") as f, open(out, "w", encoding="utf-8") as w:
        for n, line in enumerate(f):
            doc_id = json.loads(line)["id"]
            if n < SUBSET_EXTRA_DOCS or doc_id in wanted:
                w.write(line)
                kept += 1
    assert kept >= SUBSET_EXTRA_DOCS
    return out


@pytest.fixture(scope="session")
def small_index(small_collection, tmp_path_factory) -> Path:
    """An index directory over `small_collection` with every default component."""
    from mathscout.retrievers.indexing import build_index

    path = tmp_path_factory.mktemp("indexes") / "small"
    build_index([small_collection], path)
    return path


@pytest.fixture(scope="session")
def dev_subset(shared_data, dev_topic_ids, tmp_path_factory):
    """The 60 dev topics of the small index (topics + qrels files)."""
    folder = tmp_path_factory.mktemp("dev-subset")
    wanted = set(dev_topic_ids)
    with open(shared_data / "collection" / "topics.dev.jsonl", encoding="utf-8") as f:
        lines = [line for line in f if json.loads(line)["id"] in wanted]
    (folder / "topics.jsonl").write_text("".join(lines), encoding="utf-8")
    qrels = (shared_data / "collection" / "qrels.dev.txt").read_text(encoding="utf-8").splitlines()
    (folder / "qrels.txt").write_text(
        "".join(line + "\n" for line in qrels if line.split()[0] in wanted), encoding="utf-8"
    )
    return folder / "topics.jsonl", folder / "qrels.txt"


@pytest.fixture(autouse=True)
def notices_stay_data():
    """A test that runs the command line in this process (`main([...])`) configures logging for the process: undo it,
    so later tests see what a library call does (notices logged to no handler and collected, never printed)."""
    yield
    from mathscout import logs

    if os.environ.get("MATHSCOUT_COMMAND_LINE"):
        logs.reset()


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, headless, through Playwright (tests/support/page.py); skipped when it is not installed."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (scripts/setup.sh installs it: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture()
def mathscout_home(tmp_path, monkeypatch) -> Path:
    """An empty MATHSCOUT_HOME for tests that touch the default (demo) index."""
    monkeypatch.setenv("MATHSCOUT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MATHSCOUT_INDEX", raising=False)
    return tmp_path / "home"


# --- the tiny index: the one index of a few hundred real documents the tests share ---------------------------


@pytest.fixture(scope="session")
def tiny_corpus(shared_data, tmp_path_factory) -> Path:
    """The tiny corpus (tests/support/corpora.py): the first TINY_REAL_DOCS documents of the shared collection, a
    document that tries a prompt injection and one whose text is hostile markup; TINY_DOCS documents in all."""
    return write_tiny_corpus(shared_data, tmp_path_factory.mktemp("tiny") / "tiny.jsonl")


@pytest.fixture(scope="session")
def tiny_index(tiny_corpus, tmp_path_factory) -> Path:
    """bm25 + structure over the tiny corpus, built once per session: the agent, the tools, the command line, the
    services and the hostile-input tests search it. Read it as it is; a test that changes an index copies it first
    (shutil.copytree)."""
    from mathscout.retrievers.indexing import build_index

    path = tmp_path_factory.mktemp("tiny-index") / "idx"
    build_index([tiny_corpus], path, ["bm25", "structure"])
    return path


# --- a small index with dense vectors (real MiniLM weights; ~200 documents encode in seconds) ----------------


@pytest.fixture(scope="session")
def dense_topics(shared_data) -> list[dict]:
    topics = []
    with open(shared_data / "collection" / "topics.dev.jsonl", encoding="utf-8") as f:
        for line in f:
            topic = json.loads(line)
            if topic["id"].startswith("mse:"):
                topics.append(topic)
            if len(topics) == DENSE_TOPICS:
                break
    return topics


@pytest.fixture(scope="session")
def dense_qrels(shared_data, dense_topics) -> dict[str, dict[str, int]]:
    wanted = {t["id"] for t in dense_topics}
    qrels: dict[str, dict[str, int]] = {}
    with open(shared_data / "collection" / "qrels.dev.txt", encoding="utf-8") as f:
        for line in f:
            qid, _, doc, grade = line.split()
            if qid in wanted:
                qrels.setdefault(qid, {})[doc] = int(grade)
    return qrels


@pytest.fixture(scope="session")
def dense_index(shared_data, dense_qrels, tmp_path_factory) -> Path:
    """bm25, dense and colbert over the judged answers of `dense_topics` and DENSE_DISTRACTORS other documents."""
    from mathscout.retrievers.indexing import build_index

    judged = {d for docs in dense_qrels.values() for d in docs}
    folder = tmp_path_factory.mktemp("dense")
    corpus = folder / "docs.jsonl"
    with (
        open(shared_data / "collection" / "docs.jsonl", encoding="utf-8") as f,
        open(corpus, "w", encoding="utf-8") as out,
    ):
        for n, line in enumerate(f):
            if n < DENSE_DISTRACTORS or json.loads(line)["id"] in judged:
                out.write(line)
        out.write(json.dumps(FORMULA_ONLY) + "\n")
    path = folder / "index"
    build_index([corpus], path, ["bm25", "dense", "colbert"])
    return path


# --- the small index with a tiny trained cross-encoder (issue 34; ~50 s of training, once) ---------------------


@pytest.fixture(scope="session")
def cross_train_files(shared_data, small_index, tmp_path_factory):
    """Train topics whose relevant answers the small index holds (its first documents are those of train threads):
    (topics file, qrels file)."""
    from mathscout.index.layout import IndexDir

    qrels: dict[str, dict[str, int]] = {}
    for line in (shared_data / "collection" / "qrels.train.txt").read_text(encoding="utf-8").splitlines():
        qid, _, doc, grade = line.split()
        qrels.setdefault(qid, {})[doc] = int(grade)
    stored = IndexDir(small_index).store.summaries(d for judged in qrels.values() for d in judged)
    wanted = [q for q, judged in qrels.items() if any(d in stored and g >= 2 for d, g in judged.items())][:40]
    folder = tmp_path_factory.mktemp("cross-train")
    with open(shared_data / "collection" / "topics.train.jsonl", encoding="utf-8") as f:
        lines = [line for line in f if json.loads(line)["id"] in set(wanted)]
    (folder / "topics.train.jsonl").write_text("".join(lines), encoding="utf-8")
    (folder / "qrels.train.txt").write_text(
        "".join(f"{q} 0 {d} {g}\n" for q in wanted for d, g in qrels[q].items()), encoding="utf-8"
    )
    return folder / "topics.train.jsonl", folder / "qrels.train.txt"


@pytest.fixture(scope="session")
def cross_index(small_index, cross_train_files, tmp_path_factory) -> Path:
    """A copy of the small index with a tiny cross-encoder (tests/support/training.py): the first training run stops
    after one step (--max-minutes 0), the second resumes from its checkpoint and finishes. Read it as it is."""
    import shutil

    from mathscout.evaluation.training.cross_encoder import ROWS_FILE, WORK, main

    index = tmp_path_factory.mktemp("cross-index") / "small"
    shutil.copytree(small_index, index)
    topics, qrels = cross_train_files
    arguments = ["--index", str(index), "--topics", str(topics), "--qrels", str(qrels), *TINY_CROSS_ENCODER]
    main([*arguments, "--max-minutes", "0"])
    checkpoints = sorted(p.name for p in (index / WORK / "trainer").glob("checkpoint-*"))
    assert checkpoints == ["checkpoint-1"], checkpoints  # stopped after its first step, resumable
    assert (index / WORK / ROWS_FILE).is_file()  # the training rows, which the resumed run reads back
    assert not (index / "cross-encoder").exists()
    main(arguments)
    assert not (index / WORK).exists()  # the work folder goes once the model is stored
    return index
