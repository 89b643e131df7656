"""`TileOp`: a tile-primitive call with its keywords gathered, the form in
which the passes that plan or lower tile primitives (plan-tma, dispatch and
its variants) read a call.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, Optional


from tilec.compiler import records
from tilec.compiler import ir
from tilec.compiler.builtins import tile_primitive
from tilec.compiler.diagnostics import TilecError


@records.frozen(eq=False)
class TileOp:
    """A tile-primitive call as the variants see it: `warp.gemm(D, A, B, C,
    transpose_A=True, dispatch="mma_sync")` has name "gemm", scope "warp",
    four args, kwargs {"transpose_A": Bool(True)} and dispatch "mma_sync".
    `**{...}` splats are expanded into kwargs; `dispatch` is taken out of them."""

    name: str
    scope: Optional[str]  # "cta", "wg", "warp", "thread", or None when unprefixed
    args: tuple  # of ir.Expr
    kwargs: Mapping[str, ir.Expr]
    dispatch: Optional[str]
    call: ir.Call
    span: Optional[ir.Span]

    @classmethod
    def from_call(cls, call: ir.Call) -> "TileOp":
        name = tile_primitive(call.func)
        if name is None:
            raise ValueError(f"{call.func} is not a tile primitive")
        scope = call.func.rpartition(".")[0] or None
        kwargs: dict = {}
        for kw in call.kwargs:
            for key, value, span in _keyword_items(call, kw):
                if key in kwargs:
                    raise TilecError(f"{call.func}() got keyword '{key}' twice", span)
                kwargs[key] = value
        dispatch = kwargs.pop("dispatch", None)
        if dispatch is not None and not isinstance(dispatch, ir.Str):
            raise TilecError(
                f"{call.func}(): dispatch= must be a string literal naming a variant",
                dispatch.span or call.span,
            )
        return cls(
            name,
            scope,
            tuple(call.args),
            MappingProxyType(kwargs),
            dispatch.value if dispatch is not None else None,
            call,
            call.span,
        )

    def bind(self, signature) -> dict:
        """The call's arguments by parameter name under `signature` (a
        `builtins.Signature`): a located error for a call that does not fit."""
        kwargs = tuple(ir.Keyword(k, v, span=v.span) for k, v in self.kwargs.items())
        return signature.bind(self.call.func, self.args, kwargs, self.span)


def _keyword_items(call: ir.Call, kw: ir.Keyword):
    if kw.name is not None:
        return [(kw.name, kw.value, kw.span or call.span)]
    if not isinstance(kw.value, ir.DictExpr):
        raise TilecError(
            f"{call.func}(): a ** argument must be a {{...}} dict literal by the time it is dispatched",
            kw.value.span or call.span,
        )
    return [(k, v, v.span or call.span) for k, v in zip(kw.value.keys, kw.value.values)]
