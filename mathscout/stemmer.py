"""NLTK's Porter stemmer without importing all of NLTK.

`import nltk` (which any `nltk.stem.porter` import runs first) loads taggers, chunkers and scipy.stats:
about 2 s for one stemmer. The stemmer's module needs only three small NLTK modules, so it is loaded
under placeholder `nltk` / `nltk.stem` packages, and every `nltk` module this loaded is then dropped
from `sys.modules` again: a later `import nltk` runs NLTK as usual. The stems are NLTK's, from NLTK's
own code; if NLTK's layout ever changes, the ordinary import is used.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types


def _porter_class_alone() -> type:
    spec = importlib.util.find_spec("nltk")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("nltk is not installed")
    root = next(iter(spec.submodule_search_locations))
    before = set(sys.modules)
    for name, path in (("nltk", root), ("nltk.stem", root + "/stem")):
        package = types.ModuleType(name)
        package.__path__ = [path]
        sys.modules[name] = package
    try:
        return importlib.import_module("nltk.stem.porter").PorterStemmer
    finally:
        for name in set(sys.modules) - before:
            if name == "nltk" or name.startswith("nltk."):
                del sys.modules[name]


def porter_stemmer():
    """NLTK's PorterStemmer in the original algorithm's mode (the one the indexes are built with)."""
    if "nltk" in sys.modules:
        cls = importlib.import_module("nltk.stem.porter").PorterStemmer
    else:
        try:
            cls = _porter_class_alone()
        except ImportError:
            raise
        except Exception:  # noqa: BLE001 — NLTK's layout changed: the ordinary (slow) import
            cls = importlib.import_module("nltk.stem.porter").PorterStemmer
    return cls(mode=cls.ORIGINAL_ALGORITHM)
