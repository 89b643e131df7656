"""The `expand-inline` pass: everything that is substitution rather than code.

After it, a kernel mentions no const, meta value or inline helper:

- `-D NAME=VALUE` replaces the value of `const NAME` (overriding a const the
  file does not define is an error, since it is almost always a typo);
- const and `meta` names are replaced by their (already expanded) values at
  each use, so `meta tid = warp * 32 + lane` turns `if tid == 0` into the
  guard the scope inference recognises;
- a call statement of an `inline def` helper is replaced by the helper's body,
  its parameters bound to the argument expressions.  The body sees the
  caller's names at the call site, as a Python closure would.  Assigning to
  a variable the caller can see updates that variable (as `+=` always did:
  no silent shadowing); the other names the helper binds are its own and are
  renamed when they would capture a caller's name (a helper's `for s in
  ...` inside the caller's `for s in ...`, a temporary also used elsewhere);
- a helper whose body ends in `return expr` can be called inside an
  expression: its other statements are placed before the statement holding
  the call (in call order) and `expr` takes the call's place, so
  `m = row_max(x)` and `a, b = split(v)` work.  A `return` anywhere else is
  an error, as is a call inside a `while` condition (which would run once,
  not once per iteration);
- `**cfg` splats of dict values become keyword arguments;
- an `if` whose condition (substituted) folds to True or False gets that
  literal as its condition and only its branch taken is expanded: the
  other stays as written, unexpanded and unchecked, until fold-constants
  drops it (docs/language.md, "Branches decided at compile time").  A
  kernel's `-D` options (epilogue variants, cluster shapes) rule out most
  of its code, and expanding the helpers of code that is thrown away was
  most of the work of the passes up to fold-constants.

Block structure scopes metas and helpers: a `meta` inside a loop body is not
visible after the loop.
"""
from __future__ import annotations

import re
from typing import Optional


from tilec.compiler import records
from tilec.compiler import ir, visit
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.fold import fold_expr
from tilec.compiler.passmanager import Pass, PassContext
from tilec.compiler.visit import NameGen


@records.frozen
class _Binding:
    """What a name stands for: kind is "const", "meta", "param" (of the
    helper `owner`) or "helper" (value is then the InlineDef), which are
    substituted, or "var" (a variable bound in this scope, kept)."""

    kind: str
    value: object
    owner: str = ""


_VAR = _Binding("var", None)
_NOT_BOUND = _Binding("", None)  # what `env.get` gives for a name bound to nothing

_INT = re.compile(r"[+-]?(0[xX][0-9a-fA-F]+|[0-9]+)")
_FLOAT = re.compile(r"[+-]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][+-]?[0-9]+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def parse_define_value(name: str, value, span: Optional[ir.Span] = None) -> ir.Expr:
    """The expression a `-D NAME=VALUE` stands for: an int (decimal or hex), a
    float, True/False, a dtype, or another name (a const, `SWIZZLE_128B_ATOM`)."""
    text = str(value).strip()
    if _INT.fullmatch(text):  # decimal even with leading zeros ("08"), which int(text, 0) refuses
        return ir.Int(int(text, 16 if "x" in text.lower() else 10), span=span)
    if _FLOAT.fullmatch(text):
        return ir.Float(float(text), span=span)
    if text in ("True", "False"):
        return ir.Bool(text == "True", span=span)
    if text in DTYPES:
        return ir.DTypeLit(text, span=span)
    if _NAME.fullmatch(text):
        return ir.Name(text, span=span)
    raise TilecError(f"-D {name}={text}: expected an integer, a float or a name", span)


def apply_defines(consts, defines: dict) -> tuple:
    """The consts with the `-D` values in place of the written ones."""
    by_name = {c.name: c for c in consts}
    for name in defines:
        if name not in by_name:
            known = ", ".join(by_name) or "none"
            raise TilecError(f"-D {name}: the program has no const named '{name}' (consts: {known})")
    return tuple(
        visit.evolve(c, value=parse_define_value(c.name, defines[c.name], c.value.span))
        if c.name in defines
        else c
        for c in consts
    )


class ExpandInline(Pass):
    name = "expand-inline"
    requires = frozenset({"parsed"})
    provides = frozenset({"expanded"})

    def apply(self, module: ir.Module, ctx: PassContext) -> ir.Module:
        return expand_module(module, ctx.defines)


def expand_module(module: ir.Module, defines: dict) -> ir.Module:
    env: dict = {}
    consts = []
    for c in apply_defines(module.consts, defines):
        if c.name in env:
            raise TilecError(f"const '{c.name}' is defined twice", c.span)
        value = _Expander(env, set()).subst(c.value, env)
        env[c.name] = _Binding("const", value)
        consts.append(visit.evolve(c, value=value))
    for h in module.helpers:
        if h.name in env:
            raise TilecError(f"'{h.name}' is defined twice", h.span)
        env[h.name] = _Binding("helper", h)
    # Every name of the module (what fresh names avoid) and each kernel's
    # names outside its helpers' bodies, in one walk of each kernel.
    everything, outside = set(env), []
    for node in visit.children(module):
        if type(node) is not ir.Kernel:
            everything |= visit.identifiers(node)
            continue
        helpers: list = []
        names = visit.identifiers(node, skip_helper_bodies=True, skipped=helpers)
        outside.append(names)
        everything |= names
        for h in helpers:
            everything |= visit.identifiers(h)
    kernels = tuple(_Expander(env, everything).kernel(k, names) for k, names in zip(module.kernels, outside))
    return visit.evolve(module, consts=tuple(consts), helpers=(), kernels=kernels)


class _Expander:
    """Expands one kernel.  A helper's locals are renamed away from `outside`
    (the names the kernel itself uses) and `bound` (every variable bound so
    far, including earlier expansions' locals); fresh names avoid every name
    `used` anywhere in the module.

    `renames` holds the renames of the helper body being expanded (old name
    -> fresh name), applied to its names as they are met: the expansion of
    a body is that of the body renamed, without a rewrite of the whole body
    first (the body is rewritten again by the substitution anyway)."""

    def __init__(self, env: dict, used: set):
        self.globals = env
        self.names = NameGen(used)
        self.bound: set = set()
        self.outside: set = set()
        self.renames: dict = {}
        self.binds: dict = {}  # id(helper) -> (helper, its loop variables, the names it assigns, early return)

    # -- expressions -------------------------------------------------------

    def subst(self, expr: ir.Expr, env: dict, calls: bool = False) -> ir.Expr:
        """`expr` with consts, metas and parameters replaced by their values
        and `**` splats expanded.  A helper call is an error here, or with
        `calls` raises `_HelperCall` for `value` to expand it."""
        Name, Call = ir.Name, ir.Call
        cls = type(expr)
        if cls is Name or cls in ir.LITERALS:  # (half of the expressions: an argument, a literal)
            return self._name(expr, env) if cls is Name else expr

        def fn(node):
            cls = type(node)  # (IR classes have no subclasses)
            if cls is Name:
                return self._name(node, env)
            if cls is Call:
                b = env.get(node.func)
                if b is not None and b.kind == "helper":
                    if calls:
                        raise _HelperCall()
                    raise TilecError(f"inline helper '{node.func}' cannot be called here", node.span)
            if node.kwargs:  # (a Call or a Method: `only` calls fn on nothing else)
                kwargs = _expand_splats(node.kwargs)
                return node if kwargs == node.kwargs else visit.evolve(node, kwargs=kwargs)
            return node

        return visit.transform(expr, fn, only=_SUBSTITUTED)

    def _name(self, node: ir.Name, env: dict) -> ir.Expr:
        """A name (of the body being expanded) renamed and substituted: a
        const's, meta's or parameter's value at the name's span; any other
        name as it is."""
        if self.renames:
            node = self._renamed_name(node)
        b = env.get(node.id)
        if b is None or b.kind == "var":
            return node
        if b.kind == "helper":
            raise TilecError(f"inline helper '{node.id}' is not a value", node.span)
        value, span = b.value, node.span
        if not span:
            return value
        cls = type(value)  # (an int const, an argument that is a name: most values, built as such)
        if cls is ir.Int:
            return ir.Int(value.value, span=span)
        if cls is ir.Name:
            return ir.Name(value.id, span=span)
        return visit.evolve(value, span=span)

    def _renamed_name(self, node: ir.Name) -> ir.Name:
        new = self.renames.get(node.id)
        return node if new is None else visit.evolve(node, id=new)

    def _renamed(self, node: ir.Node) -> ir.Node:
        """`node` of the body being expanded, renamed, for what is kept as
        written (a branch not taken, a helper defined in the body) or is
        expanded in two rewrites (`value`)."""
        renames = self.renames
        if not renames:
            return node

        def fn(n):
            if type(n) is ir.Name:
                return self._renamed_name(n)
            new = renames.get(n.var)  # (a For)
            return n if new is None else visit.evolve(n, var=new)

        return visit.transform(node, fn, only=_RENAMED)

    # -- statements --------------------------------------------------------

    def kernel(self, k: ir.Kernel, outside: set) -> ir.Kernel:
        """`k` expanded; `outside` holds its names outside helper bodies."""
        self.outside = outside
        env = dict(self.globals)
        params = []
        for p in k.params:
            self._check_bindable(p.name, env, p.span)
            self.bound.add(p.name)
            env[p.name] = _VAR
            params.append(
                visit.evolve(
                    p,
                    shape=None if p.shape is None else tuple(self.subst(e, env) for e in p.shape),
                    layout=None if p.layout is None else self.subst(p.layout, env),
                    cond=None if p.cond is None else self.subst(p.cond, env),
                )
            )
        body = self.block(k.body, env, ())
        return visit.evolve(k, params=tuple(params), body=body)

    def block(self, stmts, env: dict, stack: tuple) -> tuple:
        """The expanded statements; a block of nothing but metas and helper
        definitions keeps a `pass`, so the IR still prints and parses."""
        out = self.statements(stmts, dict(env), stack)
        if stmts and not out:
            out.append(ir.Pass(span=stmts[0].span))
        return tuple(out)

    def statements(self, stmts, env: dict, stack: tuple) -> list:
        """The expanded statements, binding into `env` (the caller's copy)."""
        out = []
        for s in stmts:
            out.extend(self.stmt(s, env, stack))
        return out

    def value(self, expr: ir.Expr, env: dict, stack: tuple, pre: list) -> ir.Expr:
        """`expr` substituted, each helper call in it expanded: the helper's
        statements appended to `pre`, its return value in the call's place."""
        if expr is None:
            return None
        # Most expressions call no helper: substituted in one rewrite, which
        # stops at a helper call.  An expression that holds one is expanded
        # below, its errors raised in that order, as if the rewrite had not
        # been tried.
        try:
            return self.subst(expr, env, calls=True)
        except _HelperCall:
            pass
        except TilecError:
            if _helper_call(expr, env) is None:
                raise

        def fn(node):
            if isinstance(node, ir.Call):
                b = env.get(node.func)
                if b is not None and b.kind == "helper":
                    return self.inline_value(node, env, stack, pre)
            return node

        # Renamed first, then rewritten with no renames: the values the
        # calls return are the helpers' own, and take none of these.
        expr, renames = self._renamed(expr), self.renames
        self.renames = {}
        try:
            return self.subst(visit.transform(expr, fn), env)
        finally:
            self.renames = renames

    def stmt(self, s: ir.Stmt, env: dict, stack: tuple) -> list:
        pre: list = []
        cls = type(s)  # (IR classes have no subclasses)
        if cls is ir.Assign:
            value = self.value(s.value, env, stack, pre)
            targets = tuple(self.target(t, env, pre) for t in s.targets)
            return pre + [visit.evolve(s, targets=targets, value=value)]
        if cls is ir.AugAssign:
            value = self.value(s.value, env, stack, pre)
            if isinstance(s.target, ir.Name):
                target = self._renamed_name(s.target) if self.renames else s.target
                self._check_bindable(target.id, env, target.span)
            else:
                target = self.target(s.target, env, pre)
            return pre + [visit.evolve(s, target=target, value=value)]
        if cls is ir.Return:
            raise TilecError("'return' is allowed only as the last statement of an inline helper", s.span)
        if cls is ir.Meta:
            b = env.get(s.name)
            if b is not None and b.kind != "meta":
                self._check_bindable(s.name, env, s.span)
            if s.name in self.bound:
                raise TilecError(f"'{s.name}' is a variable; a meta value needs another name", s.span)
            env[s.name] = _Binding("meta", self.subst(s.value, env))
            return []
        if cls is ir.InlineDef:
            self._check_bindable(s.name, env, s.span)
            env[s.name] = _Binding("helper", self._renamed(s))
            return []
        if cls is ir.ExprStmt:
            e = s.expr
            if type(e) is ir.Call and env.get(e.func, _NOT_BOUND).kind == "helper":
                body, _ = self.inline(e, env, stack)
                return body
            return pre + [visit.evolve(s, expr=self.value(e, env, stack, pre))]
        if cls is ir.For:
            start, stop, step = (self.value(x, env, stack, pre) for x in (s.start, s.stop, s.step))
            var = self.renames.get(s.var, s.var)
            self._check_bindable(var, env, s.span)
            self.bound.add(var)
            inner = dict(env)
            inner[var] = _VAR
            return pre + [
                visit.evolve(s, var=var, start=start, stop=stop, step=step, body=self.block(s.body, inner, stack))
            ]
        if cls is ir.If:
            cond = self.value(s.cond, env, stack, pre)
            decided = _constant_condition(cond)
            if decided is None:
                then, orelse = self.block(s.then, env, stack), self.block(s.orelse, env, stack)
                return pre + [visit.evolve(s, cond=cond, then=then, orelse=orelse)]
            # The branch not taken stays as written, unexpanded, until fold-constants drops it.
            if decided.value:
                then, orelse = self.block(s.then, env, stack), tuple(map(self._renamed, s.orelse))
            else:
                then, orelse = tuple(map(self._renamed, s.then)), self.block(s.orelse, env, stack)
            return pre + [visit.evolve(s, cond=decided, then=then, orelse=orelse)]
        if cls is ir.While:
            n = _helper_call(s.cond, env)
            if n is not None:
                raise TilecError(
                    f"inline helper '{n.func}' in a while condition would run once, not at each test: "
                    f"assign its value before the loop and again at the end of the body",
                    n.span,
                )
            return [
                visit.evolve(s, cond=self.subst(s.cond, env), body=self.block(s.body, env, stack))
            ]
        if cls is ir.TensorMap:
            return [visit.evolve(s, value=self.subst(s.value, env))]
        return [s]  # Pass

    def target(self, t: ir.Expr, env: dict, pre: list) -> ir.Expr:
        """An assignment target: names are bound, stores have their indices expanded."""
        if isinstance(t, ir.Name):
            if self.renames:
                t = self._renamed_name(t)
            self._check_bindable(t.id, env, t.span)
            self.bound.add(t.id)
            env[t.id] = _VAR
            return t
        if isinstance(t, ir.TupleExpr):
            return visit.evolve(t, items=tuple(self.target(i, env, pre) for i in t.items))
        return self.value(t, env, (), pre)

    def _check_bindable(self, name: str, env: dict, span) -> None:
        b = env.get(name)
        if b is None or b.kind == "var":
            return
        what = {
            "const": f"'{name}' is a const",
            "meta": f"'{name}' is a meta value",
            "param": f"'{name}' is a parameter of inline helper '{b.owner}'",
            "helper": f"'{name}' is an inline helper",
        }[b.kind]
        raise TilecError(f"{what} and cannot be assigned", span)

    # -- helpers -----------------------------------------------------------

    def inline_value(self, call: ir.Call, env: dict, stack: tuple, pre: list) -> ir.Expr:
        """A helper called inside an expression: its statements go to `pre`,
        the value of its `return` is the result."""
        body, value = self.inline(call, env, stack)
        if value is None:
            raise TilecError(f"inline helper '{call.func}' returns no value (it has no 'return expr')", call.span)
        pre.extend(body)
        assigned = {t.id for n in visit.statements(body) if isinstance(n, ir.Assign)
                    for t in n.targets if isinstance(t, ir.Name)}
        return self._hold(value, call.func, pre, _buffers_bound(body) | (_names_in(value) - assigned))

    def _hold(self, value: ir.Expr, helper: str, pre: list, keep: set) -> ir.Expr:
        """The returned value, kept in a fresh variable when it reads
        variables: a later call in the same statement may assign them.
        Literals, regions (a slice of a buffer) and the names in `keep` --
        buffers the helper made, names it does not assign (a parameter's
        buffer) -- are used as they are."""
        if isinstance(value, ir.TupleExpr):
            return visit.evolve(value, items=tuple(self._hold(v, helper, pre, keep) for v in value.items))
        if isinstance(value, (ir.Int, ir.Float, ir.Bool, ir.Str, ir.DTypeLit, ir.LayoutLit)):
            return value
        if isinstance(value, ir.Name) and value.id in keep:
            return value
        if isinstance(value, ir.Index) and any(isinstance(i, ir.Slice) for i in value.indices):
            return value
        name = self.names.fresh(f"{helper}_value")
        self.bound.add(name)
        pre.append(ir.Assign((ir.Name(name, span=value.span),), value, span=value.span))
        return ir.Name(name, span=value.span)

    def inline(self, call: ir.Call, env: dict, stack: tuple):
        """(statements, returned expression or None) of one expansion."""
        helper: ir.InlineDef = env[call.func].value
        if helper.name in stack:
            chain = " -> ".join(stack + (helper.name,))
            raise TilecError(f"inline helper '{helper.name}' calls itself ({chain})", call.span)
        args = [self.subst(a, env) for a in call.args]
        kwargs = _expand_splats(
            tuple(visit.evolve(k, value=self.subst(k.value, env)) for k in call.kwargs)
        )
        values = self._bind_arguments(helper, call, args, kwargs)
        renames = self._renames(helper, values, env)
        body = helper.body
        body_env = dict(env)
        for p, v in values.items():
            body_env[p] = _Binding("param", v, helper.name)
        early = self._binds(helper)[2]
        if early is not None:
            raise TilecError(
                f"'return' ends inline helper '{helper.name}': it must be the last statement of "
                f"its body (no early return)",
                early.span,
            )
        ret = body[-1] if body and isinstance(body[-1], ir.Return) else None
        if ret is not None:
            body = body[:-1]
        inner = stack + (helper.name,)
        outer, self.renames = self.renames, renames
        try:
            out = self.statements(body, body_env, inner)
            value = None if ret is None else self.value(ret.value, body_env, inner, out)
        finally:
            self.renames = outer
        return out, value

    def _bind_arguments(self, helper: ir.InlineDef, call: ir.Call, args, kwargs) -> dict:
        params = helper.params
        if len(args) > len(params):
            raise TilecError(
                f"inline helper '{helper.name}' takes {len(params)} argument"
                f"{'' if len(params) == 1 else 's'} but {len(args)} were given",
                call.span,
            )
        values = dict(zip(params, args))
        for k in kwargs:
            if k.name not in params:
                raise TilecError(
                    f"inline helper '{helper.name}' has no parameter '{k.name}'", k.span or call.span
                )
            if k.name in values:
                raise TilecError(
                    f"argument '{k.name}' of inline helper '{helper.name}' is given twice",
                    k.span or call.span,
                )
            values[k.name] = k.value
        missing = [p for p in params if p not in values]
        if missing:
            raise TilecError(
                f"inline helper '{helper.name}' is missing argument"
                f"{'' if len(missing) == 1 else 's'} {', '.join(repr(m) for m in missing)}",
                call.span,
            )
        return {p: values[p] for p in params}

    def _binds(self, helper: ir.InlineDef) -> tuple:
        """(the loop variables, the names assigned, the first `return` before
        the last statement or None) of a helper's body, found in one pass
        over its statements once per helper: a kernel expands the same
        helper many times."""
        hit = self.binds.get(id(helper))
        if hit is not None and hit[0] is helper:
            return hit[1:]
        loop_vars, assigned, early = set(), set(), None
        last = len(helper.body) - 1
        for position, s in enumerate(helper.body):
            for n in visit.statements((s,)):  # (no statement is inside an expression)
                if isinstance(n, ir.For):
                    loop_vars.add(n.var)
                elif isinstance(n, ir.Assign):
                    for t in n.targets:
                        items = t.items if isinstance(t, ir.TupleExpr) else (t,)
                        assigned.update(i.id for i in items if isinstance(i, ir.Name))
                elif isinstance(n, ir.Return) and early is None and position < last:
                    early = n
        self.binds[id(helper)] = (helper, loop_vars, assigned, early)  # the helper kept so its id stays its own
        return loop_vars, assigned, early

    def _renames(self, helper: ir.InlineDef, values: dict, env: dict) -> dict:
        """Old name -> fresh name for each variable the helper binds that
        the caller already uses (bound so far, used by the kernel, or in an
        argument of this call) -- except a variable the caller can see at
        the call (a "var" of `env`), which an assignment in the helper
        updates.  Loop variables are always the helper's own.  (Only the
        helper's own names are looked up: a kernel expands helpers by the
        hundred, and most bind nothing that clashes.)"""
        loop_vars, assigned, _ = self._binds(helper)
        local = loop_vars | {name for name in assigned if env.get(name, _NOT_BOUND).kind != "var"}
        own = local - set(helper.params)
        clashes = {name for name in own if name in self.bound or name in self.outside}
        if own - clashes:
            clashes |= (own - clashes) & set().union(*(_names_in(v) for v in values.values()))
        return {name: self.names.fresh(name) for name in sorted(clashes)}


_SUBSTITUTED = frozenset({ir.Name, ir.Call, ir.Method})  # the nodes `subst` may change
_RENAMED = frozenset({ir.Name, ir.For})  # the nodes a helper's locals are renamed in


class _HelperCall(Exception):
    """Raised by `subst(calls=True)` at a call of an inline helper."""


_MEMORY_CALLS = frozenset({"alloc", "alloc_shared", "alloc_local", "decl_buffer", "smem_pool"})


def _helper_call(expr: ir.Expr, env: dict) -> Optional[ir.Call]:
    """The first call of an inline helper in `expr` (pre-order), or None."""
    for n in visit.find_all(expr, ir.CALLS):
        b = env.get(n.func)
        if b is not None and b.kind == "helper":
            return n
    return None


def _constant_condition(cond: ir.Expr) -> Optional[ir.Bool]:
    """The literal an `if` condition (consts and metas substituted) folds to,
    or None: a decided `if` keeps its branch not taken unexpanded
    (docs/language.md, "Branches decided at compile time").  A condition
    whose folding fails decides nothing here: fold-constants reports it,
    after the errors of the passes before it, as it always did."""
    try:
        folded = fold_expr(cond)
    except TilecError:
        return None
    return folded if type(folded) is ir.Bool else None


def _names_in(e: ir.Expr) -> set:
    return {n.id for n in visit.find_all(e, ir.NAMES)}


def _buffers_bound(stmts) -> set:
    """Names the statements bind to buffers or pools (an alloc, a view)."""
    out = set()
    for n in visit.statements(stmts):
        if isinstance(n, ir.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ir.Name):
            v = n.value
            if isinstance(v, ir.Method) or (isinstance(v, ir.Call) and v.func in _MEMORY_CALLS):
                out.add(n.targets[0].id)
    return out


def _expand_splats(kwargs: tuple) -> tuple:
    """`**{"a": 1}` becomes `a=1`; a keyword given twice is an error."""
    out = []
    for k in kwargs:
        if k.name is not None:
            out.append(k)
            continue
        if not isinstance(k.value, ir.DictExpr):
            raise TilecError("'**' needs a dict (a meta value bound to {...})", k.value.span or k.span)
        out.extend(
            ir.Keyword(key, value, span=value.span or k.span)
            for key, value in zip(k.value.keys, k.value.values)
        )
    seen = set()
    for k in out:
        if k.name in seen:
            raise TilecError(f"keyword argument '{k.name}' is given twice", k.span)
        seen.add(k.name)
    return tuple(out)
