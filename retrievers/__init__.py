"""Retrievers: small interchangeable values that turn a query into ranked hits."""

from mathscout.retrievers.base import Retriever, prepare_query
from mathscout.retrievers.registry import available_modes, open_retriever

__all__ = ["Retriever", "available_modes", "open_retriever", "prepare_query"]
