"""The on-disk module cache: keys, round trips, the switches."""
import os

import pytest

import tilec
from tilec.runtime import cache

SOURCE = "kernel k(A: f16[M]):\n    pass\n"
META = {"tilec_version": "0.1.0", "target": "sm_90a", "kernels": []}


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILEC_CACHE", raising=False)
    return tmp_path / "cache"


def test_key_is_a_sha256_and_deterministic():
    key = cache.cache_key(SOURCE, {"M": 128}, "sm_90a")
    assert len(key) == 64 and int(key, 16) >= 0
    assert key == cache.cache_key(SOURCE, {"M": 128}, "sm_90a")


def test_define_order_does_not_matter():
    assert cache.cache_key(SOURCE, {"M": 1, "N": 2}, "sm_90a") == cache.cache_key(
        SOURCE, {"N": 2, "M": 1}, "sm_90a"
    )


@pytest.mark.parametrize(
    "other",
    [
        (SOURCE + "\n", {"M": 128}, "sm_90a"),
        (SOURCE, {"M": 256}, "sm_90a"),
        (SOURCE, {"M": "128"}, "sm_90a"),
        (SOURCE, {"N": 128}, "sm_90a"),
        (SOURCE, {}, "sm_90a"),
        (SOURCE, {"M": 128}, "sm_100a"),
    ],
)
def test_every_input_changes_the_key(other):
    assert cache.cache_key(*other) != cache.cache_key(SOURCE, {"M": 128}, "sm_90a")


def test_tilec_version_changes_the_key(monkeypatch):
    before = cache.cache_key(SOURCE, {}, "sm_90a")
    monkeypatch.setattr(tilec, "__version__", "9.9.9")
    assert cache.cache_key(SOURCE, {}, "sm_90a") != before


def test_store_then_lookup(cache_dir):
    key = cache.cache_key(SOURCE, {}, "sm_90a")
    assert cache.lookup(key) is None
    cache.store(key, "// ptx\n", META)
    assert cache.lookup(key) == ("// ptx\n", META)
    assert sorted(p.name for p in cache_dir.iterdir()) == [f"{key}.json", f"{key}.ptx"]


def test_store_replaces_an_entry(cache_dir):
    cache.store("k" * 64, "old", META)
    cache.store("k" * 64, "new", META)
    assert cache.lookup("k" * 64) == ("new", META)


def test_disabled_cache_neither_stores_nor_finds(cache_dir, monkeypatch):
    cache.store("a" * 64, "ptx", META)
    monkeypatch.setenv("TILEC_CACHE", "0")
    assert cache.lookup("a" * 64) is None
    cache.store("b" * 64, "ptx", META)
    monkeypatch.setenv("TILEC_CACHE", "1")
    assert cache.lookup("b" * 64) is None
    assert cache.lookup("a" * 64) == ("ptx", META)


def test_default_directory_is_under_home(monkeypatch, tmp_path):
    monkeypatch.delenv("TILEC_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / ".cache" / "tilec"
    cache.store("c" * 64, "ptx", META)
    assert (tmp_path / ".cache" / "tilec" / f"{'c' * 64}.ptx").read_text() == "ptx"


@pytest.mark.parametrize("damage", ["bad json", "missing ptx", "not a dict"])
def test_damaged_entry_is_a_miss(cache_dir, damage):
    key = "d" * 64
    cache.store(key, "ptx", META)
    if damage == "bad json":
        (cache_dir / f"{key}.json").write_text("{not json")
    elif damage == "missing ptx":
        os.unlink(cache_dir / f"{key}.ptx")
    else:
        (cache_dir / f"{key}.json").write_text("[1, 2]")
    assert cache.lookup(key) is None


def test_unwritable_directory_leaves_the_cache_empty(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("TILEC_CACHE_DIR", str(blocker / "cache"))
    cache.store("e" * 64, "ptx", META)
    assert cache.lookup("e" * 64) is None


def test_no_temporary_files_are_left(cache_dir):
    cache.store("f" * 64, "ptx", META)
    assert not [p for p in cache_dir.iterdir() if p.suffix == ".tmp"]
