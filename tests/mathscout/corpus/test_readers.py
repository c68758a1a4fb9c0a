"""Corpus ingestion: math under every delimiter, ARQMath Posts XML, folders, bad input."""

import gzip
import json

import pytest

from mathscout.corpus import IngestReport, find_math, html_to_text, make_document, read_corpus


def latexes(text):
    return [s.latex for s in find_math(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("inline $x^2$ and display $$\\int_0^1 f$$", ["x^2", "\\int_0^1 f"]),
        ("paren \\(a+b\\) and bracket \\[c=d\\]", ["a+b", "c=d"]),
        ("env \\begin{align*} a &= b \\\\ c &= d \\end{align*} done", [" a &= b \\\\ c &= d "]),
        ("\\begin{equation}E=mc^2\\end{equation}", ["E=mc^2"]),
        ("pya0 style [imath]\\frac{1}{x}[/imath]", ["\\frac{1}{x}"]),
        ("it costs $5 and $10 today", []),
        ("a price of $3.50, nothing else", []),
        ("escaped \\$5 and \\$6 and real $y$", ["y"]),
        ("$a$ then $b$", ["a", "b"]),
        ("unclosed $x + y and more", []),
        ("two paragraphs $a\n\nb$ are not one formula", []),
        ("$\\text{if $x>0$}$", ["x>0"]),  # nested dollars: no crash, the inner formula is found
    ],
)
def test_math_delimiters(text, expected):
    assert latexes(text) == expected


def test_formula_ids_and_offsets_point_into_the_text():
    text = "Let $x$ be real. Then $$x^2 \\ge 0.$$"
    doc = make_document("d7", text)
    assert [f.id for f in doc.formulas] == ["d7#0", "d7#1"]
    assert [text[f.start : f.end] for f in doc.formulas] == ["$x$", "$$x^2 \\ge 0.$$"]
    assert [f.display for f in doc.formulas] == [False, True]


def test_html_bodies_keep_math_container_spans():
    html = (
        '<p>Solve <span class="math-container" id="1">$x^2 &lt; 4$</span> for &amp; all</p>'
        '<p><span class="math-container">$$\\sum_n a_n$$</span></p>'
    )
    text = html_to_text(html)
    assert text == "Solve $x^2 < 4$ for & all\n\n$$\\sum_n a_n$$"
    assert latexes(text) == ["x^2 < 4", "\\sum_n a_n"]


POSTS_XML = """<?xml version="1.0" encoding="utf-8"?>
<posts>
  <row Id="10" PostTypeId="1" AcceptedAnswerId="12" Score="5" Title="Sum of &lt;b&gt;squares&lt;/b&gt;"
       Body="&lt;p&gt;What is &lt;span class=&quot;math-container&quot;&gt;$\\sum k^2$&lt;/span&gt;?&lt;/p&gt;"
       Tags="&lt;algebra&gt;&lt;sequences&gt;" />
  <row Id="11" PostTypeId="2" ParentId="10" Score="1"
       Body="&lt;p&gt;Use induction on &lt;span class=&quot;math-container&quot;&gt;$n$&lt;/span&gt;.&lt;/p&gt;" />
  <row Id="12" PostTypeId="2" ParentId="10" Score="9"
       Body="&lt;p&gt;It is &lt;span class=&quot;math-container&quot;&gt;$$\\frac{n(n+1)(2n+1)}{6}$$&lt;/span&gt;&lt;/p&gt;" />
  <row Id="13" PostTypeId="2" ParentId="10" Score="0" Body="" />
</posts>
"""


def test_arqmath_posts_xml_gives_answers_with_their_question(tmp_path):
    path = tmp_path / "Posts.V1.3.xml"
    path.write_text(POSTS_XML, encoding="utf-8")
    report = IngestReport()
    docs = {d.id: d for d in read_corpus([path], report)}
    assert sorted(docs) == ["11", "12"]
    answer = docs["12"]
    assert answer.title == "Sum of squares"
    assert answer.metadata["thread_id"] == "10" and answer.metadata["accepted"] is True
    assert answer.metadata["tags"] == ["algebra", "sequences"]
    assert [f.latex for f in answer.formulas] == ["\\frac{n(n+1)(2n+1)}{6}"]
    assert report.skipped == 1 and "empty answer body" in report.reasons[0]


def test_truncated_xml_keeps_rows_before_the_break(tmp_path):
    path = tmp_path / "Posts.xml"
    path.write_text(POSTS_XML[: POSTS_XML.index('<row Id="13"') + 20], encoding="utf-8")
    report = IngestReport()
    assert [d.id for d in read_corpus([path], report)] == ["11", "12"]
    assert any("broken XML" in r for r in report.reasons)


def test_bad_jsonl_lines_are_skipped_with_reasons(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(
        b'{"id": "a", "text": "ok $x$"}\n'
        b"not json\n"
        b'{"text": "no id"}\n'
        b'{"id": "b", "text": "   "}\n'
        b'{"id": "a", "text": "duplicate"}\n'
        b'{"id": "c", "text": "bad bytes \xff\xfe here $y$", "kind": "answer"}\n'
        b"[1, 2]\n"
    )
    report = IngestReport()
    docs = list(read_corpus([path], report))
    assert [d.id for d in docs] == ["a", "c"]
    assert docs[1].metadata == {"kind": "answer"} and docs[1].formulas[0].latex == "y"
    assert report.skipped == 4 and report.duplicates == 1
    assert report.reasons[0] == "c.jsonl:2: not valid JSON (Expecting value)"


def test_gzipped_jsonl(tmp_path):
    path = tmp_path / "c.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"id": "g", "text": "zipped $z$"}) + "\n")
    assert [d.id for d in read_corpus([path], IngestReport())] == ["g"]


def test_folder_of_notes(tmp_path):
    (tmp_path / "notes" / "sub").mkdir(parents=True)
    (tmp_path / "notes" / "a.md").write_text("# Euler\n\n$e^{i\\pi}+1=0$\n", encoding="utf-8")
    (tmp_path / "notes" / "sub" / "b.tex").write_text("\\section{Gauss}\n\\[\\sum_{k=1}^n k\\]", encoding="utf-8")
    (tmp_path / "notes" / "c.txt").write_text("", encoding="utf-8")
    (tmp_path / "notes" / "d.txt").write_bytes(b"\x00\x01binary")
    (tmp_path / "notes" / "e.png").write_bytes(b"\x89PNG")
    report = IngestReport()
    docs = {d.id: d for d in read_corpus([tmp_path / "notes"], report)}
    assert sorted(docs) == ["a.md", "sub/b.tex"]
    assert docs["a.md"].title == "Euler" and docs["sub/b.tex"].title == "Gauss"
    assert docs["sub/b.tex"].formulas[0].latex == "\\sum_{k=1}^n k"
    assert report.skipped == 2


def test_real_collection_formulas(shared_data):
    path = shared_data / "collection" / "docs.jsonl"
    report = IngestReport()
    docs = []
    for doc in read_corpus([path], report):
        docs.append(doc)
        if len(docs) == 2000:
            break
    assert report.skipped == 0
    assert sum(len(d.formulas) for d in docs) > 10_000
    for doc in docs[:200]:
        for f in doc.formulas:
            assert f.latex in doc.text[f.start : f.end]


@pytest.mark.parametrize(
    "text",
    [
        "Why is  $ x^2 + 1 $ positive\n for every real   $x$ ?",
        "Show that $$ \\sum_{n=1}^\\infty \\frac1{n^2} = \\frac{\\pi^2}{6} $$",
        "Is $$ empty $ ? and \\( a \\le b \\) here",
    ],
)
def test_structure_search_and_the_question_reader_split_a_query_alike(text):
    from mathscout.question import read_question
    from mathscout.retrievers.base import prepare_query
    from mathscout.retrievers.structure import split_query
    from mathscout.types import Query

    formulas, words = split_query(prepare_query(Query(id="q", text=text)))  # as a search splits it (bare math read)
    question = read_question(text)
    assert question.words == words
    assert set(question.formulas) <= set(formulas) and formulas
    assert all(f == f.strip() for f in formulas) and "  " not in words


def test_an_over_long_text_is_cut_before_the_formula_holding_the_bound():
    from mathscout.limits import MAX_DOCUMENT_CHARS

    text = "word " * ((MAX_DOCUMENT_CHARS - 20) // 5) + "$" + "x+" * 50 + "y$ and more text after it"
    report = IngestReport()
    doc = make_document("long", text, "t" * 5000, report=report, where="c.jsonl:3")
    assert len(doc.text) <= MAX_DOCUMENT_CHARS and "$" not in doc.text and doc.text.endswith("word")
    assert doc.formulas == [] and len(doc.title) == 1000
    assert report.truncated == 2 and report.truncations[0].startswith(
        "c.jsonl:3: text longer than 1,048,576 characters"
    )


def test_over_long_lines_are_skipped_without_reading_them_whole(tmp_path):
    from io import BytesIO

    from mathscout.corpus.jsonl import bounded_lines

    stream = BytesIO(b"short\n" + b"x" * 100 + b"\n" + b"y" * 10 + b"\nlast")
    assert list(bounded_lines(stream, limit=10)) == [b"short\n", None, b"y" * 10 + b"\n", b"last"]


def test_formula_trees_nested_by_loops_are_flattened():
    from mathscout.limits import MAX_TREE_DEPTH
    from mathscout.structure.parser import parse_latex
    from mathscout.structure.paths import leaf_count

    for latex in ("x^" * 100_000 + "2", "x_" * 100_000 + "1"):
        result = parse_latex(latex)
        depth, stack = 0, [(result.tree, 1)]
        while stack:
            node, level = stack.pop()
            depth = max(depth, level)
            stack += [(child, level + 1) for child in node.children]
        assert depth <= MAX_TREE_DEPTH + 1 and not result.complete and leaf_count(result.tree) > 0
