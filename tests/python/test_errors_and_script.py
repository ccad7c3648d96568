# Error types and messages at the Python surface, and TorchScript over torch.ops.mona.*.
import pytest
import torch

import mona
import mona.compat.fairseq
import mona.functional as F
from conftest import random_p


# ---- errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: F.monotonic_alignment(torch.rand(2, 3)),
     "mona::nn::monotonic_alignment: p: expected 3 dims [B, U, T], got [2, 3]"),
    (lambda: F.monotonic_alignment(torch.full((1, 1, 3), 2.0)),
     "monotonic_alignment: p: expected values in [0, 1], got 2 at [0, 0, 0]"),
    (lambda: F.monotonic_alignment(torch.rand(2, 3, 4), torch.tensor([4, 5])),
     "in_lens[1] must lie in [0, 4], got 5"),
    (lambda: F.monotonic_alignment(torch.rand(2, 3, 4, dtype=torch.float16)),
     "p: expected dtype float32 or float64, got Half"),
    (lambda: F.mocha_chunkwise(torch.rand(1, 2, 3), torch.rand(1, 2, 3), 0),
     "w: chunk size must be >= 1, got 0"),
    (lambda: F.mocha_chunkwise(torch.rand(1, 2, 3), torch.rand(1, 2, 3, dtype=torch.float64), 2),
     "u: expected dtype Float (that of alpha), got Double"),
    (lambda: F.gmm_attention_weights(torch.rand(1, 2, 1), torch.rand(1, 2, 1), window="wide",
                                     in_lens=torch.tensor([3])),
     "window: expected 'none', 'adaptive' or 'fixed', got 'wide'"),
    # in_lens fixes T when nu and delta are left out: it is checked before its maximum is read
    (lambda: F.gmm_attention_weights(torch.rand(1, 2, 1), torch.rand(1, 2, 1),
                                     in_lens=torch.tensor([-3])),
     "mona::nn::gmm_attention_weights: in_lens[0] must lie in [0, 9223372036854775807], got -3"),
    # delta without nu: its dtype is that of mu (the default positions are made in it)
    (lambda: F.gmm_attention_weights(torch.rand(1, 2, 1, dtype=torch.float64),
                                     torch.rand(1, 2, 1, dtype=torch.float64) + 0.5, delta=torch.rand(1, 4)),
     "mona::nn::gmm_attention_weights: delta: expected dtype Double (that of mu), got Float"),
    (lambda: F.gmm_length_penalty(torch.rand(1, 2, 1), None, 5e-4, torch.tensor([-3])),
     "mona::nn::gmm_length_penalty: in_lens[0] must lie in [0, 9223372036854775807], got -3"),
    # lambda_ is checked where the penalty is computed (the core), once
    (lambda: F.gmm_length_penalty(torch.rand(1, 2, 1), None, -1.0, torch.tensor([3])),
     "gmm_length_penalty: lambda: expected a finite value >= 0, got -1"),
    (lambda: F.gmm_length_penalty(torch.rand(1, 2, 1), torch.rand(1, 3), float("nan")),
     "gmm_length_penalty: lambda: expected a finite value >= 0, got nan"),
    (lambda: F.poisson_binomial_log_prob(torch.randn(1, 3), torch.tensor([4])),
     "k[0] must be <= T = 3 (cannot have more highs than trials), got 4"),
    (lambda: mona.cb_sample(torch.randn(1, 3), torch.tensor([1]), "xx"),
     "sampler: expected 'idb', 'bb' or 'db', got 'xx'"),
    (lambda: F.additive_energy(torch.rand(2, 3, 4), torch.rand(2, 5, 3), torch.rand(4)),
     "additive_energy: keys: expected sizes [B, T, d] with B = 2 and d = 4 (those of query), "
     "got [2, 5, 3]"),
    (lambda: F.attention_context(torch.rand(2, 5), torch.rand(2, 5, 3, dtype=torch.float64)),
     "attention_context: values: expected dtype Float (that of weights), got Double"),
    # integer arguments are not truncated from floats
    (lambda: F.gmm_attention_weights(torch.rand(1, 2, 1), torch.rand(1, 2, 1), window="fixed",
                                     width=2.7, in_lens=torch.tensor([3])),
     "mona.gmm_attention_weights: width: expected an integer, got 2.7"),
    (lambda: mona.cb_sample(torch.randn(1, 3), torch.tensor([1]), "bb", seed=1.5),
     "mona.cb_sample: seed: expected an integer, got 1.5"),
    (lambda: mona.Recognizer("unused.ckpt", beam=2.5),
     "mona.Recognizer: beam: expected an integer, got 2.5"),
    # None for a required tensor: named (the dispatcher said "tensor does not have a device")
    (lambda: F.monotonic_alignment(None), "mona.monotonic_alignment: p_choose: expected a tensor, got None"),
    (lambda: F.mocha_chunkwise(torch.rand(1, 2, 3), None, 2), "mona.mocha_chunkwise: u: expected a tensor, got None"),
    (lambda: F.mocha_chunkwise(torch.rand(1, 2, 3), torch.rand(1, 2, 3), 2.5),
     "mona.mocha_chunkwise: w: expected an integer, got 2.5"),
    # A list where a tensor goes: named (the dispatcher raised a RuntimeError with its schema)
    (lambda: F.monotonic_alignment(torch.rand(2, 3, 6), in_lens=[6, 6]),
     "mona.monotonic_alignment: in_lens: expected a tensor or None, got list [6, 6] (e.g. torch.tensor(...))"),
    (lambda: mona.cb_sample([0.5, 0.5], torch.tensor([1])),
     "mona.cb_sample_bb: logits: expected a tensor, got list [0.5, 0.5]"),
    # The dispatcher's own refusals, named: an int beyond int64, a value of the wrong type,
    # a tensor on another device or layout (they were RuntimeError, NotImplementedError or
    # a builtin error naming no argument).
    (lambda: F.mocha_chunkwise(torch.rand(1, 2, 3), torch.rand(1, 2, 3), -2**70),
     "mona.mocha_chunkwise: w: expected an integer in [-2**63, 2**63), got -1180591620717411303424"),
    (lambda: F.monotonic_attention_step(torch.randn(1, 3), torch.rand(1, 3), torch.randn(1, 3, 2), rule=None),
     "mona.monotonic_attention_step: rule: expected a string, got NoneType None"),
    (lambda: F.monotonic_attention_step(torch.randn(1, 3), torch.rand(1, 3), torch.randn(1, 3, 2),
                                        noise=torch.randn(1, 3), noise_std="x"),
     "mona.monotonic_attention_step: noise_std: expected a number, got str 'x'"),
    (lambda: F.gmm_attention_weights(torch.rand(1, 2, 1), torch.rand(1, 2, 1) + 0.5, in_lens=torch.tensor([3]),
                                     window=None),
     "mona.gmm_attention_weights: window: expected a string, got NoneType None"),
    (lambda: F.gmm_attention_weights(torch.rand(1, 2, 1), torch.rand(1, 2, 1) + 0.5, in_lens=torch.tensor([3]),
                                     radius="abc"),
     "mona.gmm_attention_weights: radius: expected a number, got str 'abc'"),
    (lambda: F.gmm_length_penalty(torch.rand(1, 2, 1), None, None, torch.tensor([3])),
     "mona.gmm_length_penalty: lambda_: expected a number, got NoneType None"),
    (lambda: mona.cb_sample(torch.randn(1, 3), torch.tensor([1]), []),
     "mona.cb_sample: sampler: expected 'idb', 'bb' or 'db', got []"),
    (lambda: F.masked_softmax(torch.rand(1, 2, 3, device="meta")),
     "mona.masked_softmax: e: expected a dense CPU tensor, got device meta, layout torch.strided"),
    (lambda: F.masked_softmax(torch.rand(1, 2, 3).to_sparse()),
     "mona.masked_softmax: e: expected a dense CPU tensor, got device cpu, layout torch.sparse_coo"),
    (lambda: F.monotonic_alignment(torch.rand(1, 2, 3), torch.tensor([3], device="meta")),
     "mona.monotonic_alignment: in_lens: expected a dense CPU tensor, got device meta"),
    (lambda: mona.nn.MochaAttention(4, 4, 4, chunk_size=2**63),
     "MochaAttention: chunk_size: expected an integer in [-2**63, 2**63), got 9223372036854775808"),
    (lambda: mona.nn.MonotonicAttention(4, 4, 4, init_r="-1"),
     "MonotonicAttention: init_r: expected a number, got str '-1'"),
    # Messages that name what they refuse
    (lambda: F.gmm_attention_weights(torch.rand(1, 2, 1), torch.rand(1, 2, 1) + 0.5, in_lens=torch.tensor([3]),
                                     window="adaptive", radius=0),
     "mona.gmm_attention_weights: GmmOptions.radius: expected a finite value > 0, got 0"),
    (lambda: F.cb_db_step_log_probs(torch.randn(1, 3), torch.tensor([[1]], dtype=torch.int32), torch.tensor([1])),
     "cb_db_step_log_probs: order: expected a defined int64 CPU tensor, got Int on cpu"),
    (lambda: F.monotonic_alignment(torch.rand(1, 2, 3), torch.tensor([3], dtype=torch.int16)),
     "monotonic_alignment: in_lens: expected dtype int64 (or int32), got Short"),
    (lambda: mona.compat.fairseq.expected_alignment_from_p_choose(torch.rand(1, 2, 3), [[False] * 3]),
     "expected_alignment_from_p_choose: padding_mask: expected a bool tensor [bsz, src_len] or None, got list"),
    # A seed beyond 64 bits (TorchScript's int is int64: its message named no argument)
    (lambda: mona.cb_sample(torch.randn(1, 3), torch.tensor([1]), "bb", seed=2**64),
     "mona.cb_sample: seed: expected an integer in [-2**63, 2**64), got 18446744073709551616"),
    (lambda: mona.cb_sample(torch.randn(1, 3), torch.tensor([1]), "bb", seed=-2**63 - 1),
     "mona.cb_sample: seed: expected an integer in [-2**63, 2**64), got -9223372036854775809"),
    (lambda: F.monotonic_attention_step(torch.rand(1, 3), torch.rand(1, 3), torch.rand(1, 3, 2),
                                        torch.rand(1, 3), "fixed", 2.5),
     "mona.monotonic_attention_step: w: expected an integer, got 2.5"),
])
def test_argument_errors_are_value_errors_with_monas_message(call, message):
    with pytest.raises(mona.ArgumentError) as info:
        call()
    assert isinstance(info.value, ValueError)
    assert message in str(info.value)
    assert "Exception raised from" not in str(info.value)  # no C++ backtrace in the message


def test_a_seed_is_read_modulo_2_to_the_64():
    # cb_sample's documented seed range, [-2**63, 2**64): a seed and the same 64 bits read
    # signed draw the same sample; the seed is not ignored (ten seeds draw more than one).
    logits = torch.randn(4, 12, dtype=torch.float64)
    k = torch.tensor([3, 5, 6, 1])

    def draw(seed):
        return mona.cb_sample(logits, k, "bb", seed=seed).positions

    assert torch.equal(draw(-1), draw(2**64 - 1))
    assert torch.equal(draw(-2**63), draw(2**63))
    assert len({tuple(draw(s).flatten().tolist()) for s in range(10)}) > 1


def test_raw_operators_raise_value_error_too():
    # torch.ops.mona.* without the functional layer: c10::ValueError -> ValueError
    with pytest.raises(ValueError, match=r"p: expected values in \[0, 1\], got nan"):
        torch.ops.mona.monotonic_alignment(torch.full((1, 1, 2), float("nan")))


def test_backward_operator_checks_its_arguments():
    p = torch.rand(1, 2, 3)
    with pytest.raises(ValueError, match="grad_alpha: expected sizes"):
        torch.ops.mona.monotonic_alignment_backward(torch.rand(1, 2, 4), p, p, None, None, None)


def test_fused_backward_operators_check_their_arguments():
    q, k, w = torch.rand(2, 3, 4), torch.rand(2, 5, 4), torch.rand(4)
    with pytest.raises(ValueError, match=r"additive_energy_backward: grad_e: expected sizes "
                                         r"\[B, U, T\] = \[2, 3, 5\], got \[2, 5, 3\]"):
        torch.ops.mona.additive_energy_backward(torch.rand(2, 5, 3), q, k, w, [True, True, True])
    with pytest.raises(ValueError, match=r"attention_context_backward: grad_c: expected dtype Float"):
        torch.ops.mona.attention_context_backward(torch.rand(2, 4, dtype=torch.float64),
                                                  torch.rand(2, 5), k, [True, True])


def test_file_errors_are_os_and_runtime_errors(tmp_path):
    with pytest.raises(mona.DataError) as info:
        mona.Recognizer(str(tmp_path / "missing.ckpt"))
    assert isinstance(info.value, OSError) and isinstance(info.value, RuntimeError)
    assert "missing.ckpt" in str(info.value)
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a checkpoint at all")
    with pytest.raises(OSError, match="bad.ckpt"):
        mona.Recognizer(str(bad))


# ---- TorchScript -------------------------------------------------------------------------

@torch.jit.script
def scripted_mocha(p: torch.Tensor, u: torch.Tensor, in_lens: torch.Tensor) -> torch.Tensor:
    alpha = torch.ops.mona.monotonic_alignment(p, in_lens, None, None)
    return torch.ops.mona.mocha_chunkwise(alpha, u, 2, in_lens, None)


def test_torchscript_calls_the_operators():
    p = random_p((2, 3, 5)).requires_grad_(True)
    u = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    lens = torch.tensor([5, 3])
    y = scripted_mocha(p, u, lens)
    ref = F.mocha_chunkwise(F.monotonic_alignment(p, lens), u, 2, lens)
    assert torch.equal(y, ref)  # the same kernels on the same inputs
    g = torch.autograd.grad(y.sum(), (p, u))
    g_ref = torch.autograd.grad(ref.sum(), (p, u))
    assert all(torch.equal(a, b) for a, b in zip(g, g_ref))
    assert "mona::monotonic_alignment" in str(scripted_mocha.graph)
    # errors inside the interpreter still carry mona's message
    with pytest.raises(Exception, match=r"expected values in \[0, 1\]"):
        scripted_mocha(p.detach() * 3, u.detach(), lens)
