"""Approach Zero structure search (Zhong 2023 thesis ch. 3–4): operator trees, path index, scoring, pruning."""
