"""The `tilec` command: compile a .tile file to PTX and kernel.json.

Exit status: 0 on success, 1 for a mistake in the user's program or command
line (reported GCC-style, without a traceback) and, silently, when the
reader of its output has gone (`| head`), 2 for an internal compiler error
(any other exception: a bug in tilec, reported with a hint to rerun with
--traceback).

The driver is a short-lived process, and most of a small compile's time in
it is Python starting up and tilec being imported.  So tilec's compiler is
imported with the cyclic garbage collector off (see `main`) and the pipeline
only once the command line asks for a compile, and `run`, the command
itself, ends the process without the interpreter's teardown or another
collection.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from pathlib import Path
from typing import NoReturn, Optional, Sequence

from tilec import __version__
from tilec.compiler import files
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import HANG_TIMEOUT_NS, gc_paused
from tilec.compiler.targets import TARGETS


class _ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad command line is a user error (exit 1), like any other."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(1, f"tilec: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _ArgumentParser(prog="tilec", description="Compile a .tile program to PTX.")
    p.add_argument("file", nargs="?", help="the .tile source file")
    p.add_argument("-o", dest="output", metavar="FILE",
                   help="output file ('-' for stdout); default: FILE.ptx next to the source "
                        "for --emit ptx, stdout otherwise")
    p.add_argument("--target", choices=sorted(TARGETS), help="overrides the file's `target` line (default sm_90a)")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="override `const NAME` (repeatable)")
    p.add_argument("--emit", choices=("ptx", "ir", "meta"), default="ptx",
                   help="what to write: PTX (plus kernel.json beside it), the IR as .tile text, "
                        "or the kernel metadata JSON")
    p.add_argument("--dump-ir-after", metavar="all|P1,P2", help="print the IR after these passes")
    p.add_argument("--dump-ir-before", metavar="all|P1,P2", help="print the IR before these passes")
    p.add_argument("--dump-dir", metavar="DIR",
                   help="write dumps as numbered files DIR/NN-pass.tile (default: after every pass); a pass "
                        "that fails leaves the IR it was given in DIR/NN-pass.failed.tile")
    p.add_argument("--stop-after", metavar="P", help="stop the pipeline after pass P")
    p.add_argument("--time-passes", action="store_true", help="print the wall time of each pass")
    p.add_argument("--print-pipeline", action="store_true",
                   help="print the ordered passes with what they require and provide, and exit")
    p.add_argument("--verify-each", action="store_true", help="run the verifier after every pass")
    p.add_argument("--debug-hangs", action="store_true",
                   help=f"bound every mbarrier wait to {HANG_TIMEOUT_NS // 10**9} s of wall time: a wait that runs "
                        "over prints the kernel, the wait's source location, the phase, block and thread, "
                        "then traps")
    p.add_argument("-g", "--line-info", action="store_true",
                   help="add .file/.loc line information to the PTX, so that cuda-gdb, compute-sanitizer and "
                        "Nsight Compute report .tile source lines")
    p.add_argument("--traceback", action="store_true", help="show Python tracebacks for errors")
    p.add_argument("--version", action="version", version=f"tilec {__version__}")
    return p


def _pass_list(text: Optional[str]) -> frozenset:
    if not text:
        return frozenset()
    return frozenset(name.strip() for name in text.split(",") if name.strip())


def _defines(items: Sequence[str]) -> dict:
    defines = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise TilecError(f"-D {item}: expected NAME=VALUE")
        defines[name.strip()] = value
    return defines


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Do what the command line `argv` (default: `sys.argv[1:]`) says; the
    exit status.  The cyclic garbage collector is paused meanwhile
    (`gc_paused`), for the imports of the compiler as `compile_source` has
    it for the passes; it is on again on return, for a caller that goes on
    (the tests call `main` in their process)."""
    with gc_paused():
        return _main(argv)


def run() -> NoReturn:
    """The `tilec` command (the console script, `python -m tilec.cli`,
    `bin/tilec`): `main`, then the end of the process without the
    interpreter's teardown, which would free the loaded modules and a
    compile's tables one object at a time and collect garbage once more
    (another twentieth of a cold compile) for memory the operating system
    takes back at once.  The garbage collector stays off to the end: turned
    on again, its first pass, at the next allocation, would walk every object
    the run created and kept (some 50,000 for hgemm_v7: 3% of the run)
    for nothing.  The output files are written and closed by then;
    what stdout and stderr buffer is flushed first (either may be None: a
    process started with it closed), and a flush that fails (a closed pipe)
    leaves the exit to the interpreter, which reports it as it always has.
    Nothing on this path registers an exit handler."""
    gc.disable()
    status = main()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except BrokenPipeError:
        os._exit(status or 1)  # the reader has gone; nothing left to tell it
    except OSError:
        sys.exit(status)
    os._exit(status)


def _main(argv: Optional[Sequence[str]]) -> int:
    args = _parser().parse_args(argv)
    sources = {}
    try:
        return _run(args, sources)
    except BrokenPipeError:
        # The reader of our output went away (`tilec k.tile -o - | head`):
        # like any filter, stop quietly.  What stdout still buffers goes to
        # /dev/null, or flushing it at exit would fail the same way.
        _silence_stdout()
        return 1
    except TilecError as err:
        if args.traceback:
            _print_traceback()
        sys.stderr.write(err.render(sources) + "\n")
        return 1
    except Exception:  # noqa: BLE001 - anything else is a bug in tilec
        if args.traceback:
            _print_traceback()
        kind, value, _ = sys.exc_info()
        sys.stderr.write(f"tilec: internal compiler error: {kind.__name__}: {value}\n")
        for note in getattr(value, "__notes__", ()):
            sys.stderr.write(f"tilec: note: {note}\n")
        if not args.traceback:
            sys.stderr.write("This is a bug in tilec; rerun with --traceback for the full traceback.\n")
        return 2


def _silence_stdout() -> None:
    if sys.stdout is not None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _print_traceback() -> None:
    import traceback  # only for --traceback: a compile that succeeds does not load it

    traceback.print_exc()


def _run(args, sources: dict) -> int:
    from tilec.compiler import source
    from tilec.compiler.passmanager import ALL, Options
    from tilec.compiler.printer import print_module
    from tilec.pipeline import compile_source, pass_manager

    if args.print_pipeline:
        sys.stdout.write(pass_manager().describe())
        return 0
    if args.file is None:
        raise TilecError("no input file")
    path = Path(args.file)
    text = source.read(path)
    sources[args.file] = text
    outputs = _output_files(args, path)
    if args.dump_dir:
        _check_dump_dir(args.dump_dir)
    dump_before, dump_after = _pass_list(args.dump_ir_before), _pass_list(args.dump_ir_after)
    if args.dump_dir and not (dump_before or dump_after):
        dump_after = frozenset({ALL})
    options = Options(
        dump_before=dump_before,
        dump_after=dump_after,
        dump_dir=args.dump_dir,
        stop_after=args.stop_after,
        time_passes=args.time_passes,
        verify_each=args.verify_each,
        debug_hangs=args.debug_hangs,
        line_info=args.line_info,
    )
    result = compile_source(
        text, filename=args.file, target=args.target, defines=_defines(args.defines), options=options
    )
    if args.emit == "ir":
        _write(args.output, print_module(result.module))
        return 0
    if args.emit == "meta":
        _require(result.meta, "kernel metadata", args.stop_after)
        _write(args.output, _json(result.meta))
        return 0
    _require(result.ptx, "PTX", args.stop_after)
    output = args.output or str(path.with_suffix(".ptx"))
    if output != "-":
        _require(result.meta, "kernel metadata", args.stop_after)
        _write(str(outputs[1]), _json(result.meta))
    _write(output, result.ptx)
    return 0


def _output_files(args, source_path: Path) -> list:
    """The files this run will write (PTX, then its kernel.json), checked
    before compiling: each must be a file name in an existing directory, and
    none may be the source or another output."""
    if args.emit != "ptx":
        files = [] if args.output in (None, "-") else [args.output]
    else:
        output = args.output if args.output is not None else str(source_path.with_suffix(".ptx"))
        files = [] if output == "-" else [output]
    paths = []
    for name in files:
        path = Path(name)
        if name == "" or path.name in ("", ".", "..") or name.endswith(("/", os.sep)) or path.is_dir():
            raise TilecError(f"-o '{name}' is not a file name; -o takes one such as kernel.ptx")
        _check_parent(path, f"-o '{name}'")
        paths.append(path)
    if args.emit == "ptx" and paths:
        meta = paths[0].with_suffix(".json")
        if meta == paths[0]:
            raise TilecError(
                f"-o '{paths[0]}': the kernel.json is written beside the PTX with the suffix .json, "
                "which would overwrite the PTX; name the PTX output with the suffix .ptx"
            )
        paths.append(meta)
    for path in paths:
        if _same_file(path, source_path):
            raise TilecError(f"writing '{path}' would overwrite the source file '{source_path}'; choose another -o")
    return paths


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def _check_dump_dir(name: str) -> None:
    path = Path(name)
    if path.exists() and not path.is_dir():
        raise TilecError(f"--dump-dir '{name}' is a file, not a directory")
    if not path.exists():
        _check_parent(path, f"--dump-dir '{name}'")


def _check_parent(path: Path, what: str) -> None:
    parent = path.parent
    if not parent.exists():
        raise TilecError(f"{what}: the directory '{parent}' does not exist")
    if not parent.is_dir():
        raise TilecError(f"{what}: '{parent}' is not a directory")


def _require(artifact, what: str, stop_after: Optional[str]) -> None:
    if artifact is None:
        where = f"--stop-after {stop_after} stops" if stop_after else "the pipeline stopped"
        raise TilecError(f"no {what} to write: {where} before emit-ptx (use --emit ir)")


def _json(meta: dict) -> str:
    return json.dumps(meta, indent=2) + "\n"


def _write(output: Optional[str], text: str) -> None:
    if output is None or output == "-":
        sys.stdout.write(text)
        return
    try:
        files.write_atomic(output, text)
    except OSError as err:
        raise TilecError(f"cannot write '{output}': {err.strerror or err}") from None


if __name__ == "__main__":
    run()
