"""`tilec.autotune`: choose a kernel's compile-time configuration by timing it.

A kernel's tile shape, stage count or raster order are consts that a define
overrides (`-D BLK_N=128`).  Which setting is fastest depends on the shape,
the dtype and the device, and is cheaper to measure than to model, so
`tune()` compiles every configuration of a space in worker processes
(compiling is pure Python and CPU-bound), times each on the device with CUDA
events over rotating input sets, and returns the fastest as a loaded
`Kernel`.

The winner is remembered on disk (JSON, under the cache directory) per
source, compiler, device, target, kernel, space and *shape bucket*: the
fixed defines rounded up to powers of two, so that M = 1000 and M = 1024
share one tuning.  A later process asking for the same bucket compiles the
remembered configuration (a compile-cache hit) and times nothing; within a
process a repeated call returns the same `Kernel`, so a tuned launch costs
what any launch costs.

`TILEC_AUTOTUNE=0` (or `tune(..., enabled=False)`) times nothing and returns
the default configuration, the same on every machine.
"""
from __future__ import annotations

import atexit
import hashlib
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

from tilec.compiler import records
from tilec.compiler.diagnostics import TilecError

Config = dict  # define name -> int

_memo: dict[str, "Tuned"] = {}


@records.frozen
class Tuned:
    """The outcome of `tune`: the loaded kernel, the configuration it was
    compiled with, and how it was chosen (`how`: "tuned", "disk" or
    "default").  `times_ms` maps each timed configuration (as text) to its
    median milliseconds, as measured when it was tuned (read back with a
    remembered winner; empty for "default"); `rejected` maps configurations that failed to
    compile or load to the reason.  `workspace` is what `tune`'s
    `workspace` callable made for the chosen configuration (empty without
    one): the trailing arguments each launch of `kernel` takes."""

    kernel: Any
    config: Config
    defines: dict
    how: str
    times_ms: dict = records.field(factory=dict)
    rejected: dict = records.field(factory=dict)
    workspace: tuple = ()


def configs(space: Mapping[str, Sequence[int]] | Sequence[Mapping[str, int]]) -> list[Config]:
    """The configurations of `space`: a mapping of define name to its
    candidate values (their cartesian product, in the order given) or an
    explicit list of configurations.  Values must be integers, since a
    define is an integer constant."""
    if isinstance(space, Mapping):
        for name, values in space.items():
            _check_name(name)
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
                raise TilecError(f"autotune: the values of '{name}' must be a non-empty list of integers")
        names = list(space)
        result = [dict(zip(names, combo)) for combo in itertools.product(*(space[n] for n in names))]
    elif isinstance(space, Sequence) and not isinstance(space, (str, bytes)):
        result = [dict(c) if isinstance(c, Mapping) else c for c in space]
        if not result or not all(isinstance(c, dict) for c in result):
            raise TilecError("autotune: a space is a mapping of name to values, or a non-empty list of dicts")
        for c in result:
            for name in c:
                _check_name(name)
    else:
        raise TilecError("autotune: a space is a mapping of name to values, or a non-empty list of dicts")
    for c in result:
        for name, value in c.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise TilecError(f"autotune: {name}={value!r} is not an integer")
    return result


def _check_name(name) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise TilecError(f"autotune: {name!r} is not a define name")


def bucket(defines: Mapping[str, int]) -> dict:
    """The shape bucket of `defines`: each positive integer rounded up to a
    power of two; other values as they are."""
    out = {}
    for name, value in defines.items():
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            out[name] = 1 << (value - 1).bit_length()
        else:
            out[name] = value
    return out


def config_text(config: Config) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items()) or "(no defines)"


def tune(
    source,
    space,
    args: Callable[[], Sequence] | Sequence[Sequence],
    *,
    defines: Optional[Mapping[str, int]] = None,
    target: Optional[str] = None,
    kernel: Optional[str] = None,
    default: Optional[Config] = None,
    grid=None,
    runs: int = 20,
    warmup: int = 3,
    chain: int = 1,
    input_sets: int = 3,
    jobs: Optional[int] = None,
    enabled: Optional[bool] = None,
    progress: bool = True,
    bucket_of: Callable[[Mapping[str, int]], Mapping] = bucket,
    workspace: Optional[Callable[[Config], Sequence]] = None,
) -> Tuned:
    """Compile `source` (a path or the text, as for `tilec.compile`) with
    `defines` plus each configuration of `space`, time the kernel on the
    device, and return the fastest as `Tuned`.

    `args` is a callable returning one fresh set of launch arguments (it is
    called `input_sets` times, and the timed launches rotate among the sets,
    so no configuration is timed on warm caches alone), or the sets
    themselves.  `grid` is passed to each launch: a value, or a callable
    taking the configuration.  `workspace`, a callable taking the
    configuration, makes arguments whose shape depends on it (a split-K
    kernel's f32 partials and tile counters); they are made once per
    configuration, appended to each of its launches, and handed back with
    the winner as `Tuned.workspace`.  `chain` > 1 times that many launches
    back to back between one event pair, each on the next argument set, and
    counts their time per launch: what a kernel costs among dependent
    kernels (a decode step's layers), where a kernel compiled to wait on its
    grid dependency (programmatic dependent launch, docs/python.md) overlaps
    the launch before, which a lone launch cannot show.  A configuration that
    fails to compile or to load (a compile-time assert, too much shared
    memory) is skipped with its reason; if every one fails, the error lists
    them all."""
    from tilec.api import read_source

    text, filename = read_source(source)
    candidates = configs(space)
    fixed = dict(defines or {})
    for name in fixed:
        _check_name(name)
    if not isinstance(chain, int) or isinstance(chain, bool) or chain < 1:
        raise TilecError(f"autotune: chain must be a positive int (launches per timing), got {chain!r}")
    if default is not None:
        default = dict(default)
        if default not in candidates:
            raise TilecError(f"autotune: the default {config_text(default)} is not in the space")
    if enabled is None:
        enabled = os.environ.get("TILEC_AUTOTUNE", "1") != "0"
    make_workspace = (lambda config: ()) if workspace is None else (lambda config: tuple(workspace(config)))
    if not enabled:
        chosen = default or candidates[0]
        module = _compile(text, filename, {**fixed, **chosen}, target)
        return Tuned(module.kernel(kernel), chosen, {**fixed, **chosen}, "default",
                     workspace=make_workspace(chosen))

    from tilec.runtime import driver

    dev = driver.device()
    key = _key(text, filename, fixed, target, kernel, candidates, dev, bucket_of, chain)
    if key in _memo and _memo[key].defines == {**fixed, **_memo[key].config}:
        return _memo[key]
    remembered = _read_winner(key, candidates)
    if remembered is not None:
        config, times = remembered
        module = _compile(text, filename, {**fixed, **config}, target)
        tuned = Tuned(module.kernel(kernel), config, {**fixed, **config}, "disk", times,
                      workspace=make_workspace(config))
        _memo[key] = tuned
        return tuned

    report = _Progress(filename, len(candidates), progress)
    modules, rejected = compile_configs(text, filename, fixed, candidates, target, jobs, report.compiled)
    sets = [tuple(args()) for _ in range(input_sets)] if callable(args) else [tuple(s) for s in args]
    if not sets:
        raise TilecError("autotune: no argument sets to launch with")
    loaded = _load_all(modules, kernel, jobs)
    times, kernels = {}, {}
    for config in candidates:
        name = config_text(config)
        if name not in loaded:
            continue
        k = loaded[name]
        if isinstance(k, TilecError):  # e.g. more shared memory than this device has
            rejected[name] = k.message
            continue
        launch_grid = grid(config) if callable(grid) else grid
        extra = make_workspace(config)
        times[name] = _time(k, [s + extra for s in sets], launch_grid, runs, warmup, chain)
        kernels[name] = (k, config, extra)
        report.timed(name, times[name], min(times.values()))
    report.done()
    if not times:
        table = "\n".join(f"  {name}: {why}" for name, why in rejected.items())
        raise TilecError(f"autotune: no configuration of {filename} compiled and loaded:\n{table}")
    best = min(times, key=times.get)
    k, config, extra = kernels[best]
    _write_winner(key, config, times, dev.name)
    tuned = Tuned(k, config, {**fixed, **config}, "tuned", times, rejected, extra)
    _memo[key] = tuned
    return tuned


def _compile(text: str, filename: str, defines: dict, target):
    from tilec.api import compile_text

    return compile_text(text, filename, target=target, defines=defines)


def _compile_worker(job):
    """In a worker process: (config text, (ptx, meta) or None, error text)."""
    text, filename, defines, target, name = job
    try:
        module = _compile(text, filename, defines, target)
    except TilecError as e:
        return name, None, str(e)
    return name, (module.ptx, module.meta), ""


def compile_configs(
    text: str,
    filename: str,
    fixed: Mapping[str, int],
    candidates: list[Config],
    target: Optional[str] = None,
    jobs: Optional[int] = None,
    on_compiled: Callable[[str], None] = lambda name: None,
) -> tuple[dict, dict]:
    """Compile `text` with `fixed` plus each candidate, in parallel processes
    when there are several CPUs and several candidates.  Returns the
    `CompiledModule`s and the rejections (the first line of each error),
    both keyed by `config_text`.  Touches no GPU."""
    from tilec.runtime.module import CompiledModule

    work = [(text, filename, {**fixed, **c}, target, config_text(c)) for c in candidates]
    jobs = jobs or min(len(work), os.cpu_count() or 1)
    if jobs > 1 and len(work) > 1:
        results = list(_pool(jobs).map(_compile_worker, work))
    else:
        results = [_compile_worker(job) for job in work]
    modules, rejected = {}, {}
    for name, built, error in results:
        on_compiled(name)
        if built is None:
            rejected[name] = error.strip().splitlines()[0] if error.strip() else "compile failed"
        else:
            ptx, meta = built
            modules[name] = CompiledModule(ptx, meta, meta["target"])
    return modules, rejected


_pools: dict = {}


def _pool(jobs: int):
    """A process pool of `jobs` workers, made once and kept: starting one
    costs seconds (each worker imports the caller's main module afresh), so
    tuning many shapes shares it.  Spawned, not forked: the parent may hold
    a CUDA context and threads."""
    if jobs not in _pools:
        import concurrent.futures
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        _pools[jobs] = pool = concurrent.futures.ProcessPoolExecutor(jobs, mp_context=ctx)
        # shut down before the interpreter tears its modules down under the
        # pool's manager thread
        atexit.register(pool.shutdown)
    return _pools[jobs]


def _load_all(modules: dict, kernel: Optional[str], jobs: Optional[int]) -> dict:
    """Each module's kernel loaded, or the `TilecError` that refused it,
    keyed as `modules`.  Loading assembles the PTX (a strict ptxas check)
    and has the driver compile it, seconds for a large kernel; both run
    outside the GIL, so the modules load on threads at once."""
    import concurrent.futures

    def load(module):
        try:
            return module.kernel(kernel)
        except TilecError as e:
            return e

    if len(modules) < 2:
        return {name: load(m) for name, m in modules.items()}
    workers = jobs or min(len(modules), os.cpu_count() or 1)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return dict(zip(modules, pool.map(load, modules.values())))


# One thread spins until `ns` nanoseconds of %globaltimer have passed.
_SLEEP_PTX = """.version 7.0
.target sm_70
.address_size 64

.visible .entry tilec_autotune_sleep(.param .u64 ns)
{
    .reg .pred %p;
    .reg .u64 %ns, %start, %now, %passed;
    ld.param.u64 %ns, [ns];
    mov.u64 %start, %globaltimer;
$spin:
    mov.u64 %now, %globaltimer;
    sub.u64 %passed, %now, %start;
    setp.lt.u64 %p, %passed, %ns;
    @%p bra $spin;
    ret;
}
"""
SLEEP_NS = 200_000  # longer than the host takes to queue an event and a launch
_sleep_function = None


def _gpu_sleep(stream: int, ns: int = SLEEP_NS) -> None:
    """Queue a one-thread kernel that keeps `stream` busy for `ns`
    nanoseconds.  A timed launch queued behind it starts as soon as its
    start event is recorded, so the host's launch cost (several
    microseconds, as long as a small GEMM) is not in the time: without it
    the ranking of 6-10 us kernels is noise."""
    import ctypes

    from tilec.runtime import driver

    global _sleep_function
    if _sleep_function is None:
        module = driver.load_module(_SLEEP_PTX.encode() + b"\0")
        _sleep_function = driver.get_function(module, "tilec_autotune_sleep")
    value = ctypes.c_uint64(ns)
    params = (ctypes.c_void_p * 1)(ctypes.addressof(value))
    driver.launch(_sleep_function, (1, 1, 1), (1, 1, 1), (1, 1, 1), 0, stream, ctypes.addressof(params))


def _time(kernel, sets, grid, runs: int, warmup: int, chain: int = 1) -> float:
    """Median milliseconds per launch of `runs` timings, each of `chain`
    launches back to back between two CUDA events on a stream of its own
    behind a GPU sleep (`_gpu_sleep`, `chain` times the usual length, since
    the host queues `chain` launches behind it), rotating through the
    argument sets."""
    from tilec.runtime import driver

    stream = driver.stream_create()
    try:
        for i in range(max(warmup, 1)):
            kernel(*sets[i % len(sets)], grid=grid, stream=stream)
        events = [(driver.event_create(), driver.event_create()) for _ in range(runs)]
        for i, (start, end) in enumerate(events):
            _gpu_sleep(stream, SLEEP_NS * chain)
            driver.event_record(start, stream)
            for j in range(i * chain, (i + 1) * chain):
                kernel(*sets[j % len(sets)], grid=grid, stream=stream)
            driver.event_record(end, stream)
        times = [driver.event_elapsed_ms(start, end) / chain for start, end in events]
        for start, end in events:
            driver.event_destroy(start)
            driver.event_destroy(end)
    finally:
        driver.stream_synchronize(stream)
        driver.stream_destroy(stream)
    return statistics.median(times)


def _key(text, filename, fixed, target, kernel, candidates, dev, bucket_of, chain) -> str:
    from tilec.compiler import source
    from tilec.runtime import cache

    compiled_for = cache.cache_key(text, dict(bucket_of(fixed)), target or "", source.dependencies(text, filename))
    blob = json.dumps(
        {
            "compile": compiled_for,
            "kernel": kernel,
            "space": [sorted(c.items()) for c in candidates],
            "device": [dev.name, dev.compute_capability, dev.sm_count],
            "chain": chain,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _winner_path(key: str):
    """Where the winner for `key` lives: `autotune/` in the compile cache's
    directory, under the same rules (private, no links); None when the
    cache is off or cannot be created."""
    from tilec.runtime import cache

    base = cache.directory()
    return None if base is None else base / "autotune" / f"{key}.json"


def _read_winner(key: str, candidates: list[Config]) -> Optional[tuple[Config, dict]]:
    """The remembered winner and the times it was chosen by, if there is a
    well-formed entry naming a configuration of this space with its own
    time among them; anything else is a miss."""
    from tilec.compiler.files import read_no_follow

    path = _winner_path(key)
    if path is None:
        return None
    try:
        data = json.loads(read_no_follow(path).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    config, times = data.get("config"), data.get("times_ms")
    if not isinstance(config, dict) or config not in candidates or not isinstance(times, dict):
        return None
    if config_text(config) not in times or not all(
        isinstance(t, (int, float)) and not isinstance(t, bool) for t in times.values()
    ):
        return None
    return config, times


def _write_winner(key: str, config: Config, times: dict, device_name: str) -> None:
    """Write the winner atomically, never through a link; a cache
    directory that cannot be written leaves nothing."""
    from tilec.compiler.files import write_atomic

    path = _winner_path(key)
    if path is None:
        return
    body = json.dumps({"config": config, "device": device_name, "times_ms": times}, sort_keys=True)
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        write_atomic(path, body)
    except OSError:
        return


class _Progress:
    """One line on stderr while tuning: compiled and timed counts, the
    configuration just timed and the best time so far."""

    def __init__(self, filename: str, total: int, enabled: bool):
        self.name = os.path.basename(filename)
        self.total = total
        self.enabled = enabled
        self.compiled_n = 0
        self.timed_n = 0
        self.start = time.perf_counter()
        self.tty = enabled and sys.stderr.isatty()

    def _say(self, text: str, final: bool = False) -> None:
        if not self.enabled:
            return
        line = f"tilec.autotune {self.name}: {text}"
        if self.tty:
            sys.stderr.write("\r\x1b[K" + line + ("\n" if final else ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def compiled(self, name: str) -> None:
        self.compiled_n += 1
        if self.tty:
            self._say(f"compiled {self.compiled_n}/{self.total}")

    def timed(self, name: str, ms: float, best: float) -> None:
        self.timed_n += 1
        self._say(f"timed {self.timed_n}/{self.total} [{name}] {ms * 1e3:.1f} us (best {best * 1e3:.1f} us)")

    def done(self) -> None:
        self._say(f"done in {time.perf_counter() - self.start:.1f} s", final=True)
