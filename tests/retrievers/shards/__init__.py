"""Tests of mathscout.retrievers.shards (retrievers/shards/): sharded indexes on Ray."""
