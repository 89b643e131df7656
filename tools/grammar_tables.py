"""Regenerate `tilec/grammar/tables.json`, the parser tables that ship with
tilec, from `tilec/grammar/tile.lark`.  Run it after editing the grammar:

    python3 tools/grammar_tables.py

`tests/test_parser_tables.py` fails while the tables and the grammar differ.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lark.grammar import Rule  # noqa: E402
from lark.lexer import TerminalDef  # noqa: E402

from tilec.grammar.parser import build_parser, grammar_digest, grammar_text  # noqa: E402

from tilec.grammar.parser import TABLES  # noqa: E402


def render() -> str:
    """The tables as JSON (which reads back in a few milliseconds and, unlike
    pickle, cannot run code): Lark's serialized parser and memo, and the
    digest of what they were generated from."""
    data, memo = build_parser(postlex=False).memo_serialize([TerminalDef, Rule])
    data["parser"]["parser"] = canonical_table(data["parser"]["parser"])
    tables = {"digest": grammar_digest(grammar_text()), "data": data, "memo": memo}
    return json.dumps(tables, separators=(",", ":"), sort_keys=True) + "\n"


def canonical_table(table: dict) -> dict:
    """The LALR table with its arbitrary numbers replaced by canonical ones,
    so that one grammar always gives the same file (Lark numbers tokens and
    states in an order that changes from run to run): tokens numbered in
    name order, states in breadth-first order from the start state,
    following shifts in token order.  Action 0 is a shift (its argument a
    state), 1 a reduce (a rule)."""
    names = sorted(table["tokens"].values())
    token_id = {name: i for i, name in enumerate(names)}
    name_of = table["tokens"]
    order, seen = [], set()
    queue = [table["start_states"][s] for s in sorted(table["start_states"])]
    while queue:
        state = queue.pop(0)
        if state in seen:
            continue
        seen.add(state)
        order.append(state)
        actions = table["states"][state]
        for token in sorted(actions, key=lambda t: name_of[t]):
            action, arg = actions[token]
            if action == 0:
                queue.append(arg)
    order += sorted(set(table["states"]) - seen)  # unreachable: none in an LALR table
    number = {state: i for i, state in enumerate(order)}

    def action(a):
        kind, arg = a
        return [kind, number[arg] if kind == 0 else arg]

    return dict(
        table,
        tokens={token_id[name]: name for name in names},
        states={
            number[state]: {token_id[name_of[t]]: action(a) for t, a in table["states"][state].items()}
            for state in order
        },
        start_states={k: number[v] for k, v in table["start_states"].items()},
        end_states={k: number[v] for k, v in table["end_states"].items()},
    )


def main() -> int:
    Path(TABLES).write_text(render(), encoding="utf-8")
    print(f"wrote {Path(TABLES).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
