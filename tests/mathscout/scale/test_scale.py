"""Scale: segmented builds merged on disk give the one-segment index, the index opens without decoding, and
the scale corpus generator is deterministic, consistent and streams; a full disk leaves no half index."""

from __future__ import annotations

import filecmp
import gzip
import json
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from mathscout.corpus import IngestReport, estimate_documents, make_document, read_corpus
from mathscout.errors import DamagedIndexError
from mathscout.evaluation.topics import load_topics
from mathscout.scale.corpus import rename_variables, write_scale_corpus
from mathscout.store import DocumentStore
from mathscout.structure.index import PathIndex, build_path_index
from mathscout.structure.parser import parse_latex
from mathscout.structure.paths import path_prefixes
from mathscout.structure.search import StructureSearcher
from mathscout.structure.text_lists import TextLists, build_text_lists
from tests.support.corpora import first_records, formula_triples

N_DOCS = 600


@pytest.fixture(scope="module")
def formulas(shared_data) -> list[tuple[int, int, str]]:
    return formula_triples(first_records(shared_data, N_DOCS))


@pytest.fixture(scope="module")
def two_builds(formulas, tmp_path_factory) -> tuple[Path, Path]:
    one, many = tmp_path_factory.mktemp("one-segment"), tmp_path_factory.mktemp("segments")
    build_path_index(formulas, len(formulas), one, progress=False)
    build_path_index(formulas, len(formulas), many, progress=False, segment_bytes=64 * 1024)
    return one, many


def test_segments_merged_on_disk_give_the_one_segment_index(two_builds):
    one, many = two_builds
    assert json.loads((many / "meta.json").read_text())["segments"] > 10
    assert not (many / ".segments").exists()
    for name in ("postings.bin", "lists.npz", "formulas.npz", "symbols.json", "path_hash.npy", "path_tid.npy"):
        assert filecmp.cmp(one / name, many / name, shallow=False), name
    one_blocks, many_blocks = np.load(one / "blocks.npz"), np.load(many / "blocks.npz")
    assert all(np.array_equal(one_blocks[name], many_blocks[name]) for name in one_blocks.files)


def test_same_ranked_ids_and_scores_and_pruning_stays_rank_safe(two_builds, shared_data):
    one, many = (StructureSearcher(PathIndex.open(p)) for p in two_builds)
    queries = [t.formula for t in load_topics(shared_data / "arqmath" / "topics.arqmath-2021-task2-origin.xml")][:25]
    compared = 0
    for latex in queries:
        try:
            a = [(h.formula, h.score) for h in one.search(latex, k=50, per_document=True)]
        except Exception:  # noqa: BLE001 — a topic formula structure search cannot read is left out
            continue
        b = [(h.formula, h.score) for h in many.search(latex, k=50, per_document=True)]
        exact = [(h.formula, h.score) for h in many.search(latex, k=50, strategy="exhaustive", per_document=True)]
        assert a == b == exact
        compared += bool(a)
    assert compared >= 15


def test_a_query_decodes_only_the_blocks_its_candidates_lie_in(two_builds, shared_data):
    from mathscout.structure.lists import BLOCK

    index = PathIndex.open(two_builds[0])
    searcher = StructureSearcher(index)
    queries = [t.formula for t in load_topics(shared_data / "arqmath" / "topics.arqmath-2021-task2-origin.xml")][:25]
    decoded = total = compared = 0
    for latex in queries:
        try:
            prepared = searcher.prepare(latex)
        except Exception:  # noqa: BLE001 — a topic formula structure search cannot read is left out
            continue
        assert not prepared.ix[11].any()  # laid out, nothing decoded yet
        pruned = [(h.formula, h.score) for h in searcher.search(prepared, k=10, per_document=True)]
        decoded, total = decoded + int(prepared.ix[11].sum()), total + len(prepared.ix[11])
        exact = searcher.search(searcher.prepare(latex), k=10, strategy="exhaustive", per_document=True)
        assert pruned == [(h.formula, h.score) for h in exact]
        prepared.release()  # its decoded blocks dropped; a search decodes them again, with the same answer
        assert not prepared.ix[11].any()
        assert [(h.formula, h.score) for h in searcher.search(prepared, k=10, per_document=True)] == pruned
        compared += bool(pruned)
    assert compared >= 15 and total > 2 * len(queries)  # lists longer than one block
    assert 0 < decoded < 0.8 * total  # pruned searches skip whole blocks without decoding them
    lengths = np.diff(index.lists.list_start)
    assert lengths.max() > 4 * BLOCK


def test_an_index_built_before_block_tables_gets_one_when_it_opens(two_builds, tmp_path):
    from mathscout.notices import collecting

    copy = tmp_path / "old"
    shutil.copytree(two_builds[0], copy)
    (copy / "blocks.npz").unlink()
    with collecting() as said:
        old = PathIndex.open(copy)
    assert any("indexing the blocks of its posting lists" in n for n in said)
    built = np.load(two_builds[0] / "blocks.npz")
    with np.load(copy / "blocks.npz") as scanned:  # written beside the index, the same table the build wrote
        assert all(np.array_equal(scanned[name], built[name]) for name in ("block", "byte", "base", "last", "group"))
    assert (copy / "blocks.npz").stat().st_mode & 0o777 == (two_builds[0] / "postings.bin").stat().st_mode & 0o777
    from mathscout.structure.lists import BlockTable

    lists = np.load(copy / "lists.npz")  # read a few KiB at a time (many pieces, lists cut nowhere): the same table
    pieces = BlockTable.scan(
        copy / "postings.bin", lists["byte_offsets"], lists["list_start"], int(lists["n_groups"]), piece=4096
    )
    assert all(np.array_equal(getattr(pieces, name), built[name]) for name in ("byte", "base", "last", "group"))

    def hits(ix):
        return [(h.formula, h.score) for h in StructureSearcher(ix).search("a^2+b^2=c^2", k=20)]

    assert hits(old) == hits(PathIndex.open(two_builds[0])) and hits(old)
    with collecting() as again:
        PathIndex.open(copy)
    assert again == []  # scanned once


def test_open_decodes_nothing_and_a_damaged_list_is_a_clear_error_when_read(two_builds, tmp_path):
    index = PathIndex.open(two_builds[0])
    assert isinstance(index.lists.buf, np.memmap)
    query = "a^2+b^2=c^2"
    tid = max(StructureSearcher(index).prepare(query).tids, key=lambda t: index.df[t])  # its longest list
    assert index.df[tid] > 1000
    copy = tmp_path / "structure"
    shutil.copytree(two_builds[0], copy)
    at = (int(index.lists.byte_offsets[tid]) + int(index.lists.byte_offsets[tid + 1])) // 2
    data = bytearray((copy / "postings.bin").read_bytes())
    data[at : at + 64] = b"\xff" * 64  # garble the middle of that list
    (copy / "postings.bin").write_bytes(bytes(data))
    searcher = StructureSearcher(PathIndex.open(copy))  # opens: nothing is decoded yet
    with pytest.raises(DamagedIndexError, match=r"postings.bin.*mathscout index --index"):
        searcher.search(query, k=10, strategy="exhaustive")  # reads every block of the list


def test_a_damaged_block_table_is_a_clear_error(two_builds, tmp_path):
    shutil.copytree(two_builds[0], tmp_path / "structure")
    index = PathIndex.open(tmp_path / "structure")
    tid = int(np.argmax(index.df))  # the longest list
    table = dict(np.load(tmp_path / "structure" / "blocks.npz"))
    table["last"][int(index.lists.blocks.first[tid]) + 1] += 1  # a block that says it ends one formula later
    np.savez(tmp_path / "structure" / "blocks.npz", **table)
    with pytest.raises(DamagedIndexError, match="block table"):
        PathIndex.open(tmp_path / "structure").view(np.array([tid]))


def test_an_index_without_the_hashed_dictionary_still_opens_the_same(two_builds, tmp_path):
    copy = tmp_path / "old"
    shutil.copytree(two_builds[0], copy)
    (copy / "path_hash.npy").unlink()
    (copy / "path_tid.npy").unlink()
    meta = json.loads((copy / "meta.json").read_text())
    del meta["ordinary_entries"]
    (copy / "meta.json").write_text(json.dumps(meta))
    new, old = PathIndex.open(two_builds[0]), PathIndex.open(copy)
    assert old.total_entries == new.total_entries

    def hits(ix):
        return [(h.formula, h.score) for h in StructureSearcher(ix).search("a^2+b^2=c^2", k=20)]

    assert hits(old) == hits(new) and hits(new)


def test_text_lists_built_in_segments_equal_the_one_segment_lists(shared_data, tmp_path):
    from mathscout.latex.tokens import document_terms

    docs = [document_terms(make_document(r["id"], r["text"])) for r in first_records(shared_data, N_DOCS)]
    whole = TextLists.build(docs)
    TextLists.build(docs, segment_postings=5000, folder=tmp_path)
    merged = TextLists.open(tmp_path)
    assert merged.terms == whole.terms
    for name in ("term_start", "docs", "tf", "doc_len", "norm"):
        assert np.array_equal(getattr(merged, name), getattr(whole, name)), name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text.npz", "text_terms.json.gz"]
    saved = tmp_path / "saved"
    saved.mkdir()
    whole.save(saved)
    terms_file = (tmp_path / "text_terms.json.gz").read_bytes()
    assert terms_file == (saved / "text_terms.json.gz").read_bytes()
    assert terms_file[4:8] == b"\0\0\0\0"  # no gzip timestamp: a rebuild at another time writes the same bytes


def _last_rendering(stderr: str, desc: str) -> str:
    """The last state a tqdm bar `desc` printed (bars redraw on one line with carriage returns)."""
    shown = [part for line in stderr.split("\r") for part in line.splitlines() if part.strip().startswith(desc)]
    assert shown, f"no progress bar '{desc}' in: {stderr[-500:]!r}"
    return shown[-1]


@pytest.fixture
def bars_shown(monkeypatch):
    """Progress bars as a command on a terminal shows them (a library call into a pipe shows none)."""
    monkeypatch.setattr("mathscout.progress.shown", lambda: True)


def test_the_structure_build_shows_every_stage_with_its_eta(formulas, shared_data, tmp_path, capsys, bars_shown):
    build_path_index(formulas, len(formulas), tmp_path / "paths", segment_bytes=64 * 1024)
    store = DocumentStore.create(tmp_path / "store.sqlite")
    store.add(make_document(r["id"], r["text"]) for r in first_records(shared_data, N_DOCS))
    build_text_lists(store, tmp_path, segment_postings=5000)
    err = capsys.readouterr().err
    segments = json.loads((tmp_path / "paths" / "meta.json").read_text())["segments"]
    for desc in ("path index:", f"path index merge ({segments} segments):", "text lists:", "text lists merge ("):
        final = _last_rendering(err, desc)
        assert "100%" in final and "<00:00" in final, final  # done, and the ETA (elapsed<remaining) was shown
    assert _last_rendering(err, "text lists:").count(f"{N_DOCS}/{N_DOCS}")


@pytest.fixture(scope="module")
def subset_store(shared_data, tmp_path_factory) -> DocumentStore:
    store = DocumentStore.create(tmp_path_factory.mktemp("subset-store") / "store.sqlite")
    store.add(make_document(r["id"], r["text"]) for r in first_records(shared_data, N_DOCS))
    store.finish()
    return DocumentStore.open(store.path)


@pytest.mark.parametrize("workers", [2, 3])
def test_a_build_by_worker_processes_writes_the_one_process_files(subset_store, tmp_path, capsys, workers, bars_shown):
    from mathscout.structure.parallel import build_path_index_parallel

    n = subset_store.formula_count()
    one, many = tmp_path / "one", tmp_path / "many"
    build_path_index(subset_store.iter_formula_latex(), n, one, progress=False)
    report = build_path_index_parallel(subset_store.path, n, many, workers, segment_bytes=64 * 1024)
    assert sorted(p.name for p in one.iterdir()) == sorted(p.name for p in many.iterdir())  # no segments left
    for name in sorted(p.name for p in one.iterdir() if p.name != "meta.json"):
        assert filecmp.cmp(one / name, many / name, shallow=False), name
    meta_one, meta_many = (json.loads((p / "meta.json").read_text()) for p in (one, many))
    assert meta_many.pop("workers") == workers and meta_many.pop("segments") > 2 * workers
    meta_one.pop("segments")
    assert meta_one == meta_many
    assert [w["formulas"] for w in report.workers] == [
        n * (w + 1) // workers - n * w // workers for w in range(workers)
    ]
    assert all(0 < w["peak_mib"] < 1024 for w in report.workers)
    err = capsys.readouterr().err  # one bar for the workers together, to 100 % with its ETA, then the merge
    final = _last_rendering(err, f"path index ({workers} workers):")
    assert "100%" in final and f"{n}/{n}" in final and "<00:00" in final, final
    assert "100%" in _last_rendering(err, "path index merge (")


def test_the_tree_peak_counts_child_processes_holding_memory_at_once():
    import subprocess
    import sys

    from mathscout.usage import TreePeak, tree_rss_mib

    hold = "import time; x = bytearray(200 * 2**20); x[::4096] = b'1' * len(x[::4096]); time.sleep(1.5)"
    with TreePeak(interval=0.05) as tree:  # two children of 200 MiB each, alive at the same moment
        children = [subprocess.Popen([sys.executable, "-c", hold]) for _ in range(2)]
        assert [c.wait() for c in children] == [0, 0]
    assert tree.samples > 3 and tree.peak_mib >= 400
    assert tree_rss_mib() < tree.peak_mib - 300  # they are gone


def test_renaming_is_consistent_and_keeps_structure():
    mapping = {"x": "q", "y": "b", "n": "m"}
    renamed = rename_variables(r"\frac{x+y}{x} = \sum_{n} \text{for x} \mathrm{dx} \operatorname{sin} x", mapping)
    assert renamed == r"\frac{q+b}{q} = \sum_{m} \text{for x} \mathrm{dx} \operatorname{sin} q"
    before, after = parse_latex(r"\frac{x+y}{x}").tree, parse_latex(rename_variables(r"\frac{x+y}{x}", mapping)).tree
    assert [p.token_path for p in path_prefixes(before)] == [p.token_path for p in path_prefixes(after)]


def test_scale_corpus_is_deterministic_new_ids_and_reads_back_from_xml(shared_data, tmp_path):
    source = tmp_path / "source.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in first_records(shared_data, 300)), encoding="utf-8")
    first = write_scale_corpus(source, 3, tmp_path / "a", xml=True)
    second = write_scale_corpus(source, 3, tmp_path / "b")
    with gzip.open(first.jsonl) as a, gzip.open(second.jsonl) as b:
        assert a.read() == b.read()
    with gzip.open(first.jsonl, "rt", encoding="utf-8") as copies:
        records = [json.loads(line) for line in copies]
    assert len(records) == 900 and len({r["id"] for r in records}) == 900
    with open(source, encoding="utf-8") as collection:
        originals = [json.loads(line) for line in collection]
    assert records[:300] == originals  # copy 0 is the real collection
    changed = sum(r["text"] != o["text"] for r, o in zip(records[300:600], originals))
    assert changed > 250  # variants, not duplicates
    assert all(r["source"] == o["source"] for r, o in zip(records[600:], originals))
    from_jsonl = list(read_corpus([first.jsonl], IngestReport()))
    report = IngestReport()
    from_xml = list(read_corpus([first.xml], report))
    assert report.skipped == 0 and len(from_xml) == 900
    assert sum(len(d.formulas) for d in from_xml) == sum(len(d.formulas) for d in from_jsonl)
    # ingest's progress bar knows its total (hence an ETA) before it starts: counted, not parsed
    assert (
        estimate_documents([first.jsonl]) == estimate_documents([first.xml]) == estimate_documents([source]) * 3 == 900
    )


def _mount_tmpfs(folder: Path, size: str) -> bool:
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    return done.returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_gives_a_clear_error_and_keeps_the_previous_index(small_collection, tmp_path):
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "6m"):
        pytest.skip("cannot mount a tmpfs here")
    try:
        few = tmp_path / "few.jsonl"
        with open(small_collection, encoding="utf-8") as collection:
            lines = collection.readlines()
        few.write_text("".join(lines[:50]), encoding="utf-8")
        more = tmp_path / "more.jsonl"
        more.write_text("".join(lines[:1500]), encoding="utf-8")
        env = dict(os.environ, MATHSCOUT_SEGMENT_MB="0.25")

        def run(*args):
            return subprocess.run(
                [sys.executable, "-m", "mathscout.cli", *args], capture_output=True, text=True, env=env
            )

        index = disk / "idx"
        assert run("index", "--input", str(few), "--index", str(index), "--components", "structure").returncode == 0
        before = json.loads(
            run("search", "--index", str(index), "--mode", "structure", "--json", "$a^2+b^2=c^2$").stdout
        )["hits"]
        failed = run("index", "--input", str(more), "--index", str(index), "--components", "structure")
        assert (
            failed.returncode == 2 and "is full: free some space" in failed.stderr and "Traceback" not in failed.stderr
        )
        assert sorted(p.name for p in disk.iterdir() if not p.name.endswith(".lock")) == ["idx"]  # no half index
        after = json.loads(
            run("search", "--index", str(index), "--mode", "structure", "--json", "$a^2+b^2=c^2$").stdout
        )["hits"]
        assert after == before  # the same hits, ids and scores (the JSON also holds the search's time)
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def test_open_checks_large_files_at_their_ends_and_old_records_as_they_were_made(tmp_path, monkeypatch):
    from mathscout.index import integrity

    monkeypatch.setattr(integrity, "FULL_CHECK_BYTES", 4096)
    monkeypatch.setattr(integrity, "SAMPLE_BYTES", 512)
    big = tmp_path / "postings.bin"
    big.write_bytes(bytes(range(256)) * 64)  # 16 KiB: above the threshold
    sampled = integrity.record_file(big)
    whole = integrity.FileRecord(sampled.bytes, zlib.crc32(big.read_bytes()), sampled=False)  # an older index's record
    assert sampled.sampled
    integrity.verify_file(big, sampled, "rebuild")
    integrity.verify_file(big, whole, "rebuild")
    data = bytearray(big.read_bytes())
    data[8000] ^= 1  # the middle: left to the readers' own checks when sampled; an old whole record still sees it
    big.write_bytes(bytes(data))
    integrity.verify_file(big, sampled, "rebuild")
    with pytest.raises(DamagedIndexError, match="checksum differs"):
        integrity.verify_file(big, whole, "rebuild")
    data[-1] ^= 1
    big.write_bytes(bytes(data))
    with pytest.raises(DamagedIndexError, match=r"checksum differs.*rebuild"):
        integrity.verify_file(big, sampled, "rebuild")
