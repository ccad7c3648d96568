// GMM / SAGMM / SAGMM-tr attention modules and autograd functions; see
// include/mona/nn/gmm_attention.h and mona/core/gmm.h.
#include "mona/nn/gmm_attention.h"

#include <algorithm>
#include <limits>

#include <ATen/Dispatch.h>
#include <torch/autograd.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "check.h"
#include "mona/core/error.h"
#include "mona/nn/functional.h"
#include "mona/nn/unrolled_linear.h"

namespace mona::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Non-tensor arguments of the autograd function (LibTorch 1.13's custom functions cannot
// take undefined tensors, so defaults are materialised by the caller).
struct GmmArgs {
  core::GmmOptions options;
  at::Tensor in, out;
};

core::GmmOptions load_options(AutogradContext* ctx) {
  core::GmmOptions o;
  o.window = static_cast<core::GmmWindow>(ctx->saved_data["window"].toInt());
  o.radius = ctx->saved_data["radius"].toDouble();
  o.width = ctx->saved_data["width"].toInt();
  return o;
}

struct GmmFn : torch::autograd::Function<GmmFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor mu, at::Tensor variance,
                            at::Tensor weights, at::Tensor nu, at::Tensor delta, GmmArgs args) {
    const int64_t B = mu.size(0), U = mu.size(1), H = mu.size(2), T = nu.size(1);
    at::Tensor alpha = at::empty({B, U, T}, mu.options());
    const auto grid = detail::make_grid(B, U, T, args.in, args.out);
    AT_DISPATCH_FLOATING_TYPES(mu.scalar_type(), "gmm_attention", [&] {
      core::gmm_attention(mu.data_ptr<scalar_t>(), variance.data_ptr<scalar_t>(),
                          weights.data_ptr<scalar_t>(), nu.data_ptr<scalar_t>(),
                          delta.data_ptr<scalar_t>(), alpha.data_ptr<scalar_t>(), H, grid,
                          args.options);
    });
    ctx->save_for_backward({mu, variance, weights, nu, delta});
    ctx->saved_data["window"] = static_cast<int64_t>(args.options.window);
    ctx->saved_data["radius"] = args.options.radius;
    ctx->saved_data["width"] = args.options.width;
    detail::keep_for_backward(ctx, "in_lens", args.in);
    detail::keep_for_backward(ctx, "out_lens", args.out);
    return alpha;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const char* fn = "mona::nn::gmm_attention_weights";
    const auto s = ctx->get_saved_variables();
    detail::check_first_order(fn, s, grads);
    const at::Tensor &mu = s[0], &variance = s[1], &weights = s[2], &nu = s[3], &delta = s[4];
    const at::Tensor g = grads[0].contiguous();
    const int64_t B = mu.size(0), U = mu.size(1), H = mu.size(2), T = nu.size(1);
    const auto grid = detail::make_grid(B, U, T, detail::kept_for_backward(ctx, "in_lens", fn),
                                        detail::kept_for_backward(ctx, "out_lens", fn));
    at::Tensor gmu = at::empty_like(mu), gv = at::empty_like(mu), gw = at::empty_like(mu);
    at::Tensor gnu = at::empty_like(nu), gd = at::empty_like(nu);
    const core::GmmOptions o = load_options(ctx);
    AT_DISPATCH_FLOATING_TYPES(mu.scalar_type(), "gmm_attention_backward", [&] {
      core::gmm_attention_backward(
          g.data_ptr<scalar_t>(), mu.data_ptr<scalar_t>(), variance.data_ptr<scalar_t>(),
          weights.data_ptr<scalar_t>(), nu.data_ptr<scalar_t>(), delta.data_ptr<scalar_t>(),
          gmu.data_ptr<scalar_t>(), gv.data_ptr<scalar_t>(), gw.data_ptr<scalar_t>(),
          gnu.data_ptr<scalar_t>(), gd.data_ptr<scalar_t>(), H, grid, o);
    });
    return {gmu, gv, gw, gnu, gd, at::Tensor()};
  }
};

struct LengthPenaltyFn : torch::autograd::Function<LengthPenaltyFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor mu, at::Tensor nu, double lambda,
                            GmmArgs args) {
    const int64_t B = mu.size(0), U = mu.size(1), H = mu.size(2), T = nu.size(1);
    at::Tensor loss = at::empty({B}, mu.options());
    const auto grid = detail::make_grid(B, U, T, args.in, args.out);
    AT_DISPATCH_FLOATING_TYPES(mu.scalar_type(), "gmm_length_penalty", [&] {
      core::gmm_length_penalty(mu.data_ptr<scalar_t>(), nu.data_ptr<scalar_t>(),
                               loss.data_ptr<scalar_t>(), H, grid, lambda);
    });
    ctx->save_for_backward({mu, nu});
    ctx->saved_data["lambda"] = lambda;
    detail::keep_for_backward(ctx, "in_lens", args.in);
    detail::keep_for_backward(ctx, "out_lens", args.out);
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const char* fn = "mona::nn::gmm_length_penalty";
    const auto s = ctx->get_saved_variables();
    detail::check_first_order(fn, s, grads);
    const at::Tensor &mu = s[0], &nu = s[1];
    const at::Tensor g = grads[0].contiguous();
    const int64_t B = mu.size(0), U = mu.size(1), H = mu.size(2), T = nu.size(1);
    const auto grid = detail::make_grid(B, U, T, detail::kept_for_backward(ctx, "in_lens", fn),
                                        detail::kept_for_backward(ctx, "out_lens", fn));
    at::Tensor gmu = at::empty_like(mu), gnu = at::empty_like(nu);
    const double lambda = ctx->saved_data["lambda"].toDouble();
    AT_DISPATCH_FLOATING_TYPES(mu.scalar_type(), "gmm_length_penalty_backward", [&] {
      core::gmm_length_penalty_backward(g.data_ptr<scalar_t>(), mu.data_ptr<scalar_t>(),
                                        nu.data_ptr<scalar_t>(), gmu.data_ptr<scalar_t>(),
                                        gnu.data_ptr<scalar_t>(), H, grid, lambda);
    });
    return {gmu, gnu, at::Tensor(), at::Tensor()};
  }
};

// The position of memory entry j (0-based) when none is learned or given: nu_j = j + 1
// (GMM attention, and nu left out of gmm_attention_weights / gmm_length_penalty). Every
// default position of this file comes from here.
double default_position(int64_t j) { return static_cast<double>(j) + 1.0; }

// [T]: default_position(j) for j = 0 .. T-1.
at::Tensor default_positions(int64_t T, const at::TensorOptions& o) {
  return at::arange(default_position(0), default_position(T), o);
}

// [B, T]: default_positions for every row.
at::Tensor default_positions(int64_t B, int64_t T, const at::TensorOptions& o) {
  return default_positions(T, o).unsqueeze(0).expand({B, T}).contiguous();
}

// T when in_lens alone fixes it (nu and delta left out): its largest value (0 for B = 0).
// in_lens is checked first ([B] int64/int32 on the CPU, values >= 0; no upper bound yet, T
// being what is computed), so that a bad one is refused by name rather than by LibTorch's
// max or arange; the caller's check_lengths against T follows as for given positions.
int64_t frames_of_in_lens(const at::Tensor& in_lens, const char* fn, int64_t B) {
  const at::Tensor l = detail::check_lengths(in_lens, fn, "in_lens", B,
                                             std::numeric_limits<int64_t>::max());
  const int64_t* v = l.data_ptr<int64_t>();
  return B > 0 ? *std::max_element(v, v + B) : 0;
}

// f() where T = max(in_lens) fixed the size of what f allocates (positions [B, T], weights or
// penalty terms [B, U, T] of `dtype`): a T whose tensors cannot be addressed is refused by
// name before anything is allocated, and an allocation that fails (LibTorch's allocator
// throws c10::Error) is reported as in_lens's, with the allocator's message.
template <class F>
auto sized_by_in_lens(const char* fn, int64_t B, int64_t U, int64_t T, at::ScalarType dtype, F&& f) {
  int64_t bytes = 0;
  const bool overflow = __builtin_mul_overflow(B, std::max<int64_t>(U, 1), &bytes) ||
                        __builtin_mul_overflow(bytes, T, &bytes) ||
                        __builtin_mul_overflow(bytes, static_cast<int64_t>(at::elementSize(dtype)), &bytes);
  MONA_CHECK(!overflow, fn, ": in_lens: its largest value, T = ", T, " frames, makes [B, U, T] = [", B, ", ", U,
             ", ", T, "] ", dtype, " values, more bytes than an int64 counts");
  try {
    return f();
  } catch (const c10::Error& e) {
    ::mona::detail::fail(fn, ": in_lens: its largest value, T = ", T, " frames, asks for [B, U, T] = [", B, ", ", U,
                         ", ", T, "] ", dtype, " values (", bytes, " bytes): ", e.what_without_backtrace());
  }
}

// Keys of the positions: K W_delta + b -> [..., T, H] (SAGMM) or [..., T, 0] (GMM).
class PositionEnergy : public Energy {
 public:
  PositionEnergy(int64_t memory_dim, int64_t heads, bool source_aware)
      : heads_(source_aware ? heads : 0) {
    if (source_aware) {
      proj = register_module("proj", torch::nn::Linear(memory_dim, heads));
      // sigmoid(0) = 0.5; start near one position unit per frame instead.
      torch::NoGradGuard no_grad;
      proj->bias.fill_(2.0);
    }
  }
  at::Tensor keys(const at::Tensor& memory) override {
    if (heads_ == 0) {
      auto sizes = memory.sizes().vec();
      sizes.back() = 0;
      return at::empty(sizes, memory.options());
    }
    // K W_delta + b as a per-row product and sum, not proj(memory): a matrix product's
    // rounding can depend on how many rows it gets (gemv for one frame, gemm for many), and
    // the positions must not depend on how the input was split into extend() calls
    // (streaming equals offline exactly).
    return (memory.unsqueeze(-2) * proj->weight).sum(-1) + proj->bias;
  }
  at::Tensor forward(const at::Tensor&, const at::Tensor&) override {
    ::mona::detail::fail("GmmAttention: the position projection is not an energy function");
  }
  EnergyScorer scorer(const at::Tensor&) override {
    ::mona::detail::fail("GmmAttention: the position projection has no scorer");
  }
  int64_t key_dim() const override { return heads_; }
  torch::nn::Linear proj{nullptr};

 private:
  int64_t heads_;
};

}  // namespace

// ---------------------------------------------------------------------------------------
// Functions

at::Tensor gmm_attention_weights(const at::Tensor& mu, const at::Tensor& variance,
                                 const at::Tensor& weights, const at::Tensor& nu,
                                 const at::Tensor& delta, const core::GmmOptions& options,
                                 const at::Tensor& in_lens, const at::Tensor& out_lens) {
  const char* fn = "mona::nn::gmm_attention_weights";
  detail::check_tensor(mu, fn, "mu", 3, "[B, U, H]");
  detail::check_tensor(variance, fn, "variance", 3, "[B, U, H]");
  detail::check_like(variance, mu, fn, "variance", "mu");
  at::Tensor w = weights;
  if (w.defined()) {
    detail::check_tensor(w, fn, "weights", 3, "[B, U, H]");
    detail::check_like(w, mu, fn, "weights", "mu");
  } else {
    w = at::ones_like(mu);
  }
  const int64_t B = mu.size(0), U = mu.size(1);
  MONA_CHECK(nu.defined() || delta.defined() || in_lens.defined(), fn,
              ": nu, delta or in_lens must be given (they fix T)");
  // T comes from the first of nu, delta, in_lens given, each checked before it is read.
  if (nu.defined()) {
    detail::check_tensor(nu, fn, "nu", 2, "[B, T]");
    MONA_CHECK(nu.size(0) == B, fn, ": nu: expected [B, T] with B = ", B, ", got ", nu.sizes());
    MONA_CHECK(nu.scalar_type() == mu.scalar_type(), fn, ": nu: expected dtype ",
                mu.scalar_type(), " (that of mu), got ", nu.scalar_type());
  }
  if (delta.defined()) detail::check_tensor(delta, fn, "delta", 2, "[B, T]");
  const int64_t T = nu.defined()      ? nu.size(1)
                    : delta.defined() ? delta.size(1)
                                      : frames_of_in_lens(in_lens, fn, B);
  const auto weights_of = [&] {
    const at::Tensor n = nu.defined() ? nu : default_positions(B, T, mu.options());
    at::Tensor d = delta;
    if (d.defined()) {
      // Against mu when nu was not given (n is then the default positions, made in mu's dtype).
      detail::check_like(d, n, fn, "delta", nu.defined() ? "nu" : "mu");
    } else {
      d = at::ones({B, T}, mu.options());
    }
    options.validate();
    const at::Tensor il = detail::check_lengths(in_lens, fn, "in_lens", B, T);
    const at::Tensor ol = detail::check_lengths(out_lens, fn, "out_lens", B, U);
    return GmmFn::apply(mu.contiguous(), variance.contiguous(), w.contiguous(), n.contiguous(),
                        d.contiguous(), GmmArgs{options, il, ol});
  };
  if (nu.defined() || delta.defined()) return weights_of();
  return sized_by_in_lens(fn, B, U, T, mu.scalar_type(), weights_of);
}

at::Tensor gmm_length_penalty(const at::Tensor& mu, const at::Tensor& nu, double lambda,
                              const at::Tensor& in_lens, const at::Tensor& out_lens,
                              int64_t step, int64_t until_step) {
  const char* fn = "mona::nn::gmm_length_penalty";
  detail::check_tensor(mu, fn, "mu", 3, "[B, U, H]");
  const int64_t B = mu.size(0), U = mu.size(1);
  if (until_step >= 0 && step >= until_step) return at::zeros({B}, mu.options());
  at::Tensor n = nu;
  if (n.defined()) {
    detail::check_tensor(n, fn, "nu", 2, "[B, T]");
    MONA_CHECK(n.size(0) == B && n.scalar_type() == mu.scalar_type(), fn,
                ": nu: expected [B, T] with B = ", B, " and dtype ", mu.scalar_type(), ", got ",
                n.sizes(), " ", n.scalar_type());
  }
  const auto penalty_of = [&] {
    const at::Tensor il = detail::check_lengths(in_lens, fn, "in_lens", B, n.size(1));
    const at::Tensor ol = detail::check_lengths(out_lens, fn, "out_lens", B, U);
    return LengthPenaltyFn::apply(mu.contiguous(), n.contiguous(), lambda,
                                  GmmArgs{core::GmmOptions{}, il, ol});
  };
  if (n.defined()) return penalty_of();
  MONA_CHECK(in_lens.defined(), fn, ": nu or in_lens must be given (they fix T)");
  const int64_t T = frames_of_in_lens(in_lens, fn, B);
  return sized_by_in_lens(fn, B, U, T, mu.scalar_type(), [&] {
    n = default_positions(B, T, mu.options());
    return penalty_of();
  });
}

at::Tensor eos_frame(int64_t dim, const at::TensorOptions& options) {
  return at::ones({1, dim}, options);
}

EosBatch append_eos_frame(const at::Tensor& memory, const at::Tensor& lengths, double p_eos,
                          at::Generator gen) {
  const char* fn = "mona::nn::append_eos_frame";
  detail::check_tensor(memory, fn, "memory", 3, "[B, T, D]");
  MONA_CHECK(p_eos >= 0.0 && p_eos <= 1.0, fn, ": p_eos must lie in [0, 1], got ", p_eos);
  const int64_t B = memory.size(0), T = memory.size(1), D = memory.size(2);
  at::Tensor lens = detail::check_lengths(lengths, fn, "lengths", B, T);
  if (!lens.defined()) lens = at::full({B}, T, at::kLong);
  const at::Tensor draw = gen.defined() ? at::rand({B}, gen, at::kDouble) : at::rand({B}, at::kDouble);
  EosBatch out;
  out.appended = draw < p_eos;
  out.memory = at::cat({memory, at::zeros({B, 1, D}, memory.options())}, 1);
  const auto* l = lens.data_ptr<int64_t>();
  const auto* a = out.appended.data_ptr<bool>();
  const at::Tensor frame = eos_frame(D, memory.options()).view({D});
  for (int64_t b = 0; b < B; ++b) {
    if (a[b]) out.memory.select(0, b).select(0, l[b]).copy_(frame);
  }
  out.lengths = lens + out.appended.to(at::kLong);
  return out;
}

// ---------------------------------------------------------------------------------------
// Modules

int64_t GmmHardState::touched() const {
  int64_t t = 0;
  for (const auto& c : cursors) t += c.touched;
  return t;
}

GmmAttention::GmmAttention(const AttentionOptions& options, bool source_aware,
                           core::GmmWindow window)
    : Attention(options), source_aware_(source_aware) {
  options_.validate("GmmAttention");
  window_.window = window;
  window_.radius = options_.gmm.window_radius;
  window_.width = options_.gmm.window_width;
  const int64_t H = options_.gmm.num_heads;
  query_proj = register_module("query_proj", torch::nn::Linear(options_.query_dim, 3 * H));
  {
    torch::NoGradGuard no_grad;
    query_proj->bias.narrow(0, 0, H).fill_(options_.gmm.init_step_bias);  // Delta = softplus(.)
    query_proj->bias.narrow(0, H, H).fill_(0.5);                  // variance about 1
  }
  position_energy = register_module(
      "position", std::make_shared<PositionEnergy>(options_.memory_dim, H, source_aware_));
  reseed_noise(options_.seed);
}

at::Tensor GmmAttention::initial_state(const Memory& memory) const {
  return torch::zeros({memory.batch(), options_.gmm.num_heads}, memory.values.options());
}

GmmAttention::Params GmmAttention::params(const at::Tensor& queries) { return params_of(query_proj(queries)); }

GmmAttention::Params GmmAttention::params_of(const at::Tensor& raw) const {
  const int64_t H = options_.gmm.num_heads;
  Params p;
  p.step = torch::nn::functional::softplus(raw.narrow(-1, 0, H));
  if (options_.gmm.max_step > 0) p.step = torch::clamp(p.step, 0.0, options_.gmm.max_step);
  p.variance = torch::nn::functional::softplus(raw.narrow(-1, H, H)) + options_.gmm.min_variance;
  if (options_.gmm.max_variance > 0) p.variance = torch::clamp_max(p.variance, options_.gmm.max_variance);
  p.weights = torch::softmax(raw.narrow(-1, 2 * H, H), -1);
  return p;
}

std::pair<at::Tensor, at::Tensor> GmmAttention::positions(const Memory& memory) const {
  const int64_t B = memory.batch(), T = memory.in_len(), H = options_.gmm.num_heads;
  if (!source_aware_) {
    const auto o = memory.values.options();
    return {default_positions(T, o).view({1, 1, T}).expand({B, H, T}),
            at::ones({B, H, T}, o)};
  }
  const at::Tensor delta = torch::sigmoid(memory.keys).permute({0, 2, 1});  // [B, H, T]
  return {torch::cumsum(delta, -1), delta};
}

GmmAttention::FoldedPositions GmmAttention::folded_positions(const Memory& memory) const {
  const int64_t B = memory.batch(), H = options_.gmm.num_heads, T = memory.in_len();
  auto [nu, delta] = positions(memory);
  FoldedPositions f;
  f.nu = nu.reshape({B * H, T});
  f.delta = delta.reshape({B * H, T});
  if (memory.lengths.defined()) f.in_lens = memory.lengths.repeat_interleave(H);
  return f;
}

at::Tensor GmmAttention::weights_of(const at::Tensor& mu, const at::Tensor& variance, const at::Tensor& weights,
                                    const FoldedPositions& positions, const at::Tensor& out_lengths) {
  const int64_t B = mu.size(0), U = mu.size(1), H = mu.size(2), T = positions.nu.size(1);
  auto fold = [&](const at::Tensor& x) {  // [B, U, H] -> [B*H, U, 1]
    return x.permute({0, 2, 1}).reshape({B * H, U, 1});
  };
  at::Tensor ol = out_lengths.defined() ? out_lengths.repeat_interleave(H) : at::Tensor();
  const at::Tensor alpha = gmm_attention_weights(fold(mu), fold(variance), fold(weights), positions.nu,
                                                 positions.delta, window_, positions.in_lens, ol);
  return alpha.view({B, H, U, T}).sum(1);
}

namespace {

// What GmmAttention::unroll's steps share (GmmAttention::share_steps).
struct GmmSharedSteps : SharedSteps {
  GmmSharedSteps(UnrolledLinear projection, GmmAttention::FoldedPositions folded)
      : query_proj(std::move(projection)), positions(std::move(folded)) {}
  UnrolledLinear query_proj;
  GmmAttention::FoldedPositions positions;
};

}  // namespace

std::unique_ptr<SharedSteps> GmmAttention::share_steps(const Memory& memory, int64_t steps) {
  return std::make_unique<GmmSharedSteps>(UnrolledLinear(query_proj->weight, query_proj->bias, memory.batch(), steps),
                                          folded_positions(memory));
}

StepOutput GmmAttention::step_with(SharedSteps* shared, const at::Tensor& query, const Memory& memory,
                              const at::Tensor& state) {
  const char* fn = "GmmAttention::step";
  detail::check_tensor(query, fn, "query", 2, "[B, Dq]");
  MONA_CHECK(query.size(0) == memory.batch() && query.size(1) == options_.query_dim, fn,
              ": query: expected [B, Dq] = [", memory.batch(), ", ", options_.query_dim,
              "], got ", query.sizes());
  detail::check_memory_dtype(query, memory.values, fn, "query");
  detail::check_tensor(state, fn, "state", 2, "[B, H]");
  MONA_CHECK(state.size(0) == memory.batch() && state.size(1) == options_.gmm.num_heads, fn,
              ": state: expected mu of the previous step [B, H] = [", memory.batch(), ", ",
              options_.gmm.num_heads, "], got ", state.sizes());
  detail::check_memory_dtype(state, memory.values, fn, "state");
  // Within unroll(): the query projection's step and the positions that the steps share.
  auto* unrolled = static_cast<GmmSharedSteps*>(shared);  // made by share_steps
  const Params p = params_of(unrolled ? unrolled->query_proj.step(query).unsqueeze(1) : query_proj(query.unsqueeze(1)));
  const at::Tensor mu = state.unsqueeze(1) + p.step;  // [B, 1, H]
  StepOutput out;
  out.weights =
      weights_of(mu, p.variance, p.weights, unrolled ? unrolled->positions : folded_positions(memory), {}).squeeze(1);
  out.context = attention_context(out.weights, memory.values);
  out.state = mu.squeeze(1);
  return out;
}

SequenceOutput GmmAttention::forward(const at::Tensor& queries, const Memory& memory,
                                     const at::Tensor& out_lengths) {
  const char* fn = "GmmAttention::forward";
  detail::check_tensor(queries, fn, "queries", 3, "[B, U, Dq]");
  MONA_CHECK(queries.size(0) == memory.batch() && queries.size(2) == options_.query_dim, fn,
              ": queries: expected [B, U, Dq] = [", memory.batch(), ", U, ",
              options_.query_dim, "], got ", queries.sizes());
  detail::check_memory_dtype(queries, memory.values, fn, "queries");
  const at::Tensor ol =
      detail::check_lengths(out_lengths, fn, "out_lengths", queries.size(0), queries.size(1));
  const Params p = params(queries);
  const at::Tensor mu = torch::cumsum(p.step, 1);  // eq. 5 with mu(-1) = 0
  SequenceOutput out;
  out.weights = weights_of(mu, p.variance, p.weights, folded_positions(memory), ol);
  out.alignment = out.weights;
  out.contexts = torch::bmm(out.weights, memory.values);
  return out;
}

void GmmAttention::hard_step_into(const at::Tensor& query, const OnlineMemory& memory,
                                  HardState& state, HardStepOutput& out) {
  // Copy the per-hypothesis part (the positions are shared), step the copy, publish it as
  // a new immutable extension: copies of `state` made before this call are unaffected.
  std::shared_ptr<GmmHardState> next;
  if (state.extension) {
    const auto* cur = dynamic_cast<const GmmHardState*>(state.extension.get());
    MONA_CHECK(cur != nullptr,
                "GmmAttention::hard_step: HardState::extension holds another mechanism's "
                "state; start GMM decoding from a default HardState");
    next = std::make_shared<GmmHardState>(*cur);
  } else {
    next = std::make_shared<GmmHardState>();
  }
  HardStepOutput step = hard_step(query, memory, *next);
  if (step.status != core::ScanStatus::kNeedMoreInput) state.t = step.index;
  state.extension = std::move(next);
  if (step.status == core::ScanStatus::kNeedMoreInput) {  // keep out's tensors, as documented
    step.context = std::move(out.context);
    step.weights = std::move(out.weights);
  }
  out = std::move(step);
}

int64_t GmmAttention::first_needed(const HardState& state) const {
  if (!state.extension) return 0;
  const auto* s = dynamic_cast<const GmmHardState*>(state.extension.get());
  if (s == nullptr || s->cursors.empty()) return 0;
  if (window_.window == core::GmmWindow::kFixed) {
    int64_t gamma = s->cursors[0].gamma;
    for (const auto& c : s->cursors) gamma = std::min(gamma, c.gamma);
    return std::max<int64_t>(0, gamma - core::gmm_fixed_half_width(window_.width));
  }
  if (window_.window != core::GmmWindow::kAdaptive || options_.gmm.max_variance <= 0 || !s->positions) return 0;
  // Every later step's window lies above mu - r sqrt(v) >= mu_{last} - r sqrt(max_variance)
  // (mu never decreases, eq. 5): the first entry whose position exceeds that, less one
  // entry of slack for the rounding of the window bounds, is the first one still readable.
  int64_t first = std::numeric_limits<int64_t>::max();
  for (size_t h = 0; h < s->mu.size(); ++h) {
    const std::vector<double>& nu = s->positions->nu[h];
    const double lo = s->mu[h] - window_.radius * std::sqrt(options_.gmm.max_variance);
    const auto above = std::upper_bound(nu.begin(), nu.begin() + std::min<int64_t>(s->frames, nu.size()), lo);
    first = std::min<int64_t>(first, std::max<int64_t>(0, (above - nu.begin()) - 1));
  }
  return first == std::numeric_limits<int64_t>::max() ? 0 : first;
}

HardStepOutput GmmAttention::hard_step(const at::Tensor& query, const OnlineMemory& memory,
                                       GmmHardState& state) {
  const char* fn = "GmmAttention::hard_step";
  MONA_CHECK(query.defined() && query.device().is_cpu(), fn,
              ": query: expected a defined CPU tensor");
  MONA_CHECK(query.numel() == options_.query_dim, fn, ": query: expected Dq = ",
              options_.query_dim, " values, got ", query.sizes());
  check_dtype(query, fn, "query");
  torch::NoGradGuard no_grad;
  const int64_t H = options_.gmm.num_heads, n = memory.size();
  if (state.cursors.empty()) {
    state.mu.assign(H, 0.0);
    state.cursors.assign(H, core::GmmCursor());
    state.done.assign(H, 0);
    state.begin.assign(H, 0);
    state.end.assign(H, 0);
    state.window_weights.assign(H, {});
  }
  MONA_CHECK(static_cast<int64_t>(state.mu.size()) == H, fn, ": state has ", state.mu.size(),
              " heads, the module ", H, "; start from a fresh GmmHardState");
  MONA_CHECK(n >= state.frames, fn, ": the memory has ", n, " frames, fewer than the ",
              state.frames, " this state has seen (memory reset?); start from a fresh state");
  if (!state.positions) {
    state.positions = std::make_shared<GmmPositions>();
    state.positions->nu.assign(H, {});
    state.positions->delta.assign(H, {});
  }
  GmmPositions& pos = *state.positions;
  MONA_CHECK(pos.frames <= n, fn, ": the state's shared positions cover ", pos.frames,
              " frames but the memory has ", n,
              " (a state of another stream or utterance?); start from a fresh state");
  // Positions of frames no copy has computed yet (running sum of delta), appended to the
  // shared positions: O(new frames) per call, and each frame is computed once per stream.
  if (n > pos.frames) {
    at::Tensor logits;
    // SAGMM's positions are a running sum over every entry's key: entries released before
    // this state's positions reached them cannot be summed.
    MONA_CHECK(!source_aware_ || pos.frames >= memory.first(), fn, ": the memory released entries before ",
               memory.first(), " whose positions this state has not computed (it has ", pos.frames,
               "); release only before Attention::first_needed");
    if (source_aware_) {
      logits = memory.keys().narrow(0, pos.frames - memory.first(), n - pos.frames).to(at::kDouble).contiguous();
    }
    for (int64_t h = 0; h < H; ++h) {
      auto& nu = pos.nu[h];
      auto& de = pos.delta[h];
      double sum = nu.empty() ? 0.0 : nu.back();
      for (int64_t j = pos.frames; j < n; ++j) {
        double d = 1.0;
        if (source_aware_) {
          d = 1.0 / (1.0 + std::exp(-logits.data_ptr<double>()[(j - pos.frames) * H + h]));
        }
        de.push_back(d);
        nu.push_back(source_aware_ ? (sum += d) : default_position(j));
      }
    }
    pos.frames = n;
  }
  state.frames = n;
  const Params p = params(query.reshape({1, 1, options_.query_dim}));
  const at::Tensor steps = p.step.reshape({H}).to(at::kDouble).contiguous();
  const at::Tensor var = p.variance.reshape({H}).to(at::kDouble).contiguous();
  const at::Tensor mix = p.weights.reshape({H}).to(at::kDouble).contiguous();
  HardStepOutput out;
  // Scratch for one head's window weights; gmm_online_step wants room for n values. Kept
  // per thread and only grown, so a step costs no O(n) allocation or fill.
  thread_local std::vector<double> buf;
  if (buf.size() < static_cast<size_t>(std::max<int64_t>(n, 1))) {
    buf.resize(static_cast<size_t>(std::max<int64_t>({n, 2 * static_cast<int64_t>(buf.size()), 16})));
  }
  bool all = true;
  for (int64_t h = 0; h < H; ++h) {
    if (state.done[h]) continue;
    const double mu = state.mu[h] + steps.data_ptr<double>()[h];
    const auto r = core::gmm_online_step(mu, var.data_ptr<double>()[h], pos.nu[h].data(),
                                         pos.delta[h].data(), n, memory.finished(),
                                         window_, state.cursors[h], buf.data());
    out.monotonic_energies += r.touched;
    if (r.status == core::ScanStatus::kChose) {
      state.done[h] = 1;
      state.begin[h] = r.begin;
      state.end[h] = r.end;
      state.window_weights[h].assign(buf.begin(), buf.begin() + (r.end - r.begin));
    } else {
      all = false;
    }
  }
  if (!all) {
    out.status = core::ScanStatus::kNeedMoreInput;
    return out;
  }
  // Every head emitted: mix the windows, form the context, advance mu.
  int64_t begin = n, end = 0;
  for (int64_t h = 0; h < H; ++h) {
    if (state.end[h] > state.begin[h]) {
      begin = std::min(begin, state.begin[h]);
      end = std::max(end, state.end[h]);
    }
  }
  // Every window empty with every mean past the last position of a finished input: the
  // attention ran off the end of the memory (kExhausted below). An empty window with a mean
  // inside the memory (between two positions) stays kChose.
  bool past_the_end = end <= begin && memory.finished();
  if (end <= begin) begin = end = 0;
  MONA_CHECK(end <= begin || begin >= memory.first(), fn, ": the window reads memory entry ", begin,
             ", released already (the memory holds entries from ", memory.first(), " on)");
  const at::Tensor values = memory.values();
  const auto vopt = n > 0 ? values.options() : query.options();
  at::Tensor w = torch::zeros({end - begin}, at::kDouble);
  double* wp = w.data_ptr<double>();
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t j = state.begin[h]; j < state.end[h]; ++j) {
      wp[j - begin] += mix.data_ptr<double>()[h] * state.window_weights[h][j - state.begin[h]];
    }
    state.mu[h] += steps.data_ptr<double>()[h];
    state.done[h] = 0;
    past_the_end = past_the_end && (n == 0 || state.mu[h] > pos.nu[h][static_cast<size_t>(n - 1)]);
  }
  out.status = past_the_end ? core::ScanStatus::kExhausted : core::ScanStatus::kChose;
  out.weights = w.to(vopt.dtype());
  out.begin = begin;
  out.index = end - 1;
  out.context = end > begin ? torch::matmul(out.weights, values.narrow(0, begin - memory.first(), end - begin))
                            : torch::zeros({options_.memory_dim}, vopt);
  return out;
}

}  // namespace mona::nn
