"""`mathscout index`: build an index folder, or add components to one."""

from __future__ import annotations

import argparse
from pathlib import Path

from mathscout.dense.device import add_device_argument
from mathscout.errors import MathScoutError


def add(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("index", parents=[common], help="build an index directory (or add components to one)")
    p.add_argument(
        "--input", nargs="+", type=Path, help="JSONL files, ARQMath Posts XML files, or folders of .md/.tex/.txt"
    )
    p.add_argument("--index", required=True, type=Path, help="the index directory to create or extend")
    p.add_argument(
        "--components",
        help="comma-separated components (default: an existing index's own, else "
        "bm25,structure); with --input on an existing index, the ones not listed are dropped",
    )
    p.add_argument(
        "--shards",
        type=int,
        help="split the collection into N shards built and searched on Ray "
        "(optional part 'distributed'); searches fan out to one actor per shard",
    )
    p.add_argument(
        "--ray",
        help="with --shards: the Ray cluster, 'auto' (default: this machine's, else a local one), "
        "'local' or HOST:PORT of a head started with 'ray start --head' (searches: $MATHSCOUT_RAY)",
    )
    p.add_argument(
        "--workers",
        type=int,
        help="processes building the structure path index (default: min(2, CPU "
        "count); from 100,000 formulas on); the files are the same for any number",
    )
    p.add_argument(
        "--fresh",
        action="store_true",
        help="with --input on an existing index: do not keep its tuned files (structure.json, fusion.json, models)",
    )
    add_device_argument(p)  # where the dense encoding runs
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    from mathscout.index.components import BuildOptions
    from mathscout.retrievers.indexing import add_components, build_index

    components = [c.strip() for c in args.components.split(",") if c.strip()] if args.components else None
    if args.workers is not None and args.workers < 1:
        raise MathScoutError(f"--workers must be at least 1, not {args.workers}")
    # the structure component's path index builders (parallel.py); where the dense encoding runs
    options = BuildOptions(workers=args.workers, device=args.device)
    if args.shards is not None:
        if not args.input:
            raise MathScoutError("--shards needs --input PATH… (a sharded index is built whole)")
        from mathscout.retrievers.shards.build import build_sharded_index

        manifest = build_sharded_index(
            args.input, args.index, args.shards, components, args.ray, fresh=args.fresh, options=options
        )
    elif args.input:
        manifest = build_index(args.input, args.index, components, fresh=args.fresh, options=options)
    elif components:
        manifest = add_components(args.index, components, options)
    else:
        raise MathScoutError("give --input PATH… to build an index, or --components NAME to add to one")
    print(
        f"index {args.index}: {manifest.documents:,} documents, {manifest.formulas:,} formulas, "
        f"components: {', '.join(manifest.components)}"
    )
