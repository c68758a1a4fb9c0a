"""Every equation, algorithm or section a line of the source cites names its paper on the same line.

Each module of the package (mathscout/ and the folders mapped into it, as `tests/support/source.py` finds them) is read line by
line, code, comments and docstrings alike; a line citing "Eq."/"Eqs."/"Alg."/"Algorithm N"/"§" must also name
a paper by author and year. The papers in ../shared/papers have one short form each:

    Zhong 2023 thesis            zhong2023-thesis-structure-search-mabowdor (structure search, MABOWDOR)
    Zhong et al. 2022            zhong2022-dense-retrieval-math-ir (DPR and ColBERT for math IR)
    Rohatgi et al. 2020          rohatgi2020-psu-arqmath-reranking
    Stathopoulos & Teufel 2016   stathopoulos-teufel-type-embeddings-query-expansion
    Novotný & Štefánik 2022      novotny-stefanik-2022-soft-vsm-mathberta

Runs without ../shared."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import PACKAGE
from tests.support.source import package_modules

CITATION = re.compile(r"\b[Ee]qs?\.|\bAlg\.|\bAlgorithm \d|§|\b[Cc]h\. \d|\bFig(?:ure)?s?\.? \d|\bTables? \d")
# an author (optionally "et al." or "& Second-author") followed by a year: "Zhong 2023", "Lee et al. 2021"
PAPER = re.compile(r"\b[A-Z][\w-]+(?: et al\.| & [A-Z][\w-]+)? (?:19|20)\d\d\b")


def unnamed_citations(path: Path) -> list[tuple[int, str]]:
    """(line number, line) of each line of `path` citing an equation, algorithm or section without a paper."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(n, line.strip()) for n, line in enumerate(lines, 1) if CITATION.search(line) and not PAPER.search(line)]


def test_every_citation_names_its_paper():
    unnamed = [
        f"{path.relative_to(PACKAGE.parent)}:{n}: {line}"
        for _, path in package_modules()
        for n, line in unnamed_citations(path)
    ]
    assert not unnamed, f"{len(unnamed)} citations name no paper:\n" + "\n".join(unnamed)


def test_the_check_tells_a_named_citation_from_a_bare_one(tmp_path):
    source = tmp_path / "cites.py"
    source.write_text(
        '"""Eq. 3.14 alone."""\n'
        "x = 1  # Zhong 2023 thesis, Eq. 3.14\n"
        "y = 2  # thesis §4.1.3\n"
        "z = 3  # Zhong et al. 2022, Eq. 3\n"
        "w = 4  # Alg. 2 line 4\n"
        "v = 5  # Stathopoulos & Teufel 2016 §4.1\n"
        "u = 6  # an equation nobody cites\n"
        "t = 7  # thesis ch. 6, Table 5.6\n",
        encoding="utf-8",
    )
    assert [n for n, _ in unnamed_citations(source)] == [1, 3, 5, 8]
