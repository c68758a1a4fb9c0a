"""Connecting to Ray and the options of the shard actors.

`--ray local` (the default without $MATHSCOUT_RAY / $RAY_ADDRESS) starts a Ray instance for this process; `auto` joins
the cluster of this machine (`ray start --head`) or starts a local one when there is none; `HOST:PORT` joins that
cluster's head (GCS address).
Ray's documented APIs only: `ray.init(address=…)`, remote functions, actors with max_restarts / max_task_retries.
"""

from __future__ import annotations

import os

from mathscout.errors import MathScoutError
from mathscout.extras import missing_extra
from mathscout.java import keep_jvm_signal_handlers
from mathscout.settings import settings

MAX_RESTARTS = 3
MAX_TASK_RETRIES = 2
_FORWARDED = (
    "PYTHONPATH",
    "MATHSCOUT_HOME",
    "MATHSCOUT_DENSE_MODEL",
    "MATHSCOUT_DENSE_FT_MODEL",
    "MATHSCOUT_SPLADE_MODEL",
    "MATHSCOUT_DEBUG",
    "JAVA_HOME",
)


def ray_module():
    """`ray`, or a one-line error naming the optional part that installs it."""
    try:
        import ray
    except ImportError as exc:
        raise MathScoutError(missing_extra(exc) or f"Ray is not importable ({exc})") from None
    return ray


def connect(address: str | None = None) -> str:
    """Join or start Ray (`address`: auto, local or HOST:PORT; default $MATHSCOUT_RAY, $RAY_ADDRESS, else local);
    the address used."""
    ray = ray_module()
    current = settings()
    address = (address or current.ray or current.ray_address or "local").strip()
    if ray.is_initialized():
        return address
    common = dict(namespace="mathscout", log_to_driver=False, include_dashboard=False, runtime_env=worker_env())
    try:
        with keep_jvm_signal_handlers():  # a JVM already running in this process keeps handling its own faults
            if address == "local":
                ray.init(**common)
            elif address == "auto":
                try:
                    ray.init(address="auto", **{k: v for k, v in common.items() if k != "include_dashboard"})
                except ConnectionError:
                    ray.init(**common)
                    address = "local"
            else:
                ray.init(address=address, **{k: v for k, v in common.items() if k != "include_dashboard"})
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise MathScoutError(
            f"cannot reach Ray at {address!r} ({str(exc).splitlines()[0]}): start it with "
            "'ray start --head' or use --ray local"
        ) from None
    return address


def worker_env() -> dict:
    """What the shard workers inherit: the project's import path and settings, and a bounded JVM heap (each actor's
    JVM: MATHSCOUT_JAVA_HEAP, else MATHSCOUT_SHARD_JAVA_HEAP)."""
    env = {name: value for name, value in os.environ.items() if name in _FORWARDED or name.startswith("MATHSCOUT_")}
    current = settings()
    env["MATHSCOUT_JAVA_HEAP"] = current.java_heap or current.shard_java_heap
    env.update(MATHSCOUT_QUIET="1", TQDM_DISABLE="1")  # workers print nothing; the coordinator reports
    return {"env_vars": env}
