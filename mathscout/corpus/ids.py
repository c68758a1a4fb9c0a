"""The one rule for document ids holding control characters (issue 42 item 5): such a record is skipped, with a
line saying why, by every reader (JSONL, ARQMath Posts XML, notes). An id is printed, linked and quoted wherever its
document is shown; a control character in it (ESC, BEL, C1, a bidirectional override: `mathscout.terminal.CONTROL`)
would be a terminal command there, and an id changed to hide it would no longer be the id that qrels and links use.
"""

from __future__ import annotations


def control_in_id(what: str, control: str) -> str:
    """Why a record is skipped: `what` ("'id'", …) holds the control character `control` (U+XXXX)."""
    return f"{what} holds a control character ({control}), which a terminal would obey: skipped"


__all__ = ["control_in_id"]
