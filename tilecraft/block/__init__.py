"""tilecraft.block: the block-instruction IR, the middle level of the compiler (DESIGN 2, Tilus
sections 6-7; docs/block_ir.md).

A `BlockProgram` is a kernel written in thread-block-level instructions (Tilus Table 1) whose
register tensors carry explicit `Fragment` layouts and shared tensors `SharedLayout`s. It prints
as Tilus-style script (printer.py), is checked by a verifier (verifier.py) and runs on a CPU
virtual machine that stores registers per thread (vm.py, vm_ops.py). Lowering of tile ops,
instruction selection and the CUDA printer build on it.
"""

from .compute import (
                      BINARY_OPS,
                      REDUCE_KINDS,
                      UNARY_OPS,
                      BinaryOp,
                      Cast,
                      CastBytes,
                      CastPlanes,
                      Dot,
                      Fill,
                      Fma,
                      ReduceRegister,
                      UnaryOp,
                      View,
                      elementwise_expr,
                      result_dtype,
)
from .dot_shared import DotShared, DotWaitGroup
from .instructions import (
                      AllocateGlobal,
                      AllocateRegister,
                      AllocateShared,
                      Exit,
                      Instruction,
                      Print,
                      Synchronize,
                      ViewGlobal,
)
from .mbarrier import CopyAsyncBulk, MbarrierArrive, MbarrierExpect, MbarrierInit, MbarrierWait
from .parallel import AtomicGlobal, CumSumRegister, ParallelCompute
from .printer import instruction_str, program_str
from .program import BlockProgram
from .tensors import BlockTensor, GlobalTensor, RegisterTensor, SharedTensor
from .transfer import (
                      CopyAsync,
                      CopyAsyncCommitGroup,
                      CopyAsyncWaitGroup,
                      LoadGlobal,
                      LoadShared,
                      SharedSlice,
                      StoreGlobal,
                      StoreShared,
)
from .verifier import verify
from .vm import run

__all__ = [
    "BINARY_OPS", "REDUCE_KINDS", "UNARY_OPS", "AllocateGlobal", "AllocateRegister",
    "AllocateShared", "AtomicGlobal", "BinaryOp", "BlockProgram", "Fma", "BlockTensor", "Cast",
    "CastBytes", "CastPlanes", "CopyAsync", "CopyAsyncBulk", "CopyAsyncCommitGroup",
    "CopyAsyncWaitGroup", "CumSumRegister",
    "Dot", "DotShared", "DotWaitGroup", "Exit", "Fill", "GlobalTensor", "Instruction",
    "LoadGlobal", "LoadShared", "MbarrierArrive", "MbarrierExpect", "MbarrierInit", "MbarrierWait",
    "ParallelCompute", "Print", "ReduceRegister", "RegisterTensor", "SharedSlice", "SharedTensor",
    "StoreGlobal", "StoreShared", "Synchronize", "UnaryOp", "View", "ViewGlobal",
    "elementwise_expr", "instruction_str", "program_str", "result_dtype", "run", "verify",
]
