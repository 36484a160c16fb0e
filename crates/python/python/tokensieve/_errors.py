"""The exception the native module raises for constraints, backends and tokenizers it cannot use."""

from typing import Optional


class GrammarError(ValueError):
    """A constraint could not be compiled, a backend could not be created, or
    a tokenizer could not be read; see the attributes for where."""

    def __init__(
        self,
        message: str,
        *,
        kind: str = "other",
        pointer: Optional[str] = None,
        line: Optional[int] = None,
        column: Optional[int] = None,
        offset: Optional[int] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.pointer = pointer
        self.line = line
        self.column = column
        self.offset = offset

    def __reduce__(self):
        # Keeps the attributes across pickling (multiprocessing workers).
        return (
            _rebuild,
            (self.message, self.kind, self.pointer, self.line, self.column, self.offset),
        )


def _rebuild(message, kind, pointer, line, column, offset):
    return GrammarError(
        message, kind=kind, pointer=pointer, line=line, column=column, offset=offset
    )
