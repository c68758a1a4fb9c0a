"""Collection-wide statistics, summed over the shards and written into every shard.

What each scorer reads from the whole collection (so each shard scores a document as one index would):
- BM25 (Lucene 9 BM25Similarity, Zhong 2023 thesis §5.3.1): the document count N, each term's document frequency df and the
  average document length (sum of lengths / N); lengths stay quantised per document (SmallFloat.intToByte4), which
  needs nothing global. The shards score from their text lists (`mathscout.structure.text_lists`, the same terms
  and postings Lucene holds) fed these values.
- Structure search: path weights idf_t = log(N / DF_t) (Zhong 2023 thesis §3.1.2, Eq. 3.11) with DF_t the entries of list t
  and N the entries of all ordinary lists; Zhong 2023 thesis Eq. 3.18's text part is the BM25 above.
- Structure search, Zhong 2023 thesis Alg. 2's tie-breaking order of symbols (`PreparedQuery.symbol_key`): symbol ids in order of first
  appearance in the collection. Shards are contiguous ranges, so the global order is each shard's symbols in shard
  order, the first time seen; `symbols.json` holds it and `symbol_map.npy` maps the shard's symbol ids into it.
- Dense: nothing (cosine of a query and a passage). Fusion and reranking run on the merged lists.

Files in `<shard>/global/`: `text_df.npy` (global df of the shard's text terms, in its list order), `path_df.npy`
(global DF of the shard's path lists, in list order), `outside_hash.npy` / `outside_df.npy` (the paths only other
shards hold, by 64-bit hash, and their DF: a query node's upper bound counts them, which orders the nodes, Zhong 2023 thesis Alg. 4),
`symbols.json` and `symbol_map.npy`, `stats.json` (N, sum of lengths, ordinary path entries).
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from mathscout.errors import DamagedIndexError
from mathscout.index.layout import write_json_atomic
from mathscout.structure.lists import path_hash
from mathscout.structure.scoring import floored_path_idf
from mathscout.structure.text_lists import TextLists

GLOBAL = "global"


@dataclass(frozen=True)
class GlobalStatistics:
    documents: int  # BM25's N
    length_sum: int  # Σ document lengths in terms (avgdl = length_sum / documents)
    path_entries: int  # structure N: entries of the ordinary path lists
    shards: int

    @property
    def avgdl(self) -> np.float32:
        return np.float32(
            float(self.length_sum) / max(self.documents, 1)
        )  # Lucene: (float) (sumTTF / (double) docCount)


def text_lists_folder(shard: Path) -> Path:
    """Where a shard keeps its text lists: its structure component's, else its own `text/`."""
    return shard / "structure" if (shard / "structure" / "text.npz").is_file() else shard / "text"


def _path_table(folder: Path) -> tuple[list[str], np.ndarray, int]:
    """Token path of each list, each list's entries, and the ordinary (non-wildcard) entries of a path index."""
    paths = json.loads(gzip.decompress((folder / "paths.json.gz").read_bytes()))
    lists = np.load(folder / "lists.npz", allow_pickle=False)
    df = np.diff(lists["list_start"]).astype(np.int64)
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    return paths, df, int(meta["ordinary_entries"])


def _symbols(folder: Path) -> list[str]:
    return json.loads((folder / "symbols.json").read_text(encoding="utf-8"))


def _read_global(shard: Path, what: str, *names: str) -> list:
    """The shard's global files `names` (.npy arrays, .json values); one clear error when any is missing or damaged."""
    try:
        return [
            json.loads((shard / GLOBAL / name).read_text(encoding="utf-8"))
            if name.endswith(".json")
            else np.load(shard / GLOBAL / name, allow_pickle=False)
            for name in names
        ]
    except (OSError, ValueError) as exc:
        raise DamagedIndexError(
            f"the {what} of the shard {shard} is missing or damaged ({exc}); rebuild the sharded index"
        ) from None


def read_global_symbols(shard: Path, local: int) -> tuple[dict[str, int], np.ndarray]:
    """The collection's symbol ids (symbol → id) and the map of the shard's symbol ids into them."""
    names, mapping = _read_global(shard, "global symbol table", "symbols.json", "symbol_map.npy")
    if mapping.shape != (local,) or (local and (mapping.min() < 0 or mapping.max() >= len(names))):
        raise DamagedIndexError(
            f"the global symbol table of the shard {shard} does not match its structure index; "
            "rebuild the sharded index"
        )
    return {name: n for n, name in enumerate(names)}, mapping


def write_global_statistics(shards: list[Path]) -> GlobalStatistics:
    """Sum every shard's statistics and write the global values into each shard's `global/` folder."""
    text_df: Counter[str] = Counter()
    path_df: Counter[str] = Counter()
    symbols: dict[str, int] = {}
    documents = length_sum = path_entries = 0
    tables = []  # each shard's terms, and its paths and symbols when it has a structure index, in its own order
    for shard in shards:
        lists = TextLists.open(text_lists_folder(shard))
        if lists is None:
            raise DamagedIndexError(f"the shard {shard} has no text lists: rebuild the sharded index")
        text_df.update(dict(zip(lists.terms, np.diff(lists.term_start).tolist())))
        documents += lists.doc_count
        length_sum += int(lists.doc_len.sum())
        paths = shard_symbols = None
        if (shard / "structure" / "meta.json").is_file():
            paths, pdf, entries = _path_table(shard / "structure")
            path_df.update(dict(zip(paths, pdf.tolist())))
            path_entries += entries
            shard_symbols = _symbols(shard / "structure")
            for symbol in shard_symbols:
                symbols.setdefault(symbol, len(symbols))
        tables.append((list(lists.terms), paths, shard_symbols))
    stats = GlobalStatistics(documents, length_sum, path_entries, len(shards))
    for shard, (terms, paths, shard_symbols) in zip(shards, tables):
        folder = shard / GLOBAL
        folder.mkdir(exist_ok=True)
        np.save(folder / "text_df.npy", np.array([text_df[t] for t in terms], dtype=np.int64))
        if paths is not None:
            assert shard_symbols is not None  # read with the paths
            np.save(folder / "path_df.npy", np.array([path_df[p] for p in paths], dtype=np.int64))
            held = set(paths)
            outside = sorted((path_hash(p), df) for p, df in path_df.items() if p not in held)
            np.save(folder / "outside_hash.npy", np.array([h for h, _ in outside], dtype=np.uint64))
            np.save(folder / "outside_df.npy", np.array([df for _, df in outside], dtype=np.int64))
            np.save(folder / "symbol_map.npy", np.array([symbols[x] for x in shard_symbols], dtype=np.int32))
            (folder / "symbols.json").write_text(json.dumps(list(symbols), ensure_ascii=False), encoding="utf-8")
        write_json_atomic(folder / "stats.json", asdict(stats))
    return stats


def read_global_statistics(shard: Path) -> GlobalStatistics:
    try:
        return GlobalStatistics(**json.loads((shard / GLOBAL / "stats.json").read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        raise DamagedIndexError(
            f"the global statistics of the shard {shard} are missing or unreadable ({exc}); rebuild the sharded index"
        ) from None


def load_global_df(shard: Path, name: str, length: int) -> np.ndarray:
    """A global df table of the shard (`text_df` or `path_df`), checked against the table it belongs to."""
    try:
        df = np.load(shard / GLOBAL / f"{name}.npy", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise DamagedIndexError(
            f"{shard / GLOBAL / (name + '.npy')} is missing or damaged ({exc}); rebuild the sharded index"
        ) from None
    if df.shape != (length,):
        raise DamagedIndexError(
            f"{shard / GLOBAL / (name + '.npy')} does not match the shard's lists; rebuild the sharded index"
        )
    return df


def outside_weights(shard: Path, total_entries: int):
    """idf_t (Zhong 2023 thesis, Eq. 3.11, as PathIndex.list_idf) of a token path only other shards hold; None for a path no shard holds."""
    hashes, df = _read_global(shard, "global path table", "outside_hash.npy", "outside_df.npy")
    if hashes.shape != df.shape:
        raise DamagedIndexError(f"the global path table of the shard {shard} is damaged; rebuild the sharded index")

    def weight(path: str) -> float | None:
        key = np.uint64(path_hash(path))
        at = int(np.searchsorted(hashes, key))
        if at == len(hashes) or hashes[at] != key:
            return None
        return float(floored_path_idf(total_entries, df[at]))

    return weight
