// Autograd functions over the core kernels; see include/mona/nn/functional.h.
#include "mona/nn/functional.h"

#include <ATen/Dispatch.h>
#include <torch/autograd.h>

#include <cmath>
#include <vector>

#include "check.h"
#include "mona/core/additive_energy.h"
#include "mona/core/attention_context.h"
#include "mona/core/matcha.h"
#include "mona/core/mocha.h"
#include "mona/core/monotonic.h"
#include "mona/core/softmax.h"
#include "mona/core/error.h"

namespace mona::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using detail::make_grid;

// Optional lengths travel as one non-tensor argument: LibTorch 1.13's custom functions
// cannot take undefined tensors as arguments.
struct Lengths {
  at::Tensor in, out;
};

void save_lengths(AutogradContext* ctx, const Lengths& lens) {
  detail::keep_for_backward(ctx, "in_lens", lens.in);
  detail::keep_for_backward(ctx, "out_lens", lens.out);
}

Lengths saved_lengths(AutogradContext* ctx, const char* fn) {
  return {detail::kept_for_backward(ctx, "in_lens", fn), detail::kept_for_backward(ctx, "out_lens", fn)};
}

// ---------------------------------------------------------------------------------------
// Gradient passes: the dtype dispatch and the core backward kernel of each function, over
// arguments already checked and contiguous. The autograd nodes below call them, and so do
// the public *_backward functions after their checks.

// grad_alpha0 is computed when `with_grad_alpha0` (else undefined); an undefined alpha0 is
// the default one-hot alpha_{-1} (the core kernels' null).
std::tuple<at::Tensor, at::Tensor> monotonic_alignment_grads(const at::Tensor& g, const at::Tensor& p,
                                                             const at::Tensor& alpha, at::Tensor alpha0,
                                                             const Lengths& lens, bool with_grad_alpha0) {
  const int64_t B = p.size(0), U = p.size(1), T = p.size(2);
  at::Tensor grad_p = at::empty_like(p);
  at::Tensor grad_alpha0 = with_grad_alpha0 ? at::empty({B, T}, p.options()) : at::Tensor();
  const auto grid = make_grid(B, U, T, lens.in, lens.out);
  AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "monotonic_alignment_backward", [&] {
    core::monotonic_alignment_backward(g.data_ptr<scalar_t>(), p.data_ptr<scalar_t>(),
                                       detail::ptr_or_null<scalar_t>(alpha0), alpha.data_ptr<scalar_t>(),
                                       grad_p.data_ptr<scalar_t>(), detail::ptr_or_null<scalar_t>(grad_alpha0), grid);
  });
  return {grad_p, grad_alpha0};
}

std::tuple<at::Tensor, at::Tensor> monotonic_alignment_step_grads(const at::Tensor& g, const at::Tensor& p,
                                                                  const at::Tensor& alpha_prev,
                                                                  const at::Tensor& in_lens) {
  const int64_t B = p.size(0), T = p.size(1);
  at::Tensor grad_p = at::empty_like(p), grad_prev = at::empty_like(p);
  AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "monotonic_alignment_step_backward", [&] {
    core::monotonic_alignment_step_backward(g.data_ptr<scalar_t>(), p.data_ptr<scalar_t>(),
                                            alpha_prev.data_ptr<scalar_t>(), grad_p.data_ptr<scalar_t>(),
                                            grad_prev.data_ptr<scalar_t>(), B, T, detail::ptr_or_null(in_lens));
  });
  return {grad_p, grad_prev};
}

std::tuple<at::Tensor, at::Tensor> mocha_grads(const at::Tensor& g, const at::Tensor& alpha, const at::Tensor& u,
                                               int64_t w, const Lengths& lens) {
  const int64_t B = alpha.size(0), U = alpha.size(1), T = alpha.size(2);
  at::Tensor grad_alpha = at::empty_like(alpha), grad_u = at::empty_like(u);
  const auto grid = make_grid(B, U, T, lens.in, lens.out);
  AT_DISPATCH_FLOATING_TYPES(alpha.scalar_type(), "mocha_chunkwise_backward", [&] {
    core::mocha_chunkwise_backward(g.data_ptr<scalar_t>(), alpha.data_ptr<scalar_t>(), u.data_ptr<scalar_t>(),
                                   grad_alpha.data_ptr<scalar_t>(), grad_u.data_ptr<scalar_t>(), grid, w);
  });
  return {grad_alpha, grad_u};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> matcha_grads(const at::Tensor& g, const at::Tensor& alpha_prev,
                                                            const at::Tensor& p, const at::Tensor& u,
                                                            const at::Tensor& beta, const Lengths& lens) {
  const int64_t B = p.size(0), U = p.size(1), T = p.size(2);
  at::Tensor ga = at::empty_like(p), gp = at::empty_like(p), gu = at::empty_like(p);
  const auto grid = make_grid(B, U, T, lens.in, lens.out);
  AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "matcha_chunkwise_backward", [&] {
    core::matcha_chunkwise_backward(g.data_ptr<scalar_t>(), alpha_prev.data_ptr<scalar_t>(), p.data_ptr<scalar_t>(),
                                    u.data_ptr<scalar_t>(), beta.data_ptr<scalar_t>(), ga.data_ptr<scalar_t>(),
                                    gp.data_ptr<scalar_t>(), gu.data_ptr<scalar_t>(), grid);
  });
  return {ga, gp, gu};
}

at::Tensor softmax_grads(const at::Tensor& g, const at::Tensor& w, const Lengths& lens) {
  at::Tensor ge = at::empty_like(w);
  const auto grid = make_grid(w.size(0), w.size(1), w.size(2), lens.in, lens.out);
  AT_DISPATCH_FLOATING_TYPES(w.scalar_type(), "masked_softmax_backward", [&] {
    core::softmax_backward(g.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), ge.data_ptr<scalar_t>(), grid);
  });
  return ge;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> additive_energy_grads(const at::Tensor& g, const at::Tensor& query,
                                                                     const at::Tensor& keys, const at::Tensor& w,
                                                                     std::array<bool, 3> mask) {
  const int64_t B = query.size(0), U = query.size(1), T = keys.size(1), d = query.size(2);
  at::Tensor grad_query, grad_keys, grad_w;
  if (mask[0]) grad_query = at::empty_like(query);
  if (mask[1]) grad_keys = at::empty_like(keys);
  if (mask[2]) grad_w = at::empty_like(w);
  AT_DISPATCH_FLOATING_TYPES(query.scalar_type(), "additive_energy_backward", [&] {
    core::additive_energy_backward(g.data_ptr<scalar_t>(), query.data_ptr<scalar_t>(), keys.data_ptr<scalar_t>(),
                                   w.data_ptr<scalar_t>(), detail::ptr_or_null<scalar_t>(grad_query),
                                   detail::ptr_or_null<scalar_t>(grad_keys),
                                   detail::ptr_or_null<scalar_t>(grad_w), B, U, T, d);
  });
  return {grad_query, grad_keys, grad_w};
}

std::tuple<at::Tensor, at::Tensor> attention_context_grads(const at::Tensor& g, const at::Tensor& weights,
                                                           const at::Tensor& values, std::array<bool, 2> mask) {
  const int64_t B = values.size(0), T = values.size(1), d = values.size(2);
  at::Tensor grad_weights, grad_values;
  if (mask[0]) grad_weights = at::empty_like(weights);
  if (mask[1]) grad_values = at::empty_like(values);
  AT_DISPATCH_FLOATING_TYPES(values.scalar_type(), "attention_context_backward", [&] {
    core::attention_context_backward(g.data_ptr<scalar_t>(), weights.data_ptr<scalar_t>(), values.data_ptr<scalar_t>(),
                                     detail::ptr_or_null<scalar_t>(grad_weights),
                                     detail::ptr_or_null<scalar_t>(grad_values), B, 1, T, d);
  });
  return {grad_weights, grad_values};
}

// ---------------------------------------------------------------------------------------
// Autograd nodes: the forward kernel, and the gradient pass above as the backward.

struct MonotonicAlignmentFn : torch::autograd::Function<MonotonicAlignmentFn> {
  // alpha0: none for the default one-hot alpha_{-1}, which is then never built (an optional,
  // since autograd refuses an undefined tensor among a node's inputs).
  static at::Tensor forward(AutogradContext* ctx, at::Tensor p, c10::optional<at::Tensor> alpha0_or_none,
                            Lengths lens) {
    const at::Tensor alpha0 = alpha0_or_none.value_or(at::Tensor());
    const int64_t B = p.size(0), U = p.size(1), T = p.size(2);
    at::Tensor alpha = at::empty_like(p);
    const auto grid = make_grid(B, U, T, lens.in, lens.out);
    AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "monotonic_alignment", [&] {
      core::monotonic_alignment(p.data_ptr<scalar_t>(), detail::ptr_or_null<scalar_t>(alpha0),
                                alpha.data_ptr<scalar_t>(), grid);
    });
    ctx->save_for_backward({p, alpha, alpha0});
    save_lengths(ctx, lens);
    return alpha;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    detail::check_first_order("mona::nn::monotonic_alignment", s, grads);
    // An undefined alpha0 (the default) has no gradient to compute.
    auto [grad_p, grad_alpha0] =
        monotonic_alignment_grads(grads[0].contiguous(), s[0], s[1], s[2],
                                  saved_lengths(ctx, "mona::nn::monotonic_alignment"), s[2].defined());
    return {grad_p, grad_alpha0, at::Tensor()};
  }
};

struct MonotonicStepFn : torch::autograd::Function<MonotonicStepFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor p, at::Tensor alpha_prev,
                            Lengths lens) {
    const int64_t B = p.size(0), T = p.size(1);
    at::Tensor alpha = at::empty_like(p);
    AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "monotonic_alignment_step", [&] {
      core::monotonic_alignment_step(p.data_ptr<scalar_t>(), alpha_prev.data_ptr<scalar_t>(),
                                     alpha.data_ptr<scalar_t>(), B, T,
                                     detail::ptr_or_null(lens.in));
    });
    ctx->save_for_backward({p, alpha_prev});
    save_lengths(ctx, lens);
    return alpha;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    detail::check_first_order("mona::nn::monotonic_alignment_step", s, grads);
    auto [grad_p, grad_prev] =
        monotonic_alignment_step_grads(grads[0].contiguous(), s[0], s[1],
                                       saved_lengths(ctx, "mona::nn::monotonic_alignment_step").in);
    return {grad_p, grad_prev, at::Tensor()};
  }
};

struct MochaFn : torch::autograd::Function<MochaFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor alpha, at::Tensor u, int64_t w,
                            Lengths lens) {
    const int64_t B = alpha.size(0), U = alpha.size(1), T = alpha.size(2);
    at::Tensor beta = at::empty_like(alpha);
    const auto grid = make_grid(B, U, T, lens.in, lens.out);
    AT_DISPATCH_FLOATING_TYPES(alpha.scalar_type(), "mocha_chunkwise", [&] {
      core::mocha_chunkwise(alpha.data_ptr<scalar_t>(), u.data_ptr<scalar_t>(),
                            beta.data_ptr<scalar_t>(), grid, w);
    });
    ctx->save_for_backward({alpha, u});
    ctx->saved_data["w"] = w;
    save_lengths(ctx, lens);
    return beta;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    detail::check_first_order("mona::nn::mocha_chunkwise", s, grads);
    auto [grad_alpha, grad_u] = mocha_grads(grads[0].contiguous(), s[0], s[1],
                                            ctx->saved_data["w"].toInt(), saved_lengths(ctx, "mona::nn::mocha_chunkwise"));
    return {grad_alpha, grad_u, at::Tensor(), at::Tensor()};
  }
};

struct MatchaFn : torch::autograd::Function<MatchaFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor alpha_prev, at::Tensor p,
                            at::Tensor u, Lengths lens) {
    const int64_t B = p.size(0), U = p.size(1), T = p.size(2);
    at::Tensor beta = at::empty_like(p);
    const auto grid = make_grid(B, U, T, lens.in, lens.out);
    AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "matcha_chunkwise", [&] {
      core::matcha_chunkwise(alpha_prev.data_ptr<scalar_t>(), p.data_ptr<scalar_t>(),
                             u.data_ptr<scalar_t>(), beta.data_ptr<scalar_t>(), grid);
    });
    ctx->save_for_backward({alpha_prev, p, u, beta});
    save_lengths(ctx, lens);
    return beta;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    detail::check_first_order("mona::nn::matcha_chunkwise", s, grads);
    auto [ga, gp, gu] = matcha_grads(grads[0].contiguous(), s[0], s[1], s[2], s[3],
                                     saved_lengths(ctx, "mona::nn::matcha_chunkwise"));
    return {ga, gp, gu, at::Tensor()};
  }
};

struct SoftmaxFn : torch::autograd::Function<SoftmaxFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor e, Lengths lens) {
    const int64_t B = e.size(0), U = e.size(1), T = e.size(2);
    at::Tensor w = at::empty_like(e);
    const auto grid = make_grid(B, U, T, lens.in, lens.out);
    AT_DISPATCH_FLOATING_TYPES(e.scalar_type(), "masked_softmax", [&] {
      core::softmax(e.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), grid);
    });
    ctx->save_for_backward({w});
    save_lengths(ctx, lens);
    return w;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    detail::check_first_order("mona::nn::masked_softmax", s, grads);
    return {softmax_grads(grads[0].contiguous(), s[0], saved_lengths(ctx, "mona::nn::masked_softmax")), at::Tensor()};
  }
};

// Inputs query [B, U, d] (or [B, d]: U = 1), keys, w and the offset as a list of zero or one
// 0-dim tensors (a custom function cannot take an undefined tensor) -> e [B, U, T].
struct AdditiveEnergyFn : torch::autograd::Function<AdditiveEnergyFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor query, at::Tensor keys, at::Tensor w,
                            at::TensorList offset) {
    const int64_t B = query.size(0), U = query.dim() == 3 ? query.size(1) : 1, T = keys.size(1), d = keys.size(2);
    at::Tensor e = at::empty({B, U, T}, query.options());
    AT_DISPATCH_FLOATING_TYPES(query.scalar_type(), "additive_energy", [&] {
      scalar_t* out = e.data_ptr<scalar_t>();
      core::additive_energy(query.data_ptr<scalar_t>(), keys.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), out, B, U,
                            T, d);
      if (!offset.empty()) {
        const scalar_t r = *offset[0].data_ptr<scalar_t>();
        for (int64_t k = 0; k < B * U * T; ++k) out[k] += r;
      }
    });
    ctx->save_for_backward({query, keys, w});
    ctx->saved_data["offset"] = !offset.empty();
    return e;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    detail::check_first_order("mona::nn::additive_energy", s, grads);
    const at::Tensor g = grads[0].contiguous();
    const at::Tensor& query = s[0];
    const at::Tensor q = query.dim() == 3 ? query : query.view({query.size(0), 1, query.size(1)});
    auto [gq, gk, gw] = additive_energy_grads(
        g, q, s[1], s[2], {ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2)});
    if (gq.defined() && query.dim() == 2) gq = gq.view(query.sizes());
    variable_list out = {gq, gk, gw};
    // dL/d(offset) = the sum of dL/de over every entry (each is e + offset).
    if (ctx->saved_data["offset"].toBool()) out.push_back(ctx->needs_input_grad(3) ? g.sum() : at::Tensor());
    return out;
  }
};

struct AttentionContextFn : torch::autograd::Function<AttentionContextFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor weights, at::Tensor values) {
    const int64_t B = values.size(0), T = values.size(1), d = values.size(2);
    at::Tensor c = at::empty({B, d}, values.options());
    AT_DISPATCH_FLOATING_TYPES(values.scalar_type(), "attention_context", [&] {
      core::attention_context(weights.data_ptr<scalar_t>(), values.data_ptr<scalar_t>(), c.data_ptr<scalar_t>(), B,
                              1, T, d);
    });
    ctx->save_for_backward({weights, values});
    return c;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    detail::check_first_order("mona::nn::attention_context", s, grads);
    auto [gw, gv] = attention_context_grads(grads[0].contiguous(), s[0], s[1],
                                            {ctx->needs_input_grad(0), ctx->needs_input_grad(1)});
    return {gw, gv};
  }
};

// monotonic_attention_step's arguments that are not differentiated: the rule, the training
// noise (a tensor of the energy's numel, or undefined) and the lengths.
struct StepRule {
  ChunkRule rule = ChunkRule::kNone;
  int64_t w = 1;
  double noise_std = 0;
  at::Tensor noise, in_lens;
};

// a + b where either may be undefined (a gradient that no output sent). b is a tensor this
// node made, so the sum is taken into it.
at::Tensor sum_defined(const at::Tensor& a, at::Tensor b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return b.add_(a);
}

// The one-node step of monotonic_attention_step. Inputs energy, alpha_prev, values and the
// chunk energy as a list of zero or one tensors (a custom function cannot take an undefined
// tensor); outputs alpha, [beta,] context. Saved: p, alpha_prev, alpha, beta, values, u.
struct MonotonicAttentionStepFn : torch::autograd::Function<MonotonicAttentionStepFn> {
  static variable_list forward(AutogradContext* ctx, at::Tensor energy, at::Tensor alpha_prev, at::Tensor values,
                               at::TensorList chunk, StepRule r) {
    ctx->set_materialize_grads(false);  // an output nothing reads sends no gradient
    const int64_t B = alpha_prev.size(0), T = alpha_prev.size(1), D = values.size(2);
    const at::Tensor u = chunk.empty() ? at::Tensor() : chunk[0];
    at::Tensor p = at::empty({B, T}, alpha_prev.options()), alpha = at::empty_like(p);
    at::Tensor beta = r.rule == ChunkRule::kNone ? alpha : at::empty_like(p);
    at::Tensor context = at::empty({B, D}, values.options());
    const auto grid = make_grid(B, 1, T, r.in_lens, {});
    AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "monotonic_attention_step", [&] {
      const scalar_t* e = energy.data_ptr<scalar_t>();
      const scalar_t* n = detail::ptr_or_null<scalar_t>(r.noise);
      const scalar_t s = static_cast<scalar_t>(r.noise_std);
      scalar_t* pp = p.data_ptr<scalar_t>();
      bool nan = false;
      for (int64_t k = 0; k < B * T; ++k) {
        const scalar_t x = n ? e[k] + s * n[k] : e[k];
        nan |= x != x;
        pp[k] = scalar_t(1) / (scalar_t(1) + std::exp(-x));
      }
      // A NaN energy (or noise) gives a NaN p; named here, as the caller's argument, where it
      // is read (the valid entries; padding is not).
      for (int64_t b = 0; nan && b < B; ++b) {
        for (int64_t j = 0; j < grid.T_of(b); ++j) {
          const int64_t k = b * T + j;
          MONA_CHECK(e[k] == e[k], "mona::nn::monotonic_attention_step: energy: expected values that are not NaN, got ",
                     e[k], " at [", b, ", ", j, "]");
          MONA_CHECK(!n || n[k] == n[k], "mona::nn::monotonic_attention_step: noise: expected values that are not NaN, got ",
                     n ? n[k] : scalar_t(0), " at [", b, ", ", j, "]");
        }
      }
      core::monotonic_alignment_step(pp, alpha_prev.data_ptr<scalar_t>(), alpha.data_ptr<scalar_t>(), B, T,
                                     detail::ptr_or_null(r.in_lens));
      if (r.rule == ChunkRule::kFixed) {
        core::mocha_chunkwise(alpha.data_ptr<scalar_t>(), u.data_ptr<scalar_t>(), beta.data_ptr<scalar_t>(), grid,
                              r.w);
      } else if (r.rule == ChunkRule::kAdaptive) {
        core::matcha_chunkwise(alpha_prev.data_ptr<scalar_t>(), pp, u.data_ptr<scalar_t>(), beta.data_ptr<scalar_t>(),
                               grid);
      }
      core::attention_context(beta.data_ptr<scalar_t>(), values.data_ptr<scalar_t>(), context.data_ptr<scalar_t>(),
                              B, 1, T, D);
    });
    ctx->save_for_backward({p, alpha_prev, alpha, beta, values, u});
    ctx->saved_data["rule"] = static_cast<int64_t>(r.rule);
    ctx->saved_data["w"] = r.w;
    ctx->saved_data["energy_dim"] = energy.dim();
    save_lengths(ctx, {r.in_lens, {}});
    if (r.rule == ChunkRule::kNone) return {alpha, context};
    return {alpha, beta, context};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    detail::check_first_order("mona::nn::monotonic_attention_step", s, grads);
    const at::Tensor &p = s[0], &alpha_prev = s[1], &alpha = s[2], &beta = s[3], &values = s[4], &u = s[5];
    const auto rule = static_cast<ChunkRule>(ctx->saved_data["rule"].toInt());
    const int64_t w = ctx->saved_data["w"].toInt(), B = p.size(0), T = p.size(1), D = values.size(2);
    const at::Tensor in_lens = saved_lengths(ctx, "mona::nn::monotonic_attention_step").in;
    const auto grid = make_grid(B, 1, T, in_lens, {});
    const at::Tensor& g_c = grads.back();
    at::Tensor g_alpha = grads[0].defined() ? grads[0].contiguous() : at::Tensor();
    at::Tensor g_beta = rule != ChunkRule::kNone && grads[1].defined() ? grads[1].contiguous() : at::Tensor();
    at::Tensor g_values, g_u, g_p, g_prev, g_e;
    AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "monotonic_attention_step_backward", [&] {
      if (g_c.defined()) {  // c = sum_j beta[j] values[j]
        at::Tensor gw = at::empty_like(p);
        if (ctx->needs_input_grad(2)) g_values = at::empty_like(values);
        core::attention_context_backward(g_c.contiguous().data_ptr<scalar_t>(), beta.data_ptr<scalar_t>(),
                                         values.data_ptr<scalar_t>(), gw.data_ptr<scalar_t>(),
                                         detail::ptr_or_null<scalar_t>(g_values), B, 1, T, D);
        if (rule == ChunkRule::kNone) {
          g_alpha = sum_defined(g_alpha, gw);
        } else {
          g_beta = sum_defined(g_beta, gw);
        }
      }
      if (g_beta.defined() && rule == ChunkRule::kFixed) {
        at::Tensor ga = at::empty_like(p);
        g_u = at::empty_like(p);
        core::mocha_chunkwise_backward(g_beta.data_ptr<scalar_t>(), alpha.data_ptr<scalar_t>(),
                                       u.data_ptr<scalar_t>(), ga.data_ptr<scalar_t>(), g_u.data_ptr<scalar_t>(),
                                       grid, w);
        g_alpha = sum_defined(g_alpha, ga);
      } else if (g_beta.defined() && rule == ChunkRule::kAdaptive) {
        g_prev = at::empty_like(p);
        g_p = at::empty_like(p);
        g_u = at::empty_like(p);
        core::matcha_chunkwise_backward(g_beta.data_ptr<scalar_t>(), alpha_prev.data_ptr<scalar_t>(),
                                        p.data_ptr<scalar_t>(), u.data_ptr<scalar_t>(), beta.data_ptr<scalar_t>(),
                                        g_prev.data_ptr<scalar_t>(), g_p.data_ptr<scalar_t>(),
                                        g_u.data_ptr<scalar_t>(), grid);
      }
      if (g_alpha.defined()) {  // alpha = monotonic_alignment_step(p, alpha_prev)
        at::Tensor gp = at::empty_like(p), gprev = at::empty_like(p);
        core::monotonic_alignment_step_backward(g_alpha.data_ptr<scalar_t>(), p.data_ptr<scalar_t>(),
                                                alpha_prev.data_ptr<scalar_t>(), gp.data_ptr<scalar_t>(),
                                                gprev.data_ptr<scalar_t>(), B, T, detail::ptr_or_null(in_lens));
        g_p = sum_defined(g_p, gp);
        g_prev = sum_defined(g_prev, gprev);
      }
      if (g_p.defined()) {  // p = sigmoid(x): dp/dx = p (1 - p)
        g_e = ctx->saved_data["energy_dim"].toInt() == 2 ? at::empty({B, T}, p.options())
                                                         : at::empty({B, 1, T}, p.options());
        const scalar_t* pp = p.data_ptr<scalar_t>();
        const scalar_t* gpp = g_p.data_ptr<scalar_t>();
        scalar_t* ge = g_e.data_ptr<scalar_t>();
        for (int64_t k = 0; k < B * T; ++k) ge[k] = gpp[k] * pp[k] * (scalar_t(1) - pp[k]);
      }
    });
    if (g_u.defined() && u.dim() == 3) g_u = g_u.view({B, 1, T});
    variable_list out = {g_e, g_prev, g_values};
    if (rule != ChunkRule::kNone) out.push_back(g_u);
    out.push_back(at::Tensor());  // the StepRule
    return out;
  }
};

// A backward pass's tensor argument: defined, on the CPU, floating, with the sizes and dtype
// of `ref` (an input or output of the forward).
void check_same(const at::Tensor& t, const at::Tensor& ref, const char* fn, const char* name,
                const char* ref_name, const char* dims) {
  detail::check_tensor(t, fn, name, ref.dim(), dims);
  detail::check_like(t, ref, fn, name, ref_name);
}

}  // namespace

at::Tensor attention_context(const at::Tensor& weights, const at::Tensor& values) {
  detail::check_context_args(weights, values, "mona::nn::attention_context");
  return AttentionContextFn::apply(weights.contiguous(), values.contiguous());
}

at::Tensor additive_energy(const at::Tensor& query, const at::Tensor& keys, const at::Tensor& w,
                           const at::Tensor& offset) {
  const char* fn = "mona::nn::additive_energy";
  detail::check_energy_args(query, keys, w, fn);
  std::vector<at::Tensor> r;
  if (offset.defined()) {
    detail::check_tensor(offset, fn, "offset", 0, "[] (a scalar)");
    MONA_CHECK(offset.scalar_type() == query.scalar_type(), fn, ": offset: expected dtype ", query.scalar_type(),
               " (that of query), got ", offset.scalar_type());
    r.push_back(offset);
  }
  return AdditiveEnergyFn::apply(query.contiguous(), keys.contiguous(), w.contiguous(), at::TensorList(r));
}

at::Tensor monotonic_alignment(const at::Tensor& p, const at::Tensor& in_lens,
                               const at::Tensor& out_lens, const at::Tensor& alpha0) {
  const char* fn = "mona::nn::monotonic_alignment";
  detail::check_tensor(p, fn, "p", 3, "[B, U, T]");
  const int64_t B = p.size(0), U = p.size(1), T = p.size(2);
  at::Tensor a0;
  if (alpha0.defined()) {
    detail::check_tensor(alpha0, fn, "alpha0", 2, "[B, T]");
    MONA_CHECK(alpha0.size(0) == B && alpha0.size(1) == T, fn,
                ": alpha0: expected sizes [B, T] = [", B, ", ", T, "], got ", alpha0.sizes());
    MONA_CHECK(alpha0.scalar_type() == p.scalar_type(), fn, ": alpha0: expected dtype ",
                p.scalar_type(), " (that of p), got ", alpha0.scalar_type());
    a0 = alpha0.contiguous();
  }  // else none: the kernels' default, all mass on entry 0 (002 sec. 2.2), not built
  const at::Tensor il = detail::check_lengths(in_lens, fn, "in_lens", B, T);
  const at::Tensor ol = detail::check_lengths(out_lens, fn, "out_lens", B, U);
  return MonotonicAlignmentFn::apply(p.contiguous(), a0.defined() ? c10::optional<at::Tensor>(a0) : c10::nullopt,
                                     Lengths{il, ol});
}

at::Tensor monotonic_alignment_step(const at::Tensor& p, const at::Tensor& alpha_prev,
                                    const at::Tensor& in_lens) {
  const char* fn = "mona::nn::monotonic_alignment_step";
  detail::check_tensor(p, fn, "p", 2, "[B, T]");
  detail::check_tensor(alpha_prev, fn, "alpha_prev", 2, "[B, T]");
  detail::check_like(alpha_prev, p, fn, "alpha_prev", "p");
  const at::Tensor il = detail::check_lengths(in_lens, fn, "in_lens", p.size(0), p.size(1));
  return MonotonicStepFn::apply(p.contiguous(), alpha_prev.contiguous(), Lengths{il, {}});
}

at::Tensor mocha_chunkwise(const at::Tensor& alpha, const at::Tensor& u, int64_t w,
                           const at::Tensor& in_lens, const at::Tensor& out_lens) {
  const char* fn = "mona::nn::mocha_chunkwise";
  detail::check_tensor(alpha, fn, "alpha", 3, "[B, U, T]");
  detail::check_tensor(u, fn, "u", 3, "[B, U, T]");
  detail::check_like(u, alpha, fn, "u", "alpha");
  MONA_CHECK(w >= 1, fn, ": w: chunk size must be >= 1, got ", w);
  const at::Tensor il = detail::check_lengths(in_lens, fn, "in_lens", alpha.size(0), alpha.size(2));
  const at::Tensor ol = detail::check_lengths(out_lens, fn, "out_lens", alpha.size(0), alpha.size(1));
  return MochaFn::apply(alpha.contiguous(), u.contiguous(), w, Lengths{il, ol});
}

at::Tensor matcha_chunkwise(const at::Tensor& alpha_prev, const at::Tensor& p,
                            const at::Tensor& u, const at::Tensor& in_lens,
                            const at::Tensor& out_lens) {
  const char* fn = "mona::nn::matcha_chunkwise";
  detail::check_tensor(alpha_prev, fn, "alpha_prev", 3, "[B, U, T]");
  detail::check_tensor(p, fn, "p", 3, "[B, U, T]");
  detail::check_tensor(u, fn, "u", 3, "[B, U, T]");
  detail::check_like(alpha_prev, p, fn, "alpha_prev", "p");
  detail::check_like(u, p, fn, "u", "p");
  const at::Tensor il = detail::check_lengths(in_lens, fn, "in_lens", p.size(0), p.size(2));
  const at::Tensor ol = detail::check_lengths(out_lens, fn, "out_lens", p.size(0), p.size(1));
  return MatchaFn::apply(alpha_prev.contiguous(), p.contiguous(), u.contiguous(), Lengths{il, ol});
}

MonotonicStepOutput monotonic_attention_step(const at::Tensor& energy, const at::Tensor& noise, double noise_std,
                                             const at::Tensor& alpha_prev, const at::Tensor& chunk_energy,
                                             const at::Tensor& values, ChunkRule rule, int64_t w,
                                             const at::Tensor& in_lens) {
  const char* fn = "mona::nn::monotonic_attention_step";
  detail::check_tensor(alpha_prev, fn, "alpha_prev", 2, "[B, T]");
  const int64_t B = alpha_prev.size(0), T = alpha_prev.size(1);
  // energy and chunk_energy: [B, T], or [B, 1, T] as one step of Energy::forward gives them.
  const auto check_energy = [&](const at::Tensor& e, const char* name) {
    MONA_CHECK(e.defined(), fn, ": ", name, " must be a defined tensor");
    detail::check_tensor(e, fn, name, e.dim() == 3 ? 3 : 2, "[B, T] or [B, 1, T]");
    const bool fits = e.dim() == 2 ? e.sizes() == alpha_prev.sizes()
                                   : e.size(0) == B && e.size(1) == 1 && e.size(2) == T;
    MONA_CHECK(fits, fn, ": ", name, ": expected sizes [B, T] = [", B, ", ", T, "] or [B, 1, T], got ", e.sizes());
    MONA_CHECK(e.scalar_type() == alpha_prev.scalar_type(), fn, ": ", name, ": expected dtype ",
               alpha_prev.scalar_type(), " (that of alpha_prev), got ", e.scalar_type());
  };
  check_energy(energy, "energy");
  detail::check_tensor(values, fn, "values", 3, "[B, T, D]");
  MONA_CHECK(values.size(0) == B && values.size(1) == T, fn, ": values: expected sizes [B, T, D] with [B, T] = [", B,
             ", ", T, "] (those of alpha_prev), got ", values.sizes());
  MONA_CHECK(values.scalar_type() == alpha_prev.scalar_type(), fn, ": values: expected dtype ",
             alpha_prev.scalar_type(), " (that of alpha_prev), got ", values.scalar_type());
  StepRule r;
  r.rule = rule;
  r.w = w;
  if (rule == ChunkRule::kNone) {
    MONA_CHECK(!chunk_energy.defined(), fn, ": chunk_energy: expected none (undefined) under ChunkRule::kNone, got ",
               chunk_energy.sizes());
  } else {
    MONA_CHECK(chunk_energy.defined(), fn, ": chunk_energy: expected [B, T] = [", B, ", ", T,
               "] under a chunk rule (MoChA, MAtChA), got an undefined tensor");
    check_energy(chunk_energy, "chunk_energy");
  }
  MONA_CHECK(rule != ChunkRule::kFixed || w >= 1, fn, ": w: chunk size must be >= 1, got ", w);
  MONA_CHECK(std::isfinite(noise_std), fn, ": noise_std: expected a finite value, got ", noise_std);
  if (noise.defined()) {
    check_energy(noise, "noise");  // like energy: [B, T] or [B, 1, T]
    r.noise = noise.contiguous();
    r.noise_std = noise_std;
  }
  r.in_lens = detail::check_lengths(in_lens, fn, "in_lens", B, T);
  std::vector<at::Tensor> chunk;
  if (rule != ChunkRule::kNone) chunk.push_back(chunk_energy.contiguous());
  const variable_list out =
      MonotonicAttentionStepFn::apply(energy.contiguous(), alpha_prev.contiguous(), values.contiguous(),
                                      at::TensorList(chunk), r);
  if (rule == ChunkRule::kNone) return {out[0], out[0], out[1]};
  return {out[0], out[1], out[2]};
}

at::Tensor masked_softmax(const at::Tensor& e, const at::Tensor& in_lens,
                          const at::Tensor& out_lens) {
  const char* fn = "mona::nn::masked_softmax";
  detail::check_tensor(e, fn, "e", 3, "[B, U, T]");
  const at::Tensor il = detail::check_lengths(in_lens, fn, "in_lens", e.size(0), e.size(2));
  const at::Tensor ol = detail::check_lengths(out_lens, fn, "out_lens", e.size(0), e.size(1));
  return SoftmaxFn::apply(e.contiguous(), Lengths{il, ol});
}

// ---------------------------------------------------------------------------------------
// Backward passes (checked)

std::tuple<at::Tensor, at::Tensor> monotonic_alignment_backward(const at::Tensor& grad_alpha, const at::Tensor& p,
                                                                const at::Tensor& alpha, const at::Tensor& in_lens,
                                                                const at::Tensor& out_lens, const at::Tensor& alpha0) {
  const char* fn = "mona::nn::monotonic_alignment_backward";
  detail::check_tensor(p, fn, "p", 3, "[B, U, T]");
  check_same(grad_alpha, p, fn, "grad_alpha", "p", "[B, U, T]");
  check_same(alpha, p, fn, "alpha", "p", "[B, U, T]");
  const int64_t B = p.size(0), U = p.size(1), T = p.size(2);
  at::Tensor a0;
  if (alpha0.defined()) {
    detail::check_tensor(alpha0, fn, "alpha0", 2, "[B, T]");
    detail::check_sizes(alpha0, {B, T}, p, fn, "alpha0", "[B, T]", "p");
    a0 = alpha0.contiguous();
  }
  const Lengths lens{detail::check_lengths(in_lens, fn, "in_lens", B, T),
                     detail::check_lengths(out_lens, fn, "out_lens", B, U)};
  return monotonic_alignment_grads(grad_alpha.contiguous(), p.contiguous(), alpha.contiguous(), a0, lens,
                                   /*with_grad_alpha0=*/true);
}

std::tuple<at::Tensor, at::Tensor> monotonic_alignment_step_backward(const at::Tensor& grad_alpha,
                                                                     const at::Tensor& p,
                                                                     const at::Tensor& alpha_prev,
                                                                     const at::Tensor& in_lens) {
  const char* fn = "mona::nn::monotonic_alignment_step_backward";
  detail::check_tensor(p, fn, "p", 2, "[B, T]");
  check_same(grad_alpha, p, fn, "grad_alpha", "p", "[B, T]");
  check_same(alpha_prev, p, fn, "alpha_prev", "p", "[B, T]");
  const at::Tensor il = detail::check_lengths(in_lens, fn, "in_lens", p.size(0), p.size(1));
  return monotonic_alignment_step_grads(grad_alpha.contiguous(), p.contiguous(), alpha_prev.contiguous(), il);
}

std::tuple<at::Tensor, at::Tensor> mocha_chunkwise_backward(const at::Tensor& grad_beta, const at::Tensor& alpha,
                                                            const at::Tensor& u, int64_t w,
                                                            const at::Tensor& in_lens, const at::Tensor& out_lens) {
  const char* fn = "mona::nn::mocha_chunkwise_backward";
  detail::check_tensor(alpha, fn, "alpha", 3, "[B, U, T]");
  check_same(grad_beta, alpha, fn, "grad_beta", "alpha", "[B, U, T]");
  check_same(u, alpha, fn, "u", "alpha", "[B, U, T]");
  MONA_CHECK(w >= 1, fn, ": w: chunk size must be >= 1, got ", w);
  const Lengths lens{detail::check_lengths(in_lens, fn, "in_lens", alpha.size(0), alpha.size(2)),
                     detail::check_lengths(out_lens, fn, "out_lens", alpha.size(0), alpha.size(1))};
  return mocha_grads(grad_beta.contiguous(), alpha.contiguous(), u.contiguous(), w, lens);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> matcha_chunkwise_backward(
    const at::Tensor& grad_beta, const at::Tensor& alpha_prev, const at::Tensor& p, const at::Tensor& u,
    const at::Tensor& beta, const at::Tensor& in_lens, const at::Tensor& out_lens) {
  const char* fn = "mona::nn::matcha_chunkwise_backward";
  detail::check_tensor(p, fn, "p", 3, "[B, U, T]");
  check_same(grad_beta, p, fn, "grad_beta", "p", "[B, U, T]");
  check_same(alpha_prev, p, fn, "alpha_prev", "p", "[B, U, T]");
  check_same(u, p, fn, "u", "p", "[B, U, T]");
  check_same(beta, p, fn, "beta", "p", "[B, U, T]");
  const Lengths lens{detail::check_lengths(in_lens, fn, "in_lens", p.size(0), p.size(2)),
                     detail::check_lengths(out_lens, fn, "out_lens", p.size(0), p.size(1))};
  return matcha_grads(grad_beta.contiguous(), alpha_prev.contiguous(), p.contiguous(), u.contiguous(),
                      beta.contiguous(), lens);
}

at::Tensor masked_softmax_backward(const at::Tensor& grad_w, const at::Tensor& w, const at::Tensor& in_lens,
                                   const at::Tensor& out_lens) {
  const char* fn = "mona::nn::masked_softmax_backward";
  detail::check_tensor(w, fn, "w", 3, "[B, U, T]");
  check_same(grad_w, w, fn, "grad_w", "w", "[B, U, T]");
  const Lengths lens{detail::check_lengths(in_lens, fn, "in_lens", w.size(0), w.size(2)),
                     detail::check_lengths(out_lens, fn, "out_lens", w.size(0), w.size(1))};
  return softmax_grads(grad_w.contiguous(), w.contiguous(), lens);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> additive_energy_backward(const at::Tensor& grad_e,
                                                                        const at::Tensor& query,
                                                                        const at::Tensor& keys, const at::Tensor& w,
                                                                        std::array<bool, 3> output_mask) {
  const char* fn = "mona::nn::additive_energy_backward";
  detail::check_energy_args(query, keys, w, fn);  // query [B, U, d] or one step [B, d]
  const bool one_step = query.dim() == 2;
  const int64_t U = one_step ? 1 : query.size(1);
  detail::check_tensor(grad_e, fn, "grad_e", 3, "[B, U, T]");
  detail::check_sizes(grad_e, {query.size(0), U, keys.size(1)}, query, fn, "grad_e", "[B, U, T]", "query");
  const at::Tensor q = one_step ? query.unsqueeze(1) : query;
  auto [gq, gk, gw] =
      additive_energy_grads(grad_e.contiguous(), q.contiguous(), keys.contiguous(), w.contiguous(), output_mask);
  if (gq.defined() && one_step) gq = gq.view(query.sizes());
  return {gq, gk, gw};
}

std::tuple<at::Tensor, at::Tensor> attention_context_backward(const at::Tensor& grad_c, const at::Tensor& weights,
                                                              const at::Tensor& values,
                                                              std::array<bool, 2> output_mask) {
  const char* fn = "mona::nn::attention_context_backward";
  detail::check_context_args(weights, values, fn);
  detail::check_tensor(grad_c, fn, "grad_c", 2, "[B, d]");
  detail::check_sizes(grad_c, {values.size(0), values.size(2)}, values, fn, "grad_c", "[B, d]", "values");
  return attention_context_grads(grad_c.contiguous(), weights.contiguous(), values.contiguous(), output_mask);
}

}  // namespace mona::nn
