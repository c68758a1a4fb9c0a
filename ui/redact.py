"""Messages as a client of the server may read them (issue 42, item 7): no filesystem path of the server.

Errors and notices name files so that the owner can act (`…/structure/postings.bin is damaged: rebuild with
mathscout index --index /home/ada/idx`); a client learns nothing from them but the server's folders. The server
logs the full message and sends it with each offered index's folder as `the folder of index 'KEY'` and any other
absolute path as `a path on the server`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger("mathscout.ui")

# an absolute path of two or more parts (or ~/…), not inside a word or URL: /etc/passwd, /tmp/x/idx/store.sqlite
_PART = r"[^\s/'\"`,;()\[\]{}<>]"  # a character of a file or folder name as messages quote them
_PATH = re.compile(rf"(?<![\w:/.~\\-])(?:~|/{_PART}+)(?:/{_PART}*)+")
SOME_PATH = "a path on the server"


class PathRedactor:
    """Replaces the folders of `indexes` ((key, folder) pairs) and the files in them by names relative to the index
    (`structure/postings.bin of index 'idx'`), then any other absolute path."""

    def __init__(self, indexes: Iterable[tuple[str, Path]] = (), log_changes: bool = True):
        self.log_changes = log_changes  # the full message to the server's log (the page re-renders: it says so once)
        named: dict[str, str] = {}
        for key, folder in indexes:
            for spelling in {str(folder), str(Path(folder).absolute()), str(Path(folder).resolve())}:
                named[spelling.rstrip("/") or "/"] = key
        spellings = sorted(named, key=len, reverse=True)  # the longest spelling first
        self._keys = named
        alternatives = "|".join(map(re.escape, spellings)) or "(?!)"
        self._folders = re.compile(f"({alternatives})(?!{_PART})((?:/{_PART}+)*)/?")

    @classmethod
    def of_pool(cls, pool, log_changes: bool = True) -> PathRedactor:
        """The redactor of a server's offered indexes (a `mathscout.ui.chat.AssistantPool`'s choices)."""
        return cls(((c.key, c.path) for c in pool.choices.values()), log_changes)

    def _named(self, match: re.Match) -> str:
        inside, key = match.group(2).lstrip("/"), self._keys[match.group(1)]
        return f"{inside} of index '{key}'" if inside else f"the folder of index '{key}'"

    def __call__(self, text: str) -> str:
        shown = _PATH.sub(SOME_PATH, self._folders.sub(self._named, text))
        if shown != text and self.log_changes:
            log.warning("told a client, without its paths: %s", text)
        return shown
