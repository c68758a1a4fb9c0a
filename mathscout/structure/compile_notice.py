"""A one-line status when numba compiles the structure-search kernels.

The kernels are compiled with `cache=True`: the first search after an installation compiles them (about
15 s on 2 cores) and stores the machine code beside the modules (or in NUMBA_CACHE_DIR); later processes
load it. numba announces real compilations (not cache loads) as "numba:compile" events; the first one in
a process says so: on the terminal of a command, else as a log line (`mathscout.progress.status`).
"""

from __future__ import annotations

from numba.core import event

from mathscout.progress import status


class _CompileNotice(event.Listener):
    announced = False

    def on_start(self, _event) -> None:
        if not self.announced:
            self.announced = True
            status("compiling the structure-search kernels (once per installation, about 15 s) …")

    def on_end(self, _event) -> None:
        pass


event.register("numba:compile", _CompileNotice())
