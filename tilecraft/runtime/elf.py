"""A small reader for CUDA cubins (64-bit little-endian ELF), enough to read kernel resources.

A cubin keeps per-kernel facts in sections the driver reads at load time:

- `.nv.info` (and `.nv.info.<kernel>`): a list of EIATTR records. Each record is
  `format:u8, attribute:u8` then either a 16-bit value (format 0x03, "HVAL") or a 16-bit size and
  that many bytes (format 0x04, "SVAL"). Records in the global `.nv.info` that describe a kernel
  start their payload with the kernel's symbol index (u32) followed by the value (u32).
  Attributes read here: EIATTR_REGCOUNT (0x2f, registers per thread), EIATTR_FRAME_SIZE (0x11,
  stack frame bytes per thread), EIATTR_MIN_STACK_SIZE (0x12), EIATTR_MAX_STACK_SIZE (0x23),
  EIATTR_MAX_THREADS (0x05, from __launch_bounds__), EIATTR_CBANK_PARAM_SIZE (0x19, bytes of
  parameters).
- `.nv.shared.<kernel>`: a NOBITS section whose size is the kernel's static shared memory.
- `.text.<kernel>`: the kernel's machine code (its size is a rough code-size measure).

Spill bytes are not recorded in the cubin; `resources.py` documents what that means.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

EIATTR_MAX_THREADS = 0x05
EIATTR_FRAME_SIZE = 0x11
EIATTR_MIN_STACK_SIZE = 0x12
EIATTR_CBANK_PARAM_SIZE = 0x19
EIATTR_MAX_STACK_SIZE = 0x23
EIATTR_REGCOUNT = 0x2F

_FMT_HVAL = 0x03
_FMT_SVAL = 0x04
_SHT_SYMTAB = 2


class ElfFormatError(ValueError):
    """The bytes are not a 64-bit little-endian ELF file this reader understands."""


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    offset: int
    size: int
    link: int
    entsize: int


@dataclass(frozen=True)
class KernelInfo:
    """What the cubin says about one kernel (entry function). Missing facts are None."""

    name: str
    registers: int | None = None
    frame_size: int | None = None
    min_stack_size: int | None = None
    max_stack_size: int | None = None
    max_threads: tuple[int, ...] | None = None
    param_bytes: int | None = None
    shared_bytes: int = 0
    code_bytes: int = 0
    attributes: dict[int, bytes] = field(default_factory=dict, compare=False, repr=False)


class Cubin:
    """Parsed section table and symbols of a cubin."""

    def __init__(self, data: bytes):
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ElfFormatError("not a 64-bit little-endian ELF file")
        self.data = bytes(data)
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        raw = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        names = raw[shstrndx]
        self.sections: list[Section] = [
            Section(self._cstr(names[4] + r[0]), r[1], r[4], r[5], r[6], r[9]) for r in raw
        ]
        self.symbols: list[str] = self._read_symbols()

    def _cstr(self, offset: int) -> str:
        end = self.data.index(b"\0", offset)
        return self.data[offset:end].decode("utf-8", "replace")

    def _read_symbols(self) -> list[str]:
        for sec in self.sections:
            if sec.type == _SHT_SYMTAB and sec.entsize:
                strtab = self.sections[sec.link]
                count = sec.size // sec.entsize
                return [
                    self._cstr(
                        strtab.offset
                        + struct.unpack_from("<I", self.data, sec.offset + i * sec.entsize)[0]
                    )
                    for i in range(count)
                ]
        return []

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def section_bytes(self, sec: Section) -> bytes:
        return self.data[sec.offset : sec.offset + sec.size]

    def kernel_names(self) -> list[str]:
        """Entry functions: every `.nv.info.<name>` or `.text.<name>` section."""
        return [s.name[len(".text.") :] for s in self.sections if s.name.startswith(".text.")]

    def records(self, sec: Section) -> list[tuple[int, bytes]]:
        """The (attribute, payload) EIATTR records of a `.nv.info*` section."""
        buf, out, pos = self.section_bytes(sec), [], 0
        while pos + 4 <= len(buf):
            fmt, attr, val = buf[pos], buf[pos + 1], struct.unpack_from("<H", buf, pos + 2)[0]
            pos += 4
            if fmt == _FMT_SVAL:
                out.append((attr, buf[pos : pos + val]))
                pos += val
            else:
                out.append((attr, struct.pack("<H", val) if fmt == _FMT_HVAL else b""))
        return out

    def kernel_info(self, name: str) -> KernelInfo:
        """Registers, frame and stack sizes, static shared memory, ... of kernel `name`."""
        sym = self.symbols.index(name) if name in self.symbols else -1
        per_kernel: dict[int, int] = {}
        glob = self.section(".nv.info")
        if glob is not None:
            for attr, payload in self.records(glob):
                if len(payload) == 8:
                    idx, value = struct.unpack("<II", payload)
                    if idx == sym:
                        per_kernel[attr] = value
        local: dict[int, bytes] = {}
        own = self.section(f".nv.info.{name}")
        if own is not None:
            local = dict(self.records(own))
        max_threads = None
        if EIATTR_MAX_THREADS in local and len(local[EIATTR_MAX_THREADS]) == 12:
            max_threads = struct.unpack("<III", local[EIATTR_MAX_THREADS])
        param_bytes = None
        if EIATTR_CBANK_PARAM_SIZE in local and len(local[EIATTR_CBANK_PARAM_SIZE]) == 2:
            param_bytes = struct.unpack("<H", local[EIATTR_CBANK_PARAM_SIZE])[0]
        shared = self.section(f".nv.shared.{name}")
        text = self.section(f".text.{name}")
        return KernelInfo(
            name=name,
            registers=per_kernel.get(EIATTR_REGCOUNT),
            frame_size=per_kernel.get(EIATTR_FRAME_SIZE),
            min_stack_size=per_kernel.get(EIATTR_MIN_STACK_SIZE),
            max_stack_size=per_kernel.get(EIATTR_MAX_STACK_SIZE),
            max_threads=max_threads,
            param_bytes=param_bytes,
            shared_bytes=shared.size if shared is not None else 0,
            code_bytes=text.size if text is not None else 0,
            attributes=local,
        )
