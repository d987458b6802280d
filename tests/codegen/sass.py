"""SASS of a cubin through cuobjdump (pip: nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm), and a
check of the wgmma register discipline: no instruction touches an accumulator register of an
HGMMA that may still be running (until WARPGROUP.DEPBAR.LE gsb0 lets it finish), in program
order. Tests skip where the tools are not installed."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path


def cuobjdump() -> str | None:
    try:
        import nvidia.cu13 as cu13  # the pip wheels put their tools in nvidia/cu13/bin

        for base in cu13.__path__:
            tool = Path(base) / "bin" / "cuobjdump"
            if tool.exists() and (Path(base) / "bin" / "nvdisasm").exists():
                return str(tool)
    except ImportError:
        pass
    return shutil.which("cuobjdump")


def sass(cubin: bytes) -> list[str]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "k.cubin"
        path.write_bytes(cubin)
        out = subprocess.run([cuobjdump(), "-sass", str(path)], capture_output=True, text=True,
                             check=True, env={"PATH": str(Path(cuobjdump()).parent)})
    return [ln for ln in out.stdout.splitlines() if re.search(r"/\*[0-9a-f]{4,}\*/", ln)]


def wgmma_register_races(lines: list[str]) -> list[str]:
    """Instructions that read or write a register of an HGMMA still in flight: its
    accumulators, and its four A registers when A comes from registers."""
    pending: list[set[int]] = []  # oldest first
    bad = []
    for ln in lines:
        m = re.search(r"HGMMA\.64x(\d+)x\d+\.F32\S* R(\d+), (?:R(\d+))?", ln)
        if m:
            n, r0 = int(m.group(1)), int(m.group(2))
            regs = set(range(r0, r0 + n // 2))
            if m.group(3) is not None:
                regs |= set(range(int(m.group(3)), int(m.group(3)) + 4))
            pending.append(regs)
            continue
        m = re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x(\d+)", ln)
        if m:
            keep = int(m.group(1), 16)
            pending = pending[len(pending) - keep:] if keep else []
            continue
        if pending:
            text = ln.split(";")[0]
            if {int(r) for r in re.findall(r"\bR(\d+)\b", text)} & set().union(*pending):
                bad.append(text.strip())
    return bad
