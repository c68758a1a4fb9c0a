"""Tests of mathscout.index and mathscout.store: the index directory, the atomic builder, tuned files."""
