"""Errors raised for user input, with their message templates as constants.

Every error a user can cause is an ``ExplainError`` (a ``ValueError``), so that callers
catch one class and tests match the templates below instead of copying strings. Its text is
capped (``explain.core.text.MESSAGE_LIMIT``): a message built from a hostile file stays a few KB.
"""

from __future__ import annotations

from explain.core.text import capped


class ExplainError(ValueError):
    """Base class of every error caused by the user's model, data or settings."""

    def __str__(self) -> str:
        return capped(super().__str__())


class AttributionError(ExplainError):
    """Integrated Gradients cannot be computed for these inputs or settings."""


class BundleError(ExplainError):
    """A bundle (model + tables) is invalid; ``problems`` lists every problem found."""

    def __init__(self, message: str, problems: list | None = None):
        super().__init__(message)
        self.problems = list(problems or [])


class UnsafeModelError(ExplainError):
    """A model file was refused before any of its code could run."""


def refusal(template: str, items: list[str] | None = None, **fields) -> UnsafeModelError:
    """An ``UnsafeModelError`` with ``template.format(**fields)``; its ``problems`` list ``items``
    (one line per offending part, read by ``python -m explain check``) or the message itself."""
    error = UnsafeModelError(template.format(**fields))
    error.problems = list(items) if items else [str(error)]
    return error


class Stopped(Exception):
    """A computation was stopped between two chunks because its ``should_stop`` callable said so.

    Not an ``ExplainError``: nothing is wrong with the input; the caller asked to stop.
    """


NO_TENSORFLOW = ("explain computes gradients with TensorFlow (Keras' backend here), which is not installed in this "
                 "environment. Install one build: pip install \"explain[tf-cpu]\" (the CPU wheel), \"explain[tf]\" "
                 "(tensorflow), or your own GPU build of TensorFlow.")
