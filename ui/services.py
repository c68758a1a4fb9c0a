"""Running MathScout services of this OS user, so that `mathscout search` and `mathscout ask` use one without
`--server` (issue 35): a search through a warm server takes a fraction of a second, a new process seconds.

A `mathscout serve` that listens on this machine writes one record, `$MATHSCOUT_HOME/services/<pid>.json` (mode
0600 in a 0700 folder): its process (id and start), its URL on the loopback interface, the resolved paths of the
indexes it serves with their keys, a random token, the fingerprint of what decides its results (version,
installation, MATHSCOUT_*/OPENAI_* settings, the config file) and the source files it has loaded. The server takes
`Authorization: Bearer <token>` as its login for /api (`token_accepted`); it removes the record when it stops.

`find(index)` is the service to use for an index, or None: a record of this user whose process is the one that wrote
it, whose fingerprint is this process's, none of whose loaded source files changed since it started, and whose
/api/health answers within HEALTH_TIMEOUT. Records of ended processes and of servers that no longer listen are
removed. `start_background` and `stop` are `mathscout serve --background` and `mathscout serve --stop`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import stat
import sys
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import mathscout
from mathscout.config import home
from mathscout.errors import MathScoutError
from mathscout.settings import settings

HEALTH_TIMEOUT = 2.0  # seconds /api/health may take before the command line searches by itself
START_TIMEOUT = 900.0  # seconds a background service may take to warm up and listen
STOP_TIMEOUT = 30.0  # seconds a stopped service may take to end
MAX_RECORD_BYTES = 1 << 20
TOKEN_LOGIN = "service:token"  # the name a wrong token fails a login as (never a user's: names hold no ':')
LOOPBACK = {"127.0.0.1": "127.0.0.1", "localhost": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::1": "[::1]", "::": "[::1]"}
NOT_SETTINGS = {
    "MATHSCOUT_HOME",
    "MATHSCOUT_AUTH",
    "MATHSCOUT_HOST",
    "MATHSCOUT_PORT",
    "MATHSCOUT_QUIET",
    "MATHSCOUT_DEBUG",
    "MATHSCOUT_LOG",
    "MATHSCOUT_COMMAND_LINE",
    "MATHSCOUT_INDEX",
    "MATHSCOUT_BUILD_WORKERS",
}
PACKAGE = Path(mathscout.__file__).resolve().parent  # the installation

_token: str | None = None  # this process's token, once it registered as a service


def folder() -> Path:
    return home() / "services"


def settings_fingerprint() -> str:
    """What decides a search's or an answer's result besides the index and the request: the version, the
    installation, the MATHSCOUT_*/OPENAI_* settings that are not only about serving or printing, the config file."""
    from mathscout import __version__
    from mathscout.agent.config import config_path
    from mathscout.settings import settings as current
    from mathscout.settings import variables

    now = current()
    settings = sorted(
        (v.env, str(functools.reduce(getattr, v.attribute, now)))
        for v in variables()
        if v.env and v.env.startswith(("MATHSCOUT_", "OPENAI_")) and v.env not in NOT_SETTINGS
    )
    try:
        config = hashlib.sha256(config_path().read_bytes()).hexdigest()
    except OSError:
        config = None
    text = json.dumps([__version__, str(PACKAGE.resolve()), settings, config])
    return hashlib.sha256(text.encode()).hexdigest()


# --- the server's side ---------------------------------------------------------------------------------------


def service_url(host: str, port: int) -> str | None:
    """The loopback URL a server bound to `host` answers on, or None (a server bound to another address only)."""
    loopback = LOOPBACK.get(host)
    return f"http://{loopback}:{port}" if loopback else None


def register(host: str, port: int, indexes: Mapping[str, Path], fingerprint: str) -> Path | None:
    """Write this server's record (`indexes`: key → folder); its path, or None when the server is not on the
    loopback interface or the folder is not this user's own. From now on `token_accepted` knows the token."""
    import secrets

    global _token
    url = service_url(host, port)
    if url is None:
        return None
    token = secrets.token_urlsafe(32)
    record = {
        "pid": os.getpid(),
        "started": _process_start(os.getpid()),
        "url": url,
        "token": token,
        "indexes": {str(Path(path).resolve()): key for key, path in indexes.items()},
        "fingerprint": fingerprint,
        "code": _loaded_code(),
        "since": _process_wall_start(),
    }
    _token = token  # before the record exists: whoever reads it finds the token accepted
    try:
        where = _own_folder(create=True)
        path, partial = where / f"{os.getpid()}.json", where / f".{os.getpid()}.{secrets.token_hex(4)}.tmp"
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            json.dump(record, out)
        os.replace(partial, path)  # readers never see half a record
    except OSError as exc:
        print(f"MathScout: warning: the command line will not find this server ({exc})", file=sys.stderr, flush=True)
        return None
    return path


def unregister(path: Path | None) -> None:
    global _token
    _token = None
    if path is not None:
        _remove(path)


def token_accepted(token: str) -> bool:
    """Whether `token` is this server's (constant-time)."""
    import hmac

    return _token is not None and hmac.compare_digest(token.encode(), _token.encode())


def _own_folder(create: bool = False) -> Path:
    """The services folder, if it is this user's and closed to others (a 0700 folder is made when `create`)."""
    where = folder()
    if create:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(where)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise OSError(f"{where} is not a folder of this user's")
    if info.st_mode & 0o077:
        os.chmod(where, 0o700)
    return where


def _loaded_code() -> list[str]:
    """The source files of this installation that this process has loaded (relative to the folder of PACKAGE)."""
    files = set()
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if name and module.__name__.split(".")[0] == "mathscout":
            files.add(os.path.relpath(os.path.realpath(name), PACKAGE.parent))
    return sorted(files)


def _process_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None (no such process, or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()
    except OSError:
        return None


def _process_start(pid: int) -> str | None:
    """When the process started, in clock ticks since boot (with the pid: which process it is), None without /proc."""
    fields = _process_stat(pid)
    return fields[19] if fields and len(fields) > 19 else None


def _process_wall_start() -> float:
    """When this process started (seconds since the epoch); now, without /proc."""
    try:
        boot = next(
            float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime ")
        )
        return boot + int(_process_start(os.getpid()) or "") / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, StopIteration):
        return time.time()


# --- the command line's side ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Service:
    """A running server of this user that serves an index under `key`."""

    pid: int
    url: str
    token: str
    key: str
    record: Path

    def client(self, timeout: float | None = None):
        from mathscout.ui.client import TIMEOUT, Client

        return Client(self.url, token=self.token, timeout=timeout or TIMEOUT)


def find(index: Path | None) -> Service | None:
    """The running service to search `index` through (default: the default index), or None."""
    if index is None:
        from mathscout.config import default_index_path

        index = default_index_path()
    wanted = str(Path(index).resolve())
    candidates = [s for s in _records() if wanted in s.indexes]
    if not candidates:
        return None
    fingerprint = settings_fingerprint()
    for record in sorted(candidates, key=lambda s: -s.since):
        if record.fingerprint != fingerprint or not record.code_unchanged():
            debug(f"the service at {record.url} runs other code or settings: not used")
            continue
        service = Service(record.pid, record.url, record.token, record.indexes[wanted], record.path)
        if _answers(service):
            return service
    return None


def debug(message: str) -> None:
    """A line on stderr with MATHSCOUT_DEBUG set: which way a search went and why."""
    if settings().debug:
        print(f"mathscout: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class _Record:
    path: Path
    pid: int
    started: str | None
    url: str
    token: str
    indexes: dict[str, str]
    fingerprint: str
    code: list[str]
    since: float

    def running(self) -> bool:
        """Whether the process that wrote the record still runs (not another one with its pid, not a zombie)."""
        fields = _process_stat(self.pid)
        if fields is None and self.started is None:  # no /proc here: ask the system
            try:
                os.kill(self.pid, 0)
            except OSError:  # no such process, or another user's
                return False
            return True
        return fields is not None and fields[0] not in ("Z", "X") and _process_start(self.pid) == self.started

    def code_unchanged(self) -> bool:
        """None of the source files the server loaded changed (or went) since it started."""
        try:
            return all(os.stat(PACKAGE.parent / name).st_mtime <= self.since for name in self.code)
        except OSError:
            return False


def _records() -> Iterator[_Record]:
    """The records of this user's running services; records of ended processes are removed."""
    try:
        where = _own_folder()
        names = sorted(where.glob("*.json"))
    except OSError:
        return
    for path in names:
        record = _read(path)
        if record is None:
            continue
        if not record.running():
            debug(f"removed the record of ended service {record.pid} ({record.url})")
            _remove(path)
            continue
        yield record


def _read(path: Path) -> _Record | None:
    """A record that only this user can read and write, with every field well formed; else None."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(descriptor, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
                return None
            data = json.loads(f.read(MAX_RECORD_BYTES))
        record = _Record(
            path,
            int(data["pid"]),
            data["started"],
            str(data["url"]),
            str(data["token"]),
            dict(data["indexes"]),
            str(data["fingerprint"]),
            list(data["code"]),
            float(data["since"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    parsed = urllib.parse.urlsplit(record.url)
    if parsed.scheme != "http" or parsed.hostname not in ("127.0.0.1", "::1") or parsed.path not in ("", "/"):
        return None
    return record


def _answers(service: Service) -> bool:
    """Whether the service answers /api/health in time and still serves the index; a service that no longer
    listens is stale (its record is removed), a slow one is only passed over."""
    started = time.perf_counter()
    try:
        health = service.client(timeout=HEALTH_TIMEOUT).health()
    except MathScoutError as exc:
        if getattr(exc, "refused", False):
            debug(f"removed the record of service {service.pid}: nothing listens at {service.url}")
            _remove(service.record)
        else:
            debug(f"the service at {service.url} did not answer: {exc}")
        return False
    keys = [entry.get("key") for entry in health.get("indexes", []) if isinstance(entry, dict)]
    if health.get("status") != "ok" or service.key not in keys:
        debug(f"the service at {service.url} does not serve {service.key}")
        return False
    debug(
        f"through the service at {service.url} (process {service.pid}; health in "
        f"{1000 * (time.perf_counter() - started):.0f} ms)"
    )
    return True


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


# --- mathscout serve --background / --stop ---------------------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def start_background(serve_arguments: Sequence[str], auth: str | None = None) -> None:
    """`mathscout serve SERVE_ARGUMENTS` as a process of its own (detached, its log beside its record); returns
    once it listens and has registered, saying where. `auth` reaches it through MATHSCOUT_AUTH, not its command."""
    import secrets
    import subprocess

    where = _own_folder(create=True)
    log = where / f".starting-{secrets.token_hex(4)}.log"
    env = {**os.environ, **({"MATHSCOUT_AUTH": auth} if auth else {})}
    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "mathscout.cli", "serve", *serve_arguments],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    log = log.rename(where / f"{process.pid}.log")
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            lines = log.read_text(errors="replace").strip().splitlines()
            raise MathScoutError(f"the service did not start: {lines[-1] if lines else f'exit {process.returncode}'}")
        record = next((r for r in _records() if r.pid == process.pid), None)
        if record is not None:
            keys = ", ".join(record.indexes.values())
            print(
                f"MathScout: serving {keys} on {record.url} in the background (process {process.pid}, log {log}); "
                "'mathscout search' and 'mathscout ask' use it; 'mathscout serve --stop' stops it",
                flush=True,
            )
            return
        time.sleep(0.25)
    raise MathScoutError(f"the service did not listen within {START_TIMEOUT:.0f} s (process {process.pid}, log {log})")


def stop(indexes: Sequence[Path] = ()) -> None:
    """End this user's services (SIGTERM; each removes its record): those serving one of `indexes`, else all."""
    import signal

    wanted = {str(Path(p).resolve()) for p in indexes}
    records = [r for r in _records() if not wanted or wanted & set(r.indexes)]
    if not records:
        print("MathScout: no service of this user is running" + (" for that index" if wanted else ""), flush=True)
        return
    for record in records:
        os.kill(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    for record in records:
        while record.running() and time.monotonic() < deadline:
            time.sleep(0.1)
        if record.running():
            raise MathScoutError(f"service {record.pid} ({record.url}) did not stop within {STOP_TIMEOUT:.0f} s")
        _remove(record.path)
        _remove(record.path.with_suffix(".log"))
        print(f"MathScout: stopped the service at {record.url} (process {record.pid})", flush=True)
