"""User-facing errors: the CLI prints their message as one line, never a stack trace."""


class MathScoutError(Exception):
    """An error whose message is meant for the user (one line, says what to do)."""


class IndexMissingError(MathScoutError):
    """The index directory (or one of its components) does not exist or is incomplete."""


class QueryError(MathScoutError):
    """The query cannot be searched (empty, unreadable)."""


EMPTY_QUERY = "the query is empty: type some words and/or a formula like $x^2+1$"


class DamagedIndexError(MathScoutError):
    """A file of an index is truncated, garbled or foreign; the message names it and the rebuild command."""


def did_you_mean(word: str, choices) -> str:
    """' (did you mean 'bm25'?)' for a mistyped name close to one of `choices`, else '': added to an "unknown …"
    message so that a typo is answered with the name meant."""
    from difflib import get_close_matches

    close = get_close_matches(str(word).lower(), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
