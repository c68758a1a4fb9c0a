"""Tests of the core package mathscout/ (its modules here, its subpackages in the folders below)."""
