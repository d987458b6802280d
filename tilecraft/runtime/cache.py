"""Compiled-kernel cache: an in-memory dict in front of a directory of cubins.

Key: sha256 over the CUDA source, the target arch, the compile options, the NVRTC version, the
tilecraft version and a hash of tilecraft's device header library (so editing a .cuh file
invalidates what was built against it). Directory: `$TILECRAFT_CACHE_DIR`, default
`~/.cache/tilecraft`; entries live in `<dir>/cubin/<key[:2]>/<key>.cubin` with a `<key>.json`
beside it (entry name, arch, options, NVRTC version, log, resources, and the cubin's length and
sha256). Both files are written to a temporary name and renamed into place, the JSON last, so a
reader never sees half an entry and concurrent writers of one key are harmless (same bytes).

Nothing read from disk is trusted: a JSON record that does not parse or lacks a field, or a cubin
whose length or sha256 differs from its record (truncated, overwritten, gone) is a miss with a
`CacheCorruptionWarning`; the caller compiles again and `put` overwrites the entry.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

from .._frozen import Frozen, _set
from .errors import CacheCorruptionWarning, warn_at_caller
from .paths import TILECRAFT_INCLUDE_DIR
from .resources import Resources

#: the fields of a cubin record that say what the cubin file must be
_LENGTH, _SHA256 = "cubin_bytes", "cubin_sha256"


class CacheEntry(Frozen):
    """A cubin read back from the cache, its resources, NVRTC log and metadata."""

    __slots__ = ("cubin", "resources", "log", "meta")
    cubin: bytes
    resources: Resources
    log: str
    meta: dict

    def __init__(self, cubin: bytes, resources: Resources, log: str, meta: dict) -> None:
        _set(self, "cubin", cubin)
        _set(self, "resources", resources)
        _set(self, "log", log)
        _set(self, "meta", meta)


def cache_dir() -> Path:
    """The disk cache directory: `$TILECRAFT_CACHE_DIR` or `~/.cache/tilecraft`."""
    env = os.environ.get("TILECRAFT_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "tilecraft"


@functools.lru_cache(maxsize=1)
def tilecraft_version() -> str:
    try:
        from importlib.metadata import version

        return version("tilecraft")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "0+unknown"


@functools.lru_cache(maxsize=1)
def header_library_hash() -> str:
    """sha256 over every file of tilecraft's device header library (path and contents)."""
    h = hashlib.sha256()
    for path in sorted(TILECRAFT_INCLUDE_DIR.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(TILECRAFT_INCLUDE_DIR)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def cache_key(source: str, arch: str, options: Iterable[str], compiler_version: str) -> str:
    """The cache key of one compile (see the module docstring for what goes in)."""
    h = hashlib.sha256()
    for part in (
        source,
        arch,
        "\0".join(options),
        compiler_version,
        tilecraft_version(),
        header_library_hash(),
    ):
        h.update(part.encode())
        h.update(b"\xff")
    return h.hexdigest()


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to a temporary file beside `path`, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def json_digest(data: dict) -> str:
    """sha256 of an entry's contents (all but its `sha256` field), in one canonical spelling."""
    body = {k: v for k, v in data.items() if k != "sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def write_signed_json(path: Path, data: dict, indent: int | None = None) -> bool:
    """Write `data` (a JSON object with a "key" and a "format") with its sha256, atomically;
    False when JSON cannot hold it or the directory is not writable."""
    try:
        data = json.loads(json.dumps(data))  # as it will read back (tuples become lists)
        data["sha256"] = json_digest(data)
        atomic_write(path, json.dumps(data, indent=indent).encode())
    except (OSError, TypeError, ValueError):
        return False
    return True


def read_signed_json(path: Path, key: str, fmt: int, parse, entry: str, redo: str):
    """`parse(data)` of the entry write_signed_json wrote at `path`; None when it is absent or
    of another format or key, or damaged (its sha256, JSON or contents: a
    CacheCorruptionWarning at the caller, "the {entry} {path} is damaged (...); {redo}")."""
    try:
        text = path.read_bytes()
    except OSError:
        return None

    def damaged(reason: str) -> None:
        warn_at_caller(f"tilecraft: the {entry} {path} is damaged ({reason}); {redo}",
                       CacheCorruptionWarning)

    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != fmt:
            return None  # another format: rewritten without a warning
        if data.get("sha256") != json_digest(data):
            return damaged("its contents do not match their sha256")
        if data.get("key") != key:
            return None
        return parse(data)
    except (ValueError, RecursionError):
        return damaged("it is not valid JSON")
    except Exception:  # noqa: BLE001 - whatever a damaged entry makes the reader raise
        return damaged("it is incomplete")


class KernelCache:
    """A directory of compiled kernels with an in-memory dict in front."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self._memory: dict[str, CacheEntry] = {}
        self._lock = threading.Lock()
        self._warned: set[str] = set()  # damaged entries already reported

    def _paths(self, key: str) -> tuple[Path, Path]:
        base = self.directory / "cubin" / key[:2] / key
        return base.with_suffix(".cubin"), base.with_suffix(".json")

    def get(self, key: str) -> CacheEntry | None:
        """The entry stored under `key`, from memory or disk; None when absent or damaged (a
        damaged entry also warns, and is overwritten by the next `put`)."""
        with self._lock:
            hit = self._memory.get(key)
        if hit is not None:
            return hit
        cubin_path, json_path = self._paths(key)
        try:
            text = json_path.read_bytes()
        except OSError:
            return None  # absent: a plain miss
        try:
            entry = _verified_entry(text, cubin_path)
        except _Damaged as exc:
            if exc.reason and key not in self._warned:  # once, until `put` rewrites it
                self._warned.add(key)
                warn_at_caller(
                    f"tilecraft: the cached kernel {json_path.with_suffix('')} is damaged "
                    f"({exc.reason}); compiling it again",
                    CacheCorruptionWarning,
                )
            return None
        with self._lock:
            self._memory[key] = entry
        return entry

    def put(self, key: str, entry: CacheEntry) -> None:
        """Store `entry` in memory and on disk (disk errors are ignored: the cache is optional)."""
        with self._lock:
            self._memory[key] = entry
            self._warned.discard(key)
        cubin_path, json_path = self._paths(key)
        meta = dict(entry.meta, resources=entry.resources.to_json(), log=entry.log)
        meta[_LENGTH] = len(entry.cubin)
        meta[_SHA256] = hashlib.sha256(entry.cubin).hexdigest()
        try:
            atomic_write(cubin_path, entry.cubin)
            atomic_write(json_path, json.dumps(meta, indent=1).encode())
        except OSError:
            pass

    def clear_memory(self) -> None:
        """Forget the in-memory entries (the disk stays); used by tests and long sessions."""
        with self._lock:
            self._memory.clear()


class _Damaged(Exception):
    """A cache entry that cannot be used; `reason` is empty for an entry of an older format."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _verified_entry(text: bytes, cubin_path: Path) -> CacheEntry:
    """The entry of record `text`, its cubin read from `cubin_path` and checked against the
    record's length and sha256; raises _Damaged otherwise."""
    try:
        meta = json.loads(text)
    except (ValueError, RecursionError):
        raise _Damaged("its record is not valid JSON") from None
    if not isinstance(meta, dict):
        raise _Damaged("its record is not a JSON object")
    if _SHA256 not in meta:
        raise _Damaged("")  # written before records carried the cubin's hash
    try:
        length, digest = meta.pop(_LENGTH), meta.pop(_SHA256)
        resources = Resources.from_json(meta.pop("resources"))
        log = meta.pop("log", "")
        if type(length) is not int or not isinstance(digest, str) or not isinstance(log, str):
            raise TypeError
    except Exception:  # noqa: BLE001 - anything a damaged record makes the parser raise
        raise _Damaged("its record is incomplete") from None
    try:
        cubin = cubin_path.read_bytes()
    except OSError:
        raise _Damaged("its cubin is missing") from None
    if len(cubin) != length:
        raise _Damaged(f"its cubin has {len(cubin)} bytes, its record says {length}")
    if hashlib.sha256(cubin).hexdigest() != digest:
        raise _Damaged("its cubin's sha256 differs from its record's")
    return CacheEntry(cubin=cubin, resources=resources, log=log, meta=meta)


_caches: dict[Path, KernelCache] = {}
_caches_lock = threading.Lock()


def default_cache() -> KernelCache:
    """The cache for the current `$TILECRAFT_CACHE_DIR` (one object per directory)."""
    directory = cache_dir()
    with _caches_lock:
        if directory not in _caches:
            _caches[directory] = KernelCache(directory)
        return _caches[directory]
