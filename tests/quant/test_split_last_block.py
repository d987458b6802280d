"""Split-K in one launch (qmm_kernel's `last_block`): every block counts itself in the tile's
arrival count (an ordered atomic that returns the count), and the tile's last block adds the
slices' partial sums in slice order, as the second kernel `qmm_reduce` does: the same bits, with
a bias, for rows past M, and the counts back at zero after every call."""

import pytest
import torch

import tilecraft.quant as quant
import tilecraft.quant.qmm as qmm

from .helpers import weight


@pytest.mark.parametrize("wtype, M, bias", [("uint4", 3, True), ("uint3", 1, False),
                                            ("float6_e3m2", 9, True)])
def test_one_launch_split_k_adds_the_slices_as_the_second_kernel_does(wtype, M, bias):
    N, K = 128, 1024
    qw = quant.quantize(weight(N, K, seed=3), wtype)
    x = torch.randn(M, K, generator=torch.Generator().manual_seed(1)).half()
    b = torch.randn(N).half() if bias else None
    base = dict(qmm.choose_config(M, N, K, qw.bits, qw.group_size, qw.dtype), split=4)
    one = qmm.quant_matmul(x, qw, b, config=dict(base, last_block=True))
    two = qmm.quant_matmul(x, qw, b, config=dict(base, last_block=False))
    assert torch.equal(one, two)  # the same sums in the same order
    ref = x.double() @ qw.dequantize().double().T + (b.double() if bias else 0)
    assert ((one.double() - ref).norm() / ref.norm()).item() < 1e-2
    again = qmm.quant_matmul(x, qw, b, config=dict(base, last_block=True))
    assert torch.equal(again, one)


def test_host_threads_on_the_interpreter_do_not_share_counts():
    import threading

    N, K, M = 128, 1024, 3
    qw = quant.quantize(weight(N, K, seed=6), "uint4")
    x = torch.randn(M, K).half()
    cfg = dict(qmm.choose_config(M, N, K, 4, 128, qw.dtype), split=4, last_block=True)
    want = qmm.quant_matmul(x, qw, config=dict(cfg, last_block=False))
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(qmm.quant_matmul(x, qw, config=cfg)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(torch.equal(g, want) for g in got)
    assert not any(k[1].type == "cpu" for k in qmm._COUNTS)  # (each call: zeros of its own)


@pytest.mark.gpu
def test_a_call_that_stops_part_way_does_not_leave_its_counts_to_the_next(monkeypatch):
    N, K, M = 64, 1024, 2
    monkeypatch.setattr(qmm, "_COUNTS", {})  # (only this test's: earlier tests leave theirs)
    qw = quant.quantize(weight(N, K, seed=4).cuda(), "uint4")
    x = torch.randn(M, K, device="cuda").half()
    cfg = dict(qmm.choose_config(M, N, K, 4, 128, qw.dtype), split=2, last_block=True)
    want = qmm.quant_matmul(x, qw, config=cfg)
    key = next(k for k, c in qmm._COUNTS.items() if tuple(c.shape) == (1, 1))
    qmm._COUNTS[key][0, 0] = 1  # as a call that stopped after one block would leave it
    calls = []
    real = type(key[0]).__call__

    def failing(self, *args):
        calls.append(1)
        raise RuntimeError("stopped")

    monkeypatch.setattr(type(key[0]), "__call__", failing)
    with pytest.raises(RuntimeError):
        qmm.quant_matmul(x, qw, config=cfg)
    monkeypatch.setattr(type(key[0]), "__call__", real)
    assert calls and key not in qmm._COUNTS  # dropped: the next call starts from zeros
    assert torch.equal(qmm.quant_matmul(x, qw, config=cfg), want)


@pytest.mark.gpu
def test_one_launch_split_k_on_the_gpu_gives_the_second_kernels_bits_call_after_call():
    N, K, M = 1024, 4096, 16
    qw = quant.quantize(weight(N, K, seed=5).cuda(), "uint4")
    x = torch.randn(M, K, device="cuda").half()
    base = dict(qmm.choose_config(M, N, K, 4, 128, qw.dtype), split=8)
    two = qmm.quant_matmul(x, qw, config=dict(base, last_block=False))
    for _ in range(10):
        one = qmm.quant_matmul(x, qw, config=dict(base, last_block=True))
        assert torch.equal(one, two)


@pytest.mark.gpu
def test_a_graph_capture_takes_counts_of_its_own():
    N, K, M = 1024, 4096, 16
    qw = quant.quantize(weight(N, K, seed=7).cuda(), "uint4")
    x = torch.randn(M, K, device="cuda").half()
    cfg = dict(qmm.choose_config(M, N, K, 4, 128, qw.dtype), split=8, last_block=True)
    want = qmm.quant_matmul(x, qw, config=dict(cfg, last_block=False))
    qmm.quant_matmul(x, qw, config=cfg)  # (compiled, and the eager counts made)
    before = dict(qmm._COUNTS)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = qmm.quant_matmul(x, qw, config=cfg)
    assert dict(qmm._COUNTS) == before  # nothing cached by the capture
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, want)
    assert torch.equal(qmm.quant_matmul(x, qw, config=cfg), want)  # eager again
