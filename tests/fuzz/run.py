"""The differential fuzzer's driver.

    python -m tests.fuzz.run --count 200 --seed 0 [--mode interp|compile|gpu] [--jobs 1]
                             [--no rebind,divmod] [--only ew,reduce] [--dtypes int8,float16]
                             [--timeout 120] [--out /tmp/tilecraft_fuzz] [--shrink]
    python -m tests.fuzz.run --replay /tmp/tilecraft_fuzz/123.py [--mode compile]

Programs `seed .. seed+count-1` run in worker processes (a program that runs past --timeout is
a hang: its worker is killed and replaced). Every failure is written to OUT/<seed>.py (the
program; with --shrink, shrunk, its inputs and model in OUT/<seed>.pkl) and OUT/<seed>.txt
(what went wrong). --replay reruns such a file: its header names the seed and the features,
which give the inputs and the model (or <seed>.pkl beside it does); the kernel is read from the
file, so a hand-shrunk kernel with the same parameters replays.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import pickle
import re
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from . import features as F

_HEADER = re.compile(r"# tilecraft fuzz program: seed=(-?\d+) (.*)")


def _task(seed: int, spec: str, mode: str, source: str | None, shrink: bool, workdir: Path,
          pickled: bytes | None = None):
    from .gen import generate
    from .shrink import shrink as do_shrink
    from .work import check

    t0 = time.time()
    try:
        prog = pickle.loads(pickled) if pickled else generate(seed, F.from_spec(spec))
        out = check(prog, mode, workdir, source)
    except Exception as e:  # noqa: BLE001 - a bug of the fuzzer itself
        import traceback

        return {"seed": seed, "status": "fuzzer", "events": [("fuzzer", "generator", type(
            e).__name__, traceback.format_exc()[-2000:])], "source": "", "time": time.time() - t0}
    src = source or prog.source
    res = {"seed": seed, "status": out.status, "events": out.events, "source": src,
           "signature": out.signature(), "time": time.time() - t0}
    if shrink and source is None and out.status in ("internal", "mismatch", "spill"):
        sig = out.signature()
        small = do_shrink(prog, lambda p: check(p, mode, workdir).signature() == sig)
        if small.source != src:
            res["shrunk"] = small.source
            res["shrunk_program"] = pickle.dumps(small)  # its inputs and model, for --replay
            res["shrunk_events"] = check(small, mode, workdir).events
    return res


#: --stress: the compiler's size thresholds set so that its optional rewrites take every program
#: they legally can (forward_copies: any size and register count; whole-tile weights copied
#: asynchronously at any size), so their correctness is fuzzed, not only their usual cases
STRESS_ENV = "TILECRAFT_FUZZ_STRESS"
STRESS = (("tilecraft.block.forward_copies", "MIN_SHARED", -1),
          ("tilecraft.block.forward_copies", "MAX_REGISTERS", 1 << 30),
          ("tilecraft.passes.lowering.context", "SHARED_WEIGHTS", 0))


def stress(setattr=setattr) -> None:
    """Set STRESS's values (`setattr`: pytest's monkeypatch.setattr in a test)."""
    import importlib

    for module, name, value in STRESS:
        setattr(importlib.import_module(module), name, value)


def _worker(conn, workdir: str) -> None:
    import warnings

    warnings.simplefilter("ignore")
    if os.environ.get(STRESS_ENV) == "1":
        stress()
    while True:
        job = conn.recv()
        if job is None:
            return
        conn.send(_task(*job[:5], Path(workdir), *job[5:]))


class Pool:
    """Worker processes with a time limit per program."""

    def __init__(self, jobs: int, timeout: float, workdir: str):
        self.ctx = mp.get_context("spawn")
        self.timeout, self.workdir = timeout, workdir
        self.workers = [self._start() for _ in range(jobs)]

    def _start(self):
        parent, child = self.ctx.Pipe()
        p = self.ctx.Process(target=_worker, args=(child, self.workdir), daemon=True)
        p.start()
        return {"proc": p, "conn": parent, "job": None, "t0": 0.0}

    def run(self, jobs: list, limit_factor=None):
        """Yield each job's result dict (hangs as status "hang")."""
        todo = list(reversed(jobs))
        busy = 0
        while todo or busy:
            for w in self.workers:
                if w["job"] is None and todo:
                    w["job"], w["t0"] = todo.pop(), time.time()
                    w["conn"].send(w["job"])
                    busy += 1
            time.sleep(0.02)
            for k, w in enumerate(self.workers):
                if w["job"] is None:
                    continue
                limit = self.timeout * (limit_factor(w["job"]) if limit_factor else 1)
                dead = False
                if w["conn"].poll():
                    try:
                        res = w["conn"].recv()
                    except (EOFError, OSError):  # the worker is gone
                        res, dead = None, True
                    if res is not None:
                        w["job"], busy = None, busy - 1
                        yield res
                        continue
                dead = dead or not w["proc"].is_alive()
                if not dead and time.time() - w["t0"] < limit:
                    continue
                seed = w["job"][0]
                if not dead:
                    os.kill(w["proc"].pid, signal.SIGKILL)
                w["proc"].join()
                what = (f"worker died (exit code {w['proc'].exitcode})" if dead
                        else f"no result after {limit:.0f} s")
                yield {"seed": seed, "status": "hang" if not dead else "internal",
                       "events": [("hang" if not dead else "internal", "run", what, what)],
                       "source": "", "signature": f"hang:run:{what}" if not dead else
                       "internal:run:worker died", "time": time.time() - w["t0"]}
                self.workers[k] = self._start()
                busy -= 1

    def close(self) -> None:
        for w in self.workers:
            try:
                w["conn"].send(None)
            except (BrokenPipeError, OSError):
                pass
            w["proc"].join(timeout=5)


def _source_of(seed: int, spec: str) -> str:
    from .gen import generate

    return generate(seed, F.from_spec(spec)).source


def _write_failure(out: Path, res: dict, spec: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    seed = res["seed"]
    src = res.get("source") or _source_of(seed, spec)
    path = out / f"{seed}.py"
    if res.get("shrunk"):
        (out / f"{seed}.orig.py").write_text(src)
        (out / f"{seed}.pkl").write_bytes(res["shrunk_program"])
        src = res["shrunk"]
    else:
        (out / f"{seed}.pkl").unlink(missing_ok=True)
    path.write_text(src)
    lines = [f"seed {seed}: {res['status']}"]
    for status, stage, key, detail in res["events"]:
        lines += [f"- {status} in {stage}: {key}", "    " + detail.replace("\n", "\n    ")]
    for status, stage, key, detail in res.get("shrunk_events", []):
        lines += [f"- (shrunk) {status} in {stage}: {key}", "    " + detail.replace("\n", "\n    ")]
    (out / f"{seed}.txt").write_text("\n".join(lines) + "\n")
    return path


def _message(detail: str) -> str:
    """A refusal's message without the names and numbers that differ between programs."""
    first = detail.splitlines()[0] if detail else ""
    return re.sub(r"`[^`]*`|\b\d+\b", "_", first)[:140]


def summarize(results: list[dict]) -> tuple[Counter, Counter, dict, Counter]:
    """(status counts, refusals by stage:code, failure signature -> seeds, refusal messages)."""
    counts, refused, defects, messages = Counter(), Counter(), defaultdict(list), Counter()
    for r in results:
        counts[r["status"]] += 1
        for status, stage, key, detail in r["events"]:
            if status == "refused":
                refused[f"{stage}:{key}"] += 1
                messages[f"{stage.split()[0]}: {_message(detail)}"] += 1
        if r["status"] not in ("pass", "refused"):
            defects[r.get("signature") or r["status"]].append(r["seed"])
    return counts, refused, defects, messages


def summary_line(counts: Counter, refused: Counter, n: int) -> str:
    codes = Counter()
    for k, v in refused.items():
        codes[k.rsplit(":", 1)[-1]] += v
    ref = ", ".join(f"{c} {v}" for c, v in sorted(codes.items()))
    return (f"programs {n} | pass {counts['pass']} | refused {counts['refused']}"
            f"{f' ({ref})' if ref else ''} | mismatch {counts['mismatch']} | internal "
            f"{counts['internal']} | hang {counts['hang']} | spill {counts['spill']}"
            + (f" | fuzzer errors {counts['fuzzer']}" if counts["fuzzer"] else ""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mode", choices=["interp", "compile", "gpu"], default="interp")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per program")
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "tilecraft_fuzz"))
    ap.add_argument("--no", default="", help="features to turn off: " + ", ".join(F.HELP))
    ap.add_argument("--only", default="", help="program families: " + ", ".join(F.FAMILIES))
    ap.add_argument("--dtypes", default="", help="element types to use")
    ap.add_argument("--shrink", action="store_true", help="shrink failing programs")
    ap.add_argument("--replay", help="rerun a program file written by an earlier run")
    ap.add_argument("--quiet", action="store_true", help="no lines per failing program")
    ap.add_argument("--show-refused", action="store_true", help="list the refusal messages")
    ap.add_argument("--stress", action="store_true",
                    help="thresholds of optional rewrites off: they take every legal case")
    a = ap.parse_args(argv)
    if a.stress:  # (the workers are spawned: they read it from the environment)
        os.environ[STRESS_ENV] = "1"
    out = Path(a.out)
    workdir = tempfile.mkdtemp(prefix="tilecraft_fuzz_work_")
    if a.replay:
        text = Path(a.replay).read_text()
        m = _HEADER.search(text)
        if not m:
            ap.error(f"{a.replay} has no '# tilecraft fuzz program: seed=...' header")
        pkl = Path(a.replay).with_suffix(".pkl")  # a shrunk program: its own inputs and model
        jobs = [(int(m.group(1)), m.group(2), a.mode, text, False,
                 pkl.read_bytes() if pkl.exists() else None)]
        spec = m.group(2)
    else:
        spec = F.parse(a.no, a.dtypes, a.only).spec()
        jobs = [(s, spec, a.mode, None, a.shrink) for s in range(a.seed, a.seed + a.count)]
    pool = Pool(max(1, a.jobs), a.timeout, workdir)
    results = []
    t0 = time.time()
    try:
        for res in pool.run(jobs, limit_factor=(lambda j: 6) if a.shrink else None):
            results.append(res)
            bad = res["status"] not in ("pass", "refused")
            if bad and not a.replay:
                res["file"] = str(_write_failure(out, res, spec))
            if a.replay or (bad and not a.quiet):
                print(f"seed {res['seed']}: {res['status']} {res.get('signature', '')} "
                      f"{res.get('file', '')}", flush=True)
                for status, stage, key, detail in res["events"]:
                    if status != "pass":
                        print(f"  {status} in {stage}: {key}\n    "
                              + detail[:1500].replace("\n", "\n    "), flush=True)
    finally:
        pool.close()
    counts, refused, defects, messages = summarize(results)
    if refused:
        print("refused: " + ", ".join(f"{k} {v}" for k, v in refused.most_common()))
    if a.show_refused:
        for msg, n in messages.most_common():
            print(f"{n:5d} x {msg}")
    for sig, seeds in sorted(defects.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(seeds):5d} x {sig}  (seeds {', '.join(map(str, seeds[:8]))})")
    print(f"{summary_line(counts, refused, len(results))} | {time.time() - t0:.0f} s")
    return 0 if not defects else 1


if __name__ == "__main__":
    sys.exit(main())
