"""Tile IR: frozen dataclasses with source spans, a printer, a verifier and the FTG."""

from .buffer import Buffer, BufferRegion, index_buffer
from .expr import (BinOp, BufferLoad, Call, Cast, Compare, Const, Expr, Not, Select, Var, as_expr,
                   cast, const_int, const_value)
from .func import PrimFunc
from .stmt import (Allocate, Break, BufferStore, Evaluate, For, If, KernelLaunch, LetStmt,
                   ParallelLoop, PipelineInfo, SeqStmt, Stmt, While)
from .tileops import (AnnotateLayout, Atomic, Copy, CumSum, DeviceAssert, Fill, Gemm,
                      GemmWarpPolicy, Print, Reduce, TileOp, UseSwizzle)

__all__ = [
    "Allocate", "AnnotateLayout", "Atomic", "BinOp", "Break", "Buffer", "BufferLoad",
    "BufferRegion", "BufferStore", "Call", "Cast", "Compare", "Const", "Copy", "CumSum",
    "DeviceAssert", "Evaluate", "Expr", "Fill", "For", "Gemm", "GemmWarpPolicy", "If",
    "KernelLaunch", "LetStmt", "Not", "ParallelLoop", "PipelineInfo", "PrimFunc", "Print",
    "Reduce", "Select", "SeqStmt", "Stmt", "TileOp", "UseSwizzle", "Var", "While", "as_expr",
    "cast", "const_int", "const_value", "index_buffer",
]

from .ftg import FTG, FTGEdge, FTGNode, build_ftg  # noqa: E402
from .verifier import verify  # noqa: E402

__all__ += ["FTG", "FTGEdge", "FTGNode", "build_ftg", "verify"]
