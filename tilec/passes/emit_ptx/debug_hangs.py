"""`--debug-hangs`: mbarrier waits that give up and say where they hung.

A wait on an mbarrier phase that never completes (an expect_tx byte count
that the copies never deliver, an arrival count that is never reached, a
phase bit out of step) spins forever: the launch never returns and nothing
says which barrier.  Under `--debug-hangs` each `ptx.mbarrier.try_wait`
becomes a bounded loop.  The thread reads `%globaltimer` (nanoseconds) once
before its first try; when the phase is still incomplete `HANG_TIMEOUT_NS` later
it prints one line through the CUDA `vprintf` syscall -- the kernel, the
try_wait's file:line:col in the .tile source, the phase, the barrier's
shared address, the block (ctaid x, y, z) and the thread (tid.x) -- and
executes `trap;`, which aborts the launch (the host sees the error at its
next synchronisation, where the driver also flushes the printed lines).
Before the trap the thread fences its report out to the system and lingers
for `GRACE_NS`: a trap ends every thread of the grid at once, and the other
threads stuck in the same hang (a consumer and its producer, each waiting
on the other's barrier) need that moment to print their own lines.

The bound is wall time, not a count of tries, because how long one
`try_wait` suspends is left to the hardware, so only a time means the same
on every device.  2 s is far beyond any wait of a correct kernel (a whole
large GEMM takes milliseconds) and short enough that a test of a hang
finishes in seconds.

Without the flag nothing here runs and the PTX is what it always was.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from tilec.compiler.ir import Span
from tilec.compiler.passmanager import HANG_TIMEOUT_NS

GRACE_NS = 100_000_000

VPRINTF_DECL = ".extern .func (.param .b32 func_retval0) vprintf(.param .b64 fmt, .param .b64 args);"

# What the message prints after its fixed text, in the order of the
# argument buffer; every one is a 32-bit value, so field i sits at byte 4*i.
_FIELDS = ("phase", "addr", "%ctaid.x", "%ctaid.y", "%ctaid.z", "%tid.x")
_ARGS_BYTES = 4 * len(_FIELDS)


def message(kernel: str, span: Optional[Span]) -> str:
    """The printf format of one wait site (a `%` in a file name is escaped)."""
    where = str(span).replace("%", "%%") if span is not None else "(no source location)"
    return (
        f"tilec --debug-hangs: kernel {kernel}: the mbarrier wait (ptx.mbarrier.try_wait) at {where} "
        f"did not complete within {HANG_TIMEOUT_NS // 1_000_000} ms: phase %u, mbarrier at shared address 0x%x, "
        "block (%u, %u, %u), thread %u\n"
    )


class HangGuard:
    """The bounded waits of one PTX module.  Collects the module-scope
    declarations they need: `vprintf` and one format string per distinct
    message (an unrolled loop repeats a site; it shares one string)."""

    def __init__(self):
        self._strings: Dict[str, str] = {}  # message -> its .global name
        self._args: Dict[str, str] = {}  # kernel name -> its .local argument buffer

    def declarations(self) -> List[str]:
        """Module-scope lines, placed before the entries (none when no wait was bounded)."""
        if not self._strings:
            return []
        lines = [VPRINTF_DECL]
        for text, name in self._strings.items():
            data = text.encode("utf-8") + b"\0"
            lines.append(f".global .align 1 .b8 {name}[{len(data)}] = {{{', '.join(map(str, data))}}};")
        return lines + [""]

    def wait_loop(self, k, poll: str, done: str, addr, phase, span: Optional[Span]) -> None:
        """Emit into kernel emitter `k`: repeat the PTX line `poll` until it
        sets predicate `done`, for at most HANG_TIMEOUT_NS, then report and trap.
        `addr` and `phase` are the operands of the wait, for the message."""
        waited = k.regs.label("waited")
        _clock_loop(k, "wait", HANG_TIMEOUT_NS, [poll, f"@{done} bra {waited};"])
        fmt = self._format_string(message(k.kernel.name, span))
        _vprintf(k, fmt, self._args_buffer(k), {"phase": phase, "addr": addr})
        k.line("membar.sys;")
        _clock_loop(k, "linger", GRACE_NS, ["nanosleep.u32 100000;"])
        k.line("trap;")
        k.line(f"{waited}:")

    def _format_string(self, text: str) -> str:
        if text not in self._strings:
            self._strings[text] = f"$hang_message{len(self._strings)}"
        return self._strings[text]

    def _args_buffer(self, k) -> str:
        """The kernel's vprintf argument buffer, declared on its first wait."""
        name = k.kernel.name
        if name not in self._args:
            self._args[name] = f"$hang_args{len(self._args)}"
            k.decls.append(f".local .align 8 .b8 {self._args[name]}[{_ARGS_BYTES}];")
        return self._args[name]


def _clock_loop(k, stem: str, bound_ns: int, body: List[str]) -> None:
    """The PTX lines `body`, repeated until `bound_ns` nanoseconds of
    %globaltimer have passed since the loop began (`body` may branch out)."""
    start, now, elapsed = (k.regs.new("u64") for _ in range(3))
    in_time = k.regs.new("bool")
    top = k.regs.label(stem)
    k.line(f"mov.u64 {start}, %globaltimer;")
    k.line(f"{top}:")
    for line in body:
        k.line(line)
    k.line(f"mov.u64 {now}, %globaltimer;")
    k.line(f"sub.u64 {elapsed}, {now}, {start};")
    k.line(f"setp.lt.u64 {in_time}, {elapsed}, {bound_ns};")
    k.line(f"@{in_time} bra {top};")


def _vprintf(k, fmt: str, args: str, values: dict) -> None:
    """Call vprintf with the format string `fmt` (a .global name) and the
    32-bit `_FIELDS`, stored consecutively into the .local buffer `args`."""
    for i, field in enumerate(_FIELDS):
        r = k.regs.new("u32")
        k.line(f"mov.u32 {r}, {values.get(field, field)};")
        k.line(f"st.local.u32 [{args}+{4 * i}], {r};")
    fmt_global, fmt_generic, args_local, args_generic = (k.regs.new("u64") for _ in range(4))
    k.line(f"mov.u64 {fmt_global}, {fmt};")
    k.line(f"cvta.global.u64 {fmt_generic}, {fmt_global};")
    k.line(f"mov.u64 {args_local}, {args};")
    k.line(f"cvta.local.u64 {args_generic}, {args_local};")
    k.line("{")
    k.line(".param .b64 fmt;")
    k.line(f"st.param.b64 [fmt], {fmt_generic};")
    k.line(".param .b64 args;")
    k.line(f"st.param.b64 [args], {args_generic};")
    k.line(".param .b32 status;")
    k.line("call.uni (status), vprintf, (fmt, args);")
    k.line("}")
