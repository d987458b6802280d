"""Per-kernel resource usage: registers, spills, stack, static shared memory.

Two sources, in order of preference:

- **ptxas report** (`source="ptxas"`): compiling with `--ptxas-options=-v` makes NVRTC's program
  log carry, for every entry function, lines like
  `ptxas . 272 bytes stack frame, 308 bytes spill stores, 376 bytes spill loads` and
  `ptxas info : Used 32 registers, used 1 barriers, 4000 bytes smem, 372 bytes cmem[0]`.
  Every field is exact.
- **cubin** (`source="cubin"`), when the log has no report (older NVRTC, or a cubin from the cache
  of another tool): registers (EIATTR_REGCOUNT) and stack frame (EIATTR_FRAME_SIZE) are exact;
  static shared memory is the `.nv.shared.<kernel>` section size, which on sm_90 includes the 1 KB
  the system reserves per block when the kernel uses shared memory; spill byte counts are not in the
  cubin (`spill_stores`/`spill_loads` are None). The cubin does list spill instructions (EIATTR
  0x55, one record per spill load/store, observed, not documented by NVIDIA); their count is
  `spill_instructions`, so `has_spills` still works.
"""

from __future__ import annotations

import functools
import re
import struct

from .._frozen import Frozen, _set

_EIATTR_SPILL_INSTRS = 0x55  # observed: (1, offset) per spill LDL/STL; absent without spills


class Resources(Frozen):
    """Resources of one compiled kernel, per thread unless the name says otherwise."""

    __slots__ = ("registers", "stack_frame_bytes", "spill_stores", "spill_loads",
                 "shared_memory_bytes", "barriers", "constant_memory_bytes", "spill_instructions",
                 "source")
    registers: int
    stack_frame_bytes: int
    spill_stores: int | None
    spill_loads: int | None
    shared_memory_bytes: int
    barriers: int | None
    constant_memory_bytes: int | None
    spill_instructions: int | None
    source: str

    def __init__(
        self,
        registers: int,
        stack_frame_bytes: int = 0,
        spill_stores: int | None = 0,
        spill_loads: int | None = 0,
        shared_memory_bytes: int = 0,
        barriers: int | None = None,
        constant_memory_bytes: int | None = None,
        spill_instructions: int | None = None,
        source: str = "ptxas",
    ) -> None:
        for field, value in zip(self.__slots__, (
            registers, stack_frame_bytes, spill_stores, spill_loads, shared_memory_bytes,
            barriers, constant_memory_bytes, spill_instructions, source,
        )):
            _set(self, field, value)

    @property
    def spill_bytes(self) -> int | None:
        """Bytes of spill stores plus spill loads; None when the source does not say."""
        if self.spill_stores is None or self.spill_loads is None:
            return None
        return self.spill_stores + self.spill_loads

    @property
    def has_spills(self) -> bool:
        """True when the compiler spilled registers to local memory."""
        if self.spill_bytes is not None:
            return self.spill_bytes > 0
        return bool(self.spill_instructions)

    def to_json(self) -> dict:
        return self.as_dict()

    @classmethod
    def from_json(cls, data: dict) -> Resources:
        return cls(**data)


# the ptxas report's lines (compiled on first use: a jit-cache hit parses no log)
_ENTRY = r"Compiling entry function '([^']+)' for '(\w+)'"
_PROPS = r"Function properties for (\S+)"
_FRAME = r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
_USED = r"Used (\d+) registers"
_BARRIERS = r"used (\d+) barriers"
_SMEM = r"(\d+) bytes smem"
_CMEM = r"(\d+) bytes cmem\[0\]"


def parse_ptxas_log(log: str) -> dict[str, Resources]:
    """Resources of every entry function reported in a ptxas `-v` log, keyed by (mangled) name."""
    entry_re, props_re, frame_re, used_re, barriers_re, smem_re, cmem_re = _patterns()
    out: dict[str, Resources] = {}
    entry: str | None = None
    props_for: str | None = None
    frame: tuple[int, int, int] = (0, 0, 0)
    for line in log.splitlines():
        if m := entry_re.search(line):
            entry, props_for, frame = m.group(1), None, (0, 0, 0)
        elif m := props_re.search(line):
            props_for = m.group(1)
        elif (m := frame_re.search(line)) and props_for == entry:
            frame = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif (m := used_re.search(line)) and entry is not None:
            out[entry] = Resources(
                registers=int(m.group(1)),
                stack_frame_bytes=frame[0],
                spill_stores=frame[1],
                spill_loads=frame[2],
                shared_memory_bytes=_int(smem_re, line) or 0,
                barriers=_int(barriers_re, line),
                constant_memory_bytes=_int(cmem_re, line),
                source="ptxas",
            )
            entry = None
    return out


@functools.lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in (_ENTRY, _PROPS, _FRAME, _USED, _BARRIERS, _SMEM, _CMEM))


def _int(pat: re.Pattern[str], line: str) -> int | None:
    m = pat.search(line)
    return int(m.group(1)) if m else None


def resources_from_cubin(cubin: bytes, name: str) -> Resources:
    """Resources of kernel `name` read from the cubin itself (see the module docstring)."""
    from .elf import Cubin  # ELF parsing only when a cubin is read (not on cache hits)

    elf = Cubin(cubin)
    info = elf.kernel_info(name)
    if info.registers is None:
        raise ValueError(f"cubin has no EIATTR_REGCOUNT record for kernel `{name}`")
    spill_instrs = 0
    payload = info.attributes.get(_EIATTR_SPILL_INSTRS)
    if payload:
        spill_instrs = len(struct.unpack(f"<{len(payload) // 4}I", payload)) // 2
    return Resources(
        registers=info.registers,
        stack_frame_bytes=info.frame_size or 0,
        spill_stores=None,
        spill_loads=None,
        shared_memory_bytes=info.shared_bytes,
        barriers=None,
        constant_memory_bytes=None,
        spill_instructions=spill_instrs,
        source="cubin",
    )
