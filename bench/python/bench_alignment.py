"""The Python call of the expected alignment against the C++ call and the ATen closed form.

Times forward + backward of the expected alignment of hard monotonic attention (002 eqs.
13-14) at [B, U, T] (default [32, 100, 500], float32, as bench/train.cc) in one process:

  python  mona.functional.monotonic_alignment (torch.ops.mona.monotonic_alignment through
          the dispatcher: Autograd kernel, CPU kernel, backward operator) and
          torch.autograd.grad;
  c++     mona::nn::monotonic_alignment and torch::autograd::grad called from C++
          (mona._C._time_monotonic_alignment_cpp, the call bench/train.cc times);
  aten    the closed form of 002 eq. 30 in torch operations, row by row, as bench/train.cc
          writes it (cp = exclusive cumprod of 1 - p as exp(cumsum(log(clamp(1 - p, 1e-10,
          1)))), alpha_i = p_i cp cumsum(alpha_{i-1} / clamp(cp, 1e-10, 1))), autograd.

The Python and C++ calls alternate, one of each per round (after warm-up calls), so that
load on a shared machine affects them alike; the slow ATen form runs in rounds of its own
after them (--aten-rounds). The report gives the median and the minimum time of each and the
ratios, measured in the same run.

Usage: PYTHONPATH=python /usr/bin/python3 bench/python/bench_alignment.py [--shape B U T]
       [--rounds N] [--threads N] [--dtype float32|float64]
"""

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import mona  # noqa: E402


def closed_form(p):
    B, U, T = p.shape
    prev = torch.zeros(B, T, dtype=p.dtype)
    prev[:, 0] = 1
    rows = []
    for i in range(U):
        pi = p.select(1, i)  # as bench/train.cc (indexing p[:, i] records a slice too)
        log_cp = torch.cumsum(torch.log(torch.clamp(1 - pi, 1e-10, 1)), dim=1)
        cp = torch.exp(torch.cat([torch.zeros(B, 1, dtype=p.dtype), log_cp[:, :-1]], dim=1))
        a = pi * cp * torch.cumsum(prev / torch.clamp(cp, 1e-10, 1), dim=1)
        rows.append(a)
        prev = a
    return torch.stack(rows, dim=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", type=int, nargs=3, default=[32, 100, 500])
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--aten-rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    B, U, T = args.shape
    p = torch.sigmoid(torch.randn(B, U, T) * 2 - 2).to(dtype).requires_grad_(True)
    g = torch.randn(B, U, T, dtype=dtype)

    def py_call():
        t0 = time.perf_counter()
        alpha = mona.functional.monotonic_alignment(p)
        torch.autograd.grad(alpha, p, g)
        return time.perf_counter() - t0

    def cpp_call():
        return mona._C._time_monotonic_alignment_cpp(p, g, 1)[0]

    def aten_call():
        t0 = time.perf_counter()
        alpha = closed_form(p)
        torch.autograd.grad(alpha, p, g)
        return time.perf_counter() - t0

    calls = {"python": py_call, "c++": cpp_call, "aten": aten_call}
    for f in calls.values():  # warm-up
        f()
    times = {k: [] for k in calls}
    for _ in range(args.rounds):
        for k in ("python", "c++"):
            times[k].append(calls[k]())
    for _ in range(args.aten_rounds):
        times["aten"].append(aten_call())
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"expected alignment fwd+bwd, [{B}, {U}, {T}] {args.dtype}, {args.threads} thread(s), "
          f"{args.rounds} interleaved rounds (aten {args.aten_rounds}), torch {torch.__version__}, "
          f"load {os.getloadavg()[0]:.1f}")
    for k in calls:
        print(f"  {k:7s} median {1e3 * med[k]:8.2f} ms   (min {1e3 * min(times[k]):.2f}, "
              f"max {1e3 * max(times[k]):.2f})")
    print(f"  python / c++ = {med['python'] / med['c++']:.3f} (medians), "
          f"{min(times['python']) / min(times['c++']):.3f} (minima); "
          f"per-call overhead {1e6 * (med['python'] - med['c++']):.0f} us (medians)")
    print(f"  aten / python = {med['aten'] / med['python']:.1f}x   aten / c++ = "
          f"{med['aten'] / med['c++']:.1f}x")


if __name__ == "__main__":
    main()
