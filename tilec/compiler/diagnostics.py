"""User-facing errors.

A `TilecError` is a mistake in the user's program: it carries the source span
it is about, and renders GCC-style (`file:line:col: error: message`, the source
line, a caret).  Any other exception escaping the compiler is a bug in tilec."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

if TYPE_CHECKING:  # spans are made by the parser; this module only reads them
    from tilec.compiler.ir import Span


class TilecError(Exception):
    """A located error in the user's program (exit code 1, no traceback)."""

    def __init__(self, message: str, span: Optional[Span] = None, notes: Sequence[str] = ()):
        super().__init__(message)
        self.message = message
        self.span = span
        self.notes = tuple(notes)

    def with_span(self, span: Optional[Span]) -> "TilecError":
        """This error, located at `span` unless it already has a location."""
        if self.span is None and span is not None:
            self.span = span
        return self

    def render(self, sources: Optional[dict] = None) -> str:
        """The GCC-style text.  `sources` maps file names to their text; the
        file is read from disk when it is not there.  The source line and
        caret follow the message's first line, so that the lines a longer
        message goes on with (dispatch's table of variants) come after them."""
        lines = []
        if self.span is None:
            lines.append(f"tilec: error: {self.message}")
        else:
            first, _, rest = self.message.partition("\n")
            lines.append(f"{self.span}: error: {first}")
            src_line = _source_line(self.span, sources)
            if src_line is not None:
                lines.append(src_line)
                width = 1
                if self.span.end_line == self.span.line and self.span.end_col > self.span.col:
                    width = self.span.end_col - self.span.col
                lines.append(" " * (self.span.col - 1) + "^" + "~" * (width - 1))
            if rest:
                lines.append(rest)
        for note in self.notes:
            lines.append(f"note: {note}")
        return "\n".join(lines)

    def __str__(self) -> str:
        where = f"{self.span}: " if self.span else ""
        return f"{where}error: {self.message}"


def _source_line(span: Span, sources: Optional[dict]) -> Optional[str]:
    text = (sources or {}).get(span.file)
    if text is None:
        try:
            with open(span.file, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            return None
    # Lines end at "\n" only, as for the parser: str.splitlines() would also
    # break at a form feed or U+2028 inside a comment and show the wrong line.
    lines = text.split("\n")
    if 1 <= span.line <= len(lines):
        return lines[span.line - 1].rstrip("\r\n").expandtabs(1)
    return None
