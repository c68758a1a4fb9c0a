"""Hostile input, across the packages (the reliability issue and issue 32): every case asserts a clean refusal (exit 2
or HTTP 4xx with one line), nothing changed on disk, and memory under MEMORY_BOUND_MIB measured over the whole
process tree (the harness: tests/support/harness.py).

Add a case by adding one test (or one parameter) in the file of its kind: test_http_hostile.py (payloads to a real
server: Host headers, heads, ids, paths in messages), test_http_llm.py (who may spend the owner's LLM tokens),
test_python_api.py (values of the wrong kind given to the Python API), test_damaged_files.py (files an index holds),
test_crafted_index_files.py (index files of every kind as a hostile author writes them, checksums recorded again),
test_hostile_corpora.py (inputs to `mathscout index`), test_command_line.py (bad command lines and limits),
test_index_safety.py (a user's files, kills, concurrent and damaged builds), test_document_markup.py (document text
is never markup), test_scanners.py (scanners over any text in linear time: SCANNERS and SHAPES of
mathscout/benchmarks/scanners.py), test_query_costs.py (what one query may cost over HTTP: long queries, the query
limit on every route, one client's slow questions beside another's), test_terminal_output.py (document text never
controls a terminal). Shared fixtures of ../conftest.py (tiny_corpus, tiny_index, …) are available here.
"""
