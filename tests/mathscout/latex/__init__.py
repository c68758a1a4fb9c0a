"""Tests of mathscout.latex: math tokens and formulas typed without delimiters."""
