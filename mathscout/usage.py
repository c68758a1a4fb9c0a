"""What this process has used so far: CPU seconds and memory, read the same way by builds, shard actors and benchmarks.

The peak is VmHWM (the high-water mark of this process's own memory, which starts afresh at exec), not
`ru_maxrss`: a process spawned by fork and exec reports in `ru_maxrss` the RSS its parent had when it forked.
"""

from __future__ import annotations

import os
import resource
import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessUsage:
    cpu_seconds: float  # user + system
    peak_mib: float  # VmHWM
    rss_mib: float  # VmRSS now
    anon_mib: float  # RssAnon now: memory of the process itself
    file_mib: float  # RssFile now: mapped files (page cache shared with other processes)


def process_usage() -> ProcessUsage:
    """This process's CPU time and memory (peak from `ru_maxrss` where /proc is missing)."""
    status: dict[str, float] = {}
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                    status[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    own = resource.getrusage(resource.RUSAGE_SELF)
    return ProcessUsage(
        own.ru_utime + own.ru_stime,
        status.get("VmHWM", own.ru_maxrss / 1024),
        status.get("VmRSS", 0.0),
        status.get("RssAnon", 0.0),
        status.get("RssFile", 0.0),
    )


def tree_rss_mib(pid: int | None = None) -> float:
    """Resident memory of a process and all its descendants now, in MiB: one pass over /proc/*/stat, which gives
    each process's parent and resident pages (the scan works without CONFIG_PROC_CHILDREN)."""
    children: dict[int, list[int]] = {}
    pages: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()  # from field 3 (state) on: the name may hold spaces
            except OSError:  # gone meanwhile
                continue
            current = int(entry.name)
            children.setdefault(int(fields[1]), []).append(current)  # field 4: ppid
            pages[current] = int(fields[21])  # field 24: rss in pages
    total, pending = 0, [pid or os.getpid()]
    while pending:
        current = pending.pop()
        total += pages.get(current, 0)
        pending += children.get(current, [])
    return total * os.sysconf("SC_PAGE_SIZE") / 2**20


class TreePeak:
    """The largest resident memory this process and its descendants held at once, sampled every `interval` seconds
    while the `with` block runs (a short spike between two samples can be missed: each process's VmHWM bounds it).
    `measure` samples something else in MiB instead (e.g. this process's anonymous memory, which VmHWM does not
    separate from mapped file pages)."""

    def __init__(self, interval: float = 0.25, measure: Callable[[], float] | None = None):
        self.interval, self.peak_mib, self.samples = interval, 0.0, 0
        self._measure = measure or tree_rss_mib
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="tree-peak", daemon=True)

    def _sample(self) -> None:
        while True:
            self.peak_mib = max(self.peak_mib, self._measure())
            self.samples += 1
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> TreePeak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
