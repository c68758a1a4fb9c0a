"""Tests of mathscout.benchmarks (benchmarks/): `mathscout bench`."""
