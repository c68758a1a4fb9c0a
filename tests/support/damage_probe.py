"""Damage every file of an index in turn and search it: run as a subprocess by tests/robust/test_index_safety.py.

    python tests/support/damage_probe.py INDEX WORKDIR truncate|garble [--no-records]

For each file of INDEX (store and component files), a copy of the index gets that file damaged and is
searched in this process with the mode that reads it. One JSON line per file on stdout, written *before*
the search starts too (`"status": "trying"`), so a crash (a signal) names the file it died on.
`--no-records` strips the manifest's file records first: the readers' own checks must then hold.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from mathscout.errors import MathScoutError
from mathscout.index.layout import MANIFEST, IndexDir
from mathscout.retrievers import open_retriever

QUERY = "prove that $a^2+b^2=c^2$ for a right triangle"


def damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncate":
        path.write_bytes(bytes(data[: len(data) // 2]))
        return
    for at in range(len(data) // 7, len(data), max(len(data) // 5, 1)):  # several spots, headers included
        for i in range(at, min(at + 16, len(data))):
            data[i] ^= 0xA5
    data[: min(8, len(data))] = bytes((b ^ 0x5A) for b in data[: min(8, len(data))])
    path.write_bytes(bytes(data))


def mode_for(relative: str) -> str:
    return "structure" if relative.startswith("structure/") else "bm25"


def strip_records(index: Path) -> None:
    manifest = json.loads((index / MANIFEST).read_text(encoding="utf-8"))
    for stats in manifest["components"].values():
        stats.pop("files", None)
    (index / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")


def main(argv: list[str]) -> int:
    index, work, how = Path(argv[0]), Path(argv[1]), argv[2]
    no_records = "--no-records" in argv
    files = sorted(
        p.relative_to(index).as_posix()
        for p in index.rglob("*")
        if p.is_file() and p.name != MANIFEST and p.stat().st_size
    )  # an empty lock file cannot be damaged
    if no_records:
        files = [f for f in files if f.startswith("structure/")]  # the readers MathScout itself writes
    for relative in files:
        copy = work / "copy"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(index, copy)
        if no_records:
            strip_records(copy)
        damage(copy / relative, how)
        print(json.dumps({"file": relative, "status": "trying"}), flush=True)
        try:
            open_retriever(IndexDir(copy), mode_for(relative)).search(QUERY, k=10)
            status, message = "searched", ""
        except MathScoutError as exc:
            status, message = "error", str(exc)
        print(json.dumps({"file": relative, "status": status, "message": message}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
