"""PTX to cubin through nvJitLink, strict about every ptxas diagnostic.

All PTX tilec produces (and every PTX a test writes) goes through
`assemble`, so a warning fails here: on generated code a ptxas warning means
the emitter wrote something other than what it meant (an ignored pragma, a
register limit ptxas clamped, an out-of-range `.minnctapersm`), and running
that code anyway hides the bug.

nvJitLink needs no GPU.  It reports ptxas *errors* in its error log and fails
the link, but reports ptxas *warnings* only in its info log (lines such as
``ptxas warning : Pragma 'foo' unsupported``) and still succeeds.  So both
logs are read after every link and a line whose severity is warning, error
or fatal fails the assembly.  Scanning the log is preferred to
``-Xptxas=-Werror``: it catches the same warnings, keeps their severity in
the message, and also catches warnings nvJitLink itself prints.
"""
from __future__ import annotations

import re

from cuda.bindings import nvjitlink

from tilec.compiler.diagnostics import TilecError


class PtxAssemblyError(TilecError):
    """ptxas (through nvJitLink) rejected or warned about a PTX module; the
    message holds its log, each located line followed by the PTX line."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


_PROBLEMS = ("warning", "error", "fatal")
_SEVERITY = re.compile(r"\b(info|warning|error|fatal)\s*$")
_PTX_LINE = re.compile(r"\bline (\d+)\b")


def assemble(ptx: str, target: str) -> bytes:
    """The cubin for `ptx` on architecture `target` ("sm_90a", "sm_80",
    or a device's own "sm_86"...).  Raises `PtxAssemblyError` on any ptxas
    error or warning."""
    cubin, _ = _link(ptx, target, verbose=False)
    return cubin


def resource_usage(ptx: str, target: str) -> dict[str, dict]:
    """Per entry function: registers, barriers, static smem bytes, stack
    frame bytes, spill stores and spill loads, read from ptxas' verbose
    report, and `performance_loss`: ptxas' "Potential Performance Loss"
    advisories (wgmma serialisation...), which are info lines, not warnings,
    so they do not fail `assemble`.  Raises like `assemble`."""
    _, info = _link(ptx, target, verbose=True)
    return parse_usage(info)


def _link(ptx: str, target: str, verbose: bool) -> tuple[bytes, str]:
    options = [f"-arch={target}"] + (["-verbose"] if verbose else [])
    try:
        handle = nvjitlink.create(len(options), options)
    except nvjitlink.nvJitLinkError as e:
        raise PtxAssemblyError(f"nvJitLink cannot assemble for '{target}' ({e})") from None
    try:
        failure = None
        data = ptx.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as e:
            failure = e
        errors = _read_log(handle, nvjitlink.get_error_log_size, nvjitlink.get_error_log)
        info = _read_log(handle, nvjitlink.get_info_log_size, nvjitlink.get_info_log)
        problems = errors.splitlines() + [
            line for line in info.splitlines() if severity(line) in _PROBLEMS
        ]
        if failure is not None or any(line.strip() for line in problems):
            log = _annotate(problems, ptx)
            verdict = "rejected" if failure is not None or errors.strip() else "warned about"
            raise PtxAssemblyError(
                f"ptxas {verdict} the PTX for {target}"
                + (f" ({failure})" if failure is not None else "")
                + (":\n" + log if log else ""),
                log,
            )
        size = nvjitlink.get_linked_cubin_size(handle)
        cubin = bytearray(size)
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin), info
    finally:
        nvjitlink.destroy(handle)


def _read_log(handle, size_of, read) -> str:
    size = size_of(handle)
    if size <= 1:
        return ""
    buf = bytearray(size)
    read(handle, buf)
    return buf.rstrip(b"\0").decode(errors="replace")


def severity(line: str) -> str | None:
    """The severity word of one log line ("info", "warning", "error",
    "fatal"), or None for continuation lines.  It is the last word before
    the first colon (``ptxas kernel.ptx, line 9; error   : ...``), so a
    kernel called ``warning`` in an info line is not mistaken for one."""
    if ":" not in line:
        return None
    m = _SEVERITY.search(line.split(":", 1)[0])
    return m.group(1) if m else None


def _annotate(lines: list[str], ptx: str) -> str:
    """The log lines, each one that names a PTX line followed by that line."""
    source = ptx.splitlines()
    out = []
    for line in lines:
        if not line.strip():
            continue
        out.append(line)
        m = _PTX_LINE.search(line)
        if m and 1 <= int(m.group(1)) <= len(source):
            n = int(m.group(1))
            out.append(f"  {n:5d} | {source[n - 1].strip()}")
    return "\n".join(out)


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"^ptxas info\s*: Function properties for (\S+)")
_FRAME = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)
_USED = re.compile(r"^ptxas info\s*: Used (\d+) registers")
_LOSS = re.compile(r"Potential Performance Loss: (.*) in the function '([^']+)'")


def parse_usage(info: str) -> dict[str, dict]:
    """Per entry function usage from a verbose ptxas log (see
    `resource_usage`).  ptxas prints, per entry, "Compiling entry function",
    "Function properties for NAME" with the stack/spill line, then "Used N
    registers[, used N barriers][, N bytes smem]"."""
    usage: dict[str, dict] = {}
    frames: dict[str, dict[str, int]] = {}
    losses: dict[str, list[str]] = {}
    entry = props = None
    for line in info.splitlines():
        if m := _LOSS.search(line):
            losses.setdefault(m.group(2), []).append(m.group(1))
        elif m := _ENTRY.search(line):
            entry = m.group(1)
        elif m := _PROPERTIES.search(line):
            props = m.group(1)
        elif (m := _FRAME.search(line)) and props is not None:
            stack, stores, loads = map(int, m.groups())
            frames[props] = {"stack": stack, "spill_stores": stores, "spill_loads": loads}
        elif (m := _USED.search(line)) and entry is not None:
            barriers = re.search(r"used (\d+) barriers", line)
            smem = re.search(r"(\d+) bytes smem", line)
            usage[entry] = {
                "registers": int(m.group(1)),
                "barriers": int(barriers.group(1)) if barriers else 0,
                "smem": int(smem.group(1)) if smem else 0,
            }
            entry = None
    for name, counts in usage.items():
        counts.update(frames.get(name, {"stack": 0, "spill_stores": 0, "spill_loads": 0}))
        counts["performance_loss"] = losses.get(name, [])
    return usage
