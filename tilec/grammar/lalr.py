"""The run-time half of the parser: an LALR(1) driver and a contextual lexer
over the tables `tilec.grammar.generate` computes with Lark (shipped as
`tables.py`).  It reproduces what Lark does with those tables -- the tokens,
the positions, the shape of the tree, the expected sets of errors -- without
importing Lark, whose import and table loading cost more than a parse.

`Parser.parse` calls the builder's method for each node as the node is
reduced (bottom-up, left to right: the order a tree transformer visits in),
with the node's position -- its first and last token, (None, None) for a
node of no token -- and its children as Lark's tree builder would pass
them.  Where that order could tell (a builder error, a tree
deeper than the caller allows), the caller parses again with `tree=True`:
the whole tree first, then the builder over it, exactly Lark's order.
"""
from __future__ import annotations

import itertools
import operator
import re

# Rule kinds, as `tilec.grammar.generate` classifies the rules.
UNIT = 0  # a `?rule` of one child: the child stands for it (no node)
SPLICE = 1  # a `_rule`: its children go into the parent's
NODE = 2  # a node: the builder method named by the rule makes its value


class Token(str):
    """A token: its text, its terminal's name and where it stands (1-based
    lines and columns; end column one past the last character)."""

    __slots__ = ("type", "start_pos", "line", "column", "end_line", "end_column", "end_pos")

    def __new__(cls, type_, value, start_pos=None, line=None, column=None, end_line=None, end_column=None,
                end_pos=None):
        self = super().__new__(cls, value)
        self.type = type_
        self.start_pos, self.line, self.column = start_pos, line, column
        self.end_line, self.end_column, self.end_pos = end_line, end_column, end_pos
        return self

    @property
    def value(self) -> str:
        return str(self)

    def __repr__(self):
        return f"Token({self.type!r}, {str(self)!r})"

    def __reduce__(self):
        return (Token, (self.type, str(self), self.start_pos, self.line, self.column, self.end_line,
                        self.end_column, self.end_pos))


class Tree:
    """A node of the parse tree (only built with `tree=True`)."""

    __slots__ = ("data", "children", "meta")

    def __init__(self, data, children, meta):
        self.data, self.children, self.meta = data, children, meta


class UnexpectedToken(Exception):
    """`token` is not acceptable here: `expected` the terminals the state
    (or, for a token the state's lexer could not read, that lexer) names,
    `accepts` those the parser would take after its pending reductions."""

    def __init__(self, token, expected, accepts):
        super().__init__(f"unexpected token {token!r}")
        self.token, self.expected, self.accepts = token, expected, accepts


class UnexpectedCharacters(Exception):
    """No terminal matches at `pos_in_stream` (`line`, `column`)."""

    def __init__(self, pos, line, column, allowed):
        super().__init__(f"no terminal matches at {line}:{column}")
        self.pos_in_stream, self.line, self.column, self.allowed = pos, line, column, allowed


class Redo(Exception):
    """Raised by `parse` when a node nests deeper than `max_depth`: the
    caller parses again with `tree=True` to locate it."""


_COMPILED: dict = {}  # pattern -> compiled regex, shared by all parsers


def _end_of_input(token) -> "Token":
    """The `$END` token, at the position of the last token (or of none)."""
    if token is None:
        return Token("$END", "", 0, 1, 1)
    return Token("$END", "", token.start_pos, token.line, token.column, token.end_line, token.end_column,
                 token.end_pos)


_ABSENT = (None, None, None, 0)  # a stack entry for an absent `[x]`: a None child
_value, _height = operator.itemgetter(0), operator.itemgetter(3)  # of a stack entry


class _Scanner:
    __slots__ = ("pattern", "keywords", "allowed", "ignore", "terminals", "_regex")

    def __init__(self, pattern, keywords, allowed, ignore, terminals):
        self.pattern, self.keywords = pattern, keywords
        self.allowed, self.ignore = frozenset(allowed), frozenset(ignore)
        self.terminals = frozenset(terminals)
        self._regex = None

    @property
    def match(self):
        """The compiled alternation's `match` (compiled on first use: most
        states are read through the root lexer's, see `Parser._lex`)."""
        if self._regex is None:
            regex = _COMPILED.get(self.pattern)
            if regex is None:
                regex = _COMPILED[self.pattern] = re.compile(self.pattern)
            self._regex = regex
        return self._regex.match


class Parser:
    def __init__(self, tables: dict):
        self.grammar = tables["grammar"]
        self.start, self.end = tables["start"], tables["end"]
        self.states = tables["states"]
        self.rules = tables["rules"]
        scanners = [_Scanner(*s) for s in tables["scanners"]]
        self.lexer_of = [scanners[i] for i in tables["lexer_of"]]
        self.root = scanners[tables["root_lexer"]]
        self.terminal_texts = tables["terminal_texts"]
        self.ignored = tuple(tables["ignored"])  # (the patterns of the ignored terminals)

    # -- lexing ----------------------------------------------------------------

    def _lex(self, text: str, state_stack: list):
        """The tokens of `text`, each read by the lexer of the state the
        parser is in when it asks for it (a generator: the parser has taken
        every earlier token by then).

        Each state's lexer tries its terminals in the root lexer's order, so
        where the root lexer's match is a terminal of the state's, it is the
        state's match too (no terminal of the state's before it matched), and
        where the root lexer matches nothing, no keyword does either (NAME
        would).  Only a match of a terminal the state lacks needs the
        state's own expression: most states' are never compiled (each costs
        a regex compile in every process).  (Only a text the descent
        refuses is lexed here, `tilec.grammar.descent`: this reads one token
        at a time, blanks too, as plainly as it can.)"""
        lexer_of = self.lexer_of
        root_match = self.root.match
        pos, line, line_start, end = 0, 1, 0, len(text)
        while pos < end:
            scanner = lexer_of[state_stack[-1]]
            m = root_match(text, pos)
            if m is not None and m.lastgroup not in scanner.terminals:
                m = scanner.match(text, pos)
            if m is None:
                raise self._unexpected(scanner, text, pos, line, pos - line_start + 1, state_stack)
            kind = m.lastgroup
            start, pos = pos, m.end()
            value = text[start:pos]
            column = start - line_start + 1
            start_line = line
            if "\n" in value:
                line += value.count("\n")
                line_start = start + value.rindex("\n") + 1
            if kind in scanner.ignore:
                continue
            words = scanner.keywords.get(kind)
            if words is not None:
                kind = words.get(value, kind)
            yield Token(kind, value, start, start_line, column, line, pos - line_start + 1, pos)

    def _unexpected(self, scanner, text, pos, line, column, state_stack):
        """What Lark's contextual lexer raises where the state's lexer reads
        nothing: the token the full lexer reads there, refused by the parser,
        or, when no terminal at all matches, the characters."""
        allowed = scanner.allowed
        root = self.root
        m = root.match(text, pos)
        if m is None:  # (the ignored terminals are in every lexer: none matched here either)
            return UnexpectedCharacters(pos, line, column, allowed)
        value, kind = m.group(), m.lastgroup
        words = root.keywords.get(kind)
        if words is not None:
            kind = words.get(value, kind)
        end_line, end_column = line, column + len(value)
        if "\n" in value:
            end_line = line + value.count("\n")
            end_column = len(value) - value.rindex("\n")
        token = Token(kind, value, pos, line, column, end_line, end_column, m.end())
        return UnexpectedToken(token, set(allowed), self._accepts(state_stack))

    # -- parsing ---------------------------------------------------------------

    def parse(self, text: str, postlex, builder, tree: bool = False, max_depth: int = 0):
        """The value the builder makes of `text`'s root node, or with
        `tree=True` the parse tree (`Tree` nodes, tokens, None placeholders).
        With `max_depth`, a node nested deeper raises `Redo`.

        (One loop: a reduction written out in it rather than a call, the end
        of input a token like the others.)"""
        states, rules, end_state = self.states, self.rules, self.end
        state_stack = [self.start]
        # One entry per stack symbol: (value, first token, last token,
        # height).  The tokens are the first and last with a position below
        # it (None for a node of no token); a node's height counts the tree
        # nodes down to its deepest leaf (the depth the tree form would have).
        stack = []
        push = stack.append
        methods = {}
        last_token = None
        for token in itertools.chain(postlex.process(self._lex(text, state_stack)), (None,)):
            if token is None:
                token = _end_of_input(last_token)
            ttype = token.type
            while True:
                action = states[state_stack[-1]].get(ttype)
                if action is None:
                    raise self._refused(token, state_stack)
                if action >= 0:
                    assert ttype != "$END", "the end of input is never shifted"
                    state_stack.append(action)
                    push((token, token, token, 0))
                    break
                origin, size, kind, name, keep, nones_after = rules[~action]
                if kind == UNIT:  # the child stands for the rule: only the state changes
                    state_stack[-1] = states[state_stack[-2]][origin]
                    continue
                if size:
                    children = stack[-size:]
                    del stack[-size:]
                    del state_stack[-size:]
                    first, last = children[0][1], children[-1][2]
                    if first is None or last is None:
                        first = next((e[1] for e in children if e[1] is not None), None)
                        last = next((e[2] for e in reversed(children) if e[2] is not None), None)
                else:
                    children = []
                    first = last = None
                kept = []
                for i, splice, nones in keep:
                    if nones:
                        kept += [_ABSENT] * nones
                    if splice:
                        kept += children[i][0]
                    else:
                        kept.append(children[i])
                if nones_after:
                    kept += [_ABSENT] * nones_after
                if kind == SPLICE:
                    entry = (kept, first, last, 0)
                else:
                    height = max(map(_height, kept), default=0) + 1
                    if tree:
                        value = Tree(name, list(map(_value, kept)), (first, last))
                    else:
                        if height > max_depth:
                            raise Redo()
                        method = methods.get(name)
                        if method is None:
                            method = methods[name] = getattr(builder, name)
                        value = method((first, last), list(map(_value, kept)))
                    entry = (value, first, last, height)
                state_stack.append(states[state_stack[-1]][origin])
                push(entry)
                if state_stack[-1] == end_state and ttype == "$END":
                    return entry[0]
            last_token = token

    # -- errors ----------------------------------------------------------------

    def _refused(self, token, state_stack) -> UnexpectedToken:
        actions = self.states[state_stack[-1]]
        expected = {s for s in actions if s.isupper()}
        return UnexpectedToken(token, expected, self._accepts(state_stack))

    def _accepts(self, state_stack) -> set:
        """The terminals the parser would take in this state: those whose
        pending reductions end in a shift (or, for the end of input, in the
        end state)."""
        states, rules = self.states, self.rules
        accepts = set()
        for terminal in states[state_stack[-1]]:
            if not terminal.isupper():
                continue
            stack = list(state_stack)
            while True:
                action = states[stack[-1]].get(terminal)
                if action is None:
                    break
                if action >= 0:
                    accepts.add(terminal)
                    break
                origin, size = rules[-1 - action][:2]
                if size:
                    del stack[-size:]
                stack.append(states[stack[-1]][origin])
                if terminal == "$END" and stack[-1] == self.end:
                    accepts.add(terminal)
                    break
        return accepts
