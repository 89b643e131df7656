"""The parser's fast path: `tile.lark` read by recursive descent, for the
texts it accepts.

The LALR driver (`tilec.grammar.lalr`) spends some hundred bytecodes on
each token and each reduction, and a contextual lexer and a postlexer
stand between it and the text: most of a parse.  For a text without a
syntax error, `read` makes the same value in a fraction of that: it calls
the same builder, with the same node names, children (tokens kept and
dropped as Lark's tree would have them, None for an absent `[x]`) and
positions (a node's first and last token), in the same order (children
first, left to right), so the IR, its spans and the builder's own checks
are the parser's.  It refuses -- returns None, and the caller parses with
the LALR driver, which then finds and words the error -- at the first
thing it does not expect, at anything the postlexer would refuse, at a
node nested deeper than the driver allows, and at any error of the
builder (the driver decides which of several errors is told).

What makes a descent read the contextual lexer's tokens with one lexer:
where it takes a token, the LALR parser takes it too, so the token's
terminal is one of the state's and the root lexer's match is the state's
match (`lalr.Parser._lex`).  A word is a keyword where the descent takes
that keyword, and a name where it takes a name: no state that takes a name
takes a keyword other than those the descent reads there (the layout heads
and the expression words), `layout` is a keyword only after a buffer's
shape, and after `.` and `@` every word is a name.  A reserved word where a
name is wanted is refused, as the postlexer does.
"""
from __future__ import annotations

import functools
import re

from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.lexicon import NAMESPACES
from tilec.grammar.lalr import Token


class _Refused(Exception):
    """The descent does not take this text: the LALR driver parses it."""


_HEADS = frozenset({"S", "R", "O", "SW"})
_NAMEISH = frozenset({"NAME", "layout"})  # a name in an expression (`layout` is a keyword only after a shape)
_NAME_ONLY = _NAMEISH | _HEADS  # a name where only a name is taken
_DTYPES = frozenset(DTYPES)
_EXPR_START = (
    frozenset({"NAME", "layout", "INT", "FLOAT", "STRING", "True", "False", "(", "[", "{", "-", "~", "not"})
    | _DTYPES | NAMESPACES | _HEADS
)
_PREFIX = frozenset({"-", "~"})
_BRACKETS = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}
_AFTER = frozenset({".", "@"})  # after these, a word is a name

# Binary operators: kind -> (precedence, the builder's method).  `@` (an
# axis: a name follows) and the comparisons do not chain; `not` (3) is a
# prefix, `-` and `~` (12) too, the postfix operators (13) bind tightest.
_BINARY = {
    "or": (1, "or_test"), "and": (2, "and_test"),
    "==": (4, "comparison"), "!=": (4, "comparison"), "<": (4, "comparison"), "<=": (4, "comparison"),
    ">": (4, "comparison"), ">=": (4, "comparison"),
    "@": (5, "axis"),
    "|": (6, "bor_expr"), "^": (7, "xor_expr"), "&": (8, "band_expr"),
    "<<": (9, "shift_expr"), ">>": (9, "shift_expr"),
    "+": (10, "arith"), "-": (10, "arith"),
    "*": (11, "term"), "/": (11, "term"), "//": (11, "term"), "%": (11, "term"),
}
_NON_ASSOCIATIVE = frozenset({4, 5})


def read(parser, text: str, builder, eof, max_depth: int):
    """The builder's value of `text` (ending in a newline), or None where
    the LALR driver must parse it (see the module's docstring)."""
    try:
        tokens, kinds = _tokens(parser, text, eof)
        return _Descent(tokens, kinds, builder, max_depth).module()
    except (_Refused, RecursionError, TilecError):  # (a builder's error: the driver tells it, or an earlier one)
        return None


@functools.lru_cache(maxsize=None)
def _lexer(parser) -> tuple:
    """(the `match` of blanks and the token after them; the groups other
    than `_FIXED` whose tokens are their own kind (NAME, INT, _NL...); a
    punctuation text -> its kind, the text; the kind of any other text of
    `_FIXED`, AUGOP; a keyword -> its kind, itself), or None for a grammar
    whose lexer is not laid out as this expects (the driver then parses).

    The expression is the root lexer's with its punctuation terminals (the
    ones after the blanks, each a fixed text but one, AUGOP, an alternation
    of fixed texts) in one group, `_FIXED`, their order kept, so that it
    matches what the root lexer matches: a regex tries the alternatives of
    one group by their first character, where it enters each named group
    of its own."""
    root = parser.root
    texts = parser.terminal_texts
    parts = re.split(r"\|(?=\(\?P<\w+>)", root.pattern)  # "(?P<NAME>body)", in order
    names = [re.match(r"\(\?P<(\w+)>", part).group(1) for part in parts]
    first = max((i for i, name in enumerate(names) if name in root.ignore), default=-1) + 1
    others = [name for name in names[first:] if texts[name] == name]
    if len(others) != 1 or any(name in root.ignore for name in names[first:]):
        return None  # (not the grammar this was written for: the driver parses)
    fixed = [part[len(name) + 5:-1] for part, name in zip(parts[first:], names[first:])]
    pattern = "|".join(parts[:first] + [f"(?P<_FIXED>{'|'.join(fixed)})"])
    match = re.compile(f"(?:{'|'.join(parser.ignored)})?(?:{pattern})").match
    kinds = {name: name for name in names[:first] if name not in root.ignore}
    punctuation = {texts[name]: texts[name] for name in names[first:] if texts[name] != name}
    return match, kinds, punctuation, others[0], {word: word for word in root.keywords.get("NAME", {})}


def _tokens(parser, text: str, eof):
    """The tokens the postlexer would hand the parser, read by the root
    lexer (INDENT and DEDENT made as the postlexer makes them, a newline
    inside brackets dropped), then `$END` (twice: a look one past the end
    reads the second; its token is None); and for each its kind: the text of a keyword or of
    punctuation, else the terminal's name.  A token carries its text and
    its position (line, column, end line and column): all the builder reads
    of one (its type and offsets serve the driver's error messages)."""
    lexer = _lexer(parser)
    if lexer is None:
        raise _Refused()
    match, kind_of, punctuation, other, keyword = lexer
    new = str.__new__
    tokens, kinds = [], []
    push, push_kind = tokens.append, kinds.append
    levels = [0]
    depth = 0
    prev = None
    pos, line, line_start, end = 0, 1, 0, len(text)
    before = line_start - 1  # (a column is an offset less this)
    m = match(text, 0)
    if m is not None and m.lastgroup != "_NL" and m.start(m.lastgroup) != 0:
        raise _Refused()  # (the postlexer's "unexpected indentation")
    while pos < end:
        m = match(text, pos)
        if m is None:
            raise _Refused()
        group = m.lastgroup
        start, pos = m.span(group)
        value = text[start:pos]
        if group == "NAME":
            kind = keyword.get(value, "NAME")
            if prev in _AFTER:
                kind = "NAME"
        elif group == "_FIXED":
            kind = punctuation.get(value, other)
            step = _BRACKETS.get(kind)
            if step is not None:
                depth += step
                if depth < 0:
                    raise _Refused()
        elif group == "_NL":
            prev = "_NL"
            if depth:
                line += value.count("\n")
                line_start = start + value.rindex("\n") + 1
                before = line_start - 1
                continue
            # the token, then `_Indentation.handle_NL`
            token = new(Token, value)
            token.line, token.column = line, start - before
            line += value.count("\n")
            line_start = start + value.rindex("\n") + 1
            before = line_start - 1
            token.end_line, token.end_column = line, pos - before
            push(token)
            push_kind("_NL")
            indent = pos - line_start
            if indent > levels[-1]:
                if "\t" in text[line_start:pos]:
                    raise _Refused()
                levels.append(indent)
                push(Token("_INDENT", text[line_start:pos], pos, line, indent + 1, line, indent + 1, pos))
                push_kind("_INDENT")
                continue
            if indent and "\t" in text[line_start:pos]:
                raise _Refused()
            while indent < levels[-1]:
                levels.pop()
                push(Token("_DEDENT", "", pos, line, indent + 1, line, indent + 1, pos))
                push_kind("_DEDENT")
            if indent != levels[-1]:
                raise _Refused()
            continue
        elif group in kind_of:
            kind = group
        else:
            raise _Refused()  # (blanks the root lexer read alone)
        prev = kind
        token = new(Token, value)
        token.line = token.end_line = line
        token.column, token.end_column = start - before, pos - before
        push(token)
        push_kind(kind)
    line, col = eof
    while len(levels) > 1:
        levels.pop()
        push(Token("_DEDENT", "", 0, line, col, line, col, 0))
        push_kind("_DEDENT")
    tokens += (None, None)  # (no node ends at `$END`)
    kinds += ("$END", "$END")
    return tokens, kinds


class _Descent:
    """One reading: `i` the next token; each method reads one construct of
    the grammar from there, returns its value and leaves its height (the
    nodes down to its deepest token, as the driver counts them) in `h`."""

    __slots__ = ("tokens", "kinds", "builder", "max_depth", "i", "h", "methods", "leaf_name", "leaf_int")

    def __init__(self, tokens, kinds, builder, max_depth):
        self.tokens, self.kinds, self.builder, self.max_depth = tokens, kinds, builder, max_depth
        self.i = 0
        self.h = 0
        self.methods = {}
        self.leaf_name, self.leaf_int = builder.name, builder.int  # (the most frequent nodes)

    def node(self, name: str, start: int, children: list, height: int):
        """The builder's value of node `name` of the tokens from `start` to
        the last one read, its children's greatest height `height`."""
        height += 1
        if height > self.max_depth:
            raise _Refused()
        self.h = height
        method = self.methods.get(name)
        if method is None:
            method = self.methods[name] = getattr(self.builder, name)
        tokens = self.tokens
        return method((tokens[start], tokens[self.i - 1]), children)

    def expect(self, kind: str):
        i = self.i
        if self.kinds[i] != kind:
            raise _Refused()
        self.i = i + 1
        return self.tokens[i]

    def name(self):
        """A NAME token, where only a name is taken."""
        i = self.i
        if self.kinds[i] not in _NAME_ONLY:
            raise _Refused()
        self.i = i + 1
        return self.tokens[i]

    # -- module level ------------------------------------------------------

    def module(self):
        kinds = self.kinds
        items, height = [], 0
        while True:
            kind = kinds[self.i]
            if kind == "$END":
                break
            if kind == "_NL":
                self.i += 1
                continue
            start = self.i
            self.i += 1
            if kind == "target":
                tok = self.name()
                self.expect("_NL")
                item = self.node("target_decl", start, [tok], 0)
            elif kind == "include":
                tok = self.expect("STRING")
                self.expect("_NL")
                item = self.node("include_decl", start, [tok], 0)
            elif kind == "const":
                tok = self.name()
                self.expect("=")
                value = self.testlist()
                self.expect("_NL")
                item = self.node("const_decl", start, [tok, value], self.h)
            elif kind == "kernel":
                tok = self.name()
                self.expect("(")
                params, h = None, 0
                if kinds[self.i] != ")":
                    params, h = self.kernel_params(), self.h
                self.expect(")")
                self.expect(":")
                body = self.suite()
                item = self.node("kernel_def", start, [tok, params, body], max(h, self.h))
            elif kind == "inline":
                item = self.inline_def(start)
            else:
                raise _Refused()
            items.append(item)
            if self.h > height:
                height = self.h
        if self.i == 0:
            return self.builder.module((None, None), items)
        return self.node("module", 0, items, height)

    def kernel_params(self):
        start = self.i
        return self.node("kernel_params", start, *self.comma_list(self.param, ")"))

    def param(self):
        start = self.i
        tok = self.name()
        self.expect(":")
        dtype = self.dtype()
        if self.kinds[self.i] == "[":
            shape = self.shape()
            height = self.h
            if self.kinds[self.i] == "layout":
                self.i += 1
                layout = self.binary(1)
                decl = self.node("buffer_param", start, [tok, dtype, shape, layout], max(height, self.h))
            else:
                decl = self.node("buffer_param", start, [tok, dtype, shape], height)
        else:
            decl = self.node("scalar_param", start, [tok, dtype], 1)
        cond, height = None, self.h
        if self.kinds[self.i] == "if":
            self.i += 1
            cond = self.test()
            height = max(height, self.h)
        return self.node("param", start, [decl, cond], height)

    def dtype(self):
        start = self.i
        if self.kinds[start] not in _DTYPES:
            raise _Refused()
        self.i = start + 1
        return self.node("dtype", start, [self.tokens[start]], 0)

    def shape(self):
        start = self.i
        self.i += 1  # "["
        dims, height = self.comma_list(self.test, "]")
        self.expect("]")
        return self.node("shape", start, dims, height)

    def inline_def(self, start):
        """`inline def NAME(...): suite`, its `inline` read."""
        kinds = self.kinds
        self.expect("def")
        tok = self.name()
        self.expect("(")
        params, height = None, 0
        if kinds[self.i] != ")":
            pstart = self.i
            names = [self.name()]
            while kinds[self.i] == ",":
                self.i += 1
                if kinds[self.i] == ")":
                    break
                names.append(self.name())
            params, height = self.node("def_params", pstart, names, 0), 1
        self.expect(")")
        self.expect(":")
        body = self.suite()
        return self.node("inline_def", start, [tok, params, body], max(height, self.h))

    # -- statements --------------------------------------------------------

    def suite(self):
        start, kinds = self.i, self.kinds
        self.expect("_NL")
        self.expect("_INDENT")
        stmts, height = [], 0
        while True:
            kind = kinds[self.i]
            st = self.i
            if kind == "for":
                stmts.append(self.for_stmt())
            elif kind == "if":
                stmts.append(self.if_stmt())
            elif kind == "while":
                self.i += 1
                cond = self.test()
                h = self.h
                self.expect(":")
                body = self.suite()
                stmts.append(self.node("while_stmt", st, [cond, body], max(h, self.h)))
            elif kind == "inline":
                self.i += 1
                stmts.append(self.inline_def(st))
            else:
                self.simple_stmts(stmts)
            if self.h > height:
                height = self.h
            if kinds[self.i] == "_DEDENT":
                break
        self.i += 1
        return self.node("suite", start, stmts, height)

    def simple_stmts(self, out: list):
        """`_simple_stmt (";" _simple_stmt)* ";"? _NL`, the statements
        appended to `out`; `h` is their greatest height."""
        kinds = self.kinds
        height = 0
        while True:
            out.append(self.simple_stmt())
            if self.h > height:
                height = self.h
            if kinds[self.i] != ";":
                break
            self.i += 1
            if kinds[self.i] == "_NL":
                break
        self.expect("_NL")
        self.h = height

    def simple_stmt(self):
        start, kinds = self.i, self.kinds
        kind = kinds[start]
        if kind == "pass":
            self.i += 1
            return self.node("pass_stmt", start, [], 0)
        if kind == "return":
            self.i += 1
            value, height = None, 0
            if kinds[self.i] not in (";", "_NL"):
                value, height = self.testlist(), self.h
            return self.node("return_stmt", start, [value], height)
        if kind == "meta":
            self.i += 1
            tok = self.name()
            self.expect("=")
            value = self.testlist()
            return self.node("meta_stmt", start, [tok, value], self.h)
        if kind == "tensormap":
            self.i += 1
            tok = self.name()
            self.expect("=")
            cstart = self.i
            self.expect("tensormap")
            call = self.node("tensormap_call", cstart, *self.call_arguments())
            return self.node("tensormap_stmt", start, [tok, call], self.h)
        if kinds[start + 1] == ":" and kind in _NAME_ONLY:
            tok = self.tokens[start]
            self.i += 1
            height = 0
            if kind in _HEADS:
                tok, height = self.node("layout_head", start, [tok], 0), 1
            self.i += 1  # ":"
            dtype = self.dtype()
            self.expect("=")
            value = self.test()
            return self.node("typed_assign", start, [tok, dtype, value], max(height, 1, self.h))
        lhs = self.test()
        kind = kinds[self.i]
        if kind == "AUGOP":
            height = self.h
            op = self.tokens[self.i]
            self.i += 1
            value = self.test()
            return self.node("aug_assign", start, [lhs, op, value], max(height, self.h))
        if kind == ",":
            lhs = self.tuple_rest(start, lhs)
            kind = kinds[self.i]
        if kind == "=":
            height = self.h
            self.i += 1
            value = self.testlist()
            return self.node("assign", start, [lhs, value], max(height, self.h))
        return self.node("expr_stmt", start, [lhs], self.h)

    def for_stmt(self):
        start, kinds = self.i, self.kinds
        self.i += 1
        tok = self.name()
        self.expect("in")
        kstart = self.i
        if kinds[kstart] not in ("range", "unroll"):
            raise _Refused()
        self.i += 1
        kind = self.node("loop_kind", kstart, [self.tokens[kstart]], 0)
        self.expect("(")
        astart = self.i
        args = self.node("range_args", astart, *self.comma_list(self.test, ")"))
        height = self.h
        self.expect(")")
        self.expect(":")
        body = self.suite()
        return self.node("for_stmt", start, [tok, kind, args, body], max(1, height, self.h))

    def if_stmt(self):
        start, kinds = self.i, self.kinds
        self.i += 1
        cond = self.test()
        height = self.h
        self.expect(":")
        children = [cond, self.suite()]
        height = max(height, self.h)
        while kinds[self.i] == "elif":
            estart = self.i
            self.i += 1
            econd = self.test()
            h = self.h
            self.expect(":")
            body = self.suite()
            children.append(self.node("elif_clause", estart, [econd, body], max(h, self.h)))
            height = max(height, self.h)
        orelse = None
        if kinds[self.i] == "else":
            self.i += 1
            self.expect(":")
            orelse = self.suite()
            height = max(height, self.h)
        children.append(orelse)
        return self.node("if_stmt", start, children, height)

    # -- expressions -------------------------------------------------------

    def testlist(self):
        start = self.i
        first = self.test()
        if self.kinds[self.i] != ",":
            return first
        return self.tuple_rest(start, first)

    def tuple_rest(self, start, first):
        """`tuple_items` from its `,` on, its first item read."""
        kinds = self.kinds
        items, height = [first], self.h
        while kinds[self.i] == ",":
            self.i += 1
            if kinds[self.i] not in _EXPR_START:
                break
            items.append(self.test())
            if self.h > height:
                height = self.h
        return self.node("tuple_items", start, items, height)

    def test(self):
        start = self.i
        value = self.binary(1)
        if self.kinds[self.i] != "if":
            return value
        height = self.h
        self.i += 1
        cond = self.binary(1)
        height = max(height, self.h)
        self.expect("else")
        orelse = self.test()
        return self.node("select", start, [value, cond, orelse], max(height, self.h))

    def binary(self, lowest: int):
        """Operators of precedence `lowest` and above (`_BINARY`): 1 is an
        `or_test`, 3 a `not_test`, 5 an `axis_expr`, 6 a `bor_expr`..."""
        kinds, tokens = self.kinds, self.tokens
        start = self.i
        if kinds[start] == "not":
            if lowest > 3:
                raise _Refused()
            self.i = start + 1
            operand = self.binary(3)
            value = self.node("not_test", start, [tokens[start], operand], self.h)
            level = 3
        else:
            value = self.factor() if kinds[start] in _PREFIX else self.postfix()
            level = 13
        while True:
            op = _BINARY.get(kinds[self.i])
            if op is None:
                return value
            prec, method = op
            if prec < lowest:
                return value
            if prec > level or (prec == level and prec in _NON_ASSOCIATIVE):
                raise _Refused()
            height = self.h
            tok = tokens[self.i]
            self.i += 1
            if prec == 5:
                value = self.node(method, start, [value, self.name()], height)
            else:
                rhs = self.binary(prec + 1)
                value = self.node(method, start, [value, tok, rhs], max(height, self.h))
            level = prec

    def factor(self):
        start = self.i
        kind = self.kinds[start]
        if kind in _PREFIX:
            self.i = start + 1
            operand = self.factor()
            return self.node("factor", start, [self.tokens[start], operand], self.h)
        return self.postfix()

    def postfix(self):
        start, kinds = self.i, self.kinds
        value = self.atom()
        while True:
            kind = kinds[self.i]
            if kind == "(":
                height = self.h
                children, h = self.call_arguments()
                value = self.node("call", start, [value] + children, max(height, h))
            elif kind == "[":
                height = self.h
                self.i += 1
                subscripts = self.subscripts()
                self.expect("]")
                value = self.node("index", start, [value, subscripts], max(height, self.h))
            elif kind == ".":
                height = self.h
                self.i += 1
                value = self.node("attr", start, [value, self.name()], height)
            else:
                return value

    def call_arguments(self):
        """`"(" [arguments] ")"`: ([the arguments node or None], its height)."""
        kinds = self.kinds
        self.expect("(")
        if kinds[self.i] == ")":
            self.i += 1
            return [None], 0
        start = self.i
        arguments = self.node("arguments", start, *self.comma_list(self.argument, ")"))
        self.expect(")")
        return [arguments], self.h

    def argument(self):
        """One call argument: `NAME = test`, `** test` or a test."""
        kinds = self.kinds
        kind = kinds[self.i]
        st = self.i
        if kinds[st + 1] == "=" and kind in _NAME_ONLY:
            tok, h = self.tokens[st], 0
            self.i += 1
            if kind in _HEADS:
                tok, h = self.node("layout_head", st, [tok], 0), 1
            self.i += 1  # "="
            value = self.test()
            return self.node("kwarg", st, [tok, value], max(h, self.h))
        if kind == "**":
            self.i += 1
            value = self.test()
            return self.node("splat", st, [value], self.h)
        return self.test()

    def subscripts(self):
        start = self.i
        return self.node("subscripts", start, *self.comma_list(self.subscript, "]"))

    def subscript(self):
        """One subscript: a test or a slice `[test] : [test]`."""
        kinds = self.kinds
        st = self.i
        if kinds[st] == ":":
            lo, h = None, 0
        else:
            lo, h = self.test(), self.h
        if kinds[self.i] != ":":
            return lo
        self.i += 1
        hi = None
        if kinds[self.i] not in (",", "]"):
            hi = self.test()
            h = max(h, self.h)
        return self.node("slice", st, [lo, hi], h)

    def atom(self):
        start = self.i
        kind = self.kinds[start]
        tok = self.tokens[start]
        self.i = start + 1
        if kind in _NAMEISH:  # (a leaf: `node` written out)
            self.h = 1
            return self.leaf_name((tok, tok), [tok])
        if kind == "INT":
            self.h = 1
            return self.leaf_int((tok, tok), [tok])
        if kind == "FLOAT":
            return self.node("float", start, [tok], 0)
        if kind == "STRING":
            return self.node("string", start, [tok], 0)
        if kind == "True":
            return self.node("true", start, [], 0)
        if kind == "False":
            return self.node("false", start, [], 0)
        if kind in _DTYPES:
            dtype = self.node("dtype", start, [tok], 0)
            return self.node("dtype_lit", start, [dtype], 1)
        if kind == "(":
            if self.kinds[self.i] == ")":
                self.i += 1
                return self.node("empty_tuple", start, [], 0)
            inner = self.testlist()
            self.expect(")")
            return self.node("paren", start, [inner], self.h)
        if kind == "[":
            return self.node("list", start, *self.items("list_items", "]", self.test))
        if kind == "{":
            return self.node("dict", start, *self.items("dict_items", "}", self.dict_item))
        if kind in _HEADS:
            head = self.node("layout_head", start, [tok], 0)
            if self.kinds[self.i] != "[":
                return self.node("head_name", start, [head], 1)
            self.i += 1
            subscripts = self.subscripts()
            self.expect("]")
            return self.node("layout_part", start, [head, subscripts], max(1, self.h))
        if kind in NAMESPACES:
            children = [self.node("namespace", start, [tok], 0)]
            self.expect(".")
            children.append(self.name())
            while self.kinds[self.i] == ".":
                self.i += 1
                children.append(self.name())
            arguments, height = self.call_arguments()
            return self.node("ns_call", start, children + arguments, max(1, height))
        raise _Refused()

    def items(self, name: str, close: str, item):
        """`"[" [items] "]"`-like, its opening read: ([the items node or
        None], its height)."""
        kinds = self.kinds
        if kinds[self.i] == close:
            self.i += 1
            return [None], 0
        start = self.i
        node = self.node(name, start, *self.comma_list(item, close))
        self.expect(close)
        return [node], self.h

    def comma_list(self, item, close: str):
        """Items read by `item`, separated by commas, a trailing comma
        allowed before `close` (which is not read): (the items, their
        greatest height).  Every comma-separated list of the grammar."""
        kinds = self.kinds
        items, height = [], 0
        while True:
            items.append(item())
            if self.h > height:
                height = self.h
            if kinds[self.i] != ",":
                return items, height
            self.i += 1
            if kinds[self.i] == close:
                return items, height

    def dict_item(self):
        start = self.i
        key = self.expect("STRING")
        self.expect(":")
        value = self.test()
        return self.node("dict_item", start, [key, value], self.h)
