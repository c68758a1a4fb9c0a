"""Tests of mathscout.types_expansion: mathematical types and type-aware expansion."""
