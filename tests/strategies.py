"""Hypothesis strategies for random, syntactically well-formed tilec IR.

Every value drawn here has a canonical text: `parse(print_module(m)) == m`.
The programs mean nothing (names are unbound, types do not agree); they
exercise the grammar, the printer and anything else that must accept every
shape of tree.  Spans are left out, as equality ignores them.

Entry points: `names`, `exprs()`, `layouts(exprs)`, `stmts()`, `kernels()`,
`modules()`.
"""
from __future__ import annotations

import string

import re

from hypothesis import strategies as st

from tilec.compiler import ir
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.targets import TARGETS
from tilec.compiler.lexicon import NAMESPACES, RESERVED

BINARY_OPS = ("+", "-", "*", "/", "//", "%", "<<", ">>", "&", "|", "^",
              "and", "or", "==", "!=", "<", "<=", ">", ">=")
AUG_OPS = ("+", "-", "*", "/", "//", "%", "<<", ">>", "&", "|", "^")
UNARY_OPS = ("-", "not", "~")

_FIRST = string.ascii_letters + "_"
names = st.builds(
    lambda head, tail: head + tail, st.sampled_from(_FIRST), st.text(_FIRST + string.digits, max_size=5)
).filter(lambda s: s not in RESERVED and s != "S")
"""Identifiers that are not reserved words (nor S: `S[...]` is always a
layout literal, so a name S would not survive being indexed)."""

dtype_names = st.sampled_from(sorted(DTYPES))

ints = st.builds(ir.Int, st.integers(-(2**40), 2**40))
floats = st.builds(ir.Float, st.floats(allow_nan=False, allow_infinity=False))
strs = st.builds(ir.Str, st.text(alphabet='ab :_"\\\n\t#', max_size=8))
leaves = st.one_of(
    ints,
    floats,
    st.builds(ir.Bool, st.booleans()),
    strs,
    st.builds(ir.Name, names),
    st.builds(ir.DTypeLit, dtype_names),
)


def _tuples(s, min_size=0, max_size=3):
    return st.lists(s, min_size=min_size, max_size=max_size).map(tuple)


func_names = st.one_of(
    names,
    dtype_names,
    st.builds(lambda root, path: ".".join([root, *path]),
              st.sampled_from(sorted(NAMESPACES)), st.lists(names, min_size=1, max_size=3)),
)


def keywords(values):
    return st.one_of(st.builds(ir.Keyword, names, values), st.builds(ir.Keyword, st.none(), values))


def layouts(values):
    """Layout literals: a shard group (shape-only or strided), optional
    replica and offset groups and an optional swizzle."""
    axes = st.one_of(st.none(), names)

    def group(min_size):
        strided = _tuples(st.builds(ir.LayoutIter, values, values, axes), min_size, 2)
        shape_only = _tuples(st.builds(ir.LayoutIter, values), min_size, 2)
        return st.one_of(strided, shape_only)

    offsets = _tuples(st.builds(ir.LayoutIter, st.just(ir.Int(1)), values, axes), 0, 1)
    swizzles = st.one_of(st.none(), st.tuples(values, values, values))
    return st.builds(ir.LayoutLit, group(1), group(0), offsets, swizzles)


def _extend(sub):
    index_items = st.one_of(sub, st.builds(ir.Slice, st.none() | sub, st.none() | sub))
    return st.one_of(
        st.builds(ir.Unary, st.sampled_from(UNARY_OPS), sub),
        st.builds(ir.Binary, st.sampled_from(BINARY_OPS), sub, sub),
        st.builds(ir.Select, sub, sub, sub),
        st.builds(ir.Call, func_names, _tuples(sub), _tuples(keywords(sub), 0, 2)),
        st.builds(ir.Method, sub, names, _tuples(sub), _tuples(keywords(sub), 0, 2)),
        st.builds(ir.Attr, sub, names),
        st.builds(ir.Index, sub, _tuples(index_items, 1, 3)),
        st.builds(ir.TupleExpr, _tuples(sub)),
        st.builds(ir.ListExpr, _tuples(sub)),
        st.lists(st.tuples(st.text(alphabet="ab_:", max_size=4), sub), max_size=3).map(
            lambda kv: ir.DictExpr(tuple(k for k, _ in kv), tuple(v for _, v in kv))
        ),
        layouts(sub),
    )


def exprs(max_leaves: int = 12):
    """Any expression, layout literals included."""
    return st.recursive(leaves, _extend, max_leaves=max_leaves)


def _simple_stmts(e):
    name_targets = st.builds(ir.Name, names)
    targets = st.one_of(name_targets, st.builds(ir.Index, e, _tuples(e, 1, 2)))
    return st.one_of(
        st.builds(ir.Assign, _tuples(targets, 1, 3), e),
        st.builds(ir.Assign, st.tuples(name_targets), e, dtype_names),
        st.builds(ir.AugAssign, targets, st.sampled_from(AUG_OPS), e),
        st.builds(ir.Meta, names, e),
        st.builds(ir.ExprStmt, e),
        st.builds(ir.Pass),
        st.builds(ir.TensorMap, names,
                  st.builds(ir.Call, st.just("tensormap"), _tuples(e), _tuples(keywords(e), 0, 2))),
    )


def _compound(e):
    def extend(stmt):
        body = _tuples(stmt, 1, 3)
        return st.one_of(
            st.builds(ir.For, names, st.sampled_from(["range", "unroll"]),
                      st.just(ir.Int(0)) | e, e, st.just(ir.Int(1)) | e, body),
            st.builds(ir.If, e, body, st.just(()) | body),
            st.builds(ir.While, e, body),
            st.builds(ir.InlineDef, names, _tuples(names), body),
        )
    return extend


def stmts(max_leaves: int = 8, expr_leaves: int = 6):
    """Any statement, compound statements with non-empty bodies."""
    e = exprs(expr_leaves)
    return st.recursive(_simple_stmts(e), _compound(e), max_leaves=max_leaves)


def _bodies():
    return _tuples(stmts(6), 1, 3)


def params():
    e = exprs(4)
    return st.one_of(
        st.builds(ir.Param, names, dtype_names),
        st.builds(ir.Param, names, dtype_names, _tuples(e, 1, 3), st.none() | e | layouts(e)),
    )


def kernels():
    return st.builds(ir.Kernel, names, _tuples(params(), 0, 3), _bodies())


def helpers():
    return st.builds(ir.InlineDef, names, _tuples(names), _bodies())


def modules():
    return st.builds(
        ir.Module,
        st.none() | st.sampled_from(sorted(TARGETS)),
        _tuples(st.builds(ir.Const, names, exprs(8)), 0, 3),
        _tuples(helpers(), 0, 2),
        _tuples(kernels(), 0, 2),
    )


# --------------------------------------------------------------------------
# Fuzzing inputs: mutated programs and well-typed kernels, as .tile text
# --------------------------------------------------------------------------
#
# tests/test_fuzz.py and tools/fuzz.py make the same inputs from the same
# code.  Every choice goes through a `Chooser`: under hypothesis it is a draw
# (so a failing input shrinks), in the standalone fuzzer a seeded
# `random.Random` (so ten thousand inputs cost little beyond compiling them).


class Chooser:
    """The one source of choices of the input makers below."""

    def below(self, n: int) -> int:
        """An integer in [0, n)."""
        raise NotImplementedError

    def pick(self, items):
        items = list(items)
        return items[self.below(len(items))]

    def chance(self, one_in: int) -> bool:
        return self.below(one_in) == 0


class RandomChooser(Chooser):
    def __init__(self, rnd):
        self.rnd = rnd

    def below(self, n: int) -> int:
        return self.rnd.randrange(n)


class DrawChooser(Chooser):
    def __init__(self, draw):
        self.draw = draw

    def below(self, n: int) -> int:
        return self.draw(st.integers(0, n - 1))


_TOKEN = re.compile(
    r"""(?P<comment>\#[^\n]*)
      | (?P<string>"(?:[^"\\\n]|\\.)*")
      | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+)
      | (?P<name>[A-Za-z_]\w*)
      | (?P<op>\*\*|//=?|<<=?|>>=?|[-+*/%&|^<>=!]=|[-+*/%&|^<>=~@])
      | (?P<punct>[.,:;()\[\]{}])""",
    re.X,
)


def tokens(text: str) -> list:
    """(start, end, kind, text) of every token but comments, in order."""
    return [
        (m.start(), m.end(), m.lastgroup, m.group())
        for m in _TOKEN.finditer(text)
        if m.lastgroup != "comment"
    ]


INTERESTING_INTS = (0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 33, 48, 63, 64, 96, 127, 128, 129, 255,
                    256, 512, 1000, 1024, 2048, 4096, 65535, 65536, 2**31 - 1, 2**31, 2**32,
                    2**63, 2**64, 10**30)
LAYOUT_AXES = ("m", "laneid", "wid_in_wg", "tid_in_wg", "wgid", "warpid", "tx", "TLane", "TCol",
               "bx", "cbx", "lane")
FUZZ_STRINGS = ("shared", "shared.dyn", "local", "tmem", "global", "", "tma", "tcgen05", "wgmma",
                "mma", "ldmatrix", "stmatrix", "cp_async", "vector", "shared::cta",
                "shared::cluster", "inc", "dec", "128B", "none", "zero", "x")
TILE_OPS = ("copy", "copy_async", "gemm", "gemm_async", "cast", "fill")
_SMALL = (1, 2, 3, 4, 8, 16, 32, 64, 128, 256)
_STRIDES = (0, 1, 2, 4, 8, 16, 32, 64, 128, 512, 1024)
_OPERATORS = ("+", "-", "*", "/", "//", "%", "<<", ">>", "&", "|", "^", "==", "!=", "<", "<=",
              ">", ">=", "=", "@", "**", "+=", "^=", "and", "or", "not")


def _iters_text(c: Chooser, head: str, n: int) -> str:
    extents = [c.pick(_SMALL) for _ in range(n)]
    strides = []
    for _ in range(n):
        s = str(c.pick(_STRIDES))
        if c.chance(3):
            s += "@" + c.pick(LAYOUT_AXES)
        strides.append(s)
    if n == 1:
        return f"{head}[{extents[0]} : {strides[0]}]"
    return f"{head}[({', '.join(map(str, extents))}) : ({', '.join(strides)})]"


def layout_text(c: Chooser) -> str:
    """A random layout: a literal (shape-only, strided, swizzled, with
    replicas and offsets) or a layout constructor call."""
    kind = c.below(5)
    if kind == 0:
        text = "S[" + ", ".join(str(c.pick(_SMALL)) for _ in range(1 + c.below(3))) + "]"
    elif kind == 3:
        shape = ", ".join(str(c.pick(_SMALL)) for _ in range(1 + c.below(3)))
        return f"mma_shared_layout({c.pick(sorted(DTYPES))}, {c.below(5)}, ({shape},))"
    elif kind == 4:
        inner = _iters_text(c, "S", 1 + c.below(3))
        return f"tile_to({inner}, ({c.pick(_SMALL)}, {c.pick(_SMALL)}), ({c.pick(_SMALL)}, {c.pick(_SMALL)}))"
    else:
        text = _iters_text(c, "S", 1 + c.below(4))
    if kind == 2 or c.chance(4):
        text = f"SW[{c.below(5)}, {c.below(5)}, {c.below(5)}] * {text}"
    if c.chance(4):
        text += " + " + _iters_text(c, "R", 1)
    if c.chance(4):
        text += f" + O[{c.pick(_STRIDES)}@{c.pick(LAYOUT_AXES)}]"
    return text


def _matching(toks: list, i: int) -> int:
    """The index of the bracket closing the one opened at toks[i] (or the last token)."""
    depth = 0
    for j in range(i, len(toks)):
        if toks[j][3] in "([{":
            depth += 1
        elif toks[j][3] in ")]}":
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def _splice(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


INTERESTING_FLOATS = ("0.0", "-0.0", "0.5", "1e-320", "3.4e38", "3.5e38", "65504.0", "65520.0",
                      "1e308", "1e999", "0x10")


def _number(c: Chooser, old: str) -> str:
    try:
        value = int(old, 0)
    except ValueError:  # a float
        return str(c.pick(INTERESTING_FLOATS + INTERESTING_INTS[:8]))
    near = (value + 1, value - 1, value * 2, value // 2, -value, value * 1000)
    return str(c.pick(INTERESTING_INTS + near if c.chance(2) else near))


_MUTATION_WEIGHTS = (0, 1, 2, 3, 3, 3, 4, 4, 5, 5, 5, 6, 6, 7, 7, 8, 9, 10)
"""Mutation kinds of `_mutate_once`, repeated by weight: the edits that keep
the syntax (numbers, dtypes, layouts, scopes, names) reach further into the
compiler than those that break it, so they come up more often."""


def _mutate_once(text: str, c: Chooser) -> str:
    toks = tokens(text)
    if not toks:
        return text + "\n" + layout_text(c)
    kind = c.pick(_MUTATION_WEIGHTS)

    def of(*kinds):
        return [t for t in toks if t[2] in kinds]

    if kind == 0:  # delete a token
        s, e, _, _ = c.pick(toks)
        return _splice(text, s, e, "")
    if kind == 1:  # duplicate a token
        s, e, _, t = c.pick(toks)
        return _splice(text, e, e, " " + t)
    if kind == 2:  # swap two nearby tokens
        i = c.below(len(toks))
        j = min(len(toks) - 1, i + 1 + c.below(4))
        (s1, e1, _, t1), (s2, e2, _, t2) = toks[i], toks[j]
        return text[:s1] + t2 + text[e1:s2] + t1 + text[e2:]
    if kind == 3 and of("number"):  # change a number
        s, e, _, t = c.pick(of("number"))
        return _splice(text, s, e, _number(c, t))
    if kind == 4:  # change a dtype
        dts = [t for t in of("name") if t[3] in DTYPES]
        if dts:
            s, e, _, _ = c.pick(dts)
            return _splice(text, s, e, c.pick(sorted(DTYPES)))
    if kind == 5:  # change a layout
        heads = [i for i, t in enumerate(toks[:-1]) if t[3] in ("S", "SW", "R", "O") and toks[i + 1][3] == "["]
        axes = [toks[i + 1] for i, t in enumerate(toks[:-1]) if t[3] == "@"]
        if axes and c.chance(3):
            s, e, _, _ = c.pick(axes)
            return _splice(text, s, e, c.pick(LAYOUT_AXES))
        if heads:
            i = c.pick(heads)
            j = _matching(toks, i + 1)
            return _splice(text, toks[i][0], toks[j][1], layout_text(c))
        calls = [i for i, t in enumerate(toks[:-1])
                 if t[3] in ("alloc", "alloc_shared", "alloc_local", "decl_buffer", "view") and toks[i + 1][3] == "("]
        if calls:
            j = _matching(toks, c.pick(calls) + 1)
            return _splice(text, toks[j][0], toks[j][0], ", layout=" + layout_text(c))
    if kind == 6:  # change a scope: a string argument or a scope prefix
        strings = of("string")
        if strings and c.chance(2):
            s, e, _, _ = c.pick(strings)
            return _splice(text, s, e, '"' + c.pick(FUZZ_STRINGS) + '"')
        ops = [t for i, t in enumerate(toks) if t[3] in TILE_OPS and (i == 0 or toks[i - 1][3] != ".")]
        prefixes = [t for t in of("name") if t[3] in NAMESPACES]
        if ops and (not prefixes or c.chance(2)):
            s, _, _, _ = c.pick(ops)
            return _splice(text, s, s, c.pick(("cta", "wg", "warp", "thread")) + ".")
        if prefixes:
            s, e, _, _ = c.pick(prefixes)
            return _splice(text, s, e, c.pick(sorted(NAMESPACES)))
    if kind == 7:  # one name for another
        found = [t for t in of("name") if t[3] not in RESERVED]
        if found:
            s, e, _, _ = c.pick(found)
            return _splice(text, s, e, c.pick(found)[3])
    if kind == 8:  # another operator
        found = of("op")
        if found:
            s, e, _, _ = c.pick(found)
            return _splice(text, s, e, " " + c.pick(_OPERATORS) + " ")
    if kind == 9:  # delete, duplicate or re-indent a line
        lines = text.split("\n")
        i = c.below(len(lines))
        how = c.below(3)
        if how == 0:
            del lines[i]
        elif how == 1:
            lines.insert(i, lines[i])
        else:
            lines[i] = "    " + lines[i] if c.chance(2) else lines[i][4:]
        return "\n".join(lines)
    copied = c.pick(toks)[3]  # a token's text anywhere else
    where = c.pick(toks)[0]
    return _splice(text, where, where, copied + " ")


def mutate(text: str, c: Chooser, max_mutations: int = 3) -> str:
    """`text` after one to `max_mutations` random edits: a token deleted,
    duplicated or swapped, a number, dtype, layout, scope, name or operator
    changed, a line dropped, repeated or re-indented."""
    for _ in range(1 + c.below(max_mutations)):
        text = _mutate_once(text, c)
    return text


def mutated_programs(texts):
    """Programs from `texts` (a list of .tile sources) after a few mutations."""

    @st.composite
    def make(draw):
        c = DrawChooser(draw)
        return mutate(c.pick(texts), c)

    return make()


# Well-typed kernels.  `typed_program` writes a kernel that the verifier
# should accept: launch ids, global, shared, local and pool buffers, typed
# scalars, arithmetic that respects the type rules, element loads and
# stores, loops, conditions, barriers and tile primitives on regions of
# matching shape, so the fuzz inputs reach dispatch and emission.

_SCALAR_DTYPES = ("f32", "f16", "i32", "u32", "u8", "i8", "bf16", "i16")
_SHAPES = ((64, 64), (128, 64), (16, 16), (8, 256), (32, 8), (256,), (128,), (16,))
_VALUE_TYPE = {"f32": "f32", "f16": "f16", "bf16": "bf16", "i32": "i32", "u32": "u32",
               "u8": "u32", "i8": "i32", "i16": "i32"}
_INT_OPS = ("+", "-", "*", "//", "%", "&", "|", "^", "<<", ">>")
_FLOAT_OPS = ("+", "-", "*", "/")
_COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")
_ATOM_BYTES = {0: 16, 1: 32, 2: 64, 3: 128}


class _KernelWriter:
    def __init__(self, c: Chooser, target: str):
        self.c, self.target = c, target
        self.lines = []
        self.depth = 1
        self.count = 0
        self.scopes = [{}]  # name -> value type, per block
        self.mutable = [set()]
        self.buffers = []  # (name, dtype, shape, scope)
        self.bar = None
        self.thread_ids = []

    # -- names and blocks -----------------------------------------------

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def bind(self, name: str, t: str, mutable: bool = False) -> None:
        self.scopes[-1][name] = t
        if mutable:
            self.mutable[-1].add(name)

    def vars_of(self, t: str, mutable: bool = False) -> list:
        out = []
        for scope, muts in zip(self.scopes, self.mutable):
            out += [n for n, vt in scope.items() if vt == t and (not mutable or n in muts)]
        return out

    def block(self, make_body) -> None:
        self.depth += 1
        self.scopes.append({})
        self.mutable.append(set())
        start = len(self.lines)
        make_body()
        if len(self.lines) == start:
            self.emit("pass")
        self.scopes.pop()
        self.mutable.pop()
        self.depth -= 1

    def at_least(self, sm: int) -> bool:
        return int(self.target[3:].rstrip("a")) >= sm

    # -- expressions ----------------------------------------------------

    def readable(self, t: str) -> list:
        return [b for b in self.buffers if b[3] != "tmem" and _VALUE_TYPE.get(b[1]) == t]

    def index(self, extent: int, depth: int) -> str:
        loops = [n for n in self.vars_of("i32") if n.startswith("it")]
        k = self.c.below(4)
        if k == 0 and loops:
            return f"{self.c.pick(loops)} % {extent}"
        if k == 1 and depth > 0:
            return f"({self.expr('i32', depth - 1)}) % {extent}"
        return str(self.c.below(extent))

    def element(self, buf, depth: int) -> str:
        name, _, shape, _ = buf
        return f"{name}[{', '.join(self.index(e, depth) for e in shape)}]"

    def expr(self, t: str, depth: int = 2) -> str:
        c = self.c
        leaves = []
        if t in ("i32", "u32"):
            leaves.append(str(c.pick((0, 1, 2, 3, 7, 8, 31, 32, 100, 4095))))
        if t == "f32":
            leaves.append(c.pick(("0.0", "1.0", "0.5", "-2.25", "1e3")))
        if t == "bool":
            leaves.append(c.pick(("True", "False")))
        leaves += self.vars_of(t)
        bufs = self.readable(t)
        if depth <= 0 or c.chance(3):
            if bufs and c.chance(3):
                return self.element(c.pick(bufs), 0)
            if not leaves:
                return self.expr(t, 1) if depth > 0 else f"convert(0, {t})"
            return c.pick(leaves)
        d = depth - 1
        k = c.below(6)
        if t == "bool":
            if k < 3:
                u = c.pick(("i32", "f32", "u32"))
                return f"{self.expr(u, d)} {c.pick(_COMPARE_OPS)} {self.expr(u, d)}"
            if k == 3:
                return f"not ({self.expr('bool', d)})"
            if k == 4 and self.at_least(90) and c.chance(3):
                return "ptx.elect_sync()"
            return f"({self.expr('bool', d)}) {c.pick(('and', 'or'))} ({self.expr('bool', d)})"
        if k == 0 and bufs:
            return self.element(c.pick(bufs), d)
        if k == 1:
            return f"({self.expr(t, d)} if {self.expr('bool', d)} else {self.expr(t, d)})"
        if k == 2:
            src = c.pick(("i32", "f32", "u32"))
            return f"convert({self.expr(src, d)}, {t})"
        if k == 3 and t in ("i32", "u32", "f32"):
            return f"{c.pick(('min', 'max'))}({self.expr(t, d)}, {self.expr(t, d)})"
        if t in ("i32", "u32"):
            return f"({self.expr(t, d)} {c.pick(_INT_OPS)} {self.expr(t, d)})"
        if t in ("f32",):
            return f"({self.expr(t, d)} {c.pick(_FLOAT_OPS)} {self.expr(t, d)})"
        return f"convert({self.expr('f32', d)}, {t})"

    # -- declarations ---------------------------------------------------

    def params(self) -> str:
        out = []
        for _ in range(1 + self.c.below(3)):
            name, dtype, shape = self.fresh("G"), self.c.pick(_SCALAR_DTYPES), self.c.pick(_SHAPES)
            text = f"{name}: {dtype}[{', '.join(map(str, shape))}]"
            if self.c.chance(4):
                text += f" layout S[{', '.join(map(str, shape))}]"
            out.append(text)
            self.buffers.append((name, dtype, shape, "global"))
        for t in ("i32", "f32", "u32"):
            if self.c.chance(3):
                name = self.fresh("n")
                out.append(f"{name}: {t}")
                self.bind(name, t)
        return ", ".join(out)

    def launch(self) -> None:
        c = self.c
        if c.chance(3):
            self.emit(f"bx, by = cta_id([{c.pick((1, 2, 8))}, {c.pick((1, 4))}])")
            self.bind("bx", "i32")
            self.bind("by", "i32")
        else:
            self.emit(f"bx = cta_id([{c.pick((1, 4, 32, 148))}])")
            self.bind("bx", "i32")
        k = c.below(4)
        if k == 0:
            self.emit(f"tx = thread_id([{c.pick((32, 64, 128, 256))}])")
            self.thread_ids = ["tx"]
        elif k == 1:
            self.emit(f"wid = warp_id([{c.pick((1, 2, 4))}])")
            self.emit("lane = lane_id([32])")
            self.thread_ids = ["wid", "lane"]
        elif k == 2:
            self.emit(f"wgid = warpgroup_id([{c.pick((1, 2))}])")
            self.emit("wid = warp_id_in_wg([4])")
            self.emit("lane = lane_id([32])")
            self.thread_ids = ["wgid", "wid", "lane"]
        else:
            self.emit("lane = lane_id([32])")
            self.thread_ids = ["lane"]
        for n in self.thread_ids:
            self.bind(n, "i32")

    def shared_layout(self, dtype: str, shape) -> str:
        bits = {"f32": 32, "i32": 32, "u32": 32, "f16": 16, "bf16": 16, "i16": 16}.get(dtype, 8)
        modes = [m for m in range(4) if len(shape) == 2 and shape[1] * bits % (_ATOM_BYTES[m] * 8) == 0
                 and (m == 0 or shape[0] % 8 == 0)]
        k = self.c.below(3)
        if k == 0 and modes:
            return f", layout=mma_shared_layout({dtype}, {self.c.pick(modes)}, ({shape[0]}, {shape[1]}))"
        if k == 1:
            return f", layout=S[{', '.join(map(str, shape))}]"
        return ""

    def allocs(self) -> None:
        c = self.c
        for _ in range(c.below(4)):
            dtype, shape = c.pick(_SCALAR_DTYPES), c.pick(_SHAPES)
            k = c.below(5)
            dims = ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "")
            if k <= 1:
                name = self.fresh("s")
                align = c.pick(("", ", align=128", ", align=1024"))
                self.emit(f'{name} = alloc(({dims}), {dtype}, scope="shared"{self.shared_layout(dtype, shape)}{align})')
                self.buffers.append((name, dtype, shape, "shared"))
            elif k == 2:
                name, n = self.fresh("r"), c.pick((1, 2, 4, 8, 16))
                self.emit(f"{name} = alloc_local(({n},), {dtype})")
                self.buffers.append((name, dtype, (n,), "local"))
            elif k == 3:
                pool = self.fresh("pool")
                self.emit(f"{pool} = smem_pool()")
                for _ in range(1 + c.below(2)):
                    name = self.fresh("p")
                    self.emit(f"{name} = {pool}.alloc(({dims}), {dtype}{self.shared_layout(dtype, shape)})")
                    self.buffers.append((name, dtype, shape, "shared.dyn"))
                self.emit(f"{pool}.commit()")
            else:
                arena, name = self.fresh("dyn"), self.fresh("d")
                nbytes = 4
                for e in shape:
                    nbytes *= e
                self.emit(f'{arena} = alloc([{nbytes}], u8, scope="shared.dyn")')
                self.emit(f"{name} = decl_buffer(({dims}), {dtype}, data={arena}, elem_offset=0)")
                self.buffers.append((name, dtype, shape, "shared.dyn"))
        if c.chance(2):
            self.bar = self.fresh("bar")
            self.emit(f"{self.bar} = alloc_shared([1], u64)")

    # -- statements -----------------------------------------------------

    def region(self, buf, extents) -> str:
        """`buf` indexed by a region with these trailing extents."""
        name, _, shape, _ = buf
        lead = len(shape) - len(extents)
        parts = [str(self.c.below(e)) for e in shape[:lead]]
        for e, size in zip(extents, shape[lead:]):
            start = self.c.below(size // e) * e
            parts.append(":" if e == size and self.c.chance(4) else f"{start}:{start + e}")
        return f"{name}[{', '.join(parts)}]"

    def tile_op(self) -> None:
        c = self.c
        bufs = [b for b in self.buffers if b[3] != "tmem"]
        if not bufs:
            return
        dst = c.pick(bufs)
        prefix = c.pick(("", "", "", "cta.", "warp.", "thread.", "wg."))
        if c.chance(4):
            value = self.expr(_VALUE_TYPE[dst[1]], 1) if dst[1] in _VALUE_TYPE else "0"
            self.emit(f"{prefix}fill({self.region(dst, dst[2][-1:])}, {value})")
            return
        src = c.pick(bufs)
        extents = tuple(min(a, b) for a, b in zip(dst[2][::-1], src[2][::-1]))[::-1]
        extents = extents[-c.pick((1, 2)):] if extents else ()
        if not extents:
            return
        op = "copy" if dst[1] == src[1] else "cast"
        extra = ""
        tma = self.bar and self.at_least(90) and src[3] == "global" and dst[3].startswith("shared")
        if op == "copy" and tma and c.chance(2):
            op, extra = "copy_async", f', dispatch="tma", mbar={self.bar}.ptr_to([0])'
        self.emit(f"{prefix}{op}({self.region(dst, extents)}, {self.region(src, extents)}{extra})")

    def intrinsic(self) -> None:
        c = self.c
        options = ["cuda.cta_sync()", "cuda.warp_sync()", f"cuda.warpgroup_sync({c.pick((1, 10, 15))})"]
        if self.at_least(90):
            options += ['ptx.fence.proxy_async("shared::cta")', "ptx.fence.mbarrier_init()",
                        "ptx.cp_async.bulk.commit_group()", "ptx.cp_async.bulk.wait_group(0)"]
        if self.bar:
            addr = f"{self.bar}.ptr_to([0])"
            options += [f"ptx.mbarrier.init({addr}, {c.pick((1, 32, 128))})", f"ptx.mbarrier.arrive({addr})"]
            if self.at_least(90):
                options += [f"ptx.mbarrier.try_wait({addr}, {self.expr('i32', 0)})",
                            f"ptx.mbarrier.arrive.expect_tx({addr}, {c.pick((0, 1024, 16384))})"]
        self.emit(c.pick(options))

    def stmt(self, depth: int) -> None:
        c = self.c
        k = c.below(12 if depth > 0 else 7)
        if k == 0:
            t = c.pick(("i32", "u32", "f32"))
            name = self.fresh("v")
            self.emit(f"{name}: {t} = {self.expr(t)}")
            self.bind(name, t, mutable=True)
        elif k == 1:
            t = c.pick(("i32", "u32", "f32", "f16", "bool"))
            name = self.fresh("x")
            self.emit(f"{name} = {self.expr(t)}")
            self.bind(name, t)
        elif k == 2:
            t = c.pick(("i32", "u32", "f32"))
            targets = self.vars_of(t, mutable=True)
            if targets:
                op = c.pick(_INT_OPS if t != "f32" else _FLOAT_OPS)
                self.emit(f"{c.pick(targets)} {op}= {self.expr(t, 1)}")
        elif k == 3:
            bufs = [b for b in self.buffers if b[1] in _VALUE_TYPE]
            if bufs:
                buf = c.pick(bufs)
                self.emit(f"{self.element(buf, 1)} = {self.expr(_VALUE_TYPE[buf[1]])}")
        elif k == 4:
            self.intrinsic()
        elif k in (5, 6):
            self.tile_op()
        elif k == 7:
            var = self.fresh("it")
            if c.chance(2):
                self.emit(f"for {var} in unroll({c.pick((1, 2, 4))}):")
            else:
                bounds = c.pick(("4", "0, 8", "1, 16, 3", f"{self.c.pick(self.thread_ids)}, 64, 32"))
                self.emit(f"for {var} in range({bounds}):")

            def body():
                self.bind(var, "i32")
                self.stmts(depth - 1)

            self.block(body)
        elif k in (8, 9):
            guard = f"{c.pick(self.thread_ids)} == 0" if c.chance(2) else self.expr("bool", 1)
            self.emit(f"if {guard}:")
            self.block(lambda: self.stmts(depth - 1))
            if c.chance(3):
                self.emit(f"elif {self.expr('bool', 1)}:")
                self.block(lambda: self.stmts(depth - 1))
            if c.chance(2):
                self.emit("else:")
                self.block(lambda: self.stmts(depth - 1))
        elif k == 10:
            counter = self.fresh("w")
            self.emit(f"{counter}: i32 = 0")
            self.bind(counter, "i32", mutable=True)
            self.emit(f"while {counter} < {c.pick((1, 3, 100))}:")

            def body():
                self.stmts(depth - 1)
                self.emit(f"{counter} += 1")

            self.block(body)
        else:
            var = self.fresh("m")
            self.emit(f"meta {var} = {self.expr('i32', 1)}")
            self.bind(var, "i32")

    def stmts(self, depth: int) -> None:
        for _ in range(1 + self.c.below(4)):
            self.stmt(depth)


def typed_program(c: Chooser) -> str:
    """A random kernel that follows the language's type and declaration rules."""
    target = c.pick(sorted(TARGETS))
    w = _KernelWriter(c, target)
    header = f"target {target}\n\n" if c.below(4) else ""
    params = w.params()
    w.launch()
    w.allocs()
    w.stmts(2)
    return header + f"kernel fuzzed({params}):\n" + "\n".join(w.lines) + "\n"


def typed_programs():
    """Hypothesis strategy of `typed_program` texts."""

    @st.composite
    def make(draw):
        return typed_program(DrawChooser(draw))

    return make()


# Inputs at the edges: deep nesting, other encodings and line terminators,
# intrinsic operands at the ends of their PTX ranges, sizes at type limits.
# Each class once ended in an internal error, a hang or PTX that ptxas
# rejected (tests/bad_inputs.py holds the first of each).

_EDGE_DEPTHS = (50, 98, 99, 100, 101, 150, 300, 500)
_EDGE_INTS = (0, 1, 2, 3, 7, 8, 15, 16, 255, 256, 65535, 65536, 2**20 - 1, 2**20, 2**31 - 1, 2**31,
              2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1)
_EDGE_SMEM = (48 * 1024, 48 * 1024 + 1, 163 * 1024, 163 * 1024 + 1, 227 * 1024, 227 * 1024 + 1, 2**31, 2**64 - 1)
_TERMINATORS = ("\r\n", "\r", "\x0c", "\x0b", "\x1c", "\x85", "\u2028", "\u2029", "\t", "\x00")


def _deep(c: Chooser, n: int) -> str:
    k = c.below(5)
    if k == 0:
        return "    A[0] = " + "(" * n + "1.0" + ")" * n + "\n"
    if k == 1:
        return "    x: i32 = " + " + ".join(["n"] * n) + "\n"
    if k == 2:
        return "    x = " + "[" * n + "1" + "]" * n + "\n"
    if k == 3:
        return "".join("    " * (i + 1) + "if tx == 0:\n" for i in range(n)) + "    " * (n + 1) + "A[0] = 1.0\n"
    return "    meta m0 = n\n" + "".join(f"    meta m{i + 1} = m{i} * 3 + tx\n" for i in range(n))


def _edge_statement(c: Chooser) -> str:
    v = c.pick(_EDGE_INTS)
    bar = "bar.ptr_to([0])"
    options = (
        f"ptx.mbarrier.try_wait({bar}, {v})",
        f"ptx.mbarrier.init({bar}, {v})",
        f"ptx.mbarrier.arrive.expect_tx({bar}, {v})",
        f"ptx.cp_async.bulk.wait_group({v})",
        f"ptx.wgmma.wait_group({v})",
        f"cuda.warpgroup_sync({v})",
        f"ptx.setmaxnreg({v}, \"inc\")",
        f"ptx.mbarrier.init(bar.ptr_to({c.pick(('', '[]', '[0, 0]', str(v)))}), 1)",
        f"x{c.below(9)}: i32 = n {c.pick(('+', '*', '<<', '>>', '//', '%', '&'))} {v}",
        f"A[{c.pick((v, -v, f'n + {v}'))}] = 1.0",
        f's{c.below(9)} = alloc(({c.pick(_EDGE_SMEM)},), u8, scope="{c.pick(("shared", "shared.dyn"))}")',
        f"s{c.below(9)} = alloc_shared([{v}], {c.pick(('u8', 'u64', 'f32'))})",
        f"r{c.below(9)} = alloc_local(({c.pick((1, 4096, v))},), f32)",
        f"for u in unroll({c.pick((0, 1, 1024, 1025, v))}):\n        A[0] = 1.0",
        f"fill(A[0:{c.pick((1, 16, 1024, 4096))}], 0.0)",
    )
    return "    " + c.pick(options) + "\n"


def edge_program(c: Chooser):
    """A small kernel with one or more edge cases; `bytes` when the edge is
    the encoding."""
    target = c.pick(sorted(TARGETS))
    text = (f"target {target}\nkernel k(A: f32[4096], n: i32):\n    tx = thread_id([32])\n"
            "    bar = alloc_shared([1], u64)\n    # a comment\n")
    for _ in range(1 + c.below(3)):
        text += _deep(c, c.pick(_EDGE_DEPTHS)) if c.chance(4) else _edge_statement(c)
    if c.chance(3):  # another line terminator, in a comment or anywhere
        cut = c.below(len(text))
        text = text[:cut] + c.pick(_TERMINATORS) + text[cut:]
    if c.chance(5):
        text = text.rstrip("\n") + c.pick(("\n    if True:", "\n    for i in range(4):", "\n    else:"))
    if c.chance(6):
        data = text.encode(c.pick(("utf-8", "utf-16", "utf-8-sig", "latin-1")), errors="replace")
        cut = c.below(len(data))
        return data[:cut] + bytes([c.pick((0x80, 0xC3, 0xE9, 0xFF))]) + data[cut:]
    return text


def edge_programs():
    """Hypothesis strategy of `edge_program` inputs."""

    @st.composite
    def make(draw):
        return edge_program(DrawChooser(draw))

    return make()
