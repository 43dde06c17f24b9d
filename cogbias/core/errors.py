"""Errors that commands report to a person, in a module light enough for the CLI to import
before it knows which command runs (the store pulls in sqlite-utils, which takes a while)."""

from __future__ import annotations


class StoreError(RuntimeError):
    """The database file cannot be used; the message says why and what to do."""


class SchemaError(StoreError):
    """The file was written by a newer cogbias (or is otherwise at an unknown schema)."""


class UserError(Exception):
    """A known condition a person can act on (a test case without example fills for a gap,
    a key the provider refused, a call that timed out): its message says what and what to do,
    and the command prints it as an error, never as "unexpected"."""
