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
//     forward kernels are mona::nn's functions (their argument checks and core forward
//     kernels) run without recording a graph; the backward kernels call the core backward
//     kernels (mona/core/*.h) directly.
//  2. The GMM and conditional Bernoulli functions (mona/nn/gmm_attention.h,
//     mona/nn/conditional_bernoulli.h) build tables and save intermediate state inside
//     mona::nn's own autograd functions. Their Autograd kernel calls the mona::nn function,
//     which records mona's node with its analytic backward; the CPU kernel calls it without
//     a graph (reached under torch.inference_mode, where autograd is skipped). A CUDA backend
//     for these would also register its own Autograd kernel.
//
// Errors: mona::ArgumentError becomes c10::ValueError (Python: ValueError) with mona's
// message; other exceptions pass through (Python: RuntimeError).
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <string>
#include <tuple>

#include "check.h"  // src/nn: the argument checks shared with mona::nn's adapters
#include "mona/core/additive_energy.h"
#include "mona/core/attention_context.h"
#include "mona/core/error.h"
#include "mona/core/gmm.h"
#include "mona/core/matcha.h"
#include "mona/core/mocha.h"
#include "mona/core/monotonic.h"
#include "mona/core/rng.h"
#include "mona/core/softmax.h"
#include "mona/nn/conditional_bernoulli.h"
#include "mona/nn/functional.h"
#include "mona/nn/gmm_attention.h"

namespace mona::python {
namespace {

using at::Tensor;
using OptTensor = c10::optional<at::Tensor>;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
namespace nnd = mona::nn::detail;

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

OptTensor saved_optional(AutogradContext* ctx, const char* key) {
  auto it = ctx->saved_data.find(key);
  if (it == ctx->saved_data.end() || it->second.isNone()) return c10::nullopt;
  return it->second.toTensor();
}

// Checked lengths for a backward kernel (int64, contiguous), undefined when absent.
Tensor lengths(const OptTensor& lens, const char* fn, const char* name, int64_t B, int64_t max) {
  return nnd::check_lengths(or_undefined(lens), fn, name, B, max);
}

// A backward kernel's tensor argument: like `ref` (sizes, dtype, CPU), made contiguous.
Tensor like(const Tensor& t, const Tensor& ref, const char* fn, const char* name,
            const char* ref_name) {
  nnd::check_tensor(t, fn, name, ref.dim(), "(the forward's shape)");
  nnd::check_like(t, ref, fn, name, ref_name);
  return t.contiguous();
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
    const Tensor& grad_alpha, const Tensor& p_in, const Tensor& alpha_in,
    const OptTensor& alpha0_in, const OptTensor& in_lens_in, const OptTensor& out_lens_in) {
  return translating([&] {
    const char* fn = "mona.monotonic_alignment_backward";
    nnd::check_tensor(p_in, fn, "p", 3, "[B, U, T]");
    const Tensor p = p_in.contiguous();
    const int64_t B = p.size(0), U = p.size(1), T = p.size(2);
    const Tensor g = like(grad_alpha, p, fn, "grad_alpha", "p");
    const Tensor alpha = like(alpha_in, p, fn, "alpha", "p");
    Tensor alpha0;
    if (alpha0_in.has_value() && alpha0_in->defined()) {
      nnd::check_tensor(*alpha0_in, fn, "alpha0", 2, "[B, T]");
      MONA_CHECK(alpha0_in->size(0) == B && alpha0_in->size(1) == T, fn,
                 ": alpha0: expected sizes [B, T] = [", B, ", ", T, "], got ",
                 alpha0_in->sizes());
      alpha0 = alpha0_in->to(p.scalar_type()).contiguous();
    }
    const Tensor il = lengths(in_lens_in, fn, "in_lens", B, T);
    const Tensor ol = lengths(out_lens_in, fn, "out_lens", B, U);
    Tensor grad_p = at::empty_like(p);
    Tensor grad_alpha0 = at::empty({B, T}, p.options());
    const auto grid = nnd::make_grid(B, U, T, il, ol);
    AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "monotonic_alignment_backward", [&] {
      core::monotonic_alignment_backward(
          g.data_ptr<scalar_t>(), p.data_ptr<scalar_t>(),
          alpha0.defined() ? alpha0.data_ptr<scalar_t>() : nullptr, alpha.data_ptr<scalar_t>(),
          grad_p.data_ptr<scalar_t>(), grad_alpha0.data_ptr<scalar_t>(), grid);
    });
    return std::make_tuple(grad_p, grad_alpha0);
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
                                                                 const Tensor& p_in,
                                                                 const Tensor& alpha_prev_in,
                                                                 const OptTensor& in_lens_in) {
  return translating([&] {
    const char* fn = "mona.monotonic_alignment_step_backward";
    nnd::check_tensor(p_in, fn, "p", 2, "[B, T]");
    const Tensor p = p_in.contiguous();
    const int64_t B = p.size(0), T = p.size(1);
    const Tensor g = like(grad_alpha, p, fn, "grad_alpha", "p");
    const Tensor prev = like(alpha_prev_in, p, fn, "alpha_prev", "p");
    const Tensor il = lengths(in_lens_in, fn, "in_lens", B, T);
    Tensor grad_p = at::empty_like(p), grad_prev = at::empty_like(p);
    AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "monotonic_alignment_step_backward", [&] {
      core::monotonic_alignment_step_backward(
          g.data_ptr<scalar_t>(), p.data_ptr<scalar_t>(), prev.data_ptr<scalar_t>(),
          grad_p.data_ptr<scalar_t>(), grad_prev.data_ptr<scalar_t>(), B, T,
          nnd::ptr_or_null(il));
    });
    return std::make_tuple(grad_p, grad_prev);
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
                                                        const Tensor& alpha_in,
                                                        const Tensor& u_in, int64_t w,
                                                        const OptTensor& in_lens_in,
                                                        const OptTensor& out_lens_in) {
  return translating([&] {
    const char* fn = "mona.mocha_chunkwise_backward";
    nnd::check_tensor(alpha_in, fn, "alpha", 3, "[B, U, T]");
    const Tensor alpha = alpha_in.contiguous();
    const int64_t B = alpha.size(0), U = alpha.size(1), T = alpha.size(2);
    const Tensor g = like(grad_beta, alpha, fn, "grad_beta", "alpha");
    const Tensor u = like(u_in, alpha, fn, "u", "alpha");
    MONA_CHECK(w >= 1, fn, ": w: chunk size must be >= 1, got ", w);
    const Tensor il = lengths(in_lens_in, fn, "in_lens", B, T);
    const Tensor ol = lengths(out_lens_in, fn, "out_lens", B, U);
    Tensor grad_alpha = at::empty_like(alpha), grad_u = at::empty_like(u);
    const auto grid = nnd::make_grid(B, U, T, il, ol);
    AT_DISPATCH_FLOATING_TYPES(alpha.scalar_type(), "mocha_chunkwise_backward", [&] {
      core::mocha_chunkwise_backward(g.data_ptr<scalar_t>(), alpha.data_ptr<scalar_t>(),
                                     u.data_ptr<scalar_t>(), grad_alpha.data_ptr<scalar_t>(),
                                     grad_u.data_ptr<scalar_t>(), grid, w);
    });
    return std::make_tuple(grad_alpha, grad_u);
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
    const Tensor& grad_beta, const Tensor& alpha_prev_in, const Tensor& p_in,
    const Tensor& u_in, const Tensor& beta_in, const OptTensor& in_lens_in,
    const OptTensor& out_lens_in) {
  return translating([&] {
    const char* fn = "mona.matcha_chunkwise_backward";
    nnd::check_tensor(p_in, fn, "p", 3, "[B, U, T]");
    const Tensor p = p_in.contiguous();
    const int64_t B = p.size(0), U = p.size(1), T = p.size(2);
    const Tensor g = like(grad_beta, p, fn, "grad_beta", "p");
    const Tensor alpha_prev = like(alpha_prev_in, p, fn, "alpha_prev", "p");
    const Tensor u = like(u_in, p, fn, "u", "p");
    const Tensor beta = like(beta_in, p, fn, "beta", "p");
    const Tensor il = lengths(in_lens_in, fn, "in_lens", B, T);
    const Tensor ol = lengths(out_lens_in, fn, "out_lens", B, U);
    Tensor ga = at::empty_like(p), gp = at::empty_like(p), gu = at::empty_like(p);
    const auto grid = nnd::make_grid(B, U, T, il, ol);
    AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "matcha_chunkwise_backward", [&] {
      core::matcha_chunkwise_backward(
          g.data_ptr<scalar_t>(), alpha_prev.data_ptr<scalar_t>(), p.data_ptr<scalar_t>(),
          u.data_ptr<scalar_t>(), beta.data_ptr<scalar_t>(), ga.data_ptr<scalar_t>(),
          gp.data_ptr<scalar_t>(), gu.data_ptr<scalar_t>(), grid);
    });
    return std::make_tuple(ga, gp, gu);
  });
}

Tensor masked_softmax_cpu(const Tensor& e, const OptTensor& in_lens, const OptTensor& out_lens) {
  return translating([&] {
    at::NoGradGuard no_grad;
    return nn::masked_softmax(e, or_undefined(in_lens), or_undefined(out_lens));
  });
}

Tensor masked_softmax_backward_cpu(const Tensor& grad_w, const Tensor& w_in,
                                   const OptTensor& in_lens_in, const OptTensor& out_lens_in) {
  return translating([&] {
    const char* fn = "mona.masked_softmax_backward";
    nnd::check_tensor(w_in, fn, "w", 3, "[B, U, T]");
    const Tensor w = w_in.contiguous();
    const int64_t B = w.size(0), U = w.size(1), T = w.size(2);
    const Tensor g = like(grad_w, w, fn, "grad_w", "w");
    const Tensor il = lengths(in_lens_in, fn, "in_lens", B, T);
    const Tensor ol = lengths(out_lens_in, fn, "out_lens", B, U);
    Tensor ge = at::empty_like(w);
    const auto grid = nnd::make_grid(B, U, T, il, ol);
    AT_DISPATCH_FLOATING_TYPES(w.scalar_type(), "masked_softmax_backward", [&] {
      core::softmax_backward(g.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
                             ge.data_ptr<scalar_t>(), grid);
    });
    return ge;
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
    const Tensor& grad_e_in, const Tensor& query_in, const Tensor& keys_in, const Tensor& w_in,
    std::array<bool, 3> output_mask) {
  return translating([&] {
    const char* fn = "mona.additive_energy_backward";
    nnd::check_energy_args(query_in, keys_in, w_in, fn);
    const Tensor query = query_in.contiguous(), keys = keys_in.contiguous(), w = w_in.contiguous();
    const int64_t B = query.size(0), U = query.size(1), T = keys.size(1), d = query.size(2);
    nnd::check_tensor(grad_e_in, fn, "grad_e", 3, "[B, U, T]");
    nnd::check_sizes(grad_e_in, {B, U, T}, query, fn, "grad_e", "[B, U, T]", "query");
    const Tensor g = grad_e_in.contiguous();
    Tensor gq, gk, gw;
    if (output_mask[0]) gq = at::empty_like(query);
    if (output_mask[1]) gk = at::empty_like(keys);
    if (output_mask[2]) gw = at::empty_like(w);
    AT_DISPATCH_FLOATING_TYPES(query.scalar_type(), "additive_energy_backward", [&] {
      auto ptr = [](Tensor& t) { return t.defined() ? t.data_ptr<scalar_t>() : nullptr; };
      core::additive_energy_backward(g.data_ptr<scalar_t>(), query.data_ptr<scalar_t>(),
                                     keys.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), ptr(gq),
                                     ptr(gk), ptr(gw), B, U, T, d);
    });
    return std::make_tuple(gq, gk, gw);
  });
}

Tensor attention_context_cpu(const Tensor& weights, const Tensor& values) {
  return translating([&] {
    at::NoGradGuard no_grad;
    return nn::attention_context(weights, values);
  });
}

std::tuple<Tensor, Tensor> attention_context_backward_cpu(const Tensor& grad_c_in,
                                                          const Tensor& weights_in,
                                                          const Tensor& values_in,
                                                          std::array<bool, 2> output_mask) {
  return translating([&] {
    const char* fn = "mona.attention_context_backward";
    nnd::check_context_args(weights_in, values_in, fn);
    const Tensor weights = weights_in.contiguous(), values = values_in.contiguous();
    const int64_t B = values.size(0), T = values.size(1), d = values.size(2);
    nnd::check_tensor(grad_c_in, fn, "grad_c", 2, "[B, d]");
    nnd::check_sizes(grad_c_in, {B, d}, values, fn, "grad_c", "[B, d]", "values");
    const Tensor g = grad_c_in.contiguous();
    Tensor gw, gv;
    if (output_mask[0]) gw = at::empty_like(weights);
    if (output_mask[1]) gv = at::empty_like(values);
    AT_DISPATCH_FLOATING_TYPES(values.scalar_type(), "attention_context_backward", [&] {
      auto ptr = [](Tensor& t) { return t.defined() ? t.data_ptr<scalar_t>() : nullptr; };
      core::attention_context_backward(g.data_ptr<scalar_t>(), weights.data_ptr<scalar_t>(),
                                       values.data_ptr<scalar_t>(), ptr(gw), ptr(gv), B, 1, T, d);
    });
    return std::make_tuple(gw, gv);
  });
}

// =======================================================================================
// 1. Alignment recursions: Autograd kernels (redispatch forward, backward operator)
// =======================================================================================

void save_lengths(AutogradContext* ctx, const OptTensor& in_lens, const OptTensor& out_lens) {
  ctx->saved_data["in_lens"] = in_lens;
  ctx->saved_data["out_lens"] = out_lens;
}

struct MonotonicAlignmentAutograd : torch::autograd::Function<MonotonicAlignmentAutograd> {
  static Tensor forward(AutogradContext* ctx, const Tensor& p, const OptTensor& in_lens,
                        const OptTensor& out_lens, const OptTensor& alpha0) {
    using Forward = Tensor(const Tensor&, const OptTensor&, const OptTensor&, const OptTensor&);
    const Tensor alpha =
        forward_below_autograd<Forward>("mona::monotonic_alignment", p, in_lens, out_lens, alpha0);
    ctx->save_for_backward({p, alpha});
    ctx->saved_data["alpha0"] = alpha0;
    save_lengths(ctx, in_lens, out_lens);
    return alpha;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const OptTensor alpha0 = saved_optional(ctx, "alpha0");
    auto [gp, ga0] =
        op<std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                      const OptTensor&, const OptTensor&, const OptTensor&)>(
            "mona::monotonic_alignment_backward")
            .call(grads[0], saved[0], saved[1], alpha0, saved_optional(ctx, "in_lens"),
                  saved_optional(ctx, "out_lens"));
    return {gp, Tensor(), Tensor(), alpha0.has_value() ? ga0 : Tensor()};
  }
};

struct MonotonicStepAutograd : torch::autograd::Function<MonotonicStepAutograd> {
  static Tensor forward(AutogradContext* ctx, const Tensor& p, const Tensor& alpha_prev,
                        const OptTensor& in_lens) {
    using Forward = Tensor(const Tensor&, const Tensor&, const OptTensor&);
    const Tensor alpha =
        forward_below_autograd<Forward>("mona::monotonic_alignment_step", p, alpha_prev, in_lens);
    ctx->save_for_backward({p, alpha_prev});
    save_lengths(ctx, in_lens, c10::nullopt);
    return alpha;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [gp, gprev] =
        op<std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                      const OptTensor&)>("mona::monotonic_alignment_step_backward")
            .call(grads[0], saved[0], saved[1], saved_optional(ctx, "in_lens"));
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
    ctx->save_for_backward({alpha, u});
    ctx->saved_data["w"] = w;
    save_lengths(ctx, in_lens, out_lens);
    return beta;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [ga, gu] = op<std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                  int64_t, const OptTensor&, const OptTensor&)>(
                        "mona::mocha_chunkwise_backward")
                        .call(grads[0], saved[0], saved[1], ctx->saved_data["w"].toInt(),
                              saved_optional(ctx, "in_lens"), saved_optional(ctx, "out_lens"));
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
    ctx->save_for_backward({alpha_prev, p, u, beta});
    save_lengths(ctx, in_lens, out_lens);
    return beta;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    auto [ga, gp, gu] =
        op<std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                              const Tensor&, const Tensor&, const OptTensor&,
                                              const OptTensor&)>("mona::matcha_chunkwise_backward")
            .call(grads[0], s[0], s[1], s[2], s[3], saved_optional(ctx, "in_lens"),
                  saved_optional(ctx, "out_lens"));
    return {ga, gp, gu, Tensor(), Tensor()};
  }
};

struct SoftmaxAutograd : torch::autograd::Function<SoftmaxAutograd> {
  static Tensor forward(AutogradContext* ctx, const Tensor& e, const OptTensor& in_lens,
                        const OptTensor& out_lens) {
    using Forward = Tensor(const Tensor&, const OptTensor&, const OptTensor&);
    const Tensor w = forward_below_autograd<Forward>("mona::masked_softmax", e, in_lens, out_lens);
    ctx->save_for_backward({w});
    save_lengths(ctx, in_lens, out_lens);
    return w;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    Tensor ge = op<Tensor(const Tensor&, const Tensor&, const OptTensor&, const OptTensor&)>(
                    "mona::masked_softmax_backward")
                    .call(grads[0], s[0], saved_optional(ctx, "in_lens"),
                          saved_optional(ctx, "out_lens"));
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

template <bool kRecord>
Tensor gmm_length_penalty_k(const Tensor& mu, const OptTensor& nu, double lambda_,
                            const OptTensor& in_lens, const OptTensor& out_lens) {
  return run(kRecord, [&] {
    MONA_CHECK(std::isfinite(lambda_) && lambda_ >= 0, "mona.gmm_length_penalty: lambda_: ",
               "expected a finite value >= 0, got ", lambda_);
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
// Registration. Names and argument names are the field's (docs/attention.md, DESIGN sec. 9).
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
  // 2. GMM and conditional Bernoulli (mona::nn's autograd functions)
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
