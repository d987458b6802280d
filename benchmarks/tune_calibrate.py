"""The cost model against measured times, offline: predictions made now, times from a file.

`tune_ranking.py --json rows.json` writes every configuration's measured time on the GPU; this
script recomputes each configuration's prediction with the current cost model (on the CPU, no
GPU needed) and prints, per workload, the same numbers as tune_ranking.py: the measured time of
the predicted best and of the predicted top 5% over the measured best, and Spearman's rank
correlation. Configurations the model now drops are left out of the ranking; "best in ranked"
is the measured best among the ranked ones over the best of all that ran (1.000: the model
drops no configuration faster than those it keeps).

Usage: PYTHONPATH=$PWD python3 benchmarks/tune_calibrate.py benchmarks/data/tune_rows_h200.json
       [--target H200|H100] [-v WORKLOAD-PREFIX]   (-v: every configuration, prediction, time)
"""

import json
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tune_ranking import spearman, workloads

from tilecraft import targets
from tilecraft.diagnostics import TilecraftError
from tilecraft.tune import cost


def main() -> None:
    rows = json.loads(Path(sys.argv[1]).read_text())
    target = targets.H100_SXM if "H100" in sys.argv else targets.H200
    verbose = sys.argv[sys.argv.index("-v") + 1] if "-v" in sys.argv else None
    known = {label: (f, a, fx) for label, _, f, a, fx in workloads(False)}
    warnings.simplefilter("ignore")
    for label in dict.fromkeys(r["workload"] for r in rows):
        factory, args, fixed = known[label]
        ran = [r for r in rows if r["workload"] == label and r["ms"]]
        preds, times = [], []
        for r in ran:
            try:
                e = cost.estimate(factory.factory(*args, **fixed, **r["config"]), target)
                preds.append(e.time)
                times.append(r["ms"])
                note = f"pred {e.time * 1e6:8.1f} us, {e.registers} registers"
            except TilecraftError as err:
                note = f"dropped: {str(err).splitlines()[0][:70]}"
            if verbose is not None and label.startswith(verbose):
                print(f"  {r['config']} {note}; measured {r['ms'] * 1e3:.1f} us, spill "
                      f"{r['spill']}")
        ordered = np.asarray(times)[np.argsort(preds)]
        best = min(times)
        n5 = max(1, -(-len(times) // 20))
        print(f"{label:32s} ranked {len(times):3d} of {len(ran):3d}: top-1 "
              f"{ordered[0] / best:.3f}, top-5% {ordered[:n5].min() / best:.3f}, spearman "
              f"{spearman(preds, times):.2f}, best in ranked "
              f"{best / min(r['ms'] for r in ran):.3f}")


if __name__ == "__main__":
    main()
