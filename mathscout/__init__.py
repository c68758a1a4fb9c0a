"""MathScout core: corpus ingestion, LaTeX handling, index directories and the command line."""

__version__ = "0.1.0"
