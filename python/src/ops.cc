// python/src/ops.cc: mona's differentiable functions as PyTorch operators, torch.ops.mona.*
// (TORCH_LIBRARY), callable from Python, TorchScript and C++ through the dispatcher.
//
// Two registration patterns (both use only APIs that PyTorch 2.x still has: TORCH_LIBRARY,
// TORCH_LIBRARY_IMPL per dispatch key, torch::autograd::Function, c10::Dispatcher typed
// handles, at::AutoDispatchBelowADInplaceOrView):
//
//  1. The alignment recursions (monotonic_alignment, monotonic_alignment_step,
//     mocha_chunkwise, matcha_chunkwise, masked_softmax) and the fused passes around them
//     (additive_energy, attention_context) are split into a forward and a
//     backward operator, each with a CPU kernel; the Autograd kernel is a
//     torch::autograd::Function that redispatches the forward below autograd and calls the
//     backward operator in its backward. A CUDA backend registers CUDA kernels for both
//     operators beside the CPU ones, and autograd then works for it unchanged. The CPU
//     kernels are mona::nn's functions: the forward ones run without recording a graph, the
//     backward ones are mona::nn's backward passes (mona/nn/functional.h, *_backward), which
//     check their arguments and call the core backward kernels (mona/core/*.h).
//  2. The monotonic family's training step (monotonic_attention_step), the GMM and
//     conditional Bernoulli functions (mona/nn/functional.h, mona/nn/gmm_attention.h,
//     mona/nn/conditional_bernoulli.h) build tables and save intermediate state inside
//     mona::nn's own autograd functions. Their Autograd kernel calls the mona::nn function,
//     which records mona's node with its analytic backward; the CPU kernel calls it without
//     a graph (reached under torch.inference_mode, where autograd is skipped). A CUDA backend
//     for these would also register its own Autograd kernel.
//
// Errors: mona::ArgumentError becomes c10::ValueError (Python: ValueError) with mona's
// message; other exceptions pass through (Python: RuntimeError).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <array>
#include <stdexcept>
#include <cmath>
#include <string>
#include <tuple>

#include "mona/core/error.h"
#include "mona/core/gmm.h"
#include "mona/core/rng.h"
#include "mona/nn/conditional_bernoulli.h"
#include "mona/nn/functional.h"
#include "mona/nn/gmm_attention.h"

namespace mona::python {
namespace {

using at::Tensor;
using OptTensor = c10::optional<at::Tensor>;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

Tensor or_undefined(const OptTensor& t) { return t.has_value() ? *t : Tensor(); }

// Runs f, turning mona's argument errors into c10::ValueError (Python ValueError) with the
// message unchanged.
template <class F>
decltype(auto) translating(F&& f) {
  try {
    return f();
  } catch (const mona::ArgumentError& e) {
    C10_THROW_ERROR(ValueError, e.what());
  }
}

// An optional argument (lengths, alpha0) as save_for_backward keeps it: undefined for none,
// so that autograd refuses it at the backward pass when it was changed in place after the
// forward pass, as it refuses every saved tensor. An inference tensor (which autograd does
// not save, and nothing outside inference mode can change in place) is kept as a copy.
Tensor for_backward(const OptTensor& t) {
  if (!t.has_value() || !t->defined()) return Tensor();
  return t->is_inference() ? t->clone() : *t;
}

// A tensor for_backward kept, as the optional argument it was.
OptTensor optional(const Tensor& t) {
  return t.defined() ? OptTensor(t) : c10::nullopt;
}

template <class Signature>
c10::TypedOperatorHandle<Signature> op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

// An Autograd kernel's forward: the operator `name` called again, below autograd (the
// backend's kernel, which records no graph).
template <class Signature, class... Args>
Tensor forward_below_autograd(const char* name, const Args&... args) {
  at::AutoDispatchBelowADInplaceOrView below;
  return op<Signature>(name).call(args...);
}

// =======================================================================================
// 1. Alignment recursions: CPU forward and backward kernels
// =======================================================================================

Tensor monotonic_alignment_cpu(const Tensor& p, const OptTensor& in_lens,
                               const OptTensor& out_lens, const OptTensor& alpha0) {
  return translating([&] {
    at::NoGradGuard no_grad;
    return nn::monotonic_alignment(p, or_undefined(in_lens), or_undefined(out_lens),
                                   or_undefined(alpha0));
  });
}

std::tuple<Tensor, Tensor> monotonic_alignment_backward_cpu(
    const Tensor& grad_alpha, const Tensor& p, const Tensor& alpha, const OptTensor& alpha0,
    const OptTensor& in_lens, const OptTensor& out_lens) {
  return translating([&] {
    return nn::monotonic_alignment_backward(grad_alpha, p, alpha, or_undefined(in_lens),
                                            or_undefined(out_lens), or_undefined(alpha0));
  });
}

Tensor monotonic_alignment_step_cpu(const Tensor& p, const Tensor& alpha_prev,
                                    const OptTensor& in_lens) {
  return translating([&] {
    at::NoGradGuard no_grad;
    return nn::monotonic_alignment_step(p, alpha_prev, or_undefined(in_lens));
  });
}

std::tuple<Tensor, Tensor> monotonic_alignment_step_backward_cpu(const Tensor& grad_alpha,
                                                                 const Tensor& p,
                                                                 const Tensor& alpha_prev,
                                                                 const OptTensor& in_lens) {
  return translating([&] {
    return nn::monotonic_alignment_step_backward(grad_alpha, p, alpha_prev, or_undefined(in_lens));
  });
}

Tensor mocha_chunkwise_cpu(const Tensor& alpha, const Tensor& u, int64_t w,
                           const OptTensor& in_lens, const OptTensor& out_lens) {
  return translating([&] {
    at::NoGradGuard no_grad;
    return nn::mocha_chunkwise(alpha, u, w, or_undefined(in_lens), or_undefined(out_lens));
  });
}

std::tuple<Tensor, Tensor> mocha_chunkwise_backward_cpu(const Tensor& grad_beta,
                                                        const Tensor& alpha, const Tensor& u,
                                                        int64_t w, const OptTensor& in_lens,
                                                        const OptTensor& out_lens) {
  return translating([&] {
    return nn::mocha_chunkwise_backward(grad_beta, alpha, u, w, or_undefined(in_lens),
                                        or_undefined(out_lens));
  });
}

Tensor matcha_chunkwise_cpu(const Tensor& alpha_prev, const Tensor& p, const Tensor& u,
                            const OptTensor& in_lens, const OptTensor& out_lens) {
  return translating([&] {
    at::NoGradGuard no_grad;
    return nn::matcha_chunkwise(alpha_prev, p, u, or_undefined(in_lens), or_undefined(out_lens));
  });
}

std::tuple<Tensor, Tensor, Tensor> matcha_chunkwise_backward_cpu(
    const Tensor& grad_beta, const Tensor& alpha_prev, const Tensor& p, const Tensor& u,
    const Tensor& beta, const OptTensor& in_lens, const OptTensor& out_lens) {
  return translating([&] {
    return nn::matcha_chunkwise_backward(grad_beta, alpha_prev, p, u, beta, or_undefined(in_lens),
                                         or_undefined(out_lens));
  });
}

Tensor masked_softmax_cpu(const Tensor& e, const OptTensor& in_lens, const OptTensor& out_lens) {
  return translating([&] {
    at::NoGradGuard no_grad;
    return nn::masked_softmax(e, or_undefined(in_lens), or_undefined(out_lens));
  });
}

Tensor masked_softmax_backward_cpu(const Tensor& grad_w, const Tensor& w,
                                   const OptTensor& in_lens, const OptTensor& out_lens) {
  return translating([&] {
    return nn::masked_softmax_backward(grad_w, w, or_undefined(in_lens), or_undefined(out_lens));
  });
}

// The fused energy and context (mona/nn/functional.h). Their backward operators take an
// output mask, as ATen's do: the gradients the graph does not need are neither computed nor
// allocated (undefined, None in Python).
Tensor additive_energy_cpu(const Tensor& query, const Tensor& keys, const Tensor& w) {
  return translating([&] {
    at::NoGradGuard no_grad;
    return nn::additive_energy(query, keys, w);
  });
}

std::tuple<Tensor, Tensor, Tensor> additive_energy_backward_cpu(
    const Tensor& grad_e, const Tensor& query, const Tensor& keys, const Tensor& w,
    std::array<bool, 3> output_mask) {
  return translating(
      [&] { return nn::additive_energy_backward(grad_e, query, keys, w, output_mask); });
}

Tensor attention_context_cpu(const Tensor& weights, const Tensor& values) {
  return translating([&] {
    at::NoGradGuard no_grad;
    return nn::attention_context(weights, values);
  });
}

std::tuple<Tensor, Tensor> attention_context_backward_cpu(const Tensor& grad_c,
                                                          const Tensor& weights,
                                                          const Tensor& values,
                                                          std::array<bool, 2> output_mask) {
  return translating(
      [&] { return nn::attention_context_backward(grad_c, weights, values, output_mask); });
}

// =======================================================================================
// 1. Alignment recursions: Autograd kernels (redispatch forward, backward operator)
// =======================================================================================

struct MonotonicAlignmentAutograd : torch::autograd::Function<MonotonicAlignmentAutograd> {
  static Tensor forward(AutogradContext* ctx, const Tensor& p, const OptTensor& in_lens,
                        const OptTensor& out_lens, const OptTensor& alpha0) {
    using Forward = Tensor(const Tensor&, const OptTensor&, const OptTensor&, const OptTensor&);
    const Tensor alpha =
        forward_below_autograd<Forward>("mona::monotonic_alignment", p, in_lens, out_lens, alpha0);
    ctx->save_for_backward(
        {p, alpha, for_backward(alpha0), for_backward(in_lens), for_backward(out_lens)});
    return alpha;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const OptTensor alpha0 = optional(saved[2]);
    auto [gp, ga0] =
        op<std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                      const OptTensor&, const OptTensor&, const OptTensor&)>(
            "mona::monotonic_alignment_backward")
            .call(grads[0], saved[0], saved[1], alpha0, optional(saved[3]),
                  optional(saved[4]));
    return {gp, Tensor(), Tensor(), alpha0.has_value() ? ga0 : Tensor()};
  }
};

struct MonotonicStepAutograd : torch::autograd::Function<MonotonicStepAutograd> {
  static Tensor forward(AutogradContext* ctx, const Tensor& p, const Tensor& alpha_prev,
                        const OptTensor& in_lens) {
    using Forward = Tensor(const Tensor&, const Tensor&, const OptTensor&);
    const Tensor alpha =
        forward_below_autograd<Forward>("mona::monotonic_alignment_step", p, alpha_prev, in_lens);
    ctx->save_for_backward({p, alpha_prev, for_backward(in_lens)});
    return alpha;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [gp, gprev] =
        op<std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                      const OptTensor&)>("mona::monotonic_alignment_step_backward")
            .call(grads[0], saved[0], saved[1], optional(saved[2]));
    return {gp, gprev, Tensor()};
  }
};

struct MochaAutograd : torch::autograd::Function<MochaAutograd> {
  static Tensor forward(AutogradContext* ctx, const Tensor& alpha, const Tensor& u, int64_t w,
                        const OptTensor& in_lens, const OptTensor& out_lens) {
    using Forward =
        Tensor(const Tensor&, const Tensor&, int64_t, const OptTensor&, const OptTensor&);
    const Tensor beta =
        forward_below_autograd<Forward>("mona::mocha_chunkwise", alpha, u, w, in_lens, out_lens);
    ctx->save_for_backward({alpha, u, for_backward(in_lens), for_backward(out_lens)});
    ctx->saved_data["w"] = w;
    return beta;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [ga, gu] = op<std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                  int64_t, const OptTensor&, const OptTensor&)>(
                        "mona::mocha_chunkwise_backward")
                        .call(grads[0], saved[0], saved[1], ctx->saved_data["w"].toInt(),
                              optional(saved[2]), optional(saved[3]));
    return {ga, gu, Tensor(), Tensor(), Tensor()};
  }
};

struct MatchaAutograd : torch::autograd::Function<MatchaAutograd> {
  static Tensor forward(AutogradContext* ctx, const Tensor& alpha_prev, const Tensor& p,
                        const Tensor& u, const OptTensor& in_lens, const OptTensor& out_lens) {
    using Forward =
        Tensor(const Tensor&, const Tensor&, const Tensor&, const OptTensor&, const OptTensor&);
    const Tensor beta = forward_below_autograd<Forward>("mona::matcha_chunkwise", alpha_prev, p,
                                                        u, in_lens, out_lens);
    ctx->save_for_backward(
        {alpha_prev, p, u, beta, for_backward(in_lens), for_backward(out_lens)});
    return beta;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    auto [ga, gp, gu] =
        op<std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                              const Tensor&, const Tensor&, const OptTensor&,
                                              const OptTensor&)>("mona::matcha_chunkwise_backward")
            .call(grads[0], s[0], s[1], s[2], s[3], optional(s[4]), optional(s[5]));
    return {ga, gp, gu, Tensor(), Tensor()};
  }
};

struct SoftmaxAutograd : torch::autograd::Function<SoftmaxAutograd> {
  static Tensor forward(AutogradContext* ctx, const Tensor& e, const OptTensor& in_lens,
                        const OptTensor& out_lens) {
    using Forward = Tensor(const Tensor&, const OptTensor&, const OptTensor&);
    const Tensor w = forward_below_autograd<Forward>("mona::masked_softmax", e, in_lens, out_lens);
    ctx->save_for_backward({w, for_backward(in_lens), for_backward(out_lens)});
    return w;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    Tensor ge = op<Tensor(const Tensor&, const Tensor&, const OptTensor&, const OptTensor&)>(
                    "mona::masked_softmax_backward")
                    .call(grads[0], s[0], optional(s[1]), optional(s[2]));
    return {ge, Tensor(), Tensor()};
  }
};

struct AdditiveEnergyAutograd : torch::autograd::Function<AdditiveEnergyAutograd> {
  static Tensor forward(AutogradContext* ctx, const Tensor& query, const Tensor& keys,
                        const Tensor& w) {
    using Forward = Tensor(const Tensor&, const Tensor&, const Tensor&);
    const Tensor e = forward_below_autograd<Forward>("mona::additive_energy", query, keys, w);
    ctx->save_for_backward({query, keys, w});
    return e;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const std::array<bool, 3> mask = {ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                                      ctx->needs_input_grad(2)};
    auto [gq, gk, gw] =
        op<std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                              const Tensor&, std::array<bool, 3>)>(
            "mona::additive_energy_backward")
            .call(grads[0], s[0], s[1], s[2], mask);
    return {gq, gk, gw};
  }
};

struct AttentionContextAutograd : torch::autograd::Function<AttentionContextAutograd> {
  static Tensor forward(AutogradContext* ctx, const Tensor& weights, const Tensor& values) {
    using Forward = Tensor(const Tensor&, const Tensor&);
    const Tensor c = forward_below_autograd<Forward>("mona::attention_context", weights, values);
    ctx->save_for_backward({weights, values});
    return c;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const std::array<bool, 2> mask = {ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    auto [gw, gv] = op<std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                  std::array<bool, 2>)>(
                        "mona::attention_context_backward")
                        .call(grads[0], s[0], s[1], mask);
    return {gw, gv};
  }
};

// The Autograd kernel of the backward operators: they are first order (mona's backward
// passes have no backward of their own), so differentiating through them (create_graph=True,
// double backward) raises instead of returning gradients that silently lack the second-order
// terms. Otherwise the call goes on below autograd to the backend's kernel.
void first_order_only(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  if (at::GradMode::is_enabled()) {
    for (size_t i = stack->size() - n; i < stack->size(); ++i) {
      const c10::IValue& v = (*stack)[i];
      if (v.isTensor() && v.toTensor().defined() && v.toTensor().requires_grad()) {
        C10_THROW_ERROR(NotImplementedError,
                        op.schema().name() + ": mona's backward passes are first order: "
                        "double backward (create_graph=True through this operator) is not implemented");
      }
    }
  }
  at::AutoDispatchBelowADInplaceOrView below;
  op.callBoxed(stack);
}

Tensor monotonic_alignment_autograd(const Tensor& p, const OptTensor& in_lens,
                                    const OptTensor& out_lens, const OptTensor& alpha0) {
  return MonotonicAlignmentAutograd::apply(p, in_lens, out_lens, alpha0);
}
Tensor monotonic_alignment_step_autograd(const Tensor& p, const Tensor& alpha_prev,
                                         const OptTensor& in_lens) {
  return MonotonicStepAutograd::apply(p, alpha_prev, in_lens);
}
Tensor mocha_chunkwise_autograd(const Tensor& alpha, const Tensor& u, int64_t w,
                                const OptTensor& in_lens, const OptTensor& out_lens) {
  return MochaAutograd::apply(alpha, u, w, in_lens, out_lens);
}
Tensor matcha_chunkwise_autograd(const Tensor& alpha_prev, const Tensor& p, const Tensor& u,
                                 const OptTensor& in_lens, const OptTensor& out_lens) {
  return MatchaAutograd::apply(alpha_prev, p, u, in_lens, out_lens);
}
Tensor masked_softmax_autograd(const Tensor& e, const OptTensor& in_lens,
                               const OptTensor& out_lens) {
  return SoftmaxAutograd::apply(e, in_lens, out_lens);
}
Tensor additive_energy_autograd(const Tensor& query, const Tensor& keys, const Tensor& w) {
  return AdditiveEnergyAutograd::apply(query, keys, w);
}
Tensor attention_context_autograd(const Tensor& weights, const Tensor& values) {
  return AttentionContextAutograd::apply(weights, values);
}

// =======================================================================================
// 2. GMM and conditional Bernoulli: mona::nn's autograd functions (see the file comment).
//    Each `*_impl(bool record, ...)` is both kernels: record = false for CPU (no graph).
// =======================================================================================

// Runs f with gradient recording as the key asks: the CPU kernel never records (it may be
// reached below autograd, where a recorded node would be wrong), the Autograd kernel
// records as the caller's grad mode says.
template <class F>
decltype(auto) run(bool record, F&& f) {
  return translating([&]() -> decltype(auto) {
    if (record) return f();
    at::NoGradGuard no_grad;
    return f();
  });
}

core::GmmOptions gmm_options(c10::string_view window, double radius, int64_t width) {
  core::GmmOptions o;
  const std::string w(window);
  if (w == "none") {
    o.window = core::GmmWindow::kNone;
  } else if (w == "adaptive") {
    o.window = core::GmmWindow::kAdaptive;
  } else if (w == "fixed") {
    o.window = core::GmmWindow::kFixed;
  } else {
    mona::detail::fail("mona.gmm_attention_weights: window: expected 'none', 'adaptive' or "
                       "'fixed', got '", w, "'");
  }
  o.radius = radius;
  o.width = width;
  try {  // GmmOptions' own rule, its message prefixed with the operator's name
    o.validate();
  } catch (const std::invalid_argument& e) {
    mona::detail::fail("mona.gmm_attention_weights: ", e.what());
  }
  return o;
}

template <bool kRecord>
Tensor gmm_attention_weights_k(const Tensor& mu, const Tensor& variance, const OptTensor& weights,
                               const OptTensor& nu, const OptTensor& delta,
                               c10::string_view window, double radius, int64_t width,
                               const OptTensor& in_lens, const OptTensor& out_lens) {
  return run(kRecord, [&] {
    return nn::gmm_attention_weights(mu, variance, or_undefined(weights), or_undefined(nu),
                                     or_undefined(delta), gmm_options(window, radius, width),
                                     or_undefined(in_lens), or_undefined(out_lens));
  });
}

// The monotonic family's training step from energies to context (mona/nn/functional.h,
// monotonic_attention_step): one mona::nn node. `rule` names the ChunkRule. Under "none" the
// weights are alpha; the operator returns a copy, so that its two outputs never alias.
nn::ChunkRule chunk_rule(c10::string_view rule) {
  const std::string r(rule);
  if (r == "none") return nn::ChunkRule::kNone;
  if (r == "fixed") return nn::ChunkRule::kFixed;
  if (r == "adaptive") return nn::ChunkRule::kAdaptive;
  mona::detail::fail("mona.monotonic_attention_step: rule: expected 'none' (hard monotonic), 'fixed' (MoChA) or "
                     "'adaptive' (MAtChA), got '", r, "'");
}

template <bool kRecord>
std::tuple<Tensor, Tensor, Tensor> monotonic_attention_step_k(const Tensor& energy, const OptTensor& noise,
                                                              double noise_std, const Tensor& alpha_prev,
                                                              const OptTensor& chunk_energy, const Tensor& values,
                                                              c10::string_view rule, int64_t w,
                                                              const OptTensor& in_lens) {
  return run(kRecord, [&] {
    const nn::ChunkRule r = chunk_rule(rule);
    const nn::MonotonicStepOutput s =
        nn::monotonic_attention_step(energy, or_undefined(noise), noise_std, alpha_prev, or_undefined(chunk_energy),
                                     values, r, w, or_undefined(in_lens));
    return std::make_tuple(s.alpha, r == nn::ChunkRule::kNone ? s.weights.clone() : s.weights, s.context);
  });
}

template <bool kRecord>
Tensor gmm_length_penalty_k(const Tensor& mu, const OptTensor& nu, double lambda_,
                            const OptTensor& in_lens, const OptTensor& out_lens) {
  // lambda_ is checked where the penalty is computed (mona::core::gmm_length_penalty:
  // "gmm_length_penalty: lambda: expected a finite value >= 0"), which this call always
  // reaches (step and until_step left at their defaults: never switched off).
  return run(kRecord, [&] {
    return nn::gmm_length_penalty(mu, or_undefined(nu), lambda_, or_undefined(in_lens),
                                  or_undefined(out_lens));
  });
}

template <bool kRecord>
Tensor poisson_binomial_log_prob_k(const Tensor& logits, const Tensor& k,
                                   const OptTensor& in_lens) {
  return run(kRecord, [&] { return nn::poisson_binomial_log_prob(logits, k, or_undefined(in_lens)); });
}

template <bool kRecord>
Tensor cb_log_prob_k(const Tensor& logits, const Tensor& b, const OptTensor& in_lens) {
  return run(kRecord, [&] { return nn::cb_log_prob(logits, b, or_undefined(in_lens)); });
}

template <bool kRecord>
Tensor cb_log_table_k(const Tensor& logits, const Tensor& k, const OptTensor& in_lens) {
  return run(kRecord, [&] { return nn::cb_log_table(logits, k, or_undefined(in_lens)); });
}

template <bool kRecord>
Tensor cb_marginals_k(const Tensor& logits, const Tensor& k, const OptTensor& in_lens) {
  return run(kRecord, [&] { return nn::cb_marginals(logits, k, or_undefined(in_lens)); });
}

template <bool kRecord>
Tensor cb_idb_step_log_probs_k(const Tensor& logits, const Tensor& b, const OptTensor& in_lens) {
  return run(kRecord, [&] { return nn::cb_idb_step_log_probs(logits, b, or_undefined(in_lens)); });
}

template <bool kRecord>
Tensor cb_bb_step_log_probs_k(const Tensor& logits, const Tensor& b, const OptTensor& in_lens) {
  return run(kRecord, [&] { return nn::cb_bb_step_log_probs(logits, b, or_undefined(in_lens)); });
}

template <bool kRecord>
Tensor cb_db_step_log_probs_k(const Tensor& logits, const Tensor& order, const Tensor& k,
                              const OptTensor& in_lens) {
  return run(kRecord, [&] {
    return nn::cb_db_step_log_probs(logits, order, k, or_undefined(in_lens));
  });
}

using Sample = std::tuple<Tensor, Tensor, Tensor>;

// positions: [B, K] int64 (BB: the highs increasing; DB: the draft order); IDB has none
// and returns an empty [B, 0] tensor in its place.
Sample as_tuple(const nn::CbSample& s, const Tensor& logits) {
  Tensor pos = s.positions.defined()
                   ? s.positions
                   : at::empty({logits.size(0), 0}, logits.options().dtype(at::kLong));
  return std::make_tuple(s.b, pos, s.step_log_probs);
}

template <bool kRecord, nn::CbSample (*kSampler)(const Tensor&, const Tensor&, core::Rng&,
                                                 const Tensor&)>
Sample cb_sample_k(const Tensor& logits, const Tensor& k, int64_t seed, const OptTensor& in_lens) {
  return run(kRecord, [&] {
    core::Rng rng(static_cast<uint64_t>(seed));
    return as_tuple(kSampler(logits, k, rng, or_undefined(in_lens)), logits);
  });
}

template <bool kRecord>
Tensor cb_marginal_log_likelihood_k(const Tensor& logits, const Tensor& log_emit,
                                    const OptTensor& in_lens, const OptTensor& out_lens) {
  return run(kRecord, [&] {
    return nn::cb_marginal_log_likelihood(logits, log_emit, or_undefined(in_lens),
                                          or_undefined(out_lens));
  });
}

}  // namespace
}  // namespace mona::python

// =======================================================================================
// Registration. Names and argument names are the field's (docs/attention.md).
// =======================================================================================

TORCH_LIBRARY(mona, m) {
  // 1. alignment recursions (forward and backward operators)
  m.def("monotonic_alignment(Tensor p_choose, Tensor? in_lens=None, Tensor? out_lens=None, "
        "Tensor? alpha0=None) -> Tensor");
  m.def("monotonic_alignment_backward(Tensor grad_alpha, Tensor p_choose, Tensor alpha, "
        "Tensor? alpha0, Tensor? in_lens, Tensor? out_lens) -> (Tensor, Tensor)");
  m.def("monotonic_alignment_step(Tensor p_choose, Tensor alpha_prev, Tensor? in_lens=None) "
        "-> Tensor");
  m.def("monotonic_alignment_step_backward(Tensor grad_alpha, Tensor p_choose, "
        "Tensor alpha_prev, Tensor? in_lens) -> (Tensor, Tensor)");
  m.def("mocha_chunkwise(Tensor alpha, Tensor u, int w, Tensor? in_lens=None, "
        "Tensor? out_lens=None) -> Tensor");
  m.def("mocha_chunkwise_backward(Tensor grad_beta, Tensor alpha, Tensor u, int w, "
        "Tensor? in_lens, Tensor? out_lens) -> (Tensor, Tensor)");
  m.def("matcha_chunkwise(Tensor alpha_prev, Tensor p_choose, Tensor u, Tensor? in_lens=None, "
        "Tensor? out_lens=None) -> Tensor");
  m.def("matcha_chunkwise_backward(Tensor grad_beta, Tensor alpha_prev, Tensor p_choose, "
        "Tensor u, Tensor beta, Tensor? in_lens, Tensor? out_lens) -> (Tensor, Tensor, Tensor)");
  m.def("masked_softmax(Tensor e, Tensor? in_lens=None, Tensor? out_lens=None) -> Tensor");
  m.def("masked_softmax_backward(Tensor grad_w, Tensor w, Tensor? in_lens, Tensor? out_lens) "
        "-> Tensor");
  m.def("additive_energy(Tensor query, Tensor keys, Tensor w) -> Tensor");
  m.def("additive_energy_backward(Tensor grad_e, Tensor query, Tensor keys, Tensor w, "
        "bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
  m.def("attention_context(Tensor weights, Tensor values) -> Tensor");
  m.def("attention_context_backward(Tensor grad_c, Tensor weights, Tensor values, "
        "bool[2] output_mask) -> (Tensor, Tensor)");
  // 2. The monotonic family's step, GMM and conditional Bernoulli (mona::nn's autograd functions)
  m.def("monotonic_attention_step(Tensor energy, Tensor? noise, float noise_std, Tensor alpha_prev, "
        "Tensor? chunk_energy, Tensor values, str rule='none', int w=1, Tensor? in_lens=None) "
        "-> (Tensor, Tensor, Tensor)");
  m.def("gmm_attention_weights(Tensor mu, Tensor variance, Tensor? weights=None, "
        "Tensor? nu=None, Tensor? delta=None, str window='none', float radius=2.0, "
        "int width=4, Tensor? in_lens=None, Tensor? out_lens=None) -> Tensor");
  m.def("gmm_length_penalty(Tensor mu, Tensor? nu, float lambda_, Tensor? in_lens=None, "
        "Tensor? out_lens=None) -> Tensor");
  m.def("poisson_binomial_log_prob(Tensor logits, Tensor k, Tensor? in_lens=None) -> Tensor");
  m.def("cb_log_prob(Tensor logits, Tensor b, Tensor? in_lens=None) -> Tensor");
  m.def("cb_log_table(Tensor logits, Tensor k, Tensor? in_lens=None) -> Tensor");
  m.def("cb_marginals(Tensor logits, Tensor k, Tensor? in_lens=None) -> Tensor");
  m.def("cb_idb_step_log_probs(Tensor logits, Tensor b, Tensor? in_lens=None) -> Tensor");
  m.def("cb_bb_step_log_probs(Tensor logits, Tensor b, Tensor? in_lens=None) -> Tensor");
  m.def("cb_db_step_log_probs(Tensor logits, Tensor order, Tensor k, Tensor? in_lens=None) "
        "-> Tensor");
  m.def("cb_sample_idb(Tensor logits, Tensor k, int seed, Tensor? in_lens=None) "
        "-> (Tensor b, Tensor positions, Tensor step_log_probs)");
  m.def("cb_sample_bb(Tensor logits, Tensor k, int seed, Tensor? in_lens=None) "
        "-> (Tensor b, Tensor positions, Tensor step_log_probs)");
  m.def("cb_sample_db(Tensor logits, Tensor k, int seed, Tensor? in_lens=None) "
        "-> (Tensor b, Tensor positions, Tensor step_log_probs)");
  m.def("cb_marginal_log_likelihood(Tensor logits, Tensor log_emit, Tensor? in_lens=None, "
        "Tensor? out_lens=None) -> Tensor");
}

namespace {
namespace mp = mona::python;
}

TORCH_LIBRARY_IMPL(mona, CPU, m) {
  m.impl("monotonic_alignment", &mp::monotonic_alignment_cpu);
  m.impl("monotonic_alignment_backward", &mp::monotonic_alignment_backward_cpu);
  m.impl("monotonic_alignment_step", &mp::monotonic_alignment_step_cpu);
  m.impl("monotonic_alignment_step_backward", &mp::monotonic_alignment_step_backward_cpu);
  m.impl("mocha_chunkwise", &mp::mocha_chunkwise_cpu);
  m.impl("mocha_chunkwise_backward", &mp::mocha_chunkwise_backward_cpu);
  m.impl("matcha_chunkwise", &mp::matcha_chunkwise_cpu);
  m.impl("matcha_chunkwise_backward", &mp::matcha_chunkwise_backward_cpu);
  m.impl("masked_softmax", &mp::masked_softmax_cpu);
  m.impl("masked_softmax_backward", &mp::masked_softmax_backward_cpu);
  m.impl("additive_energy", &mp::additive_energy_cpu);
  m.impl("additive_energy_backward", &mp::additive_energy_backward_cpu);
  m.impl("attention_context", &mp::attention_context_cpu);
  m.impl("attention_context_backward", &mp::attention_context_backward_cpu);
  m.impl("monotonic_attention_step", &mp::monotonic_attention_step_k<false>);
  m.impl("gmm_attention_weights", &mp::gmm_attention_weights_k<false>);
  m.impl("gmm_length_penalty", &mp::gmm_length_penalty_k<false>);
  m.impl("poisson_binomial_log_prob", &mp::poisson_binomial_log_prob_k<false>);
  m.impl("cb_log_prob", &mp::cb_log_prob_k<false>);
  m.impl("cb_log_table", &mp::cb_log_table_k<false>);
  m.impl("cb_marginals", &mp::cb_marginals_k<false>);
  m.impl("cb_idb_step_log_probs", &mp::cb_idb_step_log_probs_k<false>);
  m.impl("cb_bb_step_log_probs", &mp::cb_bb_step_log_probs_k<false>);
  m.impl("cb_db_step_log_probs", &mp::cb_db_step_log_probs_k<false>);
  m.impl("cb_sample_idb", &mp::cb_sample_k<false, &mona::nn::cb_sample_idb>);
  m.impl("cb_sample_bb", &mp::cb_sample_k<false, &mona::nn::cb_sample_bb>);
  m.impl("cb_sample_db", &mp::cb_sample_k<false, &mona::nn::cb_sample_db>);
  m.impl("cb_marginal_log_likelihood", &mp::cb_marginal_log_likelihood_k<false>);
}

TORCH_LIBRARY_IMPL(mona, Autograd, m) {
  for (const char* name : {"monotonic_alignment_backward", "monotonic_alignment_step_backward",
                           "mocha_chunkwise_backward", "matcha_chunkwise_backward",
                           "masked_softmax_backward", "additive_energy_backward",
                           "attention_context_backward"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&mp::first_order_only>());
  }
  m.impl("monotonic_alignment", &mp::monotonic_alignment_autograd);
  m.impl("monotonic_alignment_step", &mp::monotonic_alignment_step_autograd);
  m.impl("mocha_chunkwise", &mp::mocha_chunkwise_autograd);
  m.impl("matcha_chunkwise", &mp::matcha_chunkwise_autograd);
  m.impl("masked_softmax", &mp::masked_softmax_autograd);
  m.impl("additive_energy", &mp::additive_energy_autograd);
  m.impl("attention_context", &mp::attention_context_autograd);
  m.impl("monotonic_attention_step", &mp::monotonic_attention_step_k<true>);
  m.impl("gmm_attention_weights", &mp::gmm_attention_weights_k<true>);
  m.impl("gmm_length_penalty", &mp::gmm_length_penalty_k<true>);
  m.impl("poisson_binomial_log_prob", &mp::poisson_binomial_log_prob_k<true>);
  m.impl("cb_log_prob", &mp::cb_log_prob_k<true>);
  m.impl("cb_log_table", &mp::cb_log_table_k<true>);
  m.impl("cb_marginals", &mp::cb_marginals_k<true>);
  m.impl("cb_idb_step_log_probs", &mp::cb_idb_step_log_probs_k<true>);
  m.impl("cb_bb_step_log_probs", &mp::cb_bb_step_log_probs_k<true>);
  m.impl("cb_db_step_log_probs", &mp::cb_db_step_log_probs_k<true>);
  m.impl("cb_sample_idb", &mp::cb_sample_k<true, &mona::nn::cb_sample_idb>);
  m.impl("cb_sample_bb", &mp::cb_sample_k<true, &mona::nn::cb_sample_bb>);
  m.impl("cb_sample_db", &mp::cb_sample_k<true, &mona::nn::cb_sample_db>);
  m.impl("cb_marginal_log_likelihood", &mp::cb_marginal_log_likelihood_k<true>);
}
