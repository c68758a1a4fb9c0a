"""Tests of mathscout.corpus: corpus readers and math spans."""
