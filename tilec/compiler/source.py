"""Reading `.tile` source: bytes to text, with a located error for bytes
that are not UTF-8; where an `include` line points.

The driver and `tilec.compile` both read files through here, so a file in
another encoding is reported the same way by both: at the line and column of
the first bad byte, like any other mistake in the program.  The `parse` pass
resolves `include "path.tile"` with `include_path`, and the compile cache
keys a program by the files it includes (`dependencies`), so an edit to an
included file is a new program."""
from __future__ import annotations

import os
import re

from tilec.compiler.diagnostics import TilecError
from tilec.compiler.ir import Span


def decode(data: bytes, filename: str) -> str:
    """`data` as text, line ends normalised as Python's text mode does; a
    `TilecError` at the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as err:
        pos = err.start
        line_start = data.rfind(b"\n", 0, pos) + 1
        line = data.count(b"\n", 0, pos) + 1
        col = len(data[line_start:pos].decode("utf-8", errors="replace")) + 1
        raise TilecError(
            f"byte 0x{data[pos]:02x} is not valid UTF-8: .tile source must be UTF-8 "
            "(convert the file, e.g. with iconv -t UTF-8)",
            Span(filename, line, col, line, col + 1),
        ) from None


def read(path: "str | os.PathLike[str]") -> str:
    """The text of the file at `path`; a `TilecError` when it cannot be read
    or is not UTF-8."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            data = f.read()
    except OSError as err:
        raise TilecError(f"cannot read '{name}': {err.strerror or err}") from None
    return decode(data, name)


def include_path(path: str, including: str) -> str:
    """The file that `include "path"` in the file `including` names: `path`
    relative to that file's directory, normalised.  Nothing else is read:
    the path must be relative, end in `.tile` and use `/`, and a program
    that is not a file (`<string>`) has no directory to include from.  A
    `TilecError` (without a location: the caller has the line) otherwise."""
    if including.startswith("<"):
        raise TilecError(
            f"'include' reads a file beside the including one, and {including} is not a file: "
            "compile the program from its path"
        )
    if "\\" in path or os.path.isabs(path) or not path.endswith(".tile") or path == ".tile":
        raise TilecError(
            f"include \"{path}\": an include path is relative to the including file's directory, "
            "with '/' between directories, and names a .tile file"
        )
    return os.path.normpath(os.path.join(os.path.dirname(including), path))


_INCLUDE_LINE = re.compile(r'^include[ \t\f]+"([^"\\\n]*)"', re.M)


def dependencies(text: str, filename: str) -> tuple:
    """(path, text) of each file `text` includes, directly or through
    another include, once each, in the order the parse pass takes them
    (depth first); the text is None for a file that cannot be read (the
    compile then reports it).  Read from the `include` lines, which start a
    line (module level), without parsing: a compile reads no other file, so
    these and `text` decide its result."""
    out, seen = [], set()

    def visit(body: str, name: str) -> None:
        for m in _INCLUDE_LINE.finditer(body):
            try:
                path = include_path(m.group(1), name)
            except TilecError:
                continue  # the compile refuses the line
            real = os.path.realpath(path)  # the parse pass's notion of one file
            if real in seen:
                continue
            seen.add(real)
            try:
                included = read(path)
            except TilecError:
                included = None
            out.append((path, included))
            if included is not None:
                visit(included, path)

    visit(text, filename)
    return tuple(out)
