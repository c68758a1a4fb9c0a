"""Agent tools (structure search, hybrid search, type expansion, rewriting, reranking): agent issue."""
