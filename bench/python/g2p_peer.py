"""The G2P MoChA model of recipes/g2p-cmudict/configs/mocha_w4.yaml as a PyTorch user writes it.

A peer for mona's training throughput (bench/g2p-train-throughput.sh): the same data (the
prepared CMUdict TSV), sizes and optimiser as the mona configuration, in eager PyTorch with
autograd, and MoChA's expected alignment in the closed form of the papers' public code:

  encoder   Embedding(letters, 64), 2-layer unidirectional LSTM(128)
  decoder   Embedding(phones, 64), LSTMCell(64 + 128 -> 128); per step the monotonic
            energy g v^T/||v|| tanh(W_s s + W_h h + b) + r (002 eq. 16, d = 64, r = -1), p =
            sigmoid(e + 2 N(0, 1)), alpha_i = p_i cp cumsum(alpha_{i-1} / cp) with cp the
            exclusive cumprod of 1 - p (002 eq. 30, clamped as the reference code does), the
            chunk energy v^T tanh(W_s s + W_h h + b) and MoChA's beta by moving sums over w = 4
            (000 eq. 25, conv1d with a ones filter), context = beta^T h; logits Linear(128 +
            128 -> phones)
  loss      mean cross entropy per target token (</s> included), padding ignored
  optimiser Adam(lr 0.005, betas (0.9, 0.999), eps 1e-6, weight decay 1e-6), gradient norm
            clipped at 1, batch 64, batches of similar length (sorted within windows of 50
            batches, as mona buckets them)

Prints one line: target tokens per second over the timed steps (after warm-up steps), with
the steps, threads, batch size and parameter count it ran.

Usage: /usr/bin/python3 bench/python/g2p_peer.py TRAIN_TSV [--threads N] [--steps N]
       [--warmup N] [--seed N] [--batch N]
"""

import argparse
import random
import time

import torch
import torch.nn.functional as F


def read_tsv(path):
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or "\t" not in line:
                continue
            src, tgt = line.split("\t", 1)
            pairs.append((src.split(), tgt.split()))
    return pairs


def vocabulary(seqs):
    symbols = sorted({s for seq in seqs for s in seq})
    return {s: i + 4 for i, s in enumerate(symbols)}  # 0 pad, 1 <s>, 2 </s>, 3 unk


class MonotonicEnergy(torch.nn.Module):
    def __init__(self, dq, dh, d, r0):
        super().__init__()
        self.query = torch.nn.Linear(dq, d)
        self.memory = torch.nn.Linear(dh, d, bias=False)
        self.v = torch.nn.Parameter(torch.randn(d) / d ** 0.5)
        self.g = torch.nn.Parameter(torch.tensor(1.0 / d ** 0.5))
        self.r = torch.nn.Parameter(torch.tensor(r0))

    def forward(self, s, keys):  # s [B, dq], keys [B, T, d] -> [B, T]
        v = self.g * self.v / self.v.norm()
        return torch.tanh(self.query(s).unsqueeze(1) + keys) @ v + self.r


class ChunkEnergy(torch.nn.Module):
    def __init__(self, dq, dh, d):
        super().__init__()
        self.query = torch.nn.Linear(dq, d)
        self.memory = torch.nn.Linear(dh, d, bias=False)
        self.v = torch.nn.Parameter(torch.randn(d) / d ** 0.5)

    def forward(self, s, keys):
        return torch.tanh(self.query(s).unsqueeze(1) + keys) @ self.v


def moving_sum(x, back, forward):
    """sum_{k=j-back}^{j+forward} x[:, k] over [B, T] (000 eq. 25's MovingSum)."""
    ones = torch.ones(1, 1, back + forward + 1, dtype=x.dtype)
    return F.conv1d(F.pad(x.unsqueeze(1), (back, forward)), ones).squeeze(1)


class Model(torch.nn.Module):
    def __init__(self, n_in, n_out, w=4):
        super().__init__()
        self.w = w
        self.embed = torch.nn.Embedding(n_in, 64, padding_idx=0)
        self.encoder = torch.nn.LSTM(64, 128, num_layers=2, batch_first=True)
        self.out_embed = torch.nn.Embedding(n_out, 64, padding_idx=0)
        self.cell = torch.nn.LSTMCell(64 + 128, 128)
        self.monotonic = MonotonicEnergy(128, 128, 64, -1.0)
        self.chunk = ChunkEnergy(128, 128, 64)
        self.output = torch.nn.Linear(128 + 128, n_out)

    def forward(self, x, x_len, y_in):
        h, _ = self.encoder(self.embed(x))  # [B, T, 128]
        B, T, _ = h.shape
        mask = torch.arange(T).unsqueeze(0) < x_len.unsqueeze(1)
        mono_keys, chunk_keys = self.monotonic.memory(h), self.chunk.memory(h)
        s = h.new_zeros(B, 128)
        c = h.new_zeros(B, 128)
        alpha = F.one_hot(torch.zeros(B, dtype=torch.long), T).to(h.dtype)
        emb = self.out_embed(y_in)
        logits = []
        for i in range(y_in.shape[1]):
            e = self.monotonic(s, mono_keys)
            p = torch.sigmoid(e + 2.0 * torch.randn_like(e)) * mask
            cp = torch.exp(torch.cumsum(torch.log(torch.clamp(1 - p, 1e-10, 1)), 1))
            cp = torch.cat([torch.ones(B, 1), cp[:, :-1]], 1)  # exclusive cumprod
            alpha = p * cp * torch.cumsum(alpha / torch.clamp(cp, 1e-10, 1), 1)
            u = self.chunk(s, chunk_keys).masked_fill(~mask, -1e9)
            eu = torch.exp(u - u.max(1, keepdim=True).values)
            beta = eu * moving_sum(alpha / torch.clamp(moving_sum(eu, self.w - 1, 0), 1e-10), 0, self.w - 1)
            context = torch.bmm(beta.unsqueeze(1), h).squeeze(1)
            s, c = self.cell(torch.cat([emb[:, i], context], 1), (s, c))
            logits.append(self.output(torch.cat([s, context], 1)))
        return torch.stack(logits, 1)


def batches(data, batch_size, rng):
    order = list(range(len(data)))
    rng.shuffle(order)
    window = batch_size * 50
    for s in range(0, len(order), window):
        order[s:s + window] = sorted(order[s:s + window], key=lambda k: len(data[k][0]))
    out = [order[s:s + batch_size] for s in range(0, len(order), batch_size)]
    rng.shuffle(out)
    return out


def pad(seqs, value=0):
    n = max(len(s) for s in seqs)
    return torch.tensor([s + [value] * (n - len(s)) for s in seqs], dtype=torch.long)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("train")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    pairs = read_tsv(a.train)
    vin, vout = vocabulary(p[0] for p in pairs), vocabulary(p[1] for p in pairs)
    data = [([vin[s] for s in x], [vout[s] for s in y]) for x, y in pairs]
    model = Model(len(vin) + 4, len(vout) + 4)
    opt = torch.optim.Adam(model.parameters(), lr=0.005, betas=(0.9, 0.999), eps=1e-6, weight_decay=1e-6)
    order = batches(data, a.batch, random.Random(a.seed))
    tokens, start = 0, None
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            tokens, start = 0, time.perf_counter()
        idx = order[step % len(order)]
        x = pad([data[k][0] for k in idx])
        x_len = torch.tensor([len(data[k][0]) for k in idx])
        y_out = pad([data[k][1] + [2] for k in idx])
        y_in = pad([[1] + data[k][1] for k in idx])
        logits = model(x, x_len, y_in)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y_out.reshape(-1), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += int((y_out != 0).sum())
    print(f"{tokens / (time.perf_counter() - start):.1f} target tokens/s "
          f"({a.steps} steps, {a.threads} threads, batch {a.batch}, "
          f"{sum(p.numel() for p in model.parameters())} parameters)")


if __name__ == "__main__":
    main()
