"""CUDA for block-instruction programs (tilecraft/block): the printer and a GPU build.

    kernel = build_block_kernel(program, arch="sm_90a")   # NVRTC; kernel(*torch_cuda_tensors)
    print(kernel.source)
"""

from .build import BlockKernel, build_block_kernel
from .printer import print_cuda

__all__ = ["BlockKernel", "build_block_kernel", "print_cuda"]
