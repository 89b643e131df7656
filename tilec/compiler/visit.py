"""Generic traversal of the attrs IR.

Passes are written as small rewrites; these two helpers spare each of them a
hand-written walk over every node class.  Children are discovered from the
attrs fields, so a new node class needs no change here.
"""
from __future__ import annotations

from typing import Callable, Iterator

import attrs

from tilec.compiler import ir


def _is_node(value) -> bool:
    return isinstance(value, ir.Node)


def children(node: ir.Node) -> Iterator[ir.Node]:
    """Direct child nodes, in field order (tuples flattened, None skipped)."""
    for field in attrs.fields(type(node)):
        if field.name == "span":
            continue
        value = getattr(node, field.name)
        if _is_node(value):
            yield value
        elif isinstance(value, tuple):
            for item in value:
                if _is_node(item):
                    yield item


def walk(node: ir.Node) -> Iterator[ir.Node]:
    """Every node below and including `node`, pre-order."""
    yield node
    for child in children(node):
        yield from walk(child)


def map_children(node: ir.Node, fn: Callable[[ir.Node], ir.Node]) -> ir.Node:
    """Rebuild `node` with `fn` applied to each direct child (not recursive)."""
    changes = {}
    for field in attrs.fields(type(node)):
        if field.name == "span":
            continue
        value = getattr(node, field.name)
        if _is_node(value):
            new = fn(value)
        elif isinstance(value, tuple) and any(_is_node(v) for v in value):
            new = tuple(fn(v) if _is_node(v) else v for v in value)
        else:
            continue
        if new is not value:
            changes[field.name] = new
    return attrs.evolve(node, **changes) if changes else node


def transform(node: ir.Node, fn: Callable[[ir.Node], ir.Node]) -> ir.Node:
    """Post-order rewrite: children first, then `fn` on the rebuilt node.

    `fn` returns the node unchanged to keep it.  Spans are preserved by
    `attrs.evolve`."""
    return fn(map_children(node, lambda child: transform(child, fn)))
