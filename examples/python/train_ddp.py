"""Data-parallel training of a small monotonic-attention model with mona's operators.

A sequence-to-sequence model (GRU encoder, GRU decoder fed the previous target, MoChA
attention from :mod:`mona.nn` trained in expectation with mona's exact backward passes) on a
synthetic monotonic task (letters a..f spelled as F..A), trained with
``torch.nn.parallel.DistributedDataParallel`` over the gloo backend (CPU). Launch with any
number of processes and hosts::

    /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node=2 \
        examples/python/train_ddp.py --steps 50
    # several hosts: --nnodes=N --node_rank=R --rdzv_backend=c10d --rdzv_endpoint=HOST:PORT

With Debian's torch 1.13 under Python 3.11 add ``--redirects 1 --tee 1`` to the launcher's
options: its default ``--redirects 0`` / ``--tee 0`` is read as None there (Python 3.11's
enum iteration skips the zero member) and the launcher stops with ``AttributeError:
'NoneType' object has no attribute 'get'``; ``1`` (stdout) parses, and tee keeps it on the
console. PyTorch 2.x's launcher does not need this.

or as one process without any process group (``--single``). Each step draws one global batch
(the same on every process, from ``--seed`` and the step), and process r trains on its
contiguous share of the rows. The loss of a share is the sum of its token losses divided by
the number of target tokens in the whole global batch, times the world size: DDP averages
gradients over the processes, so the gradients equal those of one process on the whole
batch with the mean token loss (the test tests/python/test_ddp.py checks this after one step
and the losses after several).

Determinism: the parameters are initialised from ``--seed`` on every process (DDP also
broadcasts rank 0's), the model has no dropout, and the attention's pre-sigmoid noise is off
unless ``--noise-std`` is given (noise drawn per process would differ from a single
process's draw). ``--out FILE`` saves the losses and the gradients after the first step.
"""

import argparse
import os
import random
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

try:
    import mona
except ImportError:  # run from a checkout without `make python`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import mona

PAD, BOS, EOS = 0, 1, 2
SRC_VOCAB = 3 + 6   # pad, bos, eos, a..f
TGT_VOCAB = 3 + 6   # pad, bos, eos, A..F


def make_batch(n: int, seed: int):
    """n examples of 2-8 letters: source ids, lengths, decoder inputs and targets."""
    g = random.Random(seed)
    pairs = []
    for _ in range(n):
        src = [g.randint(0, 5) for _ in range(g.randint(2, 8))]
        pairs.append(([3 + s for s in src] + [EOS], [3 + (5 - s) for s in src] + [EOS]))
    T = max(len(s) for s, _ in pairs)
    U = max(len(t) for _, t in pairs)
    src = torch.full((n, T), PAD, dtype=torch.int64)
    tgt_in = torch.full((n, U), PAD, dtype=torch.int64)
    tgt_out = torch.full((n, U), PAD, dtype=torch.int64)
    for b, (s, t) in enumerate(pairs):
        src[b, :len(s)] = torch.tensor(s)
        tgt_in[b, :len(t)] = torch.tensor([BOS] + t[:-1])
        tgt_out[b, :len(t)] = torch.tensor(t)
    src_lens = torch.tensor([len(s) for s, _ in pairs])
    tgt_lens = torch.tensor([len(t) for _, t in pairs])
    return src, src_lens, tgt_in, tgt_out, tgt_lens


def shard(batch, rank: int, world: int):
    """Rows [rank * n / world, (rank + 1) * n / world) of every tensor, trimmed to the
    share's own longest sequences."""
    n = batch[0].shape[0]
    lo, hi = rank * n // world, (rank + 1) * n // world
    src, src_lens, tgt_in, tgt_out, tgt_lens = (t[lo:hi] for t in batch)
    T, U = int(src_lens.max()), int(tgt_lens.max())
    return src[:, :T], src_lens, tgt_in[:, :U], tgt_out[:, :U], tgt_lens


class Model(nn.Module):
    def __init__(self, dim: int = 32, chunk_size: int = 2, noise_std: float = 0.0):
        super().__init__()
        self.src_emb = nn.Embedding(SRC_VOCAB, dim)
        self.encoder = nn.GRU(dim, dim, batch_first=True)
        self.tgt_emb = nn.Embedding(TGT_VOCAB, dim)
        self.decoder = nn.GRU(dim, dim, batch_first=True)
        self.attention = mona.nn.MochaAttention(dim, dim, chunk_size=chunk_size, init_r=-1.0,
                                                noise_std=noise_std)
        self.out = nn.Linear(2 * dim, TGT_VOCAB)

    def forward(self, src, src_lens, tgt_in, tgt_lens):
        memory, _ = self.encoder(self.src_emb(src))   # unidirectional: padding never leaks back
        queries, _ = self.decoder(self.tgt_emb(tgt_in))
        contexts, _ = self.attention(queries, memory, src_lens, tgt_lens)
        return self.out(torch.cat([queries, contexts], dim=-1))   # [B, U, V]


def token_loss_sum(model, batch):
    src, src_lens, tgt_in, tgt_out, tgt_lens = batch
    logits = model(src, src_lens, tgt_in, tgt_lens)
    return nn.functional.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=PAD,
                                       reduction="sum")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=32, help="global batch (all processes)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--noise-std", type=float, default=0.0)
    ap.add_argument("--single", action="store_true", help="one process, no process group")
    ap.add_argument("--out", help="save losses and first-step gradients here (rank 0)")
    args = ap.parse_args(argv)

    torch.set_num_threads(1)   # one core per process
    mona.use_best_blas_kernels()  # AVX-512 / AVX2 matrix products where OpenBLAS fell back to SSE3
    dtype = getattr(torch, args.dtype)
    if args.single:
        rank, world = 0, 1
    else:
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    model = Model(noise_std=args.noise_std).to(dtype)
    net = model if args.single else DistributedDataParallel(model)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)

    losses, first_grads = [], None
    for step in range(args.steps):
        batch = make_batch(args.batch_size, args.seed * 100003 + step)
        tokens = int(batch[4].sum())
        mine = shard(batch, rank, world)
        opt.zero_grad()
        loss_sum = token_loss_sum(net, mine)
        (loss_sum * (world / tokens)).backward()   # DDP averages: sum over shards / tokens
        total = loss_sum.detach().clone()
        if not args.single:
            dist.all_reduce(total)
        losses.append(float(total) / tokens)
        if step == 0:
            first_grads = {k: p.grad.detach().clone() for k, p in model.named_parameters()}
        opt.step()
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step + 1}: loss {losses[-1]:.4f} (world {world})", flush=True)
    if args.out and rank == 0:
        torch.save({"losses": losses, "grads": first_grads, "world": world}, args.out)
    if not args.single:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
