"""`.tile` text to IR: `parse(text, filename) -> ir.Module`.

`tilec.grammar.lalr` parses `tile.lark` (LALR, contextual lexer) from the
tables in `tables.py`; `_Indentation` turns line starts into INDENT/DEDENT
tokens; `_Builder` turns each node into `ir` nodes, with its source span, as
the parser reduces it.  A text is first read by `tilec.grammar.descent`
(recursive descent, the same builder, a fraction of the driver's cost);
where that refuses it (a syntax error, most often), the LALR driver parses.  Every syntax error becomes a `TilecError` located at
the offending token and worded in plain language, never in terminal names.

The tables are not computed at run time: `tools/grammar_tables.py` generates
`tables.py` from `tile.lark` with Lark (`tilec.grammar.generate`; a test
checks that they match the grammar), so a run imports neither Lark nor
anything from a cache directory another user could write to.  Should the
grammar change without the tables being regenerated, the tables are
computed from the grammar instead (slower, needs Lark, never wrong).
"""
from __future__ import annotations

import collections
import functools
import math
import os
import re
from typing import Optional

import attrs

from tilec.compiler import ir, visit
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.lexicon import LAYOUT_HEADS, NAMESPACES, RESERVED
from tilec.grammar import descent, lalr
from tilec.grammar.lalr import Token, Tree, UnexpectedCharacters, UnexpectedToken

_GRAMMAR = os.path.join(os.path.dirname(__file__), "tile.lark")

# ---------------------------------------------------------------------------
# Indentation
# ---------------------------------------------------------------------------


class _LexError(Exception):
    """An error found by the postlexer (indentation, a reserved word used as a
    name); `parse` adds the file."""

    def __init__(self, message, line, col, end_col):
        super().__init__(message)
        self.message, self.line, self.col, self.end_col = message, line, col, end_col


class _Indentation:
    """Python-style blocks (the postlexer of Lark's `Indenter`, which the
    tables were made for).  Besides INDENT/DEDENT it remembers the open
    brackets (to name the unclosed one at end of input) and the last tokens
    (to explain errors after a namespace or a layout head).  `eof` is the
    position its final DEDENTs carry."""

    NL_type = "_NL"
    OPEN_PAREN_types = frozenset({"LPAR", "LSQB", "LBRACE"})
    CLOSE_PAREN_types = frozenset({"RPAR", "RSQB", "RBRACE"})
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"

    def __init__(self, eof):
        self.eof = eof

    def process(self, stream):
        self.paren_level = 0
        self.indent_level = [0]
        self.open_brackets = []
        self.history = collections.deque(maxlen=32)
        return self._process(stream)

    def handle_NL(self, token):
        if self.paren_level > 0:
            return
        yield token
        indent_str = token.rsplit("\n", 1)[1]
        line = token.end_line
        if "\t" in indent_str:
            raise _LexError("indentation contains a tab; indent with spaces", line, 1, len(indent_str) + 1)
        indent = len(indent_str)
        col = indent + 1
        if indent > self.indent_level[-1]:
            self.indent_level.append(indent)
            yield _token(self.INDENT_type, indent_str, token, line, col)
            return
        while indent < self.indent_level[-1]:
            self.indent_level.pop()
            yield _token(self.DEDENT_type, "", token, line, col)
        if indent != self.indent_level[-1]:
            raise _LexError(
                f"this line is indented by {indent} spaces, which matches no enclosing block "
                f"(expected {self.indent_level[-1]})",
                line, 1, col,
            )

    def _process(self, stream):
        history, remember = self.history, self.history.append
        nl, opening, closing = self.NL_type, self.OPEN_PAREN_types, self.CLOSE_PAREN_types
        first = True
        for tok in stream:
            kind = tok.type
            if first and kind != nl and tok.column != 1:
                raise _LexError("unexpected indentation", tok.line, 1, tok.column)
            first = False
            if kind == "NAME" and tok in RESERVED and not (history and history[-1].type in ("DOT", "AT")):
                raise _LexError(
                    f"'{tok}' is a reserved word and cannot appear here", tok.line, tok.column, tok.end_column
                )
            remember(tok)
            if kind == nl:
                yield from self.handle_NL(tok)
            else:
                yield tok
            if kind in opening:
                self.paren_level += 1
                self.open_brackets.append(tok)
            elif kind in closing:
                self.paren_level -= 1
                self.open_brackets.pop()
        line, col = self.eof
        while len(self.indent_level) > 1:
            self.indent_level.pop()
            yield Token(self.DEDENT_type, "", 0, line, col, line, col, 0)


def _token(kind, value, borrow, line, col):
    return Token(kind, value, borrow.end_pos, line, col, line, col, borrow.end_pos)


# ---------------------------------------------------------------------------
# The parser object
# ---------------------------------------------------------------------------


def grammar_text() -> str:
    with open(_GRAMMAR, encoding="utf-8") as f:
        return f.read()


def build_parser() -> lalr.Parser:
    """The parser with its tables computed from the grammar (by Lark)."""
    from tilec.grammar import generate  # Lark: only when the shipped tables are stale

    return lalr.Parser(generate.build())


@functools.lru_cache(maxsize=None)
def _parser() -> lalr.Parser:
    tables = _shipped_tables()
    if tables is None or tables["grammar"] != grammar_text():
        return build_parser()
    return lalr.Parser(tables)


def _shipped_tables() -> Optional[dict]:
    """The tables of `tables.py`, or None when it is missing."""
    try:
        from tilec.grammar import tables
    except ImportError:
        return None
    return {name.lower(): value for name, value in vars(tables).items() if name.isupper()}


def parse(text: str, filename: str = "<string>") -> ir.Module:
    """Parse a whole `.tile` file.  Raises `TilecError` on any syntax error."""
    parser = _parser()
    eof = _eof(text)
    source = text if text.endswith("\n") else text + "\n"
    module = descent.read(parser, source, _Builder(filename, eof), eof, MAX_DEPTH)
    if module is not None:
        return module
    try:
        try:
            return _parse(parser, source, filename, eof, tree=False)
        except lalr.Redo:
            # A node too deep, or an error of the builder: parse in Lark's
            # order (the whole tree, its depth, then the builder), so that a
            # later syntax error, or the first node too deep, is the one told.
            return _parse(parser, source, filename, eof, tree=True)
    except _LexError as e:
        raise TilecError(e.message, ir.Span(filename, e.line, e.col, e.line, e.end_col)) from None
    except UnexpectedCharacters as e:
        raise _char_error(e, text, filename) from None


def _parse(parser: lalr.Parser, source: str, filename: str, eof, tree: bool) -> ir.Module:
    postlex = _Indentation(eof)
    builder = _Builder(filename, eof)
    try:
        result = parser.parse(source, postlex, builder, tree=tree, max_depth=MAX_DEPTH)
    except UnexpectedToken as e:
        raise _token_error(e, source, filename, eof, postlex) from None
    except (TilecError, RecursionError):
        if tree:
            raise
        raise lalr.Redo() from None
    if not tree:
        return result
    _check_depth(result, filename)
    return _transform(builder, result)


def _transform(builder, node: Tree):
    """The builder's value of a parse tree, children first."""
    children = [_transform(builder, c) if isinstance(c, Tree) else c for c in node.children]
    return getattr(builder, node.data)(node.meta, children)


MAX_DEPTH = 100
"""How deeply a parse tree may nest (brackets, operator chains, blocks: the
examples reach 23).  Every pass walks the IR recursively, so a deeper tree
would end in Python's RecursionError somewhere in the pipeline; refusing it
here names the place instead."""


def _check_depth(tree, filename: str) -> None:
    """A located error at the first node deeper than `MAX_DEPTH`, found
    without recursion (Lark's LALR parser builds any depth iteratively)."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            first = node.meta[0]
            span = None if first is None else ir.Span(filename, first.line, first.column, first.line, first.column + 1)
            raise TilecError(
                f"this is nested too deeply (more than {MAX_DEPTH} levels of brackets, operators and "
                "blocks); split it into smaller statements or helpers",
                span,
            )
        stack.extend((c, depth + 1) for c in reversed(node.children) if isinstance(c, Tree))


def check_printable(module: ir.Module) -> None:
    """A located error for a kernel statement whose printed text would nest
    deeper than `MAX_DEPTH`, so that `parse(print_module(m)) == m` holds for
    every module the pipeline accepts.  Substituting metas and helpers can
    deepen an expression far past what was written (a chain of metas each
    using the last); such a statement is refused where it stands.  Only
    statements whose IR is at least a third of the limit deep are printed
    and measured, so this costs nothing on ordinary kernels."""
    from tilec.compiler.printer import print_stmt  # the printer is not needed to parse

    known: dict = {}
    for kernel in module.kernels:
        for stmt in kernel.body:
            if _ir_depth(stmt, _MEASURED_DEPTH, known) < _MEASURED_DEPTH:
                continue
            text = "kernel k():\n" + print_stmt(stmt, 1) + "\n"
            try:
                parse(text, "<printed>")
            except TilecError as err:
                if "nested too deeply" not in err.message:
                    raise
                raise TilecError(
                    f"once metas and helpers are substituted, this statement nests more than {MAX_DEPTH} "
                    "levels deep; bind parts of it to variables",
                    stmt.span,
                ) from None


_MEASURED_DEPTH = -(-MAX_DEPTH // 3)
"""How deep a statement's IR must be for `check_printable` to print and
measure it: a third of the limit."""


def _ir_depth(node: ir.Node, room: int, known: dict) -> int:
    """The depth of the IR under `node` (1 for a leaf), or `room` when it is
    at least that deep: the walk goes no further than `room` levels down and
    stops at the first path that long, so every statement costs a walk of
    its shallow nodes only (the recursion, `room` deep at most, stays far
    from Python's limit).  `known` keeps the depths found (id -> depth, for
    nodes alive meanwhile): expand-inline puts one const's or argument's
    expression object at each use, a subtree measured once."""
    depth = known.get(id(node))
    if depth is not None:
        return min(depth, room)
    deepest = 0
    for child in visit.children(node):
        if room == 1:
            return room
        below = 1 if type(child) in ir.LEAVES else _ir_depth(child, room - 1, known)
        if below == room - 1:
            return room
        if below > deepest:
            deepest = below
    known[id(node)] = deepest + 1
    return deepest + 1


def _eof(text: str):
    """1-based (line, col) just after the last non-blank character."""
    lines = text.rstrip().split("\n")
    return len(lines), len(lines[-1]) + 1


# ---------------------------------------------------------------------------
# Syntax errors in plain words
# ---------------------------------------------------------------------------

_WORDS = {
    "NAME": "a name",
    "INT": "a number",
    "FLOAT": "a number",
    "STRING": "a string",
    "AUGOP": "an augmented assignment such as '+='",
    "_NL": "end of line",
    "_INDENT": "an indented block",
    "_DEDENT": "the end of the block",
    "$END": "end of input",
}
# Terminals named by their text, so that the groups do not depend on the
# names Lark gives anonymous terminals.
_EXPR_START = frozenset(
    {"NAME", "INT", "FLOAT", "STRING", "(", "[", "{", "-", "~", "not", "True", "False"}
    | set(DTYPES) | NAMESPACES | LAYOUT_HEADS
)
_OPERATORS = frozenset(
    "or and == != < <= > >= @ | ^ & << >> + - * / // % if ( [ . AUGOP".split()
)
_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})


@functools.lru_cache(maxsize=None)
def _terminal_texts() -> dict:
    """Terminal name -> the text it stands for: the literal of a keyword or
    punctuation terminal, the terminal's own name for the others."""
    return _parser().terminal_texts | {"_INDENT": "_INDENT", "_DEDENT": "_DEDENT", "$END": "$END"}


@functools.lru_cache(maxsize=None)
def _describe_expected(expected: frozenset) -> str:
    texts = _terminal_texts()
    expected = {texts.get(name, name) for name in expected}
    groups = []
    if {"NAME", "INT"} <= expected:
        expected -= _EXPR_START
        groups.append("an expression")
    if set(DTYPES) <= expected:
        expected -= set(DTYPES)
        groups.append("a dtype (" + ", ".join(DTYPES) + ")")
    if "+" in expected:
        expected -= _OPERATORS
        groups.append("an operator")
    if "_NL" in expected:
        expected -= {";", ","}
    words = sorted(f"'{t}'" for t in expected if t not in _WORDS)
    words += sorted({_WORDS[t] for t in expected if t in _WORDS}) + groups
    if len(words) > 5:
        words = words[:4] + ["..."]
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def _describe_found(tok: Token) -> str:
    if tok.type == "NAME":
        return f"name '{tok}'"
    if tok.type in ("INT", "FLOAT"):
        return f"number {tok}"
    if tok.type == "STRING":
        return f"string {tok}"
    if tok.type in _WORDS:
        return _WORDS[tok.type]
    return f"'{tok}'"


def _token_error(e: UnexpectedToken, source: str, filename: str, eof, postlex) -> TilecError:
    tok = e.token
    expected = frozenset(e.accepts or e.expected)
    texts = {_terminal_texts().get(name, name) for name in expected}
    history = list(postlex.history)
    if history and history[-1] is tok:
        history.pop()  # the lexer let the bad token through; only the parser refused it
    hint = _context_hint(history, texts)
    if tok.type == "$END" or (tok.type in ("_NL", "_DEDENT") and tok.end_pos >= len(source)):
        line, col = eof
        span = ir.Span(filename, line, col, line, col + 1)
        if postlex.open_brackets:
            o = postlex.open_brackets[-1]
            return TilecError(f"unexpected end of input: the '{o}' at {o.line}:{o.column} is never closed", span)
        return TilecError(f"unexpected end of input, expected {_describe_expected(expected)}{hint}", span)
    line, col = tok.line, tok.column
    if tok.type == "_NL":
        span = ir.Span(filename, line, col, line, col + 1)
    else:
        span = ir.Span(filename, line, col, tok.end_line, max(tok.end_column, col + 1))
    if tok.type == "_INDENT":
        return TilecError("unexpected indentation", span)
    if str(tok) in _COMPARISONS and "and" in texts:
        return TilecError("comparisons do not chain: write 'a < b and b < c'", span)
    if postlex.open_brackets and postlex.open_brackets[-1].line < tok.line:
        o = postlex.open_brackets[-1]
        hint += f" (the '{o}' at {o.line}:{o.column} is not closed)"
    return TilecError(f"expected {_describe_expected(expected)}, found {_describe_found(tok)}{hint}", span)


def _context_hint(history, expected: set) -> str:
    """An explanation where the expected set alone misleads: after a
    namespace root and after a layout head."""
    if expected <= {".", "("} and "." in expected:
        root = next((t for t in reversed(history) if str(t) in NAMESPACES), None)
        if root is not None:
            return (
                f" ('{root}' is a namespace of intrinsics and tile primitives: "
                f"call one, as in {root}.name(...))"
            )
    if expected == {"["} and history and str(history[-1]) in LAYOUT_HEADS:
        return f" (a layout literal is written {history[-1]}[...])"
    return ""


def _char_error(e: UnexpectedCharacters, text: str, filename: str) -> TilecError:
    char = text[e.pos_in_stream]
    span = ir.Span(filename, e.line, e.column, e.line, e.column + 1)
    if char == '"':
        return TilecError("unterminated string (a string must end on the line it starts)", span)
    if char == "'":
        return TilecError("strings are written in double quotes", span)
    return TilecError(f"unexpected character {char!r}", span)


# ---------------------------------------------------------------------------
# Parse tree to IR
# ---------------------------------------------------------------------------


class _Target:
    """The module's `target NAME` line, before it is folded into the Module."""

    def __init__(self, name, span):
        self.name, self.span = name, span


class _Part:
    """`R[...]`, `O[...]` or `SW[...]`: only meaningful once attached to an
    `S[...]` layout by `+` (R, O) or `*` (SW)."""

    def __init__(self, head, items, span):
        self.head, self.items, self.span = head, items, span


class _Axis:
    """`stride@axis`: only meaningful inside a layout literal's strides."""

    def __init__(self, stride, axis, span):
        self.stride, self.axis, self.span = stride, axis, span


_LOOSE_MESSAGES = {
    "R": "a replica R[...] must be added to a layout: S[...] + R[...]",
    "O": "an offset O[...] must be added to a layout: S[...] + O[...]",
    "SW": "a swizzle SW[...] must multiply a layout: SW[...] * S[...]",
    "@": "'@axis' may only follow a stride inside a layout literal",
}

def _has_axis(item) -> bool:
    """Whether a subscript holds `@axis` (so only a layout can mean it)."""
    if isinstance(item, ir.Slice):
        return _has_axis(item.start) or _has_axis(item.stop)
    if isinstance(item, ir.TupleExpr):
        return any(_has_axis(i) for i in item.items)
    return isinstance(item, _Axis)


_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t"}
_ESCAPE_RE = re.compile(r"\\(.)")


class _Builder:
    """One per parse: holds the file name for spans and the bookkeeping that
    the grammar cannot express (literal folding, layout assembly).  A method
    per node name gets the node's position and its children (tokens, values,
    None for an absent `[x]`), called children first."""

    def __init__(self, filename: str, eof):
        self.file = filename
        self.eof = eof
        # The literal most recently built from a number token, so that `-3`
        # folds into Int(-3) while `-(3)` and `--3` keep their Unary.
        self.last_literal = None
        # Layout parts and @axis strides not (yet) placed into a LayoutLit.
        self.loose = {}
        # `O[..]`, `R[..]`, `SW[..]` read as indexing, by id: (head, items),
        # for a layout sum or product that turns out to take them in.
        self.parts = {}

    # -- spans (names need no check here: the postlexer rejects reserved words)

    def span(self, meta) -> Optional[ir.Span]:
        first, last = meta
        if first is None:
            return None
        return ir.Span(self.file, first.line, first.column, last.end_line, last.end_column)

    def tok_span(self, tok: Token) -> ir.Span:
        return ir.Span(self.file, tok.line, tok.column, tok.end_line, tok.end_column)

    def until(self, meta, last: ir.Node) -> ir.Span:
        """From the start of `meta` to the end of `last` (blocks and lines end
        with NEWLINE/DEDENT tokens that belong to the next line)."""
        end = last.span
        first = meta[0]
        return ir.Span(self.file, first.line, first.column, end.end_line, end.end_col)

    # -- module level ------------------------------------------------------

    def module(self, meta, items):
        target, includes, consts, helpers, kernels = None, [], [], [], []
        for i, item in enumerate(items):
            if isinstance(item, _Target):
                if target is not None:
                    raise TilecError("the target is already set by an earlier 'target' line", item.span)
                if i != 0:
                    raise TilecError("the 'target' line must come before everything else", item.span)
                target = item.name
            elif isinstance(item, ir.Include):
                if consts or helpers or kernels:
                    raise TilecError(
                        "'include' lines come before consts, helpers and kernels (after the 'target' line)",
                        item.span,
                    )
                includes.append(item)
            elif isinstance(item, ir.Const):
                consts.append(item)
            elif isinstance(item, ir.InlineDef):
                helpers.append(item)
            else:
                kernels.append(item)
        self.check_loose()
        line, col = self.eof
        return ir.Module(
            target, tuple(consts), tuple(helpers), tuple(kernels), tuple(includes),
            span=ir.Span(self.file, 1, 1, line, col),
        )

    def check_loose(self):
        if self.loose:
            first = min(self.loose.values(), key=lambda p: (p.span.line, p.span.col))
            key = first.head if isinstance(first, _Part) else "@"
            raise TilecError(_LOOSE_MESSAGES[key], first.span)

    def target_decl(self, meta, children):
        (tok,) = children
        first = meta[0]
        return _Target(str(tok), ir.Span(self.file, first.line, first.column, tok.end_line, tok.end_column))

    def include_decl(self, meta, children):
        (tok,) = children
        return ir.Include(self.string(meta, [tok]).value, span=self.tok_span(tok))

    def const_decl(self, meta, children):
        tok, value = children
        return ir.Const(str(tok), value, span=self.until(meta, value))

    def kernel_def(self, meta, children):
        tok, params, body = children
        return ir.Kernel(str(tok), tuple(params or ()), body, span=self.until(meta, body[-1]))

    def kernel_params(self, meta, params):
        return params

    def param(self, meta, children):
        param, cond = children
        return param if cond is None else attrs.evolve(param, cond=cond, span=self.span(meta))

    def scalar_param(self, meta, children):
        tok, dtype = children
        return ir.Param(str(tok), dtype, span=self.span(meta))

    def buffer_param(self, meta, children):
        tok, dtype, shape = children[:3]
        layout = children[3] if len(children) == 4 else None
        return ir.Param(str(tok), dtype, shape, layout, span=self.span(meta))

    def shape(self, meta, dims):
        return tuple(dims)

    def inline_def(self, meta, children):
        tok, params, body = children
        return ir.InlineDef(str(tok), tuple(params or ()), body, span=self.until(meta, body[-1]))

    def def_params(self, meta, toks):
        return [str(t) for t in toks]

    def suite(self, meta, stmts):
        return tuple(stmts)

    # -- statements --------------------------------------------------------

    def assign(self, meta, children):
        lhs, value = children
        if isinstance(lhs, ir.TupleExpr):
            if len(lhs.items) < 2:
                raise TilecError("unpacking needs at least two targets: a, b = ...", lhs.span)
            targets = lhs.items
        else:
            targets = (lhs,)
        for t in targets:
            self.check_target(t)
        return ir.Assign(tuple(targets), value, span=self.span(meta))

    def check_target(self, target):
        if isinstance(target, ir.LayoutLit):
            raise TilecError(ir.S_IS_A_LAYOUT, target.span)
        if not isinstance(target, (ir.Name, ir.Index)):
            raise TilecError("can only assign to a name or to buffer elements (buf[i] = ...)", target.span)

    def typed_assign(self, meta, children):
        tok, dtype, value = children
        name = ir.Name(str(tok), span=self.tok_span(tok) if isinstance(tok, Token) else self.span(meta))
        return ir.Assign((name,), value, dtype, span=self.span(meta))

    def aug_assign(self, meta, children):
        target, op, value = children
        self.check_target(target)
        return ir.AugAssign(target, str(op)[:-1], value, span=self.span(meta))

    def meta_stmt(self, meta, children):
        tok, value = children
        return ir.Meta(str(tok), value, span=self.span(meta))

    def expr_stmt(self, meta, children):
        return ir.ExprStmt(children[0], span=self.span(meta))

    def pass_stmt(self, meta, children):
        return ir.Pass(span=self.span(meta))

    def return_stmt(self, meta, children):
        return ir.Return(children[0], span=self.span(meta))

    def tensormap_stmt(self, meta, children):
        tok, call = children
        return ir.TensorMap(str(tok), call, span=self.span(meta))

    def tensormap_call(self, meta, children):
        args, kwargs = self.split_arguments(children[0])
        return ir.Call("tensormap", args, kwargs, span=self.span(meta))

    def for_stmt(self, meta, children):
        tok, kind, args, body = children
        if len(args) > 3:
            raise TilecError(f"{kind}() takes at most 3 arguments (start, stop, step)", args[3].span)
        # Implicit bounds carry the span of the argument list they complete.
        implied = ir.Span(self.file, args[0].span.line, args[0].span.col, args[-1].span.end_line, args[-1].span.end_col)
        if len(args) == 1:
            start, stop, step = ir.Int(0, span=implied), args[0], ir.Int(1, span=implied)
        else:
            start, stop = args[0], args[1]
            step = args[2] if len(args) == 3 else ir.Int(1, span=implied)
        return ir.For(str(tok), kind, start, stop, step, body, span=self.until(meta, body[-1]))

    def loop_kind(self, meta, children):
        return str(children[0])

    def range_args(self, meta, args):
        return args

    def if_stmt(self, meta, children):
        cond, then, *elifs, orelse = children
        orelse = orelse or ()
        for e_cond, e_then, e_meta in reversed(elifs):
            last = (orelse or e_then)[-1]
            orelse = (ir.If(e_cond, e_then, orelse, span=self.until(e_meta, last)),)
        return ir.If(cond, then, orelse, span=self.until(meta, (orelse or then)[-1]))

    def elif_clause(self, meta, children):
        cond, body = children
        return cond, body, meta

    def while_stmt(self, meta, children):
        cond, body = children
        return ir.While(cond, body, span=self.until(meta, body[-1]))

    # -- operators ---------------------------------------------------------

    def tuple_items(self, meta, items):
        return ir.TupleExpr(tuple(items), span=self.span(meta))

    def select(self, meta, children):
        then, cond, orelse = children
        return ir.Select(cond, then, orelse, span=self.span(meta))

    def binary(self, meta, children):
        lhs, op, rhs = children
        op = str(op)
        span = self.span(meta)
        if op == "+" and isinstance(lhs, ir.LayoutLit) and id(rhs) in self.parts:
            rhs = self.make_part(*self.parts.pop(id(rhs))[1:], rhs.span)
        if op == "*" and isinstance(rhs, ir.LayoutLit) and id(lhs) in self.parts:
            lhs = self.make_part(*self.parts.pop(id(lhs))[1:], lhs.span)
        if op == "+" and isinstance(lhs, ir.LayoutLit) and isinstance(rhs, _Part) and rhs.head in ("R", "O"):
            del self.loose[id(rhs)]
            if rhs.head == "R":
                return ir.LayoutLit(lhs.shard, lhs.replica + rhs.items, lhs.offset, lhs.swizzle, span=span)
            return ir.LayoutLit(lhs.shard, lhs.replica, lhs.offset + rhs.items, lhs.swizzle, span=span)
        if op == "*" and isinstance(lhs, _Part) and lhs.head == "SW" and isinstance(rhs, ir.LayoutLit):
            if rhs.swizzle is not None:
                raise TilecError("this layout already has a swizzle", rhs.span)
            del self.loose[id(lhs)]
            return ir.LayoutLit(rhs.shard, rhs.replica, rhs.offset, lhs.items, span=span)
        return ir.Binary(op, lhs, rhs, span=span)

    or_test = and_test = comparison = bor_expr = xor_expr = band_expr = binary
    shift_expr = arith = term = binary

    def not_test(self, meta, children):
        return ir.Unary("not", children[1], span=self.span(meta))

    def factor(self, meta, children):
        op, operand = children
        op = str(op)
        if op == "-" and operand is self.last_literal:
            self.last_literal = None
            return type(operand)(-operand.value, span=self.span(meta))
        return ir.Unary(op, operand, span=self.span(meta))

    def axis(self, meta, children):
        stride, tok = children
        marker = _Axis(stride, str(tok), self.span(meta))
        self.loose[id(marker)] = marker
        return marker

    # -- postfix -----------------------------------------------------------

    def call(self, meta, children):
        func, arguments = children
        args, kwargs = self.split_arguments(arguments)
        span = self.span(meta)
        if isinstance(func, ir.Name):
            return ir.Call(func.id, args, kwargs, span=span)
        if isinstance(func, ir.DTypeLit):
            return ir.Call(func.name, args, kwargs, span=span)
        if isinstance(func, ir.Attr):
            return ir.Method(func.obj, func.name, args, kwargs, span=span)
        raise TilecError("only a name or a method can be called", func.span)

    def split_arguments(self, arguments):
        args, kwargs = [], []
        for a in arguments or ():
            if isinstance(a, ir.Keyword):
                kwargs.append(a)
            elif kwargs:
                raise TilecError("a positional argument cannot follow keyword arguments", a.span)
            else:
                args.append(a)
        return tuple(args), tuple(kwargs)

    def arguments(self, meta, items):
        return items

    def kwarg(self, meta, children):
        tok, value = children
        return ir.Keyword(str(tok), value, span=self.span(meta))

    def splat(self, meta, children):
        return ir.Keyword(None, children[0], span=self.span(meta))

    def index(self, meta, children):
        base, subs = children
        return ir.Index(base, tuple(subs), span=self.span(meta))

    def subscripts(self, meta, items):
        return items

    def slice(self, meta, children):
        start, stop = children
        return ir.Slice(start, stop, span=self.span(meta))

    def attr(self, meta, children):
        obj, tok = children
        return ir.Attr(obj, str(tok), span=self.span(meta))

    # -- atoms -------------------------------------------------------------

    def name(self, meta, children):
        return ir.Name(str(children[0]), span=self.span(meta))

    def int(self, meta, children):
        text = str(children[0])
        hexa = text[:2] in ("0x", "0X")
        digits = (text[2:] if hexa else text).lstrip("0")
        # 2**64 - 1 has 16 hex or 20 decimal digits; counting first keeps a
        # literal of thousands of digits from reaching int()
        if len(digits) > (16 if hexa else 20) or int(digits or "0", 16 if hexa else 10) >= 1 << 64:
            raise TilecError(
                f"integer literal {text[:24]}{'...' if len(text) > 24 else ''} does not fit in 64 bits "
                f"(at most {(1 << 64) - 1})",
                self.span(meta),
            )
        self.last_literal = ir.Int(int(digits or "0", 16 if hexa else 10), span=self.span(meta))
        return self.last_literal

    def float(self, meta, children):
        value = float(children[0])
        if math.isinf(value):
            raise TilecError(f"float literal {children[0]} is beyond the f64 range", self.span(meta))
        self.last_literal = ir.Float(value, span=self.span(meta))
        return self.last_literal

    def string(self, meta, children):
        tok = children[0]

        def unescape(m):
            if m.group(1) not in _ESCAPES:
                raise TilecError(
                    f"unknown escape '\\{m.group(1)}' in a string (use \\\\, \\\", \\n or \\t)",
                    self.tok_span(tok),
                )
            return _ESCAPES[m.group(1)]

        return ir.Str(_ESCAPE_RE.sub(unescape, str(tok)[1:-1]), span=self.span(meta))

    def true(self, meta, children):
        return ir.Bool(True, span=self.span(meta))

    def false(self, meta, children):
        return ir.Bool(False, span=self.span(meta))

    def dtype(self, meta, children):
        return str(children[0])

    def dtype_lit(self, meta, children):
        return ir.DTypeLit(children[0], span=self.span(meta))

    def empty_tuple(self, meta, children):
        return ir.TupleExpr((), span=self.span(meta))

    def paren(self, meta, children):
        inner = children[0]
        if inner is self.last_literal:
            self.last_literal = None
        return inner

    def list(self, meta, children):
        return ir.ListExpr(tuple(children[0] or ()), span=self.span(meta))

    def list_items(self, meta, items):
        return items

    def dict(self, meta, children):
        items = children[0] or ()
        return ir.DictExpr(tuple(k for k, _ in items), tuple(v for _, v in items), span=self.span(meta))

    def dict_items(self, meta, items):
        return items

    def dict_item(self, meta, children):
        key, value = children
        return self.string(meta, [key]).value, value

    def namespace(self, meta, children):
        return str(children[0])

    def ns_call(self, meta, children):
        *path, arguments = children
        args, kwargs = self.split_arguments(arguments)
        return ir.Call(".".join(str(p) for p in path), args, kwargs, span=self.span(meta))

    # -- layout literals ---------------------------------------------------

    def layout_head(self, meta, children):
        return str(children[0])

    def head_name(self, meta, children):
        return ir.Name(children[0], span=self.span(meta))

    def layout_part(self, meta, children):
        head, items = children
        span = self.span(meta)
        if head != "S" and not any(_has_axis(i) for i in items):
            # a variable named O, R or SW, indexed -- unless a layout sum or
            # product takes it in (`binary`)
            first = meta[0]
            name_span = ir.Span(self.file, first.line, first.column, first.line, first.column + len(head))
            index = ir.Index(ir.Name(head, span=name_span), tuple(items), span=span)
            self.parts[id(index)] = (index, head, items)
            return index
        return self.make_part(head, items, span)

    def make_part(self, head, items, span):
        if head in ("S", "R"):
            iters = self.layout_iters(head, items, span)
            if head == "S":
                return ir.LayoutLit(iters, span=span)
            part = _Part(head, iters, span)
        elif head == "O":
            part = _Part(head, tuple(self.offset_iter(item) for item in items), span)
        else:
            if len(items) != 3 or any(isinstance(i, (ir.Slice, _Axis)) for i in items):
                raise TilecError(
                    "a swizzle is written SW[per_element_bits, swizzle_bits, atom_bits]", span
                )
            part = _Part(head, tuple(items), span)
        self.loose[id(part)] = part
        return part

    def layout_iters(self, head, items, span):
        """`(e0, e1) : (s0, s1@ax)`, `e : s@ax`, or the shape-only `e0, e1`."""
        if len(items) == 1 and isinstance(items[0], ir.Slice):
            sl = items[0]
            if sl.start is None or sl.stop is None:
                # `S[:]`, `S[i:]`: a slice, which no layout is
                raise TilecError(self.not_a_layout(head, "a layout needs both extents and strides: "
                                                         f"{head}[extents : strides]"), sl.span)
            extents = self.unpack(sl.start)
            strides = self.unpack(sl.stop)
            if len(extents) != len(strides):
                raise TilecError(
                    f"this layout has {len(extents)} extents but {len(strides)} strides", sl.span
                )
            return tuple(
                self.layout_iter(e, s) for e, s in zip(extents, strides)
            )
        if any(isinstance(i, ir.Slice) for i in items):
            raise TilecError(self.not_a_layout(
                head, f"a layout is written {head}[(extents) : (strides)], {head}[extent : stride] "
                      f"or {head}[extents...]"), span)
        return tuple(self.layout_iter(e, None) for e in items)

    @staticmethod
    def not_a_layout(head, message):
        """`message`, and for `S` (always a layout head) what the writer of
        `S[:]` or `S[0:8, :]` most likely meant: a buffer named S."""
        return f"{message}; {ir.S_IS_A_LAYOUT}" if head == "S" else message

    @staticmethod
    def unpack(expr):
        return expr.items if isinstance(expr, ir.TupleExpr) else (expr,)

    def layout_iter(self, extent, stride):
        if isinstance(extent, _Axis):
            raise TilecError("an extent takes no '@axis'; only strides do", extent.span)
        axis = None
        if isinstance(stride, _Axis):
            del self.loose[id(stride)]
            stride, axis = stride.stride, stride.axis
        end = (stride or extent).span
        span = ir.Span(self.file, extent.span.line, extent.span.col, end.end_line, end.end_col)
        return ir.LayoutIter(extent, stride, axis, span=span)

    def offset_iter(self, item):
        if isinstance(item, ir.Slice):
            raise TilecError("an offset is written O[offset@axis, ...]", item.span)
        axis, stride = None, item
        if isinstance(item, _Axis):
            del self.loose[id(item)]
            stride, axis = item.stride, item.axis
        return ir.LayoutIter(ir.Int(1, span=item.span), stride, axis, span=item.span)
