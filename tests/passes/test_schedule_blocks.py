"""schedule_blocks: a causal attention's query blocks (whose key loop grows with the block
index) launch last index first on the block path, as on the emitters' path; a kernel whose
loops do not grow keeps the plain order."""

import sys
from pathlib import Path

from tilecraft.codegen.block_cuda.printer import print_cuda
from tilecraft.passes import lower
from tilecraft.targets import H100_SXM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from example_configs import load  # noqa: E402


def _program(causal: bool):
    kern = load("flash_attention").flash_attention(1, 2, 512, 64, causal, block_M=64,
                                                   block_N=64)
    return lower(kern.func, H100_SXM).block_program


def test_the_blocks_with_the_longest_loops_launch_first():
    program = _program(True)
    assert program.reversed_axes == (True, False, False)
    assert "gridDim.x - 1 - blockIdx.x" in print_cuda(program, "sm_90a").source


def test_blocks_of_equal_work_keep_the_plain_order():
    program = _program(False)
    assert not any(program.reversed_axes)
    assert "gridDim.x - 1" not in print_cuda(program, "sm_90a").source
