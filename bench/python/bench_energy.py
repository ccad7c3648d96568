"""The fused additive energy and attention context of mona.functional against the same
formulas in torch operations, as a PyTorch user writes them.

  energy   e[b, i, j] = sum_k w[k] tanh(query[b, i, k] + keys[b, j, k]) (002 eqs. 15-16,
           000 eq. 5), forward + backward to query, keys and w:
             mona   mona.functional.additive_energy (torch.ops.mona.additive_energy);
             torch  torch.tanh(query.unsqueeze(2) + keys.unsqueeze(1)) @ w, autograd.
           Beside the time, the bytes the graph keeps for the backward pass (every tensor
           saved for backward, counted once per storage by a saved-tensors hook): the torch
           form keeps the [B, U, T, d] tanh values.
  context  c[b] = sum_j weights[b, j] values[b, j, :] for one output step (002 eq. 3), the
           shape of an RNN decoder's step, forward + backward to both:
             mona   mona.functional.attention_context;
             torch  torch.bmm(weights.unsqueeze(1), values).squeeze(1), autograd.

The two forms alternate, one call of each per round after warm-up calls, so that load on a
shared machine affects both alike; the report gives the median and minimum of each and their
ratio, measured in the same run. float32, one thread unless --threads.

Usage: PYTHONPATH=python /usr/bin/python3 bench/python/bench_energy.py [--rounds N]
       [--threads N]
"""

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import mona  # noqa: E402
import mona.functional as F  # noqa: E402


def torch_energy(query, keys, w):
    return torch.tanh(query.unsqueeze(2) + keys.unsqueeze(1)) @ w


def torch_context(weights, values):
    return torch.bmm(weights.unsqueeze(1), values).squeeze(1)


def saved_bytes(fn, inputs):
    """Bytes of the distinct storages the graph of fn(*inputs) keeps for backward."""
    storages = {}

    def pack(t):
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*inputs)
    del out
    return sum(storages.values())


def fwd_bwd(fn, inputs, grad):
    t0 = time.perf_counter()
    out = fn(*inputs)
    torch.autograd.grad(out, inputs, grad)
    return time.perf_counter() - t0


def compare(name, fns, inputs, grad, rounds):
    for fn in fns.values():  # warm-up
        fwd_bwd(fn, inputs, grad)
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            times[k].append(fwd_bwd(fn, inputs, grad))
    row = {k: (statistics.median(v), min(v)) for k, v in times.items()}
    saved = {k: saved_bytes(fn, inputs) for k, fn in fns.items()}
    for k in fns:
        print(f"{name:40s} {k:6s} median {row[k][0] * 1e3:9.3f} ms  min {row[k][1] * 1e3:9.3f} ms"
              f"  saved for backward {saved[k] / 2**20:9.2f} MiB")
    print(f"{name:40s} torch / mona: median {row['torch'][0] / row['mona'][0]:.2f}x, "
          f"min {row['torch'][1] / row['mona'][1]:.2f}x, saved bytes "
          f"{saved['torch'] / saved['mona']:.1f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {args.threads} thread(s), float32, {args.rounds} rounds")
    # whole output sequences: G2P-sized and speech-sized [B, U, T, d]
    for B, U, T, d in [(64, 12, 12, 64), (8, 50, 400, 128)]:
        inputs = [torch.randn(B, U, d, requires_grad=True), torch.randn(B, T, d, requires_grad=True),
                  torch.randn(d, requires_grad=True)]
        compare(f"energy [B, U, T, d] = [{B}, {U}, {T}, {d}]",
                {"mona": F.additive_energy, "torch": torch_energy}, inputs,
                torch.randn(B, U, T), args.rounds)
    # one decoder step
    for B, T, d in [(64, 12, 256), (8, 400, 256)]:
        inputs = [torch.softmax(torch.randn(B, T), 1).requires_grad_(True),
                  torch.randn(B, T, d, requires_grad=True)]
        compare(f"context [B, T, d] = [{B}, {T}, {d}]",
                {"mona": F.attention_context, "torch": torch_context}, inputs,
                torch.randn(B, d), args.rounds * 10)


if __name__ == "__main__":
    main()
