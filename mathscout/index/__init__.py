"""Index directories: one folder per collection holding a document store and retrieval components."""

from mathscout.index.layout import IndexDir

__all__ = ["IndexDir"]
