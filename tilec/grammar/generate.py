"""The parser tables, computed from `tile.lark` with Lark.

Lark is a development tool here: `tools/grammar_tables.py` runs `render()`
and writes `tilec/grammar/tables.py`, the module `tilec.grammar.lalr` parses
with, and the parser falls back to `build()` (the same tables, computed in
the process) only when the grammar no longer matches that module.  A normal
run never imports Lark: its import, the `regex` module it loads, and the
rebuilding of its lexers from serialized tables cost more than the parse.

Everything the run-time parser needs is read off the parser Lark builds, so
that it tokenizes, shapes the tree and reports errors exactly as Lark does:

- the LALR table (states numbered canonically, so one grammar always gives
  the same file);
- the contextual lexer: per parser state, the one regular expression Lark
  matches (its terminals in Lark's priority order), the keyword table that
  turns a NAME into a keyword where the state accepts the keyword, and the
  terminals it accepts (for errors); the root lexer likewise; the patterns
  of the terminals every lexer ignores (blanks), which the run-time lexer
  reads together with the token after them;
- per rule, what Lark's tree builder does with the children: which are
  kept, which `_rule` children are spliced in, where `[x]` placeholders
  (None) go, and whether a `?rule` with one child stands for that child.
"""
from __future__ import annotations

import os
import pprint
import re

from lark import Lark
from lark.lexer import PatternStr

from tilec.grammar.lalr import NODE, SPLICE, UNIT
from tilec.grammar.parser import grammar_text

TABLES = os.path.join(os.path.dirname(__file__), "tables.py")

LARK_OPTIONS = dict(
    parser="lalr",
    lexer="contextual",
    propagate_positions=True,
    maybe_placeholders=True,
    start="module",
)



class _PostLex:
    """What the tables need of the postlexer (`parser._Indentation`): it
    passes `_NL` in every state, so every state's lexer must match it."""

    always_accept = ("_NL",)

    def process(self, stream):
        return stream


def lark_parser() -> Lark:
    return Lark(grammar_text(), postlex=_PostLex(), **LARK_OPTIONS)


def build() -> dict:
    """The tables as the dict `tables.py` holds (see `render`)."""
    parser = lark_parser()
    frontend = parser.parser
    table = frontend.parser.parser.parse_table
    start = table.start_states["module"]
    end = table.end_states["module"]
    order = _canonical_states(table.states, start)
    number = {state: i for i, state in enumerate(order)}

    rules = sorted({arg for actions in table.states.values() for kind, arg in actions.values()
                    if kind.name == "Reduce"}, key=str)
    rule_id = {rule: i for i, rule in enumerate(rules)}
    states = []
    for state in order:
        actions = {}
        for symbol, (kind, arg) in sorted(table.states[state].items()):
            actions[str(symbol)] = number[arg] if kind.name == "Shift" else -1 - rule_id[arg]
        states.append(actions)

    lexer = frontend.lexer.lexer  # PostLexConnector -> ContextualLexer
    scanners, scanner_id = [], {}

    def scanner(basic) -> int:
        if id(basic) not in scanner_id:
            scanner_id[id(basic)] = len(scanners)
            scanners.append(_scanner(basic))
        return scanner_id[id(basic)]

    lexer_of = [scanner(lexer.lexers[state]) for state in order]
    root = scanner(lexer.root_lexer)
    rank = {name: i for i, name in enumerate(scanners[root][4])}
    for s in scanners:
        # every lexer tries its terminals in the root lexer's order (Lark
        # sorts them all by one key): the run-time parser relies on it
        ranks = [rank[name] for name in s[4] if name in rank]
        assert ranks == sorted(ranks), s[4]
    texts = {t.name: t.pattern.value if isinstance(t.pattern, PatternStr) else t.name for t in parser.terminals}
    ignored = {t.name: t.pattern.to_regexp() for t in parser.terminals if t.name in parser.lexer_conf.ignore}
    assert all(s[3] == tuple(sorted(ignored)) for s in scanners), "every lexer ignores the same terminals"
    # The run-time lexer reads blanks with the token after them, which
    # stands for reading them as a token of their own only while no other
    # terminal matches where an ignored one starts.
    blanks = [chr(c) for c in range(128) if any(re.match(p, chr(c)) for p in ignored.values())]
    assert not [t.name for t in parser.terminals if t.name not in ignored
                for c in blanks if re.match(t.pattern.to_regexp(), c)], "a terminal starts with a blank"
    return {
        "grammar": grammar_text(),
        "start": number[start],
        "end": number[end],
        "states": states,
        "rules": [_rule(rule) for rule in rules],
        "scanners": scanners,
        "lexer_of": lexer_of,
        "root_lexer": root,
        "terminal_texts": dict(sorted(texts.items())),
        "ignored": tuple(pattern for _, pattern in sorted(ignored.items())),
    }


def _canonical_states(states: dict, start) -> list:
    """States in breadth-first order from the start state, following shifts
    and gotos in symbol order (Lark's numbering changes from run to run)."""
    order, seen, queue = [], set(), [start]
    while queue:
        state = queue.pop(0)
        if state in seen:
            continue
        seen.add(state)
        order.append(state)
        for symbol in sorted(states[state]):
            kind, arg = states[state][symbol]
            if kind.name == "Shift":
                queue.append(arg)
    end_only = sorted(set(arg for actions in states.values() for kind, arg in actions.values()
                          if kind.name == "Shift") - seen)
    return order + end_only + sorted(set(states) - seen - set(end_only))


def _scanner(basic) -> tuple:
    """(pattern, keywords, allowed, ignore, terminals) of one of Lark's
    basic lexers: the alternation it matches (one named group per terminal,
    in Lark's order), {terminal: {text: keyword terminal}} for the terminals
    whose matches may be keywords, the terminals it reports as expected when
    nothing matches, the terminals it skips, and the terminals of the
    alternation in its order."""
    scanner = basic.scanner
    (mre,) = scanner._mres
    keywords = {}
    for name, callback in sorted(basic.callback.items()):
        words = {}
        for t in callback.scanner.terminals:
            assert isinstance(t.pattern, PatternStr) and not t.pattern.flags, t
            words[t.pattern.value] = t.name
        keywords[name] = dict(sorted(words.items()))
    assert not mre.flags & ~32, "the scanner's regex flags are re's defaults"  # re.UNICODE
    allowed = scanner.allowed_types - basic.ignore_types or {"<END-OF-FILE>"}
    terminals = tuple(t.name for t in scanner.terminals)
    return (mre.pattern, keywords, tuple(sorted(allowed)), tuple(sorted(basic.ignore_types)), terminals)


def _rule(rule) -> tuple:
    """(origin, size, kind, name, keep, placeholders_after) of one rule, as
    Lark's tree builder shapes its node: `keep` lists the kept children as
    (index, splice, placeholders before it)."""
    options = rule.options
    expansion = rule.expansion
    empty = options.empty_indices
    if empty:
        s = "".join(str(int(b)) for b in empty)
        nones = [len(ones) for ones in s.split("0")]
    else:
        nones = [0] * (len(expansion) + 1)
    keep, pending = [], 0
    for i, sym in enumerate(expansion):
        pending += nones[i]
        if options.keep_all_tokens or not (sym.is_term and sym.filter_out):
            keep.append((i, not sym.is_term and sym.name.startswith("_"), pending))
            pending = 0
    pending += nones[len(expansion)]
    origin = str(rule.origin.name)
    name = str(rule.alias or rule.options.template_source or origin)
    assert not rule.options.template_source
    if options.expand1 and not rule.alias:
        # Lark gives such a rule the child itself when one child is left.  The
        # run-time parser relies on that child being all the rule matched (so
        # its position is the rule's): every child kept, none spliced.
        assert len(keep) == len(expansion) and not any(s or n for _, s, n in keep) and not pending, rule
        if len(expansion) == 1:
            return (origin, 1, UNIT, name, (), 0)
    if name.startswith("_"):
        kind = SPLICE
        assert not options.expand1, rule
    else:
        kind = NODE
    return (origin, len(expansion), kind, name, tuple(keep), pending)


def render() -> str:
    """`tables.py`: the tables as Python literals (loaded from the bytecode
    cache like any module; nothing is unpickled or parsed at run time)."""
    tables = build()
    lines = [
        '"""The LALR tables of `tile.lark`, generated by `tools/grammar_tables.py`',
        "(`tilec.grammar.generate`); do not edit.  `tests/test_parser_tables.py`",
        'fails while they and the grammar differ."""',
        "# fmt: off",
    ]
    for key, value in tables.items():
        lines.append(f"{key.upper()} = {pprint.pformat(value, width=120, sort_dicts=False)}")
    return "\n".join(lines) + "\n"
