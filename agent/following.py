"""An assistant that follows its index: a rebuilt or extended index is noticed at the next call and served from
then on, so a long-running server (or a `MathScout` object) never answers from a build that was replaced.

A build swaps a whole new folder in (or, on a mount point, writes the manifest last); every manifest write is a
new generation (`Manifest.generation`) in a new file. `current()` compares the manifest file's identity (device,
inode, size, mtime: one `stat`, no read) with the one it opened; when it changed and the manifest names another
generation, a new `Assistant` over the new build replaces the old one in one assignment. A call that already holds
the old assistant finishes on the old build: its hits, documents and answer all come from that one build.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from mathscout.agent.assistant import Assistant, _open_index
from mathscout.errors import IndexMissingError
from mathscout.index.layout import MANIFEST, IndexDir

log = logging.getLogger("mathscout.agent")


def manifest_stamp(index: Path) -> tuple[int, int, int, int] | None:
    """The identity of the index's manifest file now (None when there is none): changes with every write."""
    try:
        status = os.stat(Path(index) / MANIFEST)
    except OSError:
        return None
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


class FollowedAssistant:
    """The `Assistant` of the current build of one index folder (thread-safe)."""

    def __init__(self, index: IndexDir | Path | str | None = None, *, use_llm: bool | None = None):
        self.use_llm = use_llm
        self._lock = threading.Lock()
        self._assistant = self._open(_open_index(index))
        self.path = self._assistant.index.path
        self._stamp = manifest_stamp(self.path)

    def _open(self, index: IndexDir) -> Assistant:
        index.store  # noqa: B018 - the store opens now: a replaced build's documents stay readable to its calls
        return Assistant(index, use_llm=self.use_llm)

    def current(self) -> Assistant:
        """The assistant of the build the folder holds now; a clear error when the folder no longer holds one."""
        stamp = manifest_stamp(self.path)
        if stamp == self._stamp and stamp is not None:
            return self._assistant
        with self._lock:
            stamp = manifest_stamp(self.path)
            if stamp == self._stamp and stamp is not None:
                return self._assistant
            if stamp is None:
                raise IndexMissingError(
                    f"the index {self.path} is gone (removed, or being rebuilt in place): "
                    f"build it again with 'mathscout index --input PATH --index {self.path}'"
                )
            index = IndexDir(self.path)
            old = self._assistant.index.manifest.generation
            if not index.manifest.generation or index.manifest.generation != old:
                self._assistant = self._open(index)
                log.info(
                    "index %s changed (generation %s → %s): serving the new build",
                    self.path,
                    old or "?",
                    index.manifest.generation or "?",
                )
            self._stamp = stamp
            return self._assistant

    @property
    def generation(self) -> str:
        return self.current().index.manifest.generation
