"""tilec.compile: paths and sources, targets, defines, and the on-disk cache."""
import json
import pathlib

import pytest

import tilec
from tilec.compiler.diagnostics import TilecError

EXAMPLE = pathlib.Path(__file__).parent.parent / "examples" / "elementwise_add.tile"
SOURCE = "const M = 4\nkernel k(A: f32[M]):\n    tx = thread_id([32])\n    A[0] = 1.0\n"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILEC_CACHE", raising=False)
    return tmp_path / "cache"


def test_path_and_source_give_the_same_module():
    by_path = tilec.compile(EXAMPLE)
    by_str_path = tilec.compile(str(EXAMPLE))
    by_source = tilec.compile(EXAMPLE.read_text())
    assert by_path.ptx == by_str_path.ptx == by_source.ptx
    assert by_path.kernel_names == ["elementwise_add"]
    assert by_path.meta["kernels"][0]["block"] == [256, 1, 1]


def test_target_and_defines_reach_the_pipeline():
    m = tilec.compile(EXAMPLE, target="sm_80", defines={"N": 2048})
    assert m.target == "sm_80"
    assert ".target sm_80" in m.ptx
    assert m.meta["kernels"][0]["grid"] == [8, 1, 1]


def test_second_compile_is_served_from_the_cache(private_cache, monkeypatch):
    first = tilec.compile(EXAMPLE)
    assert len(list(private_cache.glob("*.entry"))) == 1

    def no_compile(*a, **k):
        raise AssertionError("the pipeline ran on a cache hit")

    monkeypatch.setattr("tilec.api.compile_source", no_compile)
    assert tilec.compile(EXAMPLE).ptx == first.ptx


def test_cache_can_be_disabled(private_cache, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE", "0")
    tilec.compile(EXAMPLE)
    assert not private_cache.exists()


def test_defines_change_the_key(private_cache):
    a = tilec.compile(EXAMPLE, defines={"N": 2048})
    b = tilec.compile(EXAMPLE, defines={"N": 4096})
    assert a.meta["kernels"][0]["grid"] != b.meta["kernels"][0]["grid"]
    assert len(list(private_cache.glob("*.entry"))) == 2


def test_missing_file_is_a_user_error():
    with pytest.raises(TilecError, match="cannot read"):
        tilec.compile("no/such/kernel.tile")


def test_unknown_target_is_a_user_error():
    with pytest.raises(TilecError, match="unknown target"):
        tilec.compile(EXAMPLE, target="sm_70")


@pytest.mark.parametrize(
    "args, says",
    [
        ((None,), "expected the .tile source as a str"),
        ((b"kernel k(A: f32[4]):\n    pass\n",), "decode it"),
        ((SOURCE,), None),
        ((SOURCE, 90), "target must be a str"),
        ((SOURCE, None, "M=4"), "defines must be a dict"),
        ((SOURCE, None, {"M": [4]}), "define 'M' must be an int, float, bool or str"),
        ((SOURCE, None, {4: 4}), "define names must be str"),
        ((SOURCE, None, {"M": "4.5.6"}), "-D M=4.5.6"),
    ],
)
def test_bad_arguments_say_what_to_pass(private_cache, args, says):
    if says is None:
        tilec.compile(*args)
        return
    with pytest.raises(TilecError) as info:
        tilec.compile(*args)
    assert says in info.value.message


def test_deeply_nested_source_is_a_located_error(private_cache):
    text = "kernel k(A: f32[4]):\n    A[0] = " + "(" * 500 + "1.0" + ")" * 500 + "\n"
    with pytest.raises(TilecError) as info:
        tilec.compile(text)
    assert info.value.span is not None and "nested too deeply" in info.value.message


def test_a_file_in_another_encoding_is_located(private_cache, tmp_path):
    path = tmp_path / "latin1.tile"
    path.write_bytes("kernel k(A: f32[4]):\n    # \xe9t\xe9\n    pass\n".encode("latin-1"))
    with pytest.raises(TilecError) as info:
        tilec.compile(path)
    assert (info.value.span.line, info.value.span.col) == (2, 7) and "UTF-8" in info.value.message


def test_a_malformed_entry_is_replaced(private_cache):
    tilec.compile(SOURCE)
    (entry,) = private_cache.glob("*.entry")
    entry.write_text(entry.read_text()[:100])
    module = tilec.compile(SOURCE)
    assert module.ptx and json.loads(entry.read_text())["ptx"] == module.ptx
