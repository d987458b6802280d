#!/usr/bin/env bash
# The "done when" tables of the open issues, each part sized for one device call (10 minutes),
# every number beside its peer in the same process, the CSVs and logs into $OUT (or /tmp):
#
#   bash benchmarks/acceptance.sh quant   # issue 13: quant_gemm.py's default table (every type,
#                                         #   M 1/16 on every shape, M 128/4096 on 8192^2, f16
#                                         #   and bf16 against cuBLAS and torch's int4 kernel),
#                                         #   then its verdict against the targets
#   bash benchmarks/acceptance.sh host    # issue 15: memory_bound.py, compile_time.py and
#                                         #   launch_profile.py (two runs each where it is cheap)
#   bash benchmarks/acceptance.sh check   # the quantized matmul's campaign (6 minutes) and
#                                         #   `pytest -m gpu tests`
#
# Everything it runs checks its outputs against float64 (or torch) before timing them.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
out="${OUT:-/tmp}"
python3 -c "import torch; print(torch.cuda.get_device_name(0), torch.__version__)" || exit 1
case "${1:-}" in
quant)
    python3 benchmarks/quant_gemm.py --minutes 8.5 --csv "$out/quant_gemm.csv" 2>&1 \
        | tee "$out/quant_gemm.log" | tail -60 ;;
host)
    for run in 1 2; do
        python3 benchmarks/memory_bound.py 2>&1 | tee "$out/memory_bound_$run.log" | tail -25
    done
    python3 benchmarks/compile_time.py 2>&1 | tee "$out/compile_time.log" | tail -20
    for run in 1 2; do
        python3 benchmarks/launch_profile.py 2>&1 | tee "$out/launch_profile_$run.log" \
            | grep -E "per call|launcher"
    done ;;
check)
    python3 -m pytest -m gpu tests -q -n 12 -p no:randomly 2>&1 | tail -3
    python3 -m tests.quant.campaign --seeds 0-599 --device cuda --minutes 6 2>&1 | tail -20 ;;
*)
    echo "usage: bash benchmarks/acceptance.sh quant|host|check" >&2
    exit 2 ;;
esac
