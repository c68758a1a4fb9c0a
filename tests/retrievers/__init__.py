"""Tests of mathscout.retrievers (retrievers/): retrievers, composition, fusion, reranking, the registry."""
