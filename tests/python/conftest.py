# Shared helpers of the pytest suite. ctest puts this checkout's python/ on PYTHONPATH; run by
# hand, `PYTHONPATH=python /usr/bin/python3 -m pytest tests/python` (or after `make python`).
import os
import random
import subprocess
import sys

import pytest
import torch

_here = os.path.dirname(os.path.abspath(__file__))
_python = os.path.join(os.path.dirname(os.path.dirname(_here)), "python")
if _python not in sys.path:
    sys.path.insert(0, _python)

import mona  # noqa: E402


def lengths_mask(lens, n):
    """[B, n] bool: entry j < lens[b]."""
    return torch.arange(n).unsqueeze(0) < lens.unsqueeze(1)


def random_p(shape, dtype=torch.float64, seed=0, low=0.05, high=0.95):
    """Selection probabilities away from 0 and 1, so that finite differences of step 1e-6
    (gradcheck's) stay inside [0, 1]."""
    g = torch.Generator().manual_seed(seed)
    return (low + (high - low) * torch.rand(shape, generator=g, dtype=torch.float64)).to(dtype)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def mona_cli():
    cli = os.environ.get("MONA_CLI") or os.path.join(_here, "..", "..", "build", "bin", "mona")
    if not os.path.exists(cli):
        pytest.skip("the mona program is not built (ctest sets MONA_CLI)")
    return cli


def write_task(path, n, seed):
    """2-6 letters a..f, no letter twice in a row, spelled as F..A (tests/util/letter_task.h)."""
    g = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            prev, ins, outs = -1, [], []
            for _ in range(g.randint(2, 6)):
                s = g.randint(0, 5)
                while s == prev:
                    s = g.randint(0, 5)
                prev = s
                ins.append(chr(ord("a") + s))
                outs.append(chr(ord("F") - s))
            f.write(" ".join(ins) + "\t" + " ".join(outs) + "\n")


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    write_task(d / "train.tsv", 100, 9)
    write_task(d / "dev.tsv", 8, 10)
    (d / "cfg.yaml").write_text(
        f"data: {{train: {d}/train.tsv, dev: {d}/dev.tsv}}\n"
        "model: {embedding_dim: 8, encoder_layers: 1, encoder_hidden: 16, decoder_embedding_dim: 8,\n"
        "        decoder_hidden: 16, attention: {type: monotonic, monotonic_energy: dot, init_r: -1}}\n"
        f"train: {{output_dir: {d}/run, max_steps: 60, eval_every: 60, batch_size: 8, threads: 1}}\n")
    run = subprocess.run([mona_cli(), "train", str(d / "cfg.yaml")], capture_output=True, text=True)
    assert run.returncode == 0, f"mona train failed:\n{run.stdout}\n{run.stderr}"
    return str(d / "run" / "last.ckpt")
