"""tilecraft.autotune: candidates, the untimed path, timing (faked on the CPU), the table, errors.

On the CPU nothing can be timed, so the `gpu` fixture stands in a GPU: `_why_untimed` says
"timed", `_gpu_name` names a fake GPU, `_compile` builds no cubin and `_time_candidates` returns
the milliseconds of FAKE_MS (or the exception there). Tables go to a temporary cache dir.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.runtime.errors import CacheCorruptionWarning
from tilecraft.tune import table
from tilecraft.tune import tuner as at
from tilecraft.tune.tuner import Autotuned, AutotuneWarning, autotune

N = 256


@tilecraft.jit(out_idx=[-1])
def add(n, block=64, threads=32, fail=False):
    if fail:
        raise ValueError("this tile does not build\nsecond line")

    @T.prim_func
    def kernel(
        A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")
    ):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return kernel


CONFIGS = [{"block": 32}, {"block": 64}, {"block": 128}]
FAKE_MS: dict[int, object] = {32: 3.0, 64: 1.0, 128: 2.0}


@pytest.fixture(autouse=True)
def cache_dir(monkeypatch, tmp_path) -> Path:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TILECRAFT_AUTOTUNE", raising=False)
    monkeypatch.delenv("TILECRAFT_INTERPRET", raising=False)
    return tmp_path


@pytest.fixture
def gpu(monkeypatch) -> list:
    """A stand-in GPU; returns the list of configs each timing call got."""
    timed: list = []

    def fake_time(built, warmup, rep, bar):
        timed.append([config for config, _ in built])
        return [FAKE_MS[config["block"]] for config, _ in built]

    monkeypatch.setattr(at, "_why_untimed", lambda jit_factory: None)
    monkeypatch.setattr(at, "_gpu_name", lambda: "Fake GPU")
    monkeypatch.setattr(at, "_compile", lambda kernel: None)
    monkeypatch.setattr(at, "_time_candidates", fake_time)
    return timed


def tables(directory: Path) -> list[Path]:
    return sorted((directory / "tune").rglob("*.json"))


def tuned(**options) -> Autotuned:
    return autotune(progress=False, **options)(add)


# ---- without timing --------------------------------------------------------------------------
def test_without_a_gpu_the_first_candidate_is_returned_and_no_table_written(monkeypatch, cache_dir):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    f = tuned(configs=CONFIGS)
    kernel = f(N)
    assert f.last_result.config == {"block": 32} and f.last_result.untimed == "no CUDA GPU"
    assert f.last_result.ms is None and kernel is add(N, block=32)
    a, b = torch.randn(N), torch.randn(N)
    torch.testing.assert_close(kernel(a, b), a + b)
    assert tables(cache_dir) == []


@pytest.mark.parametrize(
    "env, why",
    [("TILECRAFT_AUTOTUNE", "TILECRAFT_AUTOTUNE=0"), ("TILECRAFT_INTERPRET", "the interpreter")],
)
def test_autotune_off_or_the_interpreter_takes_the_first_candidate(
    monkeypatch, cache_dir, env, why
):
    monkeypatch.setenv(env, "0" if env == "TILECRAFT_AUTOTUNE" else "1")
    f = tuned(configs=CONFIGS[1:])
    assert f(N) is add(N, block=64)
    assert f.last_result.untimed == why and tables(cache_dir) == []


def test_the_top_recommendation_is_the_first_candidate(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    seen = {}

    def fake_recommend(factory, *args, space=None, topk=10, target=None, **fixed):
        seen.update(factory=factory, args=args, space=space, topk=topk, fixed=fixed,
                    arch=target.arch)
        return [types.SimpleNamespace(config={"block": 128}, predicted_time=1e-6)]

    import tilecraft.tune

    module = sys.modules[tilecraft.tune.recommend.__module__]
    monkeypatch.setattr(module, "recommend", fake_recommend)
    f = tuned(space={"block": [64, 128]}, topk=3)
    assert f(N, threads=64) is add(N, threads=64, block=128)
    assert seen == {
        "factory": add,
        "args": (N,),
        "space": {"block": [64, 128]},
        "topk": 3,
        "fixed": {"threads": 64},
        "arch": "sm_90a",  # no GPU, no TILECRAFT_ARCH: current_target()'s H100
    }


# ---- timing ----------------------------------------------------------------------------------
def test_the_fastest_candidate_wins_and_is_kept_in_memory(gpu):
    f = tuned(configs=CONFIGS)
    kernel = f(N)
    r = f.last_result
    assert r.config == {"block": 64} and r.ms == 1.0 and kernel is add(N, block=64)
    assert [(t.config["block"], t.ms) for t in r.timings] == [(32, 3.0), (64, 1.0), (128, 2.0)]
    assert not r.from_table and r.untimed is None
    assert f(N) is kernel and len(gpu) == 1  # the second call tunes nothing


def test_a_failing_candidate_is_warned_about_and_skipped(gpu):
    f = tuned(configs=[{"block": 32, "fail": True}, {"block": 128}])
    with pytest.warns(AutotuneWarning, match=r"add\(block=32, fail=True\).*this tile does not"):
        f(N)
    r = f.last_result
    assert r.config == {"block": 128}
    assert r.timings[0].ms is None and r.timings[0].error == "ValueError: this tile does not build"


def test_a_candidate_failing_at_run_time_is_skipped(gpu, monkeypatch):
    monkeypatch.setitem(FAKE_MS, 64, RuntimeError("CUDA error: an illegal memory access"))

    def fake_time(built, warmup, rep, bar):
        return [FAKE_MS[config["block"]] for config, _ in built]

    monkeypatch.setattr(at, "_time_candidates", fake_time)
    f = tuned(configs=CONFIGS)
    with pytest.warns(AutotuneWarning, match="illegal memory access"):
        f(N)
    assert f.last_result.config == {"block": 128}


def test_every_candidate_failing_is_tc331_at_the_call(gpu):
    f = tuned(configs=[{"fail": True}, {"fail": True, "block": 32}])
    with pytest.warns(AutotuneWarning), pytest.raises(tilecraft.TilecraftError) as info:
        f(N)  # the line the error points at
    err = info.value
    assert err.code == "TC331" and "2 tried" in err.message and "this tile" in err.message
    assert err.file == __file__ and "f(N)  # the line" in err.render()


def test_the_timer_times_each_kernel_on_one_set_of_inputs_and_keeps_going_past_errors():
    made = []
    fast, slow = add(N, block=64), add(N, block=128)
    original = type(fast.get_profiler()).make_inputs

    def counting(self):
        made.append(1)
        return original(self)

    built = [({"block": 64}, fast), ({"block": 0}, None), ({"block": 128}, slow)]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(type(fast.get_profiler()), "make_inputs", counting)
        out = at._time_candidates(built, 1, 2, at._NoBar())
    assert isinstance(out[0], float) and isinstance(out[2], float) and out[0] > 0
    assert isinstance(out[1], AttributeError) and len(made) == 1


def test_nothing_is_printed_without_tqdm(gpu, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # not installed
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    autotune(configs=CONFIGS)(add)(N)
    assert capsys.readouterr() == ("", "")


# ---- the table -------------------------------------------------------------------------------
def test_the_table_round_trips_and_a_new_object_loads_the_winner_without_timing(gpu, cache_dir):
    first = tuned(configs=CONFIGS)
    first(N)
    [path] = tables(cache_dir)
    data = json.loads(path.read_text())
    assert data["winner"] == {"config": {"block": 64}, "ms": 1.0}
    assert data["gpu"] == "Fake GPU" and data["tilecraft"] == tilecraft.__version__
    assert path.parent.name == path.stem[:2] and data["key"] == path.stem

    second = tuned(configs=CONFIGS)  # a fresh memory, as in another process
    assert second(N) is add(N, block=64)
    r = second.last_result
    assert r.from_table and r.ms == 1.0 and r.timings == first.last_result.timings
    assert len(gpu) == 1  # timed once, by the first


def test_with_the_disk_caches_off_timing_neither_reads_nor_writes_the_table(
        gpu, cache_dir, monkeypatch):
    monkeypatch.setenv("TILECRAFT_JIT_CACHE", "0")
    f = tuned(configs=CONFIGS)
    f(N)
    assert f.last_result.config == {"block": 64} and f.last_result.key is None
    assert tables(cache_dir) == []
    second = tuned(configs=CONFIGS)
    second(N)
    assert not second.last_result.from_table and len(gpu) == 2  # timed again


@pytest.mark.parametrize("damage", ["not json", "an edited time"])
def test_a_damaged_table_entry_is_a_miss_with_a_warning(gpu, cache_dir, damage):
    tuned(configs=CONFIGS)(N)
    [path] = tables(cache_dir)
    if damage == "not json":
        path.write_text(path.read_text()[:40])
    else:
        path.write_text(path.read_text().replace('"ms": 1.0', '"ms": 0.5', 1))
    again = tuned(configs=CONFIGS)
    with pytest.warns(CacheCorruptionWarning, match="autotune table entry"):
        again(N)
    assert not again.last_result.from_table and len(gpu) == 2
    assert table.load(path.stem) is not None  # rewritten


def test_another_space_or_candidate_list_is_another_key(gpu, cache_dir):
    def key(**how):
        options = {"configs": None, "space": None, "topk": 10, **how}
        return table.table_key(add, (N,), {}, "Fake GPU", **options)

    keys = {
        key(configs=CONFIGS),
        key(configs=CONFIGS[:2]),
        key(space={"block": [64]}),
        key(space={"block": [64, 128]}),
        key(space={"block": [64]}, topk=2),
        key(),
    }
    assert len(keys) == 6 and None not in keys
    assert key(configs=CONFIGS) == key(configs=[dict(c) for c in CONFIGS])
    assert table.table_key(
        add, (N,), {}, "Another GPU", configs=CONFIGS, space=None, topk=10
    ) != key(configs=CONFIGS)
    tuned(configs=CONFIGS)(N)
    tuned(configs=CONFIGS[1:])(N)
    assert len(tables(cache_dir)) == 2 and len(gpu) == 2


# ---- the user's mistakes ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "options, keyword",
    [
        ({"configs": {"block": 64}}, "configs"),
        ({"configs": []}, "configs"),
        ({"configs": [{"block": 64}, 64]}, "configs"),
        ({"topk": 0}, "topk"),
        ({"space": {"block": 64}}, "space"),
    ],
)
def test_wrong_options_are_tc108_at_the_keyword(options, keyword):
    with pytest.raises(tilecraft.TilecraftError) as info:
        autotune(**options)
    assert info.value.code == "TC108" and info.value.file == __file__
    assert f"{keyword}=" in info.value.render()


def test_a_config_keyword_the_factory_lacks_is_tc111_with_the_closest_name():
    with pytest.raises(tilecraft.TilecraftError) as info:
        autotune(configs=[{"blok": 64}])(add)
    assert info.value.code == "TC111" and "did you mean `block`?" in info.value.hint


def test_a_keyword_both_passed_and_tuned_is_tc108(gpu):
    with pytest.raises(tilecraft.TilecraftError) as info:
        tuned(configs=CONFIGS)(N, block=32)
    assert info.value.code == "TC108" and "block=" in info.value.message


def test_autotune_on_a_plain_function_is_tc108():
    with pytest.raises(tilecraft.TilecraftError, match="put it above @tilecraft.jit"):
        autotune()(lambda n: None)


# ---- on a GPU --------------------------------------------------------------------------------
@pytest.mark.gpu
def test_tuning_a_gemm_on_the_gpu_picks_a_correct_kernel(cache_dir):
    path = Path(__file__).resolve().parents[2] / "examples" / "gemm.py"
    spec = importlib.util.spec_from_file_location("autotune_gemm_example", path)
    gemm = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gemm
    spec.loader.exec_module(gemm)
    configs = [
        {"block_M": 64, "block_N": 64, "block_K": 32, "num_stages": 2},
        {"block_M": 128, "block_N": 128, "block_K": 32, "num_stages": 3},
        {"block_M": 64, "block_N": 128, "block_K": 16, "num_stages": 3},
    ]
    matmul = autotune(configs=configs, warmup=5, rep=20, progress=False)(gemm.matmul)
    kernel = matmul(512, 512, 512)
    r = matmul.last_result
    assert r.untimed is None and r.ms > 0 and r.config in configs
    assert all(t.error is None for t in r.timings), r.timings
    a = torch.randn(512, 512, dtype=torch.float16, device="cuda")
    b = torch.randn(512, 512, dtype=torch.float16, device="cuda")
    torch.testing.assert_close(kernel(a, b).float(), (a.float() @ b.float()), atol=1e-1, rtol=1e-2)
    fresh = autotune(configs=configs, progress=False)(gemm.matmul)
    fresh(512, 512, 512)
    assert fresh.last_result.from_table and fresh.last_result.config == r.config


# ---- autotune="recommend": the recommender's best, never timed -------------------------------
def test_jit_recommend_takes_the_top_recommendation_without_timing_even_on_a_gpu(gpu, cache_dir):
    rec = tilecraft.jit(out_idx=[-1], autotune="recommend")(add.factory)
    kernel = rec(4096)
    best = tilecraft.recommend(add, 4096, topk=1)[0].config
    assert rec.last_result.untimed == "one candidate" and rec.last_result.config == best
    assert gpu == []  # nothing timed
    (entry,) = tables(cache_dir)  # the pick, kept under the target's cost model
    assert json.loads(entry.read_text())["gpu"] == "cost model: H100 SXM (sm_90a)"
    assert kernel.func.script() == add(4096, **best).func.script()
    fixed = rec(4096, block=32, threads=32)  # all fixed: that kernel
    assert fixed.func.script() == add(4096, block=32, threads=32).func.script()


def test_recommend_mode_ranks_for_the_jits_arch_and_for_tilecraft_arch(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    archs = []

    def fake_recommend(factory, *args, space=None, topk=10, target=None, **fixed):
        archs.append(target.arch)
        return [types.SimpleNamespace(config={"block": 128}, predicted_time=1e-6)]

    import tilecraft.tune

    monkeypatch.setattr(sys.modules[tilecraft.tune.recommend.__module__], "recommend",
                        fake_recommend)
    tilecraft.jit(out_idx=[-1], arch="sm_80", autotune="recommend")(add.factory)(N)
    rec = tilecraft.jit(out_idx=[-1], autotune="recommend")(add.factory)
    rec(N)
    monkeypatch.setenv("TILECRAFT_ARCH", "sm_80")
    rec(N)  # another target: ranked again, not the memory of the sm_90a call
    assert archs == ["sm_80", "sm_90a", "sm_80"]


def test_a_new_process_reads_the_recommendation_from_the_table_without_ranking(
        monkeypatch, cache_dir):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    first = tilecraft.jit(out_idx=[-1], autotune="recommend")(add.factory)
    first(4096)

    def no_ranking(*args, **kwargs):
        raise AssertionError("ranked again")

    monkeypatch.setattr(sys.modules[tilecraft.recommend.__module__], "recommend", no_ranking)
    again = tilecraft.jit(out_idx=[-1], autotune="recommend")(add.factory)  # a fresh memory
    again(4096)
    assert again.last_result.config == first.last_result.config
    monkeypatch.setenv("TILECRAFT_JIT_CACHE", "0")  # no disk caches: ranked, not read
    with pytest.raises(AssertionError, match="ranked again"):
        tilecraft.jit(out_idx=[-1], autotune="recommend")(add.factory)(4096)


def test_autotune_on_a_tuned_factory_replaces_its_options(gpu):
    rec = tilecraft.jit(out_idx=[-1], autotune="recommend")(add.factory)
    timed = autotune(configs=CONFIGS, progress=False)(rec)
    assert timed.jit_factory is rec.jit_factory
    timed(N)
    assert timed.last_result.config == {"block": 64} and gpu == [CONFIGS]


def test_a_call_that_fixes_every_tunable_keyword_is_the_plain_factory_call(gpu, monkeypatch):
    def no_ranking(*args, **kwargs):
        raise AssertionError("ranked")

    monkeypatch.setattr(sys.modules[tilecraft.recommend.__module__], "recommend", no_ranking)
    rec = tilecraft.jit(out_idx=[-1], autotune="recommend")(add.factory)
    kernel = rec(N, block=32, threads=64)
    assert rec.last_result is None and gpu == []  # nothing tuned
    assert kernel is rec.jit_factory(N, block=32, threads=64)


def test_a_keyword_passed_at_its_default_value_is_fixed_not_read_from_the_table(cache_dir):
    """The call key binds defaults, so `add(N)` and `add(N, block=64)` key the same jit kernel;
    the table keys them apart: the second tunes only `threads` (was: the first's winner,
    which sets `block` too, and a TypeError for the keyword given twice)."""
    rec = tilecraft.jit(out_idx=[-1], autotune="recommend")(add.factory)
    rec(4096)
    again = tilecraft.jit(out_idx=[-1], autotune="recommend")(add.factory)
    again(4096, block=64)
    assert set(again.last_result.config) == {"threads"}
    assert len(tables(cache_dir)) == 2
