"""Tests of mathscout.structure: the formula parser, Approach Zero scoring and structure search."""
