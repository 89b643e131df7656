"""tilec.compile: paths and sources, targets, defines, and the on-disk cache."""
import pathlib

import pytest

import tilec
from tilec.compiler.diagnostics import TilecError

EXAMPLE = pathlib.Path(__file__).parent.parent / "examples" / "elementwise_add.tile"


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
    assert len(list(private_cache.glob("*.ptx"))) == 1

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
    assert len(list(private_cache.glob("*.ptx"))) == 2


def test_missing_file_is_a_user_error():
    with pytest.raises(TilecError, match="cannot read"):
        tilec.compile("no/such/kernel.tile")


def test_unknown_target_is_a_user_error():
    with pytest.raises(TilecError, match="unknown target"):
        tilec.compile(EXAMPLE, target="sm_70")
