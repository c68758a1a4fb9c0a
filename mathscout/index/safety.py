"""The safety rules of index builds: what may be replaced, one build at a time, atomic swaps, clean-up.

- A build only ever replaces a MathScout index, a missing path or an empty folder: anything else (a file,
  a folder of the user's) is refused before anything is touched.
- One build at a time per index: an exclusive lock on `.<name>.lock` beside the index (inside a mount point).
- The new index is swapped in with one atomic exchange (renameat2 RENAME_EXCHANGE), so a good copy stays
  under the index's name at every instant; leftovers of killed builds are removed by the next build.
- An index folder that is a mount point can be neither renamed nor replaced: it is built in a hidden folder inside
  it and its entries are swapped (old ones aside first, the new manifest last), so a killed build leaves the old
  index or none; the next build finishes or undoes the swap (`settle`).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from mathscout.errors import MathScoutError
from mathscout.index.layout import MANIFEST, is_index
from mathscout.notices import notice

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
INSIDE = ".mathscout-"  # the hidden build and old folders inside an index folder that is a mount point
_MOVED = f"{INSIDE}moved"  # in an old folder: every old entry is aside (the visible entries are the new build's)


def index_entries(folder: Path) -> list[Path]:
    """The entries of an index folder, without the build folders inside it and a file system's lost+found."""
    return [p for p in sorted(folder.iterdir()) if not p.name.startswith(INSIDE) and p.name != "lost+found"]


def check_build_target(path: Path) -> None:
    """Refuse (touching nothing) a target that is a file or a non-empty folder that is not an index."""
    if path.is_symlink() and not path.exists():
        raise MathScoutError(f"--index {path} is a broken link: give a new folder name")
    if path.exists() and not path.is_dir():
        raise MathScoutError(
            f"--index {path} is a file, not an index folder: give a new or empty folder (nothing was changed)"
        )
    swapping = path.is_dir() and any(path.glob(f"{INSIDE}old-*"))  # a killed swap inside: settled under the lock
    if path.is_dir() and not is_index(path) and not swapping and index_entries(path):
        raise MathScoutError(
            f"--index {path} is a folder that holds other files and is not a MathScout index: "
            "give a new or empty folder (nothing was changed)"
        )


@contextmanager
def build_lock(index_path: Path) -> Iterator[None]:
    """Hold the exclusive build lock of `index_path` (beside it, or inside a mount point); a second build refuses at
    once with a clear error."""
    inside = index_path.is_dir() and is_mount_point(index_path)
    lock_path = index_path / f"{INSIDE}lock" if inside else index_path.parent / f".{index_path.name}.lock"
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            owner = _read_owner(lock_path)
            raise MathScoutError(
                f"another build into {index_path} is running{owner}: wait for it to finish, then run this command again"
            ) from None
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
        with suppress(OSError):
            os.unlink(lock_path)
        os.close(fd)


def _read_owner(lock_path: Path) -> str:
    try:
        pid = lock_path.read_text().strip()
    except OSError:
        return ""
    return f" (process {pid})" if pid.isdigit() else ""


def remove_leftovers(folder: Path, name: str) -> list[str]:
    """Remove `.NAME.building-*` and `.NAME.old-*` left in `folder` by killed builds, and settle the swaps inside
    `folder/NAME` (call under the lock).

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
    return removed + (settle(target) if target.is_dir() else [])


def settle(target: Path) -> list[str]:
    """Finish (new manifest in place) or undo (old entries back, manifest last) swaps cut short; the folders removed."""
    removed = []
    for old in sorted(target.glob(f"{INSIDE}old-*")):
        if not (target / MANIFEST).exists():
            if (old / _MOVED).exists():  # every old entry was aside: the visible ones are the new build's
                for entry in index_entries(target):
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.rmtree(entry)
                    else:
                        entry.unlink()
                (old / _MOVED).unlink()
            for entry in sorted(index_entries(old), key=lambda p: p.name == MANIFEST):
                os.replace(entry, target / entry.name)
        shutil.rmtree(old, ignore_errors=True)
        removed.append(old.name)
    for building in sorted(target.glob(f"{INSIDE}building-*")):
        shutil.rmtree(building, ignore_errors=True)
        removed.append(building.name)
    return removed


def is_mount_point(path: Path) -> bool:
    """Whether `path` is a mount point (a bind mount from the same file system too, which `os.path.ismount` misses)."""
    real = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as mounts:
            points = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), line.split()[4]) for line in mounts]
    except (OSError, IndexError):
        return os.path.ismount(path)
    return real in points


def new_build_folder(target: Path) -> Path:
    """A new hidden folder to build `target` in: beside it, or inside it when it is a mount point."""
    if target.is_dir() and is_mount_point(target):
        return Path(tempfile.mkdtemp(dir=target, prefix=f"{INSIDE}building-"))
    return Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.building-"))


def _swap_entries(built: Path, target: Path) -> None:
    """Move `built`'s entries into `target`, old ones aside first (manifest first), the new manifest last (`settle`)."""
    old = Path(tempfile.mkdtemp(dir=target, prefix=f"{INSIDE}old-"))
    try:
        for entry in sorted(index_entries(target), key=lambda p: p.name != MANIFEST):
            os.replace(entry, old / entry.name)
        (old / _MOVED).touch()
        for entry in sorted(index_entries(built), key=lambda p: p.name == MANIFEST):
            os.replace(entry, target / entry.name)
    finally:
        settle(target)  # done: the old entries go; cut short by an error: the old index comes back


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
    is renamed aside first and `remove_leftovers` restores it if the build dies in between. A mount point (built
    inside it) has its entries swapped instead (`_swap_entries`)."""
    if built.parent == target:  # built inside a mount point (new_build_folder)
        _swap_entries(built, target)
        return
    if not target.exists():
        os.replace(built, target)
        return
    if _exchange(built, target):
        shutil.rmtree(built, ignore_errors=True)  # `built` now holds the old index
        return
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    try:
        os.replace(target, old)
    except OSError as exc:  # a mount point that new_build_folder did not recognise
        if exc.errno not in (errno.EBUSY, errno.EXDEV):
            raise
        inside = Path(shutil.move(built, target / f"{INSIDE}building-{os.getpid()}"))
        _swap_entries(inside, target)
        return
    os.replace(built, target)
    shutil.rmtree(old, ignore_errors=True)


def disk_error(exc: OSError, where: Path) -> MathScoutError | None:
    """A one-line error for a full disk or quota (None for other OS errors)."""
    # numpy's tofile/np.save report a short write without errno ("8306 requested and 7168 written"): a full disk too
    short_write = exc.errno is None and re.search(r"\d+ requested and \d+ written", str(exc))
    if exc.errno in (errno.ENOSPC, errno.EDQUOT) or short_write:
        return MathScoutError(
            f"the disk holding {where} is full: free some space and build again "
            "(the previous index, if any, is unchanged)"
        )
    if exc.errno == errno.EROFS:
        return MathScoutError(
            f"{where} is on a read-only file system (nothing was changed): build or extend the index "
            "where it can be written"
        )
    return None


def log(message: str) -> None:
    notice(message)
