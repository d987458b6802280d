"""tilecraft.recommend: ranking a declared space, the default space, the table, and its errors
(where they land: the user's recommend call).

Every configuration is lowered on the CPU (~30 ms each); the spaces here stay small.
"""

from __future__ import annotations

import importlib.util
import linecache
import sys
from pathlib import Path

import pytest

import tilecraft
from tilecraft.diagnostics import TilecraftError
from tilecraft.targets import H100_SXM
from tilecraft.tune.ranking import Recommendation, recommend
from tilecraft.tune.space import candidate_space, configurations

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SPACE = {"block_M": [64, 128], "block_N": [64, 128], "num_stages": [2, 3]}


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"tune_recommend_{name}",
                                                  EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gemm = _example("gemm")


def _lands_on_the_call(err: TilecraftError) -> None:
    assert err.file == __file__
    assert "recommend(" in linecache.getline(err.file, err.line)


@pytest.fixture(scope="module")
def ranked() -> Recommendation:
    return recommend(gemm.matmul, 1024, 1024, 1024, space=SPACE, target=H100_SXM)


# ---- a declared space ------------------------------------------------------------------------
def test_recommend_ranks_a_declared_space_by_predicted_time(ranked):
    assert 1 <= len(ranked) <= 10
    times = [c.predicted_time for c in ranked]
    assert times == sorted(times)
    assert all(t > 0 for t in times)
    assert ranked.considered == 8
    assert len(ranked) + len(ranked.rejected) == 8


def test_each_candidates_config_holds_exactly_the_spaces_names(ranked):
    for c in ranked:
        assert isinstance(c.config, dict)
        assert set(c.config) == set(SPACE)
        assert all(c.config[k] in SPACE[k] for k in SPACE)


def test_recommend_returns_at_most_topk_candidates():
    top = recommend(gemm.matmul, 1024, 1024, 1024, space=SPACE, topk=3, target=H100_SXM)
    assert len(top) == 3
    times = [c.predicted_time for c in top]
    assert times == sorted(times)


def test_a_recommendation_prints_as_a_table_one_line_per_candidate(ranked):
    lines = str(ranked).splitlines()
    title, header, rows = lines[0], lines[1], lines[2:]
    assert "matmul" in title
    assert "time us" in header
    assert all(name in header for name in SPACE)
    assert len(rows) == len(ranked)
    for rank, (row, c) in enumerate(zip(rows, ranked), start=1):
        assert row.split()[0] == str(rank)
        assert f"{c.predicted_time * 1e6:.1f}" in row.split()


def test_configurations_that_do_not_fit_are_listed_with_a_reason():
    space = {"block_M": [128, 1024], "block_N": [128]}
    result = recommend(gemm.matmul, 1024, 1024, 1024, space=space, target=H100_SXM)
    assert [c.config for c in result] == [{"block_M": 128, "block_N": 128}]
    assert len(result.rejected) == 1
    config, reason = result.rejected[0]
    assert config == {"block_M": 1024, "block_N": 128}
    assert isinstance(reason, str) and "registers" in reason
    assert "1 do not fit" in str(result)


# ---- the default space -----------------------------------------------------------------------
def test_the_default_space_is_built_from_the_tile_stage_and_thread_parameters():
    space = candidate_space(gemm.matmul.factory, (1024, 1024, 1024), {})
    assert list(space) == ["block_M", "block_N", "block_K", "num_stages", "threads"]
    assert space["block_M"] == [128, 32, 64, 256]
    assert space["block_K"] == [32, 64, 128]
    assert space["num_stages"] == [3, 2, 4]
    assert space["threads"] == [128, 256]


def test_the_default_space_starts_with_the_factorys_defaults():
    space = candidate_space(gemm.matmul.factory, (1024, 1024, 1024), {})
    defaults = {"block_M": 128, "block_N": 128, "block_K": 32, "num_stages": 3, "threads": 128}
    assert configurations(space)[0] == defaults


def test_the_default_space_leaves_out_what_the_call_fixes():
    space = candidate_space(gemm.matmul.factory, (1024, 1024, 1024, 64), {"num_stages": 2})
    assert "block_M" not in space  # passed positionally
    assert "num_stages" not in space
    assert "block_N" in space


# ---- errors ----------------------------------------------------------------------------------
def test_an_unknown_name_in_the_space_is_tc111():
    with pytest.raises(TilecraftError) as info:
        recommend(gemm.matmul, 1024, 1024, 1024, space={"blok_M": [64]}, target=H100_SXM)
    assert info.value.code == "TC111"
    assert "blok_M" in str(info.value)
    assert "did you mean `block_M`" in str(info.value)
    _lands_on_the_call(info.value)


def test_a_misspelled_case_in_the_space_suggests_the_same_name_in_its_case():
    with pytest.raises(TilecraftError) as info:
        recommend(gemm.matmul, 1024, 1024, 1024, space={"block_m": [64]}, target=H100_SXM)
    assert info.value.code == "TC111"
    assert "did you mean `block_M`" in str(info.value)


def test_topk_zero_is_tc321():
    with pytest.raises(TilecraftError) as info:
        recommend(gemm.matmul, 1024, 1024, 1024, space=SPACE, topk=0, target=H100_SXM)
    assert info.value.code == "TC321"
    assert "topk" in str(info.value)
    _lands_on_the_call(info.value)


def test_a_space_where_nothing_fits_is_tc330():
    space = {"block_M": [1024], "block_N": [1024], "threads": [128]}
    with pytest.raises(TilecraftError) as info:
        recommend(gemm.matmul, 1024, 1024, 1024, space=space, target=H100_SXM)
    assert info.value.code == "TC330"
    assert "matmul" in str(info.value)
    _lands_on_the_call(info.value)


# ---- the package surface ---------------------------------------------------------------------
def test_recommend_and_autotune_are_reachable_from_tilecraft():
    from tilecraft.tune.tuner import autotune

    assert tilecraft.recommend is recommend
    assert tilecraft.autotune is autotune
    assert "recommend" in tilecraft.__all__ and "autotune" in tilecraft.__all__


def test_a_dynamic_size_is_counted_once_and_the_table_says_so():
    import tilecraft.language as T

    m = T.dynamic("m")

    @tilecraft.jit(out_idx=[-1])
    def add_one(n, threads=128):
        @T.prim_func
        def kernel(A: T.Tensor((m, n), "float16"), B: T.Tensor((m, n), "float16")):
            with T.Kernel(m, threads=threads) as bx:
                for j in T.Parallel(n):
                    B[bx, j] = A[bx, j] + 1

        return kernel

    ranked = tilecraft.recommend(add_one, 1024, target=H100_SXM)
    assert all(c.estimate.dynamic for c in ranked)
    assert "dynamic sizes count as 1" in str(ranked).splitlines()[0]


def test_a_function_that_returns_no_kernel_is_tc321():
    def not_a_factory(n, block_M=64):
        return n * block_M

    with pytest.raises(TilecraftError) as info:
        recommend(not_a_factory, 4, target=H100_SXM)
    assert info.value.code == "TC321" and "returned a int" in str(info.value)


def test_an_autotuned_factory_is_ranked_as_its_plain_function(monkeypatch):
    monkeypatch.setenv("TILECRAFT_AUTOTUNE", "0")
    tuned = tilecraft.autotune(progress=False)(gemm.matmul)
    ranked = recommend(tuned, 1024, 1024, 1024, space={"block_M": [64, 128]}, target=H100_SXM)
    assert [c.config for c in ranked] and tuned.last_result is None  # nothing was tuned


def test_a_shape_polymorphic_kernel_function_is_not_a_factory():
    import tilecraft.language as T

    @tilecraft.jit
    def double(A: T.Tensor, B: T.Tensor):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                B[i] = A[i] * 2

    with pytest.raises(TilecraftError) as info:
        recommend(double, target=H100_SXM)
    assert info.value.code == "TC321" and "not a kernel factory" in str(info.value)
