"""The safety rules of index builds: what may be replaced, one build at a time, atomic swaps, clean-up.

- A build only ever replaces a MathScout index, a missing path or an empty folder: anything else (a file,
  a folder of the user's) is refused before anything is touched.
- One build at a time per index: an exclusive lock on `.<name>.lock` beside the index.
- The new index is swapped in with one atomic exchange (renameat2 RENAME_EXCHANGE), so a good copy stays
  under the index's name at every instant; leftovers of killed builds are removed by the next build.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mathscout.notices import notice
from mathscout.errors import MathScoutError
from mathscout.index.layout import is_index

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def check_build_target(path: Path) -> None:
    """Refuse (touching nothing) a target that is a file or a non-empty folder that is not an index."""
    if path.is_symlink() and not path.exists():
        raise MathScoutError(f"--index {path} is a broken link: give a new folder name")
    if path.exists() and not path.is_dir():
        raise MathScoutError(f"--index {path} is a file, not an index folder: give a new or empty folder "
                             "(nothing was changed)")
    if path.is_dir() and not is_index(path) and any(path.iterdir()):
        raise MathScoutError(f"--index {path} is a folder that holds other files and is not a MathScout index: "
                             "give a new or empty folder (nothing was changed)")


@contextmanager
def build_lock(index_path: Path) -> Iterator[None]:
    """Hold the exclusive build lock of `index_path`; a second build refuses at once with a clear error."""
    lock_path = index_path.parent / f".{index_path.name}.lock"
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            owner = _read_owner(lock_path)
            raise MathScoutError(f"another build into {index_path} is running{owner}: wait for it to finish, "
                                 "then run this command again") from None
        try:  # the lock file may have been unlinked by the previous holder after we opened it: retry
            if os.fstat(fd).st_ino == os.stat(lock_path).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        try:
            os.unlink(lock_path)
        except OSError:
            pass
        os.close(fd)


def _read_owner(lock_path: Path) -> str:
    try:
        pid = lock_path.read_text().strip()
    except OSError:
        return ""
    return f" (process {pid})" if pid.isdigit() else ""


def remove_leftovers(folder: Path, name: str) -> list[str]:
    """Remove `.NAME.building-*` and `.NAME.old-*` left in `folder` by killed builds (call under the lock).

    An `.old-*` copy is put back instead when the index itself is missing (a build killed mid-swap on a
    system without atomic exchange)."""
    removed = []
    target = folder / name
    for leftover in sorted(folder.glob(f".{name}.old-*")):
        if not target.exists() and is_index(leftover):
            os.replace(leftover, target)
            continue
        shutil.rmtree(leftover, ignore_errors=True)
        removed.append(leftover.name)
    for leftover in sorted(folder.glob(f".{name}.building-*")):
        shutil.rmtree(leftover, ignore_errors=True)
        removed.append(leftover.name)
    return removed


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two paths (Linux renameat2); False where the system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    done = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return done == 0


def swap_in(built: Path, target: Path) -> None:
    """Put `built` under the name `target`; the old `target` (if any) is removed afterwards.

    With an atomic exchange, `target` names a complete index at every instant; without one, the old copy
    is renamed aside first and `remove_leftovers` restores it if the build dies in between."""
    if not target.exists():
        os.replace(built, target)
        return
    if _exchange(built, target):
        shutil.rmtree(built, ignore_errors=True)  # `built` now holds the old index
        return
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    os.replace(target, old)
    os.replace(built, target)
    shutil.rmtree(old, ignore_errors=True)


def disk_error(exc: OSError, where: Path) -> MathScoutError | None:
    """A one-line error for a full disk or quota (None for other OS errors)."""
    # numpy's tofile/np.save report a short write without errno ("8306 requested and 7168 written"): a full disk too
    short_write = exc.errno is None and re.search(r"\d+ requested and \d+ written", str(exc))
    if exc.errno in (errno.ENOSPC, errno.EDQUOT) or short_write:
        return MathScoutError(f"the disk holding {where} is full: free some space and build again "
                              "(the previous index, if any, is unchanged)")
    if exc.errno == errno.EROFS:
        return MathScoutError(f"{where} is on a read-only file system: build the index elsewhere")
    return None


def log(message: str) -> None:
    notice(message)
