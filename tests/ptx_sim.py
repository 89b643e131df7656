"""A small PTX interpreter for the instructions tilec's emitter writes, so
that emitter tests can check what a kernel computes on a machine without a
GPU (ptxas only says the PTX is well formed).

It runs one cluster of CTAs at a time (one CTA without a cluster launch):
every thread is a generator that yields at `bar.sync`, and the scheduler
resumes all of them once every live thread is waiting, which is exactly
the guarantee a CTA barrier gives.  Each CTA of a cluster has its own
shared memory (SharedMemory), which `mapa` and the `shared::cluster`
forms of ld/st (and of mbarrier and TMA, tests/tma_ptx_sim.py) reach
across; `barrier.cluster.arrive`/`wait` synchronise the cluster's threads.
Registers hold raw bits; float instructions convert through numpy's IEEE
types.  Global buffers are numpy arrays passed per parameter; shared and
local memory are byte arrays.
Asynchronous-proxy instructions (mbarrier, fences, tcgen05, TMA) are not
modelled: an unknown opcode raises, so a test cannot silently skip one.
"""
from __future__ import annotations

import re
import struct

import numpy as np

_INSTR = re.compile(r"^(@(!?)(%\w+)\s+)?([\w.:]+)\s*(.*?);$")
_WIDTH = {"pred": 1, "b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16,
          "b32": 32, "u32": 32, "s32": 32, "f32": 32, "b64": 64, "u64": 64, "s64": 64, "f64": 64}
_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}
# bar.arrive signals a named barrier without waiting; since every bar.sync here
# waits for all live threads, the arrival itself has nothing to do.  The
# griddepcontrol pair orders this grid against the kernels before and after
# it on a stream; one simulated kernel has no such neighbour in flight, so
# its wait returns at once (as on a GPU without a programmatic launch).
_NOOPS = ("fence.", "bar.warp.sync", "bar.arrive", "cp.async.bulk.commit_group", "cp.async.bulk.wait_group",
          "cp.async.commit_group", "cp.async.wait_group", "cp.async.wait_all", "griddepcontrol.wait",
          "griddepcontrol.launch_dependents")
YIELD = "yield"
"""What an extension returns for an instruction it ran that ends the thread's turn."""


def _mask(v, bits):
    return v & ((1 << bits) - 1)


def _signed(v, bits):
    v = _mask(v, bits)
    return v - (1 << bits) if v >> (bits - 1) else v


def _to_float(bits, t):
    if t == "f32":
        return np.frombuffer(struct.pack("<I", _mask(bits, 32)), np.float32)[0]
    if t == "f64":
        return np.frombuffer(struct.pack("<Q", _mask(bits, 64)), np.float64)[0]
    if t == "f16":
        return np.frombuffer(struct.pack("<H", _mask(bits, 16)), np.float16)[0].astype(np.float32)
    if t == "bf16":
        return np.frombuffer(struct.pack("<I", _mask(bits, 16) << 16), np.float32)[0]
    raise AssertionError(t)


def _from_float(x, t, rnd="rn"):
    if t == "f64":
        return struct.unpack("<Q", np.float64(x).tobytes())[0]
    if t == "f32":
        return struct.unpack("<I", _round(np.float64(x), np.float32, rnd).tobytes())[0]
    if t == "f16":
        return struct.unpack("<H", _round(np.float64(x), np.float16, rnd).tobytes())[0]
    if t == "bf16":
        f = np.float32(x)
        bits = struct.unpack("<I", f.tobytes())[0]
        if rnd == "rz":
            return bits >> 16
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF
    raise AssertionError(t)


def _round(x, kind, rnd):
    """x (float64) to numpy type `kind` with rounding rn, rz, rm or rp."""
    r = kind(x)
    if rnd == "rn" or np.float64(r) == x or not np.isfinite(x):
        return r
    toward = {"rz": 0.0, "rm": -np.inf, "rp": np.inf}[rnd]
    if rnd == "rz":
        if abs(np.float64(r)) > abs(x):
            r = np.nextafter(r, kind(0.0))
    elif (np.float64(r) > x) == (toward < 0):
        r = np.nextafter(r, kind(toward))
    return r


class Kernel:
    """One parsed `.entry` of a PTX module."""

    def __init__(self, ptx: str, name: str, extension=None, named_barriers=False):
        """`extension(op, operands, regs, special, symbols, mem, shared)` is
        offered every instruction first (`shared` is the CTA's
        SharedMemory, through which a shared::cluster address reaches any
        CTA of the cluster) and returns True for one it ran
        (tests/tma_ptx_sim.py models TMA and mbarriers this way), or YIELD
        for one it ran after which the thread lets the others run, as at a
        barrier (a spin-wait that failed, the arrival at a collective
        instruction: tests/wgmma_ptx_sim.py).  An extension with a method
        `claims(op, operands)` is offered only the instructions it claims
        (asked once per instruction, when the kernel is decoded), and may
        claim one the simulator otherwise runs as a no-op (a fence, a
        griddepcontrol), to watch where a thread executes it.

        `named_barriers=True` models `bar.sync ID, COUNT` and `bar.arrive
        ID, COUNT` as the hardware runs them (_NamedBarriers): a sync
        waits until COUNT threads have reached barrier ID, arrivals
        included, so one group of warps can hold another back (a
        ping-pong schedule, tests/test_hgemm_pingpong.py).  Without it
        (the default, which the older tests were written against) every
        bar.sync only ends the thread's turn and bar.arrive does nothing."""
        self.extension = extension
        self.named_barriers = named_barriers
        start = ptx.index(f".entry {name}(")
        header, body = ptx[start:].split("{", 1)
        body = body[: body.index("\n}")]
        self.params = re.findall(r"\.param (?:\.align \d+ )?\.\w+ (\w+)", header)
        req = re.search(r"\.reqntid (\d+)", header)
        self.block = int(req.group(1))
        self.shared, self.local = {}, {}
        shared_end = local_end = 0
        self.code, self.labels = [], {}
        for raw in body.splitlines():
            line = raw.strip()
            if not line or line.startswith("//") or line.startswith(".reg"):
                continue
            decl = re.match(r"\.(shared|local) \.align (\d+) \.b8 (\S+)\[(\d+)\];", line)
            if decl:
                space, align, sym, size = decl.group(1), int(decl.group(2)), decl.group(3), int(decl.group(4))
                if space == "shared":
                    shared_end = -(-shared_end // align) * align
                    self.shared[sym] = shared_end
                    shared_end += size
                else:
                    local_end = -(-local_end // align) * align
                    self.local[sym] = local_end
                    local_end += size
                continue
            if line.endswith(":"):
                self.labels[line[:-1]] = len(self.code)
                continue
            m = _INSTR.match(line)
            assert m, f"cannot parse PTX line: {line}"
            guard = None if m.group(3) is None else (m.group(2) == "!", m.group(3))
            self.code.append((guard, m.group(4), _split_operands(m.group(5))))
        self.dyn_base = -(-shared_end // 1024) * 1024
        self.shared_size = shared_end
        self.local_size = local_end
        symbols = {**self.shared, "$dynamic_smem": self.dyn_base, **self.local}
        # each instruction is decoded once: what the scheduler does with it
        # (and for a branch, its target) and, for the plain integer and
        # predicate instructions most of a kernel's steps are, a closure
        # that runs it exactly as _execute would
        claims = getattr(extension, "claims", lambda op, ops: extension is not None)
        watches = getattr(extension, "claims", lambda op, ops: False)  # a no-op only with `claims`
        self.decoded = []
        for guard, op, ops in self.code:
            if op == "ret":
                kind, arg = _RET, None
            elif op.startswith("bra"):
                kind, arg = _BRA, ops[0]
            elif named_barriers and op.startswith(("bar.sync", "bar.arrive")) and len(ops) == 2:
                kind, arg = (_NAMED_SYNC if op.startswith("bar.sync") else _NAMED_ARRIVE), (int(ops[0]), int(ops[1]))
            elif op.startswith("bar.sync"):
                kind, arg = _BAR, None
            elif op.startswith("barrier.cluster.arrive"):
                kind, arg = _CLUSTER_ARRIVE, None
            elif op.startswith("barrier.cluster.wait"):
                kind, arg = _CLUSTER_WAIT, None
            elif op.startswith(_NOOPS) and not watches(op, ops):
                kind, arg = _NOOP, None
            else:
                kind, arg = (_OFFER if claims(op, ops) else _OTHER), _compile(op, ops, symbols)
            self.decoded.append((guard, op, ops, kind, arg))

    def run(self, args: dict, grid=(1, 1, 1), ctas=None, dynamic_smem=0, max_steps=2_000_000, cluster=None):
        """Run the CTAs `ctas` (default: all of `grid`) with the parameters
        `args` (numpy arrays for buffers, numbers for scalars; arrays are
        updated in place).  `cluster` is the launch's cluster shape
        (kernel.json's "cluster"): the CTAs of one cluster run together,
        their threads interleaved, and a cluster's CTAs absent from `ctas`
        do not exist for those that run (reaching one raises).  Returns the
        number of instructions executed."""
        mem = _Memory(args, self.params)
        steps = 0
        cluster = tuple(cluster or (1, 1, 1))
        assert all(g % c == 0 for g, c in zip(grid, cluster)), f"grid {grid} is no whole number of clusters {cluster}"
        ctas = ctas or [(x, y, z) for z in range(grid[2]) for y in range(grid[1]) for x in range(grid[0])]
        clusters = {}  # cluster id -> its CTAs that run, in the order given
        for cta in ctas:
            clusters.setdefault(tuple(c // n for c, n in zip(cta, cluster)), []).append(tuple(cta))
        self.barriers = {}  # CTA -> its _NamedBarriers (named_barriers=True), left for the caller to inspect
        for cid, members in clusters.items():
            window = [None] * (cluster[0] * cluster[1] * cluster[2])  # shared memories by rank
            sync = _ClusterBarrier(self.block * len(members))
            live = []
            for cta in members:
                within = tuple(c % n for c, n in zip(cta, cluster))
                rank = within[0] + cluster[0] * (within[1] + cluster[1] * within[2])
                shared = window[rank] = SharedMemory(self.dyn_base + dynamic_smem + 16, window)
                ids = _cluster_registers(cta, grid, cluster, cid, within, rank)
                named = self.barriers[cta] = _NamedBarriers()
                live += [self._thread(mem, shared, cta, t, ids, sync, named) for t in range(self.block)]
            while live:
                waiting = []
                for th in live:
                    try:
                        steps += next(th)
                        waiting.append(th)
                    except StopIteration as stop:
                        steps += stop.value or 0
                live = waiting
                if steps > max_steps:
                    raise RuntimeError("kernel did not finish")
        mem.write_back()
        return steps

    def _thread(self, mem, shared, cta, tid, ids, sync, named):
        regs = {}
        local = bytearray(self.local_size + 16)
        special = {"%tid.x": tid, "%laneid": tid % 32, "%ctaid.x": cta[0], "%ctaid.y": cta[1],
                   "%ctaid.z": cta[2], **ids}
        arrived = 0  # the thread's barrier.cluster arrivals
        symbols = dict(self.shared)
        symbols["$dynamic_smem"] = self.dyn_base
        symbols.update(self.local)
        pc, steps = 0, 0
        code, labels, extension = self.decoded, self.labels, self.extension
        while True:
            guard, op, ops, kind, arg = code[pc]
            pc += 1
            steps += 1
            if guard is not None:
                negate, p = guard
                if bool(regs[p]) == negate:
                    continue
            if kind is _OFFER:
                handled = extension(op, ops, regs, special, symbols, mem, shared)
                if handled is YIELD:
                    yield steps
                    steps = 0
                    continue
                if handled:
                    continue
            elif kind is not _OTHER:
                if kind is _RET:
                    sync.exit(arrived)
                    return steps
                if kind is _BRA:
                    pc = labels[arg]
                elif kind is _BAR:
                    yield steps
                    steps = 0
                elif kind is _CLUSTER_ARRIVE:
                    sync.arrive(arrived)
                    arrived += 1
                elif kind is _CLUSTER_WAIT:
                    assert arrived, "barrier.cluster.wait before any barrier.cluster.arrive"
                    while not sync.complete(arrived - 1):
                        yield steps
                        steps = 0
                elif kind is _NAMED_ARRIVE:
                    named.arrive(*arg)
                elif kind is _NAMED_SYNC:
                    phase = named.arrive(*arg)
                    while named.phase(arg[0]) == phase:
                        yield steps + 1  # a step per turn spent waiting: a deadlock reaches max_steps
                        steps = 0
                continue
            if arg is not None:
                arg(regs, special)
            else:
                _execute(op, ops, regs, special, symbols, mem, shared, local)


# what the scheduler does with an instruction: _OFFER it to the extension
# first, else run it as _OTHER
_RET, _BRA, _BAR, _NOOP, _OFFER, _OTHER = "ret", "bra", "bar", "noop", "offer", "other"
_CLUSTER_ARRIVE, _CLUSTER_WAIT = "cluster arrive", "cluster wait"
_NAMED_SYNC, _NAMED_ARRIVE = "named sync", "named arrive"
_RING = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
         "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b}
_ORDERED = {"min": min, "max": max}


def _operand(x, t, symbols):
    """A getter `(regs, special) -> value` of operand `x` read as type `t`
    (num in _execute: sign-extended for s types, masked otherwise)."""
    bits = _WIDTH[t]
    m = (1 << bits) - 1
    if not x.startswith("%"):  # a symbol, `_` or an immediate: known now
        v = symbols[x] if x in symbols else 0 if x == "_" else _imm(x, t)
        v = _signed(v, bits) if t[0] == "s" else v & m

        def const(regs, special):
            return v
        return const
    if t[0] == "s":
        top = 1 << (bits - 1)

        def signed(regs, special):
            v = (regs[x] if x in regs else special[x]) & m
            return v - (top << 1) if v & top else v
        return signed

    def unsigned(regs, special):
        return (regs[x] if x in regs else special[x]) & m
    return unsigned


def _integer(t):
    return t in _WIDTH and t[0] in "bsu" and t != "bf16"


def _compile(op, ops, symbols):
    """A closure `(regs, special)` running `op ops` as _execute does, for
    the integer forms it covers; None for any other, and for one with an
    operand that is no number (a tensor map's name, which an extension
    resolves), which is left to _execute."""
    try:
        return _compile_integer(op, ops, symbols)
    except ValueError:
        return None


def _compile_integer(op, ops, symbols):
    parts = op.split(".")
    name, t = parts[0], parts[-1]
    if any(o.startswith(("{", "[")) or "|" in o for o in ops):
        return None
    integer = _integer(t)
    if name == "mov" and len(ops) == 2 and integer:
        d, m = ops[0], (1 << _WIDTH[t]) - 1
        get = _operand(ops[1], "b64", symbols)  # unmasked: masked to t here

        def mov(regs, special):
            regs[d] = get(regs, special) & m
        return mov
    if name == "setp" and len(parts) == 3 and parts[1] in _CMP and _integer(parts[2]):
        d, cmp = ops[0], _CMP[parts[1]]
        ga, gb = _operand(ops[1], parts[2], symbols), _operand(ops[2], parts[2], symbols)

        def setp(regs, special):
            regs[d] = bool(cmp(ga(regs, special), gb(regs, special)))
        return setp
    if name == "mad" and len(ops) == 4 and integer and len(parts) == 3 and parts[1] in ("lo", "wide"):
        wide = parts[1] == "wide"
        tc = "s64" if wide else t  # as _execute: the addend of a wide mad is read as s64
        d, m = ops[0], (1 << _WIDTH["s64" if wide else t]) - 1
        ga, gb, gc = (_operand(o, tt, symbols) for o, tt in zip(ops[1:], (t, t, tc)))

        def mad(regs, special):
            regs[d] = (ga(regs, special) * gb(regs, special) + gc(regs, special)) & m
        return mad
    if len(ops) != 3 or not integer:
        return None
    if name == "mul" and parts[1] == "hi":
        return None
    d, m = ops[0], (1 << _WIDTH[t]) - 1
    if name in _RING or name in _ORDERED:
        f = _RING.get(name) or _ORDERED[name]
        ga, gb = _operand(ops[1], t, symbols), _operand(ops[2], t, symbols)
    elif name in ("shl", "shr"):
        ga, gb = _operand(ops[1], t, symbols), _operand(ops[2], "u32", symbols)
        f = (lambda a, b: a << b) if name == "shl" else (lambda a, b: a >> b)
    else:
        return None

    def binary(regs, special):
        regs[d] = f(ga(regs, special), gb(regs, special)) & m
    return binary


def _split_operands(text):
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


CLUSTER_WINDOW = 1 << 24
"""The span of each CTA's window in the shared::cluster addresses `mapa`
makes: CTA rank r's byte o is (r + 1) * CLUSTER_WINDOW + o, which no
CTA-local address (under 228 KiB) can be mistaken for."""


class SharedMemory(bytearray):
    """One CTA's shared memory, which knows its cluster's, so that a
    shared::cluster address reaches the CTA it names.  A CTA's own
    shared::cta address is a shared::cluster address of its own memory (as
    on the GPU); `mapa` gives addresses in CLUSTER_WINDOW-sized windows
    above them, one per rank."""

    def __init__(self, size, cluster):
        super().__init__(size)
        self.cluster = cluster  # SharedMemory by rank (None for a CTA not run)

    def peer(self, rank):
        """The shared memory of the cluster's CTA of rank `rank`."""
        peer = self.cluster[rank] if 0 <= rank < len(self.cluster) else None
        if peer is None:
            raise MemoryError(f"no CTA of rank {rank} in this run of a {len(self.cluster)}-CTA cluster")
        return peer

    def window(self, addr):
        """(memory, offset) of shared::cluster address `addr`."""
        if addr < CLUSTER_WINDOW:
            return self, addr
        return self.peer(addr // CLUSTER_WINDOW - 1), addr % CLUSTER_WINDOW

    def mapa(self, addr, rank):
        """The shared::cluster address of the byte at shared address `addr`
        (a CTA-relative offset) in the CTA of rank `rank`."""
        if not 0 <= rank < len(self.cluster):
            raise MemoryError(f"mapa to CTA rank {rank} of a {len(self.cluster)}-CTA cluster")
        return (rank + 1) * CLUSTER_WINDOW + self.window(addr)[1]


def _cluster_registers(cta, grid, cluster, cid, within, rank):
    """The special registers that place a CTA in its cluster (PTX 10.x:
    %clusterid, %nclusterid, %cluster_ctaid, %cluster_nctaid, and the
    linear %cluster_ctarank, %cluster_nctarank; x fastest)."""
    ids = {"%cluster_ctarank": rank, "%cluster_nctarank": cluster[0] * cluster[1] * cluster[2]}
    for i, d in enumerate("xyz"):
        ids[f"%clusterid.{d}"] = cid[i]
        ids[f"%nclusterid.{d}"] = grid[i] // cluster[i]
        ids[f"%cluster_ctaid.{d}"] = within[i]
        ids[f"%cluster_nctaid.{d}"] = cluster[i]
    return ids


class _ClusterBarrier:
    """barrier.cluster over the threads of one cluster: a thread's n-th
    arrive counts towards phase n, and its wait returns once every thread of
    the cluster has arrived for the phase of its latest arrive.  A thread
    that has exited counts as arrived (the wait is for all non-exited
    threads, PTX ISA barrier.cluster).  Arrive and wait are modelled apart,
    so a split arrive ... wait with work between runs as on the GPU; the
    release/acquire and .relaxed orderings need nothing more, as the
    simulator's memory is sequentially consistent."""

    def __init__(self, threads):
        self.threads = threads
        self.arrivals = []  # arrivals[p]: threads that arrived for phase p
        self.exited = []  # the arrival counts of the threads that exited

    def arrive(self, phase):
        if phase == len(self.arrivals):
            self.arrivals.append(0)
        self.arrivals[phase] += 1

    def exit(self, arrived):
        self.exited.append(arrived)

    def complete(self, phase):
        return self.arrivals[phase] + sum(1 for n in self.exited if n <= phase) == self.threads


class _NamedBarriers:
    """A CTA's named barriers 0-15 (PTX ISA bar/barrier): `bar.sync id,
    count` and `bar.arrive id, count` each count one arrival (the simulator
    runs threads one by one, so a warp's 32 arrive as its 32 threads); the
    arrival that makes `count` completes the barrier's phase and the count
    starts again from 0, releasing the syncs of that phase.  Every arrival
    of a phase must give the same count (else the PTX is undefined).
    `pending()` lists the barriers some thread arrived at in a phase that
    has not completed (a kernel that exits so leaves a barrier half
    arrived)."""

    def __init__(self):
        self.state = {}  # id -> [phase, arrivals in it, their count]

    def arrive(self, barrier, count):
        """Counts one arrival; returns the phase it arrived in."""
        state = self.state.setdefault(barrier, [0, 0, count])
        phase, arrivals, expected = state
        assert arrivals == 0 or expected == count, (
            f"named barrier {barrier}: arrivals with {expected} and {count} threads in one phase")
        if arrivals + 1 == count:
            state[:] = [phase + 1, 0, count]
        else:
            state[:] = [phase, arrivals + 1, count]
        return phase

    def phase(self, barrier):
        return self.state[barrier][0]

    def pending(self) -> dict:
        """{id: arrivals} of every barrier in a phase some thread arrived at."""
        return {b: s[1] for b, s in self.state.items() if s[1]}


class _Memory:
    def __init__(self, args, params):
        self.args, self.bufs, self.params = args, {}, {}
        for i, name in enumerate(params):
            v = args.get(name)
            if isinstance(v, np.ndarray):
                self.bufs[i + 1] = (name, bytearray(v.tobytes()))
                self.params[name] = (i + 1) << 40
            elif v is not None:
                self.params[name] = v

    def view(self, addr):
        name, data = self.bufs[addr >> 40]
        return data, addr & ((1 << 40) - 1)

    def write_back(self):
        for name, data in self.bufs.values():
            arr = self.args[name]
            arr[...] = np.frombuffer(bytes(data), arr.dtype).reshape(arr.shape)


def _imm(text, t):
    if text.startswith("0f"):
        return int(text[2:], 16)
    if text.startswith("0d"):
        return int(text[2:], 16)
    return _mask(int(text, 0), _WIDTH.get(t, 64))


def _execute(op, ops, regs, special, symbols, mem, shared, local):
    parts = op.split(".")
    name, t = parts[0], parts[-1]

    def val(x, tt=t):
        if x in regs:
            return regs[x]
        if x in special:
            return special[x]
        if x in symbols:
            return symbols[x]
        if x == "_":
            return 0
        return _imm(x, tt)

    def num(x, tt=t):
        v = val(x, tt)
        if tt.startswith("f") or tt == "bf16":
            return np.float64(_to_float(v, tt))
        if tt.startswith("s"):
            return _signed(v, _WIDTH[tt])
        return _mask(v, _WIDTH.get(tt, 64))

    def put(d, v, tt=t):
        if tt == "pred":
            regs[d] = bool(v)
        elif tt.startswith("f") or tt == "bf16":
            regs[d] = _from_float(v, tt, "rn")
        else:
            regs[d] = _mask(int(v), _WIDTH[tt])

    if name == "mov":
        d, s = ops
        if d.startswith("{"):  # unpack
            halves = [h.strip() for h in d[1:-1].split(",")]
            w = _WIDTH[t] // len(halves)
            # a packed register array's first element write unpacks a word
            # never written (its other half is undefined and unread): 0 here
            v = 0 if s.startswith("%") and s not in regs else val(s)
            for i, h in enumerate(halves):
                regs[h] = _mask(v >> (w * i), w)
        elif s.startswith("{"):
            halves = [h.strip() for h in s[1:-1].split(",")]
            w = _WIDTH[t] // len(halves)
            regs[d] = sum(_mask(val(h, f"b{w}"), w) << (w * i) for i, h in enumerate(halves))
        else:
            regs[d] = val(s) if t == "pred" else _mask(val(s), _WIDTH[t])
        return
    if name == "setp":
        cmp, tt = parts[1], parts[2]
        a, b = num(ops[1], tt), num(ops[2], tt)
        if cmp == "neu":
            r = a != b or np.isnan(a) or np.isnan(b)
        else:
            r = _CMP[cmp](a, b)
        regs[ops[0]] = bool(r)
        return
    if name == "selp":
        regs[ops[0]] = val(ops[1]) if regs[ops[3]] else val(ops[2])
        return
    if t == "pred":
        a = bool(val(ops[1]))
        r = {"and": lambda: a and bool(val(ops[2])), "or": lambda: a or bool(val(ops[2])),
             "xor": lambda: a != bool(val(ops[2])), "not": lambda: not a}[name]()
        regs[ops[0]] = r
        return
    if name in ("ld", "st"):
        _memory_op(name, parts, ops, regs, val, mem, shared, local)
        return
    if name == "atom" and parts[2] == "add" and t in ("s32", "u32"):  # atom.{global,shared}.add: one thread at a time
        a = val(ops[1].strip("[]"))
        data, off = mem.view(a) if parts[1] == "global" else (shared, a)
        if off % 4 or off < 0 or off + 4 > len(data):
            raise MemoryError(f"{parts[1]} atom at offset {off} of {len(data)} bytes")
        old = int.from_bytes(data[off:off + 4], "little")
        data[off:off + 4] = _mask(old + num(ops[2]), 32).to_bytes(4, "little")
        regs[ops[0]] = old
        return
    if op.startswith("cp.async.") and parts[3] == "shared":  # cp.async.{ca,cg}.shared.global: done at once
        size = int(ops[2])
        n = size if len(ops) < 4 else int(val(ops[3], "u32"))
        src, off = mem.view(val(ops[1].strip("[]")))
        dst = val(ops[0].strip("[]"))
        if off % size or dst % size:
            raise MemoryError(f"misaligned cp.async of {size} bytes")
        if n and off + n > len(src):
            raise MemoryError(f"cp.async reads past the global buffer: offset {off} + {n} of {len(src)} bytes")
        shared[dst:dst + size] = bytes(src[off:off + n]) + bytes(size - n)
        return
    if name == "mapa":  # mapa.shared::cluster.{u32,u64} d, a, rank: a's byte in CTA `rank`
        assert parts[1] == "shared::cluster", f"mapa of generic addresses not modelled: {op}"
        regs[ops[0]] = shared.mapa(val(ops[1]), val(ops[2]))
        return
    if name == "cvta":
        regs[ops[0]] = val(ops[1])
        return
    if name == "cvt":
        _convert(parts, ops, regs, num)
        return
    if name == "bfe":  # bfe.{u32,s32} d, a, pos, len: bits pos..pos+len-1, zero- or sign-extended
        field = (num(ops[1], "u" + parts[-1][1:]) >> val(ops[2])) & ((1 << val(ops[3])) - 1)
        if parts[-1].startswith("s") and field >> (val(ops[3]) - 1):
            field -= 1 << val(ops[3])
        put(ops[0], field)
        return
    if name == "prmt":  # prmt.b32 d, a, b, c: byte i of d is byte c[4i+2:4i] of {b, a} (bit 4i+3: its sign)
        pool = _mask(num(ops[1], "u32"), 32) | _mask(num(ops[2], "u32"), 32) << 32
        out = 0
        for i in range(4):
            sel = (val(ops[3]) >> 4 * i) & 0xF
            byte = (pool >> 8 * (sel & 7)) & 0xFF
            out |= (0xFF * (byte >> 7) if sel & 8 else byte) << 8 * i
        put(ops[0], out)
        return
    if name == "mad":  # mad.wide.s32 / mad.lo
        tt = parts[-1]
        r = num(ops[1], tt) * num(ops[2], tt) + num(ops[3], "s64" if parts[1] == "wide" else tt)
        put(ops[0], r, "s64" if parts[1] == "wide" else tt)
        return
    if name == "mul" and parts[1] == "hi":  # mul.hi: the high half of the double-width product
        put(ops[0], (num(ops[1]) * num(ops[2])) >> _WIDTH[t])
        return
    if name == "elect":
        regs[ops[0].split("|")[1]] = special["%laneid"] == 0
        return
    if name in _FLOAT_MATH:
        with np.errstate(all="ignore"):
            put(ops[0], _FLOAT_MATH[name](*(num(o) for o in ops[1:])))
        return
    if name == "copysign":  # copysign d, sign, magnitude
        put(ops[0], np.copysign(num(ops[2]), num(ops[1])))
        return
    if name == "testp":
        regs[ops[0]] = bool(np.isfinite(num(ops[1])))
        return
    a = num(ops[1])
    if name in ("neg", "not"):
        put(ops[0], -a if name == "neg" else ~a)
        return
    b = num(ops[2], "u32" if name in ("shl", "shr") else t)
    if t.startswith("f"):
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):  # IEEE results, as the GPU's
            if name == "div":
                r = np.float32(a) / np.float32(b) if t == "f32" else a / b
            else:
                r = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
                     "min": lambda: min(a, b), "max": lambda: max(a, b)}.get(name, lambda: None)()
        regs[ops[0]] = _from_float(np.float32(r) if t == "f32" else r, t)
        return
    bits = _WIDTH[t]
    if name == "div":
        r = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    elif name == "rem":
        r = abs(a) % abs(b) * (1 if a >= 0 else -1)
    elif name == "shr":
        r = (a if t.startswith("s") else _mask(a, bits)) >> b
    else:
        r = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "shl": lambda: a << b,
             "and": lambda: a & b, "or": lambda: a | b, "xor": lambda: a ^ b,
             "min": lambda: min(a, b), "max": lambda: max(a, b)}[name]()
    regs[ops[0]] = _mask(r, bits)


_FLOAT_MATH = {
    # approximate instructions are modelled as exact (correctly rounded to
    # the destination type), so a test of a composed formula checks the
    # formula; the GPU tests check the hardware's accuracy
    "ex2": np.exp2, "lg2": np.log2, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "rcp": lambda x: 1 / x, "tanh": np.tanh, "sin": np.sin, "cos": np.cos, "abs": abs,
    "fma": lambda a, b, c: a * b + c,
}


_INT_ROUNDING = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}


def _convert(parts, ops, regs, num):
    dst, src = parts[-2], parts[-1]
    rnd = parts[1] if len(parts) == 4 else "rn"
    if dst in ("f16x2", "bf16x2"):
        half = dst[:-2]
        hi, lo = num(ops[1], "f32"), num(ops[2], "f32")
        regs[ops[0]] = _from_float(hi, half, rnd) << 16 | _from_float(lo, half, rnd)
        return
    x = num(ops[1], src)
    if dst.startswith(("f", "bf")):
        if src.startswith(("f", "bf")) and rnd in _INT_ROUNDING:
            x = _INT_ROUNDING[rnd](x)
            rnd = "rn"
        regs[ops[0]] = _from_float(x, dst, rnd)
        return
    bits = _WIDTH[dst]
    if src.startswith(("f", "bf")):  # float to integer clamps to the destination's range [PTX cvt]
        x = _INT_ROUNDING[rnd](x)
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dst.startswith("s") else (0, (1 << bits) - 1)
        x = 0 if x != x else int(min(max(x, lo), hi))
    regs[ops[0]] = _mask(int(x), bits)


def _memory_op(name, parts, ops, regs, val, mem, shared, local):
    space = parts[1]
    vec = int(parts[2][1:]) if parts[2].startswith("v") else 1
    t = parts[-1]
    size = _WIDTH[t] // 8
    if name == "ld":
        dsts, addr = ops[0], ops[1]
    else:
        addr, dsts = ops[0], ops[1]
    names = [x.strip() for x in dsts.strip("{}").split(",")] if vec > 1 else [dsts]
    a = addr.strip("[]")
    if space == "param":
        v = mem.params[a]
        if t == "f32":
            regs[names[0]] = struct.unpack("<I", np.float32(v).tobytes())[0]
        elif t in ("f64", "f16", "bf16") or t == "b16":
            regs[names[0]] = _from_float(v, "f16" if t == "b16" else t)
        else:
            regs[names[0]] = _mask(int(v), 64)  # sign- or zero-extended into the register
        return
    base = val(a)
    if space == "global":
        data, off = mem.view(base)
    elif space == "shared::cluster":
        data, off = shared.window(base)
    else:
        data, off = (shared if space in ("shared", "shared::cta") else local), base
    if off % (size * vec):
        raise MemoryError(f"misaligned {space} access of {size * vec} bytes at offset {off}")
    for i, r in enumerate(names):
        o = off + i * size
        if o < 0 or o + size > len(data):
            raise MemoryError(f"{space} access out of bounds: offset {o} of {len(data)} bytes")
        if name == "ld":
            v = int.from_bytes(data[o:o + size], "little")
            if t.startswith("s"):
                v = _signed(v, size * 8)
            regs[r] = _mask(v, 64)
        else:
            data[o:o + size] = _mask(val(r, t), size * 8).to_bytes(size, "little")
