"""CompileOptions: every switch besides the program itself that changes the generated code.

Made once where a build starts and passed down: `jit.py` makes it from the jit arguments and the
environment (`CompileOptions.from_env`); passes and emitters read `state.options` and never the
environment. `key()` is part of the jit cache's key, so a switch can never reuse a kernel built
without it.

    opts = CompileOptions.from_env(arch="sm_90a")        # $TILECRAFT_WGMMA=0 -> wgmma=False
    gen = generate_cuda(func, options=opts.replace(tma=False))

The environment variables (each "0" turns its switch off): TILECRAFT_WGMMA (wgmma on sm_90a;
else mma.sync), TILECRAFT_WGMMA_PIPE (a pipelined loop's lone wgmma dot left running across
iterations), TILECRAFT_TMA (TMA loads of pipelined tiles; else cp.async), TILECRAFT_WS (a
wgmma mainloop's copies in a producer warpgroup where it measured faster; "always": wherever the
form allows, `warp_specialize="always"`: passes/warp_specialize.py), TILECRAFT_SINK_STORES
(stores of loaded registers below the asynchronous copies after them: block/sink_stores.py),
TILECRAFT_ASYNC_COPIES (a global -> shared T.copy outside a multi-stage pipeline as cp.async,
not through registers: passes/lowering/copy.py);
TILECRAFT_ARCH (the arch when none is given) and TILECRAFT_DUMP_IR (a directory: the IR after
each pass).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from tilecraft._frozen import Frozen, _set
from tilecraft.targets import Target, current_target, detect_target, target_from_arch

_SWITCHES = {"wgmma": "TILECRAFT_WGMMA", "wgmma_pipeline": "TILECRAFT_WGMMA_PIPE",
             "tma": "TILECRAFT_TMA", "warp_specialize": "TILECRAFT_WS",
             "sink_stores": "TILECRAFT_SINK_STORES", "async_copies": "TILECRAFT_ASYNC_COPIES"}


# os.environ's own bytes-keyed dict, read without Mapping.get's KeyError for unset variables
# (the quantized matmul reads the switches on every call; CPython's os._Environ keeps it)
_ENV = getattr(os.environ, "_data", None)
_ENV_KEYS = tuple(os.environ.encodekey(v) for v in _SWITCHES.values()) \
    if _ENV is not None and hasattr(os.environ, "encodekey") else None


def switches_from_env(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The environment's code-generation switches as they stand (a cheap part of in-memory keys:
    a kernel built before `TILECRAFT_TMA=0` was set is not reused after)."""
    if environ is None and _ENV_KEYS is not None and os.environ._data is _ENV:
        return tuple(os.environ.decodevalue(_ENV[k]) if k in _ENV else "1" for k in _ENV_KEYS)
    env = os.environ if environ is None else environ
    return tuple(env.get(var, "1") for var in _SWITCHES.values())


def switch_on(switches: tuple[str, ...], name: str) -> bool:
    """Whether switch `name` ("tma", ...) is on in `switches` (switches_from_env's tuple; an
    empty one: the defaults): on unless "0", as CompileOptions reads them."""
    i = list(_SWITCHES).index(name)
    return i >= len(switches) or switches[i] != "0"


class CompileOptions(Frozen):
    """The target and the code-generation switches of one build (see the module doc)."""

    __slots__ = ("target", "wgmma", "wgmma_pipeline", "tma", "warp_specialize", "sink_stores",
                 "async_copies", "dump_ir")

    def __init__(self, target: Target, *, wgmma: bool = True, wgmma_pipeline: bool = True,
                 tma: bool = True, warp_specialize: bool | str = True, sink_stores: bool = True,
                 async_copies: bool = True, dump_ir: str | None = None):
        _set(self, "target", target)
        _set(self, "wgmma", wgmma)
        _set(self, "wgmma_pipeline", wgmma_pipeline)
        _set(self, "tma", tma)
        _set(self, "warp_specialize", warp_specialize)
        _set(self, "sink_stores", sink_stores)
        _set(self, "async_copies", async_copies)
        _set(self, "dump_ir", dump_ir)

    @classmethod
    def for_arch(cls, arch: str | None = None, **switches) -> CompileOptions:
        """Defaults for `arch` (else the live GPU, else the H100), without the environment."""
        return cls(target_from_arch(arch) if arch else detect_target(), **switches)

    @classmethod
    def from_env(cls, arch: str | None = None,
                 environ: Mapping[str, str] | None = None) -> CompileOptions:
        """`arch` (else $TILECRAFT_ARCH, else the live GPU, else the H100) and the switches the
        environment turns off."""
        env = os.environ if environ is None else environ
        target = target_from_arch(arch) if arch else current_target(environ=env)
        switches: dict = {name: env.get(var, "1") != "0" for name, var in _SWITCHES.items()}
        if env.get("TILECRAFT_WS") == "always":  # split wherever the form allows (tests, tuning)
            switches["warp_specialize"] = "always"
        return cls(target, **switches, dump_ir=env.get("TILECRAFT_DUMP_IR") or None)

    def key(self) -> tuple[str, ...]:
        """What the generated code depends on (the dump directory does not change it)."""
        return (repr(self.target), *(f"{n}={getattr(self, n)}" for n in _SWITCHES))
