"""Arrays stored with an index (.npy, .npz), read one way: numpy without pickles, so an object array (whose elements
numpy would unpickle) is refused and never executed, and whatever else is wrong with the file (empty, truncated, not a
zip, a header claiming more than the file holds, a missing member) is one `UnreadableArray`. That is a ValueError, which
every reader already turns into its one line naming the file and the command that rebuilds it."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

# what numpy (and scipy.sparse.load_npz, which reads through it) raises for a file that is not what it should be
_FAILURES = (OSError, ValueError, EOFError, MemoryError, KeyError, zipfile.BadZipFile)


class UnreadableArray(ValueError):
    """A stored array that cannot be read as plain numbers; the message says why in a few words."""


@contextmanager
def reading() -> Iterator[None]:
    """Turn what reading a stored array raises into UnreadableArray (for readers numpy does for us, e.g. scipy's)."""
    try:
        yield
    except UnreadableArray:
        raise
    except _FAILURES as exc:
        words = str(exc).strip().splitlines()
        reason = words[0][:200] if words else type(exc).__name__
        raise UnreadableArray(f"{type(exc).__name__}: {reason}" if isinstance(exc, KeyError) else reason) from None


def load_array(path: Path | str, mmap: bool = False) -> np.ndarray:
    """The array of an .npy file (memory-mapped read-only with `mmap`), never unpickled."""
    with reading():
        array = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    if not isinstance(array, np.ndarray):  # an .npz archive where one array belongs
        array.close()
        raise UnreadableArray("an archive of arrays, not one array")
    return array


def load_arrays(path: Path | str, *names: str) -> list[np.ndarray]:
    """The arrays `names` of an .npz archive, read into memory, never unpickled."""
    with reading(), np.load(path, allow_pickle=False) as archive:
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise UnreadableArray("one array, not an archive of arrays")
        return [np.asarray(archive[name]) for name in names]
