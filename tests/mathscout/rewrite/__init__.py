"""Tests of mathscout.rewrite: SymPy equivalent forms and the structure-rewrite mode."""
