"""The on-disk module cache: keys (the compiler itself included), one
atomic file per entry, damaged entries as misses, private directories."""
import os
import threading
import time

import pytest

import tilec
from tilec.compiler.diagnostics import TilecError
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
    assert sorted(p.name for p in cache_dir.iterdir()) == [f"{key}.entry"]


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
    assert cache.lookup("c" * 64) == ("ptx", META)
    assert oct((tmp_path / ".cache" / "tilec").stat().st_mode & 0o777) == oct(0o700)


def _damage(path, how):
    text = path.read_text()
    if how == "truncated":
        path.write_text(text[: len(text) // 2])
    elif how == "not json":
        path.write_text("{not json")
    elif how == "not a dict":
        path.write_text("[1, 2]")
    elif how == "ptx edited":
        path.write_text(text.replace('"ptx": "ptx"', '"ptx": "other"'))
    elif how == "meta without target":
        path.write_text(text.replace('"target"', '"tar"'))
    elif how == "deep json":
        path.write_text("[" * 100000 + "]" * 100000)
    elif how == "binary":
        path.write_bytes(b"\xff\xfe\x00")
    elif how == "another key's":
        os.replace(cache.directory() / f"{'e' * 64}.entry", path)


DAMAGES = ["truncated", "not json", "not a dict", "ptx edited", "meta without target", "deep json", "binary",
           "another key's"]


@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_entry_is_a_miss(cache_dir, how):
    key = "d" * 64
    cache.store(key, "ptx", META)
    cache.store("e" * 64, "ptx", META)
    _damage(cache_dir / f"{key}.entry", how)
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


def test_a_killed_writers_temporary_file_is_removed(cache_dir):
    cache.store("a" * 64, "ptx", META)
    stale, fresh = cache_dir / f".{'b' * 64}.entry.0badf00d.tmp", cache_dir / f".{'b' * 64}.entry.5eed5eed.tmp"
    stale.write_text('{"key": "trunc')
    fresh.write_text('{"key": "in prog')
    old = time.time() - 2 * cache.STALE_TEMP_SECONDS
    os.utime(stale, (old, old))
    cache.store("c" * 64, "ptx", META)
    assert not stale.exists() and fresh.exists()  # a writer may still be at work on the fresh one


def test_concurrent_writers_never_mix_ptx_and_metadata(cache_dir):
    key = "9" * 64
    pairs = [(f"// ptx {i}\n", dict(META, kernels=[{"name": f"k{i}"}])) for i in range(4)]
    seen = []

    def write(ptx, meta):
        for _ in range(25):
            cache.store(key, ptx, meta)
            seen.append(cache.lookup(key))

    threads = [threading.Thread(target=write, args=pair) for pair in pairs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen and all(hit in pairs for hit in seen)


def test_the_compiler_itself_is_part_of_the_key(monkeypatch, tmp_path):
    """A changed compiler file changes every key, although tilec.__version__
    stays the same."""
    package = tmp_path / "tilec"
    package.mkdir()
    (package / "emitter.py").write_text("A = 1\n")
    monkeypatch.setattr(cache, "_PACKAGE", package)
    cache.compiler_fingerprint.cache_clear()
    try:
        before = cache.cache_key(SOURCE, {}, "sm_90a")
        (package / "emitter.py").write_text("A = 2\n")
        cache.compiler_fingerprint.cache_clear()
        assert cache.cache_key(SOURCE, {}, "sm_90a") != before
    finally:
        cache.compiler_fingerprint.cache_clear()


def test_fingerprint_covers_the_installed_package():
    assert len(cache.compiler_fingerprint()) == 64
    assert cache._PACKAGE == cache.Path(tilec.__file__).resolve().parent


@pytest.mark.parametrize("problem", ["writable by others", "a link"])
def test_refuses_a_directory_others_could_write(tmp_path, monkeypatch, problem):
    target = tmp_path / "cache"
    target.mkdir()
    if problem == "writable by others":
        target.chmod(0o777)
        where = target
    else:
        where = tmp_path / "link"
        where.symlink_to(target)
    monkeypatch.setenv("TILEC_CACHE_DIR", str(where))
    monkeypatch.delenv("TILEC_CACHE", raising=False)
    with pytest.raises(TilecError, match="refusing the compile cache directory"):
        cache.lookup("a" * 64)
    with pytest.raises(TilecError, match="TILEC_CACHE=0"):
        cache.store("a" * 64, "ptx", META)


def test_an_entry_name_that_is_a_link_is_replaced_not_followed(cache_dir, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    cache.store("0" * 64, "ptx", META)  # creates the directory
    link = cache_dir / f"{'1' * 64}.entry"
    link.symlink_to(victim)
    assert cache.lookup("1" * 64) is None  # not read through the link
    cache.store("1" * 64, "ptx", META)
    assert victim.read_text() == "keep" and not link.is_symlink()
    assert cache.lookup("1" * 64) == ("ptx", META)
