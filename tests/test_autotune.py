"""tilec.autotune: the configuration space, shape buckets, the remembered
winner on disk, parallel compiles with rejections (CPU), and tuning a real
GEMM on the GPU."""
from pathlib import Path

import pytest

from tilec import autotune
from tilec.compiler.diagnostics import TilecError

ROOT = Path(__file__).resolve().parent.parent
V7 = ROOT / "examples" / "hopper" / "hgemm_v7.tile"


def test_space_is_the_cartesian_product_in_order():
    got = autotune.configs({"BLK_N": [128, 256], "STAGES": [3, 4]})
    assert got == [
        {"BLK_N": 128, "STAGES": 3},
        {"BLK_N": 128, "STAGES": 4},
        {"BLK_N": 256, "STAGES": 3},
        {"BLK_N": 256, "STAGES": 4},
    ]
    assert autotune.configs([{"A": 1}, {"A": 2, "B": 3}]) == [{"A": 1}, {"A": 2, "B": 3}]


@pytest.mark.parametrize(
    "space, words",
    [
        ({"BLK_N": [128, "x"]}, "is not an integer"),
        ({"BLK_N": []}, "non-empty list"),
        ({"BLK_N": "128"}, "non-empty list"),
        ({"not a name": [1]}, "not a define name"),
        ([], "non-empty list of dicts"),
        (42, "mapping of name to values"),
        ({"A": [True]}, "is not an integer"),
    ],
)
def test_bad_spaces_are_named_errors(space, words):
    with pytest.raises(TilecError, match=words):
        autotune.configs(space)


def test_bucket_rounds_sizes_up_to_powers_of_two():
    assert autotune.bucket({"M": 1000, "N": 4096, "K": 4097, "SM_COUNT": 132}) == {
        "M": 1024, "N": 4096, "K": 8192, "SM_COUNT": 256
    }
    assert autotune.bucket({"M": 1, "FLAG": 0}) == {"M": 1, "FLAG": 0}


def test_compile_configs_compiles_each_and_names_the_rejected():
    text = V7.read_text()
    fixed = {"M": 1024, "N": 1024, "K": 1024}
    space = autotune.configs({"BLK_N": [128, 168, 192]})
    modules, rejected = autotune.compile_configs(text, str(V7), fixed, space, "sm_90a", jobs=2)
    assert sorted(modules) == ["BLK_N=128", "BLK_N=192"]
    assert list(rejected) == ["BLK_N=168"]
    assert "BLK_N must be a multiple of 16 from 64 to 256" in rejected["BLK_N=168"]
    assert "m64n128k16" in modules["BLK_N=128"].ptx
    assert "m64n192k16" in modules["BLK_N=192"].ptx


def test_remembered_winner_is_read_back_and_bad_entries_are_misses(tmp_path, monkeypatch):
    tmp_path.chmod(0o700)
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path))
    space = autotune.configs({"S": [3, 4]})
    autotune._write_winner("k1", {"S": 4}, {"S=3": 1.0, "S=4": 0.5}, "dev")
    assert autotune._read_winner("k1", space) == ({"S": 4}, {"S=3": 1.0, "S=4": 0.5})
    # a winner outside the space, malformed JSON, or a wrong shape: misses
    path = tmp_path / "autotune" / "k1.json"
    for body in ('{"config": {"S": 9}}', "{not json", "[1, 2]", '{"config": 4}', "\xff",
                 '{"config": {"S": 4}}', '{"config": {"S": 4}, "times_ms": {"S=3": 1.0}}',
                 '{"config": {"S": 4}, "times_ms": {"S=4": "fast"}}'):
        path.write_text(body, encoding="latin-1")
        assert autotune._read_winner("k1", space) is None
    assert autotune._read_winner("missing", space) is None
    assert not [p for p in (tmp_path / "autotune").iterdir() if p.name.startswith(".")]
    # a link planted where the winner would be is not followed
    path.unlink()
    (tmp_path / "elsewhere.json").write_text('{"config": {"S": 3}}')
    path.symlink_to(tmp_path / "elsewhere.json")
    assert autotune._read_winner("k1", space) is None


def test_the_gpu_sleep_assembles_for_every_target():
    from tilec.runtime.assemble import assemble

    for target in ("sm_80", "sm_90a"):
        assemble(autotune._SLEEP_PTX, target)  # no warning


def test_the_gpu_sleep_is_one_thread_on_the_given_stream(monkeypatch):
    """The launch itself, against a fake driver entry point (the GPU test
    below times it): one thread, on the stream asked for, with its duration."""
    import ctypes

    from tilec.runtime import driver

    launched = []

    def fake_launch(config, function, params, extra):
        ns = ctypes.cast(ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))[0], ctypes.POINTER(ctypes.c_uint64))[0]
        launched.append((function, (config.gridDimX, config.gridDimY, config.gridDimZ),
                         (config.blockDimX, config.blockDimY, config.blockDimZ), int(config.hStream), ns))
        return (driver.cu.CUresult.CUDA_SUCCESS,)

    monkeypatch.setattr(autotune, "_sleep_function", None)
    monkeypatch.setattr(driver, "load_module", lambda image: "module")
    monkeypatch.setattr(driver, "get_function", lambda module, name: name)
    monkeypatch.setattr(driver.cu, "cuLaunchKernelEx", fake_launch)
    autotune._gpu_sleep(7, 1234)
    assert launched == [("tilec_autotune_sleep", (1, 1, 1), (1, 1, 1), 7, 1234)]


def test_a_chain_times_launches_back_to_back_per_launch(monkeypatch):
    """`chain` launches between one event pair, walking the argument sets
    on across timings, behind a sleep that long times the usual, and the
    median of each pair's time over `chain`; against a fake driver (the
    timing itself is the GPU's)."""
    from tilec.runtime import driver

    log, events = [], iter(range(1000))
    monkeypatch.setattr(driver, "stream_create", lambda: "stream")
    monkeypatch.setattr(driver, "stream_synchronize", lambda stream: None)
    monkeypatch.setattr(driver, "stream_destroy", lambda stream: None)
    monkeypatch.setattr(driver, "event_create", lambda: next(events))
    monkeypatch.setattr(driver, "event_destroy", lambda event: None)
    monkeypatch.setattr(driver, "event_record", lambda event, stream: log.append(("event", event)))
    monkeypatch.setattr(driver, "event_elapsed_ms", lambda start, end: {0: 9.0, 2: 6.0, 4: 12.0}[start])
    monkeypatch.setattr(autotune, "_gpu_sleep", lambda stream, ns: log.append(("sleep", ns)))

    def kernel(*args, grid, stream):
        assert stream == "stream"
        log.append(args)

    sets = [("s0",), ("s1",), ("s2",)]
    assert autotune._time(kernel, sets, None, runs=3, warmup=1, chain=3) == 3.0  # median(9, 6, 12) / 3
    assert log == [("s0",)] + [
        ("sleep", 3 * autotune.SLEEP_NS), ("event", 0), ("s0",), ("s1",), ("s2",), ("event", 1),
        ("sleep", 3 * autotune.SLEEP_NS), ("event", 2), ("s0",), ("s1",), ("s2",), ("event", 3),
        ("sleep", 3 * autotune.SLEEP_NS), ("event", 4), ("s0",), ("s1",), ("s2",), ("event", 5)]
    log.clear()
    events = iter(range(1000))
    assert autotune._time(kernel, sets[:2], None, runs=3, warmup=1) == 9.0  # one launch per timing
    assert [entry for entry in log if entry[0] != "event"] == [
        ("s0",), ("sleep", autotune.SLEEP_NS), ("s0",), ("sleep", autotune.SLEEP_NS), ("s1",),
        ("sleep", autotune.SLEEP_NS), ("s0",)]


@pytest.mark.parametrize("chain", [0, -1, 2.0, True, "4"])
def test_chain_must_be_a_positive_int(chain):
    with pytest.raises(TilecError, match="chain must be a positive int"):
        autotune.tune(V7, {"STAGES": [4]}, [()], chain=chain, enabled=False)


@pytest.mark.gpu
def test_the_gpu_sleep_keeps_the_stream_busy():
    """Timed launches queue behind it: it must last at least as asked."""
    from tilec.runtime import driver

    stream = driver.stream_create()
    start, end = driver.event_create(), driver.event_create()
    try:
        autotune._gpu_sleep(stream, 50_000)  # loads the module
        driver.event_record(start, stream)
        autotune._gpu_sleep(stream, 300_000)
        driver.event_record(end, stream)
        assert driver.event_elapsed_ms(start, end) >= 0.3
    finally:
        driver.stream_synchronize(stream)
        driver.event_destroy(start)
        driver.event_destroy(end)
        driver.stream_destroy(stream)


@pytest.mark.gpu
def test_tune_picks_a_working_configuration_and_remembers_it(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    tmp_path.chmod(0o700)
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    M, N, K = 1024, 1024, 512
    fixed = {"M": M, "N": N, "K": K, "SM_COUNT": sms}
    space = {"BLK_N": [128, 256], "STAGES": [3, 4]}

    def inputs():
        A = torch.randn(M, K, dtype=torch.float16, device="cuda")
        B = torch.randn(N, K, dtype=torch.float16, device="cuda")
        return A, B, torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")

    tuned = autotune.tune(V7, space, inputs, defines=fixed, runs=5, progress=False)
    assert tuned.how == "tuned" and tuned.config in autotune.configs(space)
    assert len(tuned.times_ms) == 4 and not tuned.rejected
    A, B, D = inputs()
    tuned.kernel(A, B, D)
    torch.cuda.synchronize()
    ref = A.float() @ B.float().T
    assert float((D.float() - ref).norm() / ref.norm()) < 1e-2

    again = autotune.tune(V7, space, inputs, defines=fixed, runs=5, progress=False)
    assert again is tuned  # in-process: the same kernel, nothing re-timed
    autotune._memo.clear()
    other = autotune.tune(V7, space, inputs, defines={**fixed, "M": 1000}, runs=5, progress=False)
    assert other.how == "disk" and other.config == tuned.config  # same bucket
    assert other.times_ms == tuned.times_ms
    untuned = autotune.tune(V7, space, inputs, defines=fixed, enabled=False,
                            default={"BLK_N": 256, "STAGES": 4})
    assert untuned.how == "default" and untuned.config == {"BLK_N": 256, "STAGES": 4}


@pytest.mark.gpu
def test_tuning_programmatic_chains(tmp_path, monkeypatch):
    """`chain` with a kernel that waits on its grid dependency: gemm_small_m
    with PDL = 1, launched programmatically back to back while tuning,
    gives a working kernel, and its winner is remembered apart from the
    one-launch tuning of the same space."""
    torch = pytest.importorskip("torch")
    tmp_path.chmod(0o700)
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path))
    M, N, K = 64, 2048, 1024
    source = ROOT / "examples" / "hopper" / "gemm_small_m.tile"
    space = {"STAGES": [4, 8]}
    sets = [(torch.randn(M, K, dtype=torch.float16, device="cuda"), torch.randn(N, K, dtype=torch.float16, device="cuda"),
             torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")) for _ in range(3)]
    torch.cuda.synchronize()  # the weights are written before the first programmatic launch's pre-wait loads
    fixed = {"M": M, "N": N, "K": K, "PDL": 1}
    chained = autotune.tune(source, space, sets, defines=fixed, runs=5, chain=6, progress=False)
    assert chained.how == "tuned" and len(chained.times_ms) == 2
    single = autotune.tune(source, space, sets, defines=fixed, runs=5, progress=False)
    assert single.how == "tuned"  # not the chain's winner read back
    A, B, D = sets[0]
    D.fill_(float("nan"))
    chained.kernel(A, B, D)
    torch.cuda.synchronize()
    ref = A.float() @ B.float().T
    assert float((D.float() - ref).norm() / ref.norm()) < 1e-2
