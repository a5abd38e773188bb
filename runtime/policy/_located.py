"""The error a whole-entry check raises to name the field it is about (a leaf module: the
schema and the ``[network]`` rules both raise it, and the loader reads it)."""

from __future__ import annotations

__all__ = ["LocatedError"]


class LocatedError(ValueError):
    """A whole-policy check's error on one entry: ``loc`` is that entry's field path (as
    pydantic's), which the loader turns into the file's line (a model validator's own
    errors have none)."""

    def __init__(self, message: str, loc: tuple[str | int, ...]) -> None:
        super().__init__(message)
        self.loc = loc
