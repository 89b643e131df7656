"""The pass manager: ordering from requires/provides, its error messages, and
the instrumentation (dumps, stop-after, timing, verify-each)."""
import io

import attrs
import pytest

from tilec.compiler import ir
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import (
    ALL,
    Options,
    Pass,
    PassContext,
    PassManager,
    PipelineError,
    gc_paused,
    order_passes,
)
from tilec.pipeline import compile_source, pass_manager
from tilec.compiler.printer import print_module
from tilec.grammar.parser import parse


class Step(Pass):
    """A pass that records that it ran and appends a const named after itself."""

    def __init__(self, name, requires=(), provides=(), log=None):
        self.name = name
        self.requires = frozenset(requires)
        self.provides = frozenset(provides)
        self.log = log if log is not None else []

    def apply(self, module, ctx):
        self.log.append(self.name)
        if module is None:
            module = ir.Module(None, (), (), ())
        const = ir.Const(self.name.replace("-", "_"), ir.Int(len(module.consts)))
        return attrs.evolve(module, consts=module.consts + (const,))


def names(passes):
    return [p.name for p in passes]


def test_order_follows_dependencies_not_registration():
    passes = [
        Step("c", requires={"b"}),
        Step("b", requires={"a"}, provides={"b"}),
        Step("a", provides={"a"}),
    ]
    assert names(order_passes(passes)) == ["a", "b", "c"]


def test_independent_passes_keep_registration_order():
    passes = [Step("root", provides={"r"})] + [Step(n, requires={"r"}) for n in "zyx"]
    assert names(order_passes(passes)) == ["root", "z", "y", "x"]


def test_missing_provider_is_named():
    passes = [Step("plan-tma", provides={"x"}), Step("dispatch", requires={"tma-planned"})]
    with pytest.raises(PipelineError) as info:
        order_passes(passes)
    assert str(info.value) == "pass 'dispatch' requires 'tma-planned', which no pass provides"


def test_cycle_message_names_the_passes_around_it():
    passes = [
        Step("start", provides={"s"}),
        Step("a", requires={"s", "c"}, provides={"a"}),
        Step("b", requires={"a"}, provides={"b"}),
        Step("c", requires={"b"}, provides={"c"}),
    ]
    with pytest.raises(PipelineError) as info:
        order_passes(passes)
    message = str(info.value)
    assert "cycle" in message
    cycle = message.split(": ", 1)[1].split(" (")[0].split(" -> ")
    assert cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}
    assert "start" not in message.split(" (")[0]


def test_two_providers_of_one_property_are_rejected():
    with pytest.raises(PipelineError, match="'p' is provided by both 'x' and 'y'"):
        order_passes([Step("x", provides={"p"}), Step("y", provides={"p"})])


def _manager(log, verify=None, verify_after=()):
    return PassManager(
        [
            Step("parse", provides={"parsed"}, log=log),
            Step("fold", requires={"parsed"}, provides={"folded"}, log=log),
            Step("emit", requires={"folded"}, log=log),
        ],
        verify=verify,
        verify_after=verify_after,
    )


def test_run_in_order_and_record_timings():
    log = []
    ctx = PassContext()
    module = _manager(log).run(None, ctx)
    assert log == ["parse", "fold", "emit"]
    assert [c.name for c in module.consts] == ["parse", "fold", "emit"]
    assert list(ctx.timings) == ["parse", "fold", "emit"]
    assert all(t >= 0 for t in ctx.timings.values())


def test_stop_after():
    log = []
    module = _manager(log).run(None, PassContext(options=Options(stop_after="fold")))
    assert log == ["parse", "fold"]
    assert len(module.consts) == 2


@pytest.mark.parametrize(
    "options, flag",
    [
        (Options(stop_after="folding"), "--stop-after"),
        (Options(dump_after=frozenset({"parse", "nope"})), "--dump-ir-after"),
        (Options(dump_before=frozenset({"nope"})), "--dump-ir-before"),
    ],
)
def test_unknown_pass_names_in_flags_are_user_errors(options, flag):
    with pytest.raises(TilecError) as info:
        _manager([]).run(None, PassContext(options=options))
    assert flag in info.value.message
    assert "parse, fold, emit" in info.value.message


def test_dump_after_selected_passes_to_the_stream():
    stream = io.StringIO()
    opts = Options(dump_after=frozenset({"fold"}), stream=stream)
    module = _manager([]).run(None, PassContext(options=opts))
    text = stream.getvalue()
    assert "IR Dump After fold" in text and "After parse" not in text and "After emit" not in text
    body = text.split("\n", 1)[1]
    assert parse(body, "dump") == attrs.evolve(module, consts=module.consts[:2])


def test_dump_before_all_skips_the_first_pass_which_has_no_input():
    stream = io.StringIO()
    opts = Options(dump_before=frozenset({ALL}), stream=stream)
    _manager([]).run(None, PassContext(options=opts))
    text = stream.getvalue()
    assert "Before parse" not in text
    assert "Before fold" in text and "Before emit" in text


def test_dump_dir_writes_numbered_files_that_parse_back(tmp_path):
    opts = Options(dump_after=frozenset({ALL}), dump_before=frozenset({"emit"}), dump_dir=str(tmp_path))
    module = _manager([]).run(None, PassContext(options=opts))
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["01-parse.tile", "02-fold.tile", "03-emit.before.tile", "03-emit.tile"]
    assert (tmp_path / "03-emit.tile").read_text() == print_module(module)
    assert parse((tmp_path / "02-fold.tile").read_text(), "x").consts == module.consts[:2]


def test_time_passes_table_lists_each_pass_and_the_total():
    stream = io.StringIO()
    _manager([]).run(None, PassContext(options=Options(time_passes=True, stream=stream)))
    rows = [line.split() for line in stream.getvalue().splitlines()]
    first_column = [r[0] for r in rows if len(r) == 3]
    assert first_column == ["pass", "parse", "fold", "emit", "total"]
    assert rows[-1][2] == "100.0%"


def test_verifier_runs_after_named_passes_or_after_each_with_verify_each():
    seen = []

    def verify(module, ctx):
        seen.append(len(module.consts))

    _manager([], verify, verify_after=("parse",)).run(None, PassContext())
    assert seen == [1]
    seen.clear()
    _manager([], verify, verify_after=("parse",)).run(None, PassContext(options=Options(verify_each=True)))
    assert seen == [1, 2, 3]


def test_verifier_errors_after_a_later_pass_name_it():
    def verify(module, ctx):
        if len(module.consts) == 2:
            raise TilecError("broken")

    with pytest.raises(TilecError) as info:
        _manager([], verify).run(None, PassContext(options=Options(verify_each=True)))
    assert info.value.notes == ("found by the verifier after pass 'fold'",)


def test_describe_lists_the_ordered_pipeline():
    text = _manager([]).describe()
    lines = text.splitlines()
    assert [line.split()[1] for line in lines] == ["parse", "fold", "emit"]
    assert "requires folded" in lines[2] and "provides parsed" in lines[0]


# --------------------------------------------------------------------------
# The default pipeline
# --------------------------------------------------------------------------

_TCGEN05 = """{target}
kernel k(A: f32[4]):
    t = thread_id([32])
    if t == 0:
        ptx.tcgen05.fence.before_thread_sync()
"""


def test_default_pipeline_order_starts_with_the_front_passes():
    assert pass_manager().names[:5] == ["parse", "expand-inline", "check-asserts", "lower-scheduler", "fold-constants"]


@pytest.mark.parametrize(
    "line, target, ok",
    [
        ("target sm_100a", None, True),  # the file's target line
        ("", None, False),  # default sm_90a
        ("", "sm_100a", True),  # --target
        ("target sm_100a", "sm_90a", False),  # --target wins over the file
    ],
)
def test_target_precedence(line, target, ok):
    text = _TCGEN05.format(target=line)
    if ok:
        compile_source(text, target=target, options=Options(stop_after="fold-constants"))
    else:
        with pytest.raises(TilecError, match="not available on sm_90a"):
            compile_source(text, target=target, options=Options(stop_after="fold-constants"))


def test_compile_source_applies_defines_and_reports_timings():
    text = "const N = 4\nkernel k(A: f32[N]):\n    t = thread_id([N])\n"
    result = compile_source(text, defines={"N": 8}, options=Options(stop_after="fold-constants"))
    assert result.module.kernels[0].params[0].shape == (ir.Int(8),)
    assert list(result.timings) == ["parse", "expand-inline", "check-asserts", "lower-scheduler", "fold-constants"]
    assert result.ptx is None and result.meta is None


# --------------------------------------------------------------------------
# Honest declarations, instrumentation hooks, failure reproducers
# --------------------------------------------------------------------------


def test_a_property_nobody_needs_is_rejected_unless_it_is_a_product():
    passes = [Step("parse", provides={"parsed"}), Step("emit", requires={"parsed"}, provides={"ptx"})]
    with pytest.raises(PipelineError) as info:
        PassManager(passes)
    assert str(info.value) == (
        "pass 'emit' provides 'ptx', which no pass or the verifier requires and which is not a product of the pipeline"
    )
    PassManager(passes, products=("ptx",))
    PassManager([passes[0]], verify=lambda m, c: None, verify_requires=("parsed",))


def test_the_verifier_cannot_run_before_what_it_reads_is_established():
    passes = [Step("parse", provides={"parsed"}), Step("fold", requires={"parsed"}, provides={"folded"})]
    with pytest.raises(PipelineError, match="the verifier runs after 'parse' but requires 'folded', not established"):
        PassManager(passes, verify=lambda m, c: None, verify_after=("parse",), verify_requires=("folded",))


def test_the_default_pipeline_declares_only_what_is_used():
    manager = pass_manager()
    required = set(manager.verify_requires).union(*(p.requires for p in manager.passes))
    provided = set().union(*(p.provides for p in manager.passes))
    assert provided - required == {"ptx"}


class Recorder:
    """An instrumentation that logs every hook call."""

    def __init__(self, log):
        self.log = log

    def before_pass(self, p, module, ctx, position):
        self.log.append(("before", p.name, position, None if module is None else len(module.consts)))

    def after_pass(self, p, module, ctx, position):
        self.log.append(("after", p.name, position, len(module.consts)))

    def after_pass_failed(self, p, module, ctx, position, error):
        self.log.append(("failed", p.name, position, len(module.consts), str(error)))

    def after_pipeline(self, ctx):
        self.log.append(("end",))


class Boom(Step):
    def apply(self, module, ctx):
        raise RuntimeError("kaboom")


def test_instrumentation_hooks_run_around_each_pass_and_after_a_failure():
    log = []
    _manager([]).run(None, PassContext(options=Options(instrumentations=(Recorder(log),))))
    assert log == [
        ("before", "parse", 1, None), ("after", "parse", 1, 1),
        ("before", "fold", 2, 1), ("after", "fold", 2, 2),
        ("before", "emit", 3, 2), ("after", "emit", 3, 3),
        ("end",),
    ]
    log.clear()
    manager = PassManager([Step("parse", provides={"parsed"}), Boom("emit", requires={"parsed"})])
    with pytest.raises(RuntimeError):
        manager.run(None, PassContext(options=Options(instrumentations=(Recorder(log),))))
    assert log == [("before", "parse", 1, None), ("after", "parse", 1, 1), ("before", "emit", 2, 1),
                   ("failed", "emit", 2, 1, "kaboom")]


def test_a_verifier_error_is_a_failure_of_the_pass_it_follows(tmp_path):
    def verify(module, ctx):
        if len(module.consts) == 2:
            raise TilecError("broken")

    log = []
    opts = Options(verify_each=True, dump_dir=str(tmp_path), instrumentations=(Recorder(log),))
    with pytest.raises(TilecError) as info:
        _manager([], verify).run(None, PassContext(options=opts))
    assert log[-1][:4] == ("failed", "fold", 2, 1)
    failed = tmp_path / "02-fold.failed.tile"
    assert info.value.notes == ("found by the verifier after pass 'fold'", f"the IR pass 'fold' was given is in {failed}")
    assert [c.name for c in parse(failed.read_text(), "x").consts] == ["parse"]


def test_a_crashing_pass_leaves_its_input_in_the_dump_dir(tmp_path):
    manager = PassManager([Step("parse", provides={"parsed"}), Boom("emit", requires={"parsed"})])
    with pytest.raises(RuntimeError) as info:
        manager.run(None, PassContext(options=Options(dump_dir=str(tmp_path))))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["02-emit.failed.tile"]
    assert f"the IR pass 'emit' was given is in {tmp_path / '02-emit.failed.tile'}" in info.value.__notes__


_BAD_DISPATCH = """target sm_90a
kernel k(A: f16[64, 64]):
    t = thread_id([128])
    s = alloc((64, 64), f16, scope="shared")
    copy(s[0:64, 0:64], A[0:64, 0:64], dispatch="no_such_variant")
"""


def test_a_failing_pass_of_the_pipeline_dumps_the_ir_it_was_given(tmp_path):
    before = compile_source(_BAD_DISPATCH, "k.tile", options=Options(stop_after="plan-tma")).module
    with pytest.raises(TilecError) as info:
        compile_source(_BAD_DISPATCH, "k.tile", options=Options(dump_dir=str(tmp_path)))
    position = pass_manager().names.index("dispatch") + 1
    failed = tmp_path / f"{position:02d}-dispatch.failed.tile"
    assert parse(failed.read_text(), "again.tile") == before
    assert info.value.notes[-1] == f"the IR pass 'dispatch' was given is in {failed}"


def test_gc_paused_restores_the_collector_as_it_was():
    import gc

    was = gc.isenabled()
    try:
        gc.enable()
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the inner block found it off
        assert gc.isenabled()
        with pytest.raises(ZeroDivisionError):
            with gc_paused():
                1 / 0
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
