"""Approach Zero structure search (thesis ch. 3–4): operator trees, path index, scoring, pruning."""
