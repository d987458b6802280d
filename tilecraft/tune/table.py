"""The autotune table: a tuned factory call -> its winning configuration, kept on disk.

    <cache dir>/tune/<key[:2]>/<key>.json    (cache dir: $TILECRAFT_CACHE_DIR, ~/.cache/tilecraft)

Key (`table_key`): sha256 of this format's number, the jit cache's key of the call without the
tuned keywords (`tilecraft.jit_key.call_key`: tilecraft's version and sources, the factory by
value, the arguments, the jit options), the names of the keywords the call fixes (the call key
binds defaults, so a keyword passed at its default value would key as a tuned one), the GPU's
name, and what the candidates come from (the
`configs` list, or the `space` and `topk` given to the recommender). An uncacheable call has no
key and is tuned every process.

Entry: a `TuneRecord` (the winner's config and milliseconds, every candidate's milliseconds or
error, the GPU, tilecraft's version, when) plus the sha256 of all of it, written to a temporary
name and renamed (runtime/cache.py's signed JSON, as the jit cache's entries). A file that
does not parse, or whose contents do not hash to its sha256, is a miss with a
`CacheCorruptionWarning`; one of another format or key is a plain miss. The call is then
tuned again and the entry rewritten.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = 1


@dataclass(frozen=True)
class Timing:
    """One candidate's outcome: its config and milliseconds per call, or why it failed."""

    config: dict[str, Any]
    ms: float | None = None
    error: str | None = None

    def to_json(self) -> dict:
        out: dict[str, Any] = {"config": self.config}
        if self.error is None:
            out["ms"] = self.ms
        else:
            out["error"] = self.error
        return out

    @classmethod
    def from_json(cls, data: dict) -> Timing:
        error = data.get("error")
        return cls(
            _config(data["config"]),
            None if error is not None else float(data["ms"]),
            None if error is None else str(error),
        )


@dataclass(frozen=True)
class TuneRecord:
    """A table entry: the winner and every candidate's outcome, on which GPU, by which tilecraft,
    when (ISO 8601, UTC)."""

    config: dict[str, Any]
    ms: float
    timings: tuple[Timing, ...]
    gpu: str
    version: str
    timestamp: str

    @classmethod
    def now(cls, config: dict, ms: float, timings: tuple[Timing, ...], gpu: str) -> TuneRecord:
        import tilecraft

        stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        return cls(dict(config), float(ms), tuple(timings), gpu, tilecraft.__version__, stamp)

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "winner": {"config": self.config, "ms": self.ms},
            "candidates": [t.to_json() for t in self.timings],
            "gpu": self.gpu,
            "tilecraft": self.version,
            "timestamp": self.timestamp,
        }

    @classmethod
    def from_json(cls, data: dict) -> TuneRecord:
        winner = data["winner"]
        return cls(
            config=_config(winner["config"]),
            ms=float(winner["ms"]),
            timings=tuple(Timing.from_json(t) for t in data["candidates"]),
            gpu=str(data["gpu"]),
            version=str(data["tilecraft"]),
            timestamp=str(data["timestamp"]),
        )


def _config(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise ValueError(f"a config is a dict of keywords, got {data!r}")
    return dict(data)


def json_exact(value: Any) -> bool:
    """Whether `value` reads back from JSON as itself, types included (a tuple would come back
    a list, a str subclass a str): only such a winner is written to the table."""
    t = type(value)
    if t in (type(None), bool, int, float, str):
        return True
    if t is list:
        return all(json_exact(v) for v in value)
    if t is dict:
        return all(type(k) is str and json_exact(v) for k, v in value.items())
    return False


# ---- the key ---------------------------------------------------------------------------------
def table_key(
    jit_factory: Any,
    args: tuple,
    fixed: dict[str, Any],
    gpu: str,
    *,
    configs: list[dict] | None,
    space: dict | None,
    topk: int,
) -> str | None:
    """The table key of tuning `jit_factory(*args, **fixed)` on `gpu` over `configs` (or the
    recommender's `topk` from `space`); None when the call cannot be keyed by value."""
    from tilecraft.jit_key import Fingerprint, Unkeyable, call_key

    try:
        base = call_key(jit_factory.factory, args, fixed, jit_factory.options)
        if base is None:
            return None
        fp = Fingerprint()
        fp.add("autotune table", FORMAT, base, gpu)
        # the call key binds defaults: a keyword passed at its default value keys the same,
        # but it is not tuned, so the names the call fixes are part of the key
        fp.value(("fixed", sorted(fixed)))
        if configs is not None:
            fp.value(("configs", [dict(c) for c in configs]))
        else:
            fp.value(("space", space, topk))
    except Unkeyable:
        return None
    return fp.hexdigest()


# ---- the file --------------------------------------------------------------------------------
def entry_path(key: str) -> Path:
    """Where the entry of `key` lives."""
    from tilecraft.runtime.cache import cache_dir

    return cache_dir() / "tune" / key[:2] / f"{key}.json"


def load(key: str) -> TuneRecord | None:
    """The entry stored under `key`; None when absent or damaged (damaged: with a warning)."""
    from tilecraft.runtime.cache import read_signed_json

    return read_signed_json(entry_path(key), key, FORMAT, TuneRecord.from_json,
                            "autotune table entry", "tuning again")


def save(key: str, record: TuneRecord, factory: str = "") -> bool:
    """Store `record` under `key` (a temporary name, then a rename); False when not written: a
    winner JSON cannot hold exactly, or an unwritable directory."""
    from tilecraft.runtime.cache import write_signed_json

    if not json_exact(record.config):
        return False
    data = {"key": key, "factory": factory, **record.to_json()}
    return write_signed_json(entry_path(key), json.loads(json.dumps(data, default=repr)),
                             indent=1)
