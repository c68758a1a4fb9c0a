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
