"""MathScout's tests: one folder per package (tests/README.md has the map, the markers and the quick loop)."""
