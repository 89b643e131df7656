"""Reading `.tile` source: bytes to text, with a located error for bytes
that are not UTF-8.

The driver and `tilec.compile` both read files through here, so a file in
another encoding is reported the same way by both: at the line and column of
the first bad byte, like any other mistake in the program."""
from __future__ import annotations

import os

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
