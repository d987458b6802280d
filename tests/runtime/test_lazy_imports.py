"""What a process that only builds (or loads) a kernel with every tile fixed imports: neither the
tuner (dataclasses cost a millisecond each to define) nor ml_dtypes (about 4 ms). Issue 15's
"cached kernel ready in a new process" budget is 20 ms."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = """
import sys
sys.path.insert(0, "examples")
import gemm
kernel = gemm.matmul(256, 256, 256, 128, 128, 32, num_stages=3, threads=128)
kernel.func
print(sorted(m for m in ("tilecraft.tune.tuner", "tilecraft.tune.table", "ml_dtypes")
             if m in sys.modules))
"""


def test_a_fixed_call_of_a_recommending_factory_imports_neither_tuner_nor_ml_dtypes():
    out = subprocess.run([sys.executable, "-c", PROGRAM], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={"TILECRAFT_JIT_CACHE": "0",
                                                     "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
