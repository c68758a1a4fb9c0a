"""Checks over the whole source tree: import layers, paper citations, the README's examples."""
