"""What the benchmarks time with: Triton's peers and do_bench when Triton is installed; without
it, `triton_peers` is None (its columns read n/a) and torch's Timer gives the medians."""

import torch
import torch.utils.benchmark

try:
    import triton_peers
    from triton.testing import do_bench
except ImportError:
    triton_peers = None

    def do_bench(fn, return_mode="median"):
        """Median milliseconds per call of fn (torch's Timer synchronises the GPU)."""
        timer = torch.utils.benchmark.Timer("fn()", globals={"fn": fn})
        return timer.blocked_autorange(min_run_time=1.0).median * 1e3
