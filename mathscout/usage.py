"""What this process has used so far: CPU seconds and memory, read the same way by builds, shard actors and benchmarks.

The peak is VmHWM (the high-water mark of this process's own memory, which starts afresh at exec), not
`ru_maxrss`: a process spawned by fork and exec reports in `ru_maxrss` the RSS its parent had when it forked.
"""

from __future__ import annotations

import resource
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
    return ProcessUsage(own.ru_utime + own.ru_stime, status.get("VmHWM", own.ru_maxrss / 1024), status.get("VmRSS", 0.0),
                        status.get("RssAnon", 0.0), status.get("RssFile", 0.0))
