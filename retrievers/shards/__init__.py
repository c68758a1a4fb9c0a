"""Sharded indexes on Ray (issue 18): one index split into N shards that score as one index would.

layout.py    the shards manifest (`shards.json`) of a sharded index directory
cluster.py   connecting to Ray (local, auto, HOST:PORT) and the per-shard actor options
build.py     `mathscout index --shards N`: split the store, build each shard as a Ray task
stats.py     collection-wide statistics (BM25 df / N / avgdl, structure path df / N) written into every shard
scoring.py   shard-side retrievers that score with the global statistics
worker.py    the Ray actor that holds one shard open
retriever.py the coordinator: fan out, merge top-k (global k), partial results flagged
"""

from mathscout.retrievers.shards.layout import SHARDS_FILE, ShardSet, is_sharded

__all__ = ["SHARDS_FILE", "ShardSet", "is_sharded"]
