"""MathScout: math-aware retrieval and a tool-using assistant over math Q&A.

    from mathscout import Experiment, MathScout
    scout = MathScout()                      # the demo index (built on first use), or MathScout("path/to/index")
    scout.search("sum of $\\frac{1}{n^2}$", mode="structure", k=5)   # -> list[Hit]
    answer = scout.ask("Why is $\\cos^2 x + \\sin^2 x = 1$?")       # -> Answer (text with [doc-id] citations)
    Experiment({"bm25": bm25, "hybrid": 0.5 * bm25 + 0.5 * structure}, topics, qrels, ["nDCG@10", "RR@10"])
                                             # -> a table: means, Δ and corrected p-values against the baseline

`mathscout` is the only top-level import name: the project's top-level folders `agent/`, `retrievers/`, `tools/`,
`ui/`, `evaluation/`, `benchmarks/` and `prompts/` are its subpackages `mathscout.agent`, …, mapped by the build
(pyproject.toml's `[tool.setuptools.package-dir]`; no links). This folder holds the core floors below them (corpus,
store, index, LaTeX, engines). Layers and a question's path: docs/architecture.md. `MathScout` and `Experiment`
(`mathscout.evaluation.experiment`) are imported lazily so that `import mathscout` stays light.
"""

import logging

__version__ = "0.1.0"
__all__ = ["Experiment", "MathScout", "__version__"]

# a library logs and prints nothing of its own: the application shows the `mathscout` logs if it wants them
# (mathscout/logs.py; the command line does)
logging.getLogger(__name__).addHandler(logging.NullHandler())


def __getattr__(name: str):
    if name == "MathScout":
        from mathscout.agent.api import MathScout

        return MathScout
    if name == "Experiment":
        from mathscout.evaluation.experiment import Experiment

        return Experiment
    raise AttributeError(f"module 'mathscout' has no attribute {name!r}")
