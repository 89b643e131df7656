"""The `canonicalize-layouts` pass: every layout in its one canonical spelling.

A layout can be written many ways (`S[(4, 32) : (1@wid_in_wg, 1@laneid)]` and
`S[128 : 1@tid_in_wg]`, `S[8, 256]` and `S[2048 : 1]`).  Later passes compare
layouts and take them apart -- dispatch matches an operand against a
fragment layout, TMA planning reads the box from the iterators -- and should
not each have to cope with every spelling, so after this pass a layout
literal is exactly `to_lit(canonicalize(to_layout(lit)))`: thread axes on the
scope axis, no unit iterators, contiguous iterators fused, explicit integer
strides, and no zero offset except `O[0@axis]` on a thread axis nothing
else names (the scope: `S[4 : 1] + O[0@laneid]` is lane 0's of each warp,
`S[4 : 1]` every thread's).  The mapping of every element and the scope are
unchanged (docs/layout.md, "Canonical form").

Rewritten are the layouts that belong to buffers -- a kernel parameter's
`layout`, the `layout=` argument of an allocation, `decl_buffer`,
`pool.alloc` or `.view` -- and module consts whose value is a layout
(expansion already copied them into the kernels; the const itself is kept
in step so an IR dump shows one notation).
"""
from __future__ import annotations

from typing import Optional

import attrs

from tilec.compiler import ir, visit
from tilec.compiler.layout import canonicalize
from tilec.compiler.layout_ir import to_layout, to_lit
from tilec.compiler.passmanager import Pass, PassContext


class CanonicalizeLayouts(Pass):
    name = "canonicalize-layouts"
    requires = frozenset({"folded"})
    provides = frozenset({"canonical-layouts"})

    def apply(self, module: ir.Module, ctx: PassContext) -> ir.Module:
        return canonicalize_module(module)


def canonical_lit(lit: ir.LayoutLit, memo: Optional[dict] = None) -> ir.LayoutLit:
    """`lit` in canonical form, every new node located at `lit`'s span; `lit`
    itself when it is canonical already (so its spans survive).  `memo`
    (literal -> its canonical form, or None when it is canonical) spares a
    module that writes one layout at many sites the work of all but the
    first: the form depends on the literal alone (equality ignores spans)."""
    new = memo.get(lit, lit) if memo is not None else lit
    if new is lit:  # not yet seen
        new = to_lit(canonicalize(to_layout(lit)))
        if new == lit:
            new = None
        if memo is not None:
            memo[lit] = new
    if new is None:
        return lit
    return visit.transform(new, lambda node: attrs.evolve(node, span=lit.span))


def _layout_kwargs(node: ir.Node, memo: dict) -> ir.Node:
    if not any(k.name == "layout" and type(k.value) is ir.LayoutLit for k in node.kwargs):
        return node
    kwargs = tuple(
        visit.keep(k, value=canonical_lit(k.value, memo))
        if k.name == "layout" and type(k.value) is ir.LayoutLit
        else k
        for k in node.kwargs
    )
    return visit.keep(node, kwargs=kwargs)


def _param(p: ir.Param, memo: dict) -> ir.Param:
    if isinstance(p.layout, ir.LayoutLit):
        return visit.keep(p, layout=canonical_lit(p.layout, memo))
    return p


_CALLS = frozenset({ir.Call, ir.Method})


def _all_canonical(body: tuple, memo: dict) -> bool:
    """Is every `layout=` literal of a call in `body` canonical already?  A
    look at every node, nothing rebuilt: most kernels are written (or
    expanded) in canonical form, and a rebuild of every statement to find
    that out cost several times the look."""
    for s in body:
        for node in visit.find_all(s, _CALLS):
            if node.kwargs and _layout_kwargs(node, memo) is not node:
                return False
    return True


def canonicalize_module(module: ir.Module) -> ir.Module:
    memo: dict = {}
    consts = tuple(
        visit.keep(c, value=canonical_lit(c.value, memo)) if isinstance(c.value, ir.LayoutLit) else c
        for c in module.consts
    )
    kernels = tuple(
        visit.keep(
            k,
            params=tuple(_param(p, memo) for p in k.params),
            body=k.body if _all_canonical(k.body, memo) else tuple(
                visit.transform(s, lambda node: _layout_kwargs(node, memo), only=_CALLS) for s in k.body
            ),
        )
        for k in module.kernels
    )
    return visit.keep(module, consts=consts, kernels=kernels)
