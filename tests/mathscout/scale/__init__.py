"""Tests of mathscout.scale and segmented builds."""
