// Autograd functions over the Poisson-binomial / conditional Bernoulli kernels; see
// include/mona/nn/conditional_bernoulli.h.
#include "mona/nn/conditional_bernoulli.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "check.h"
#include "mona/core/cb_marginal.h"
#include "mona/core/conditional_bernoulli.h"
#include "mona/core/poisson_binomial.h"
#include "mona/core/error.h"

namespace mona::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Non-differentiable companions of a call (LibTorch 1.13's custom functions cannot take
// undefined tensors, so optional lengths travel in a plain struct).
struct CbArgs {
  at::Tensor in_lens;   // [B] int64 or undefined
  at::Tensor k;         // [B] int64 (number of highs / labels)
  at::Tensor aux;       // b (IDB/BB, as logits dtype) or order (DB, int64)
};

void save_args(AutogradContext* ctx, const CbArgs& a) {
  detail::keep_for_backward(ctx, "in_lens", a.in_lens);
  detail::keep_for_backward(ctx, "k", a.k);
  detail::keep_for_backward(ctx, "aux", a.aux);
}

CbArgs load_args(AutogradContext* ctx, const char* fn) {
  return {detail::kept_for_backward(ctx, "in_lens", fn), detail::kept_for_backward(ctx, "k", fn),
          detail::kept_for_backward(ctx, "aux", fn)};
}

int64_t max_of(const at::Tensor& k) {
  return k.numel() == 0 ? 0 : k.max().item<int64_t>();
}

// The CB grid: batch B, in_len T, out_len K = max k, out_lens = k.
core::Grid cb_grid(const at::Tensor& logits, const CbArgs& a) {
  core::Grid g;
  g.batch = logits.size(0);
  g.in_len = logits.size(1);
  g.out_len = max_of(a.k);
  g.in_lens = detail::ptr_or_null(a.in_lens);
  g.out_lens = a.k.data_ptr<int64_t>();
  return g;
}

at::Tensor build_table(const at::Tensor& logits, const core::Grid& g) {
  at::Tensor table = at::empty({g.batch, g.in_len + 1, g.out_len + 1}, logits.options());
  AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "cb_table", [&] {
    core::cb_table(logits.data_ptr<scalar_t>(), table.data_ptr<scalar_t>(), g);
  });
  return table;
}

// ---------------------------------------------------------------------------------------
struct PoissonBinomialFn : torch::autograd::Function<PoissonBinomialFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor logits, CbArgs a) {
    const int64_t B = logits.size(0), T = logits.size(1);
    at::Tensor out = at::empty({B}, logits.options());
    AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "poisson_binomial_log_prob", [&] {
      core::poisson_binomial_log_prob(logits.data_ptr<scalar_t>(), a.k.data_ptr<int64_t>(),
                                      out.data_ptr<scalar_t>(), B, T,
                                      detail::ptr_or_null(a.in_lens));
    });
    ctx->save_for_backward({logits});
    save_args(ctx, a);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    detail::check_first_order("mona::nn::poisson_binomial_log_prob", saved, grads);
    const at::Tensor& logits = saved[0];
    const CbArgs a = load_args(ctx, "mona::nn::poisson_binomial_log_prob");
    const at::Tensor g = grads[0].contiguous();
    at::Tensor gx = at::empty_like(logits);
    AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "poisson_binomial_log_prob_backward", [&] {
      core::poisson_binomial_log_prob_backward(
          g.data_ptr<scalar_t>(), logits.data_ptr<scalar_t>(), a.k.data_ptr<int64_t>(),
          gx.data_ptr<scalar_t>(), logits.size(0), logits.size(1),
          detail::ptr_or_null(a.in_lens));
    });
    return {gx, at::Tensor()};
  }
};

struct CbLogProbFn : torch::autograd::Function<CbLogProbFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor logits, CbArgs a) {
    const auto g = cb_grid(logits, a);
    const at::Tensor table = build_table(logits, g);
    at::Tensor out = at::empty({g.batch}, logits.options());
    AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "cb_log_prob", [&] {
      core::cb_log_prob(logits.data_ptr<scalar_t>(), a.aux.data_ptr<scalar_t>(),
                        table.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), g);
    });
    ctx->save_for_backward({logits, table});
    save_args(ctx, a);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    detail::check_first_order("mona::nn::cb_log_prob", saved, grads);
    const at::Tensor &logits = saved[0], &table = saved[1];
    const CbArgs a = load_args(ctx, "mona::nn::cb_log_prob");
    const auto g = cb_grid(logits, a);
    const at::Tensor go = grads[0].contiguous();
    at::Tensor gx = at::empty_like(logits);
    AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "cb_log_prob_backward", [&] {
      core::cb_log_prob_backward(go.data_ptr<scalar_t>(), logits.data_ptr<scalar_t>(),
                                 a.aux.data_ptr<scalar_t>(), table.data_ptr<scalar_t>(),
                                 gx.data_ptr<scalar_t>(), g);
    });
    return {gx, at::Tensor()};
  }
};

struct CbTableFn : torch::autograd::Function<CbTableFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor logits, CbArgs a) {
    const auto g = cb_grid(logits, a);
    at::Tensor table = build_table(logits, g);
    ctx->save_for_backward({logits, table});
    save_args(ctx, a);
    return table;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    detail::check_first_order("mona::nn::cb_log_table", saved, grads);
    const at::Tensor &logits = saved[0], &table = saved[1];
    const CbArgs a = load_args(ctx, "mona::nn::cb_log_table");
    const auto g = cb_grid(logits, a);
    // Entries at -inf (infeasible) carry no gradient (and 0 there keeps NaN * 0 out of the
    // adjoint); every other seed reaches the kernel, which refuses a non-finite one.
    const at::Tensor gt = grads[0].masked_fill(at::isinf(table), 0.0).contiguous();
    at::Tensor gx = at::empty_like(logits);
    AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "cb_table_backward", [&] {
      core::cb_table_backward(gt.data_ptr<scalar_t>(), logits.data_ptr<scalar_t>(),
                              table.data_ptr<scalar_t>(), gx.data_ptr<scalar_t>(), g);
    });
    return {gx, at::Tensor()};
  }
};

enum class StepKind { kIdb, kBb, kDb };

// The public function whose node a StepFn<kKind> is (for its messages).
template <StepKind kKind>
constexpr const char* kStepFnName = kKind == StepKind::kIdb  ? "mona::nn::cb_idb_step_log_probs"
                                    : kKind == StepKind::kBb ? "mona::nn::cb_bb_step_log_probs"
                                                             : "mona::nn::cb_db_step_log_probs";

template <StepKind kKind>
struct StepFn : torch::autograd::Function<StepFn<kKind>> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor logits, CbArgs a) {
    const auto g = cb_grid(logits, a);
    const int64_t width = kKind == StepKind::kIdb ? g.in_len : g.out_len;
    at::Tensor out = at::empty({g.batch, width}, logits.options());
    at::Tensor table;
    if (kKind != StepKind::kDb) table = build_table(logits, g);
    AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "cb_step_log_probs", [&] {
      if constexpr (kKind == StepKind::kIdb) {
        core::cb_idb_step_log_probs(logits.data_ptr<scalar_t>(), a.aux.data_ptr<scalar_t>(),
                                    table.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), g);
      } else if constexpr (kKind == StepKind::kBb) {
        core::cb_bb_step_log_probs(logits.data_ptr<scalar_t>(), a.aux.data_ptr<scalar_t>(),
                                   table.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), g);
      } else {
        core::cb_db_step_log_probs(logits.data_ptr<scalar_t>(), a.aux.data_ptr<int64_t>(),
                                   out.data_ptr<scalar_t>(), g);
      }
    });
    if (table.defined()) {
      ctx->save_for_backward({logits, table});
    } else {
      ctx->save_for_backward({logits});
    }
    save_args(ctx, a);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    detail::check_first_order(kStepFnName<kKind>, saved, grads);
    const at::Tensor& logits = saved[0];
    const CbArgs a = load_args(ctx, kStepFnName<kKind>);
    const auto g = cb_grid(logits, a);
    const at::Tensor go = grads[0].contiguous();
    at::Tensor gx = at::empty_like(logits);
    AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "cb_step_log_probs_backward", [&] {
      if constexpr (kKind == StepKind::kIdb) {
        core::cb_idb_step_log_probs_backward(
            go.data_ptr<scalar_t>(), logits.data_ptr<scalar_t>(), a.aux.data_ptr<scalar_t>(),
            saved[1].data_ptr<scalar_t>(), gx.data_ptr<scalar_t>(), g);
      } else if constexpr (kKind == StepKind::kBb) {
        core::cb_bb_step_log_probs_backward(
            go.data_ptr<scalar_t>(), logits.data_ptr<scalar_t>(), a.aux.data_ptr<scalar_t>(),
            saved[1].data_ptr<scalar_t>(), gx.data_ptr<scalar_t>(), g);
      } else {
        core::cb_db_step_log_probs_backward(go.data_ptr<scalar_t>(),
                                            logits.data_ptr<scalar_t>(),
                                            a.aux.data_ptr<int64_t>(), gx.data_ptr<scalar_t>(), g);
      }
    });
    return {gx, at::Tensor()};
  }
};

struct MarginalFn : torch::autograd::Function<MarginalFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor logits, at::Tensor log_emit,
                            CbArgs a) {
    const auto g = detail::make_grid(logits.size(0), log_emit.size(1), logits.size(1),
                                     a.in_lens, a.k);
    at::Tensor out = at::empty({g.batch}, logits.options());
    AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "cb_marginal_log_likelihood", [&] {
      core::cb_marginal_log_likelihood(logits.data_ptr<scalar_t>(),
                                       log_emit.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), g);
    });
    ctx->save_for_backward({logits, log_emit});
    save_args(ctx, a);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    detail::check_first_order("mona::nn::cb_marginal_log_likelihood", saved, grads);
    const at::Tensor &logits = saved[0], &log_emit = saved[1];
    const CbArgs a = load_args(ctx, "mona::nn::cb_marginal_log_likelihood");
    const auto g = detail::make_grid(logits.size(0), log_emit.size(1), logits.size(1),
                                     a.in_lens, a.k);
    const at::Tensor go = grads[0].contiguous();
    at::Tensor gx = at::empty_like(logits), ge = at::empty_like(log_emit);
    AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "cb_marginal_log_likelihood_backward", [&] {
      core::cb_marginal_log_likelihood_backward(
          go.data_ptr<scalar_t>(), logits.data_ptr<scalar_t>(), log_emit.data_ptr<scalar_t>(),
          gx.data_ptr<scalar_t>(), ge.data_ptr<scalar_t>(), g);
    });
    return {gx, ge, at::Tensor()};
  }
};

// ---- argument checks -------------------------------------------------------------------

// k [B] integer CPU, 0 <= k[b] <= T_b. Returns contiguous int64.
at::Tensor check_k(const at::Tensor& k, const char* fn, const char* name, int64_t batch,
                   int64_t T, const at::Tensor& in_lens) {
  MONA_CHECK(k.defined(), fn, ": ", name, " must be a defined tensor");
  MONA_CHECK(k.device().is_cpu(), fn, ": ", name, ": expected a CPU tensor, got device ",
              k.device());
  MONA_CHECK(k.dim() == 1 && k.size(0) == batch, fn, ": ", name, ": expected shape [B] = [",
              batch, "], got ", k.sizes());
  MONA_CHECK(k.scalar_type() == at::kLong || k.scalar_type() == at::kInt, fn, ": ", name,
              ": expected an integer dtype (int64), got ", k.scalar_type());
  at::Tensor kk = k.to(at::kLong).contiguous();
  const int64_t* v = kk.data_ptr<int64_t>();
  const int64_t* il = detail::ptr_or_null(in_lens);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = il ? il[b] : T;
    MONA_CHECK(v[b] >= 0, fn, ": ", name, "[", b, "] must be >= 0, got ", v[b]);
    MONA_CHECK(v[b] <= n, fn, ": ", name, "[", b, "] must be <= ", (il ? "in_lens" : "T"),
                (il ? "[" + std::to_string(b) + "]" : std::string()), " = ", n,
                " (cannot have more highs than trials), got ", v[b]);
  }
  return kk;
}

// b [B, T] like logits, values 0/1 in the valid region; returns (b contiguous, k = sum b).
std::pair<at::Tensor, at::Tensor> check_b(const at::Tensor& b, const at::Tensor& logits,
                                          const char* fn, const at::Tensor& in_lens) {
  detail::check_tensor(b, fn, "b", 2, "[B, T]");
  detail::check_like(b, logits, fn, "b", "logits");
  at::Tensor bc = b.detach().contiguous();
  if (in_lens.defined()) {  // padding must not count (a where, so that a NaN there does not either)
    const at::Tensor mask = at::arange(logits.size(1), in_lens.options()).unsqueeze(0) <
                            in_lens.unsqueeze(1);
    bc = at::where(mask, bc, at::zeros({}, bc.options()));
  }
  const at::Tensor bad = ((bc != 0) & (bc != 1)).nonzero();  // [n, 2]: (b, t) of each
  if (bad.size(0) > 0) {
    const int64_t row = bad[0][0].item<int64_t>(), t = bad[0][1].item<int64_t>();
    MONA_CHECK(false, fn, ": b: expected values in {0, 1}, got ", bc[row][t].item<double>(), " at [", row, ", ", t,
               "]");
  }
  return {bc, bc.sum(1).round().to(at::kLong).contiguous()};
}

struct Checked {
  at::Tensor logits, in_lens, k;
};

// Logits [B, T] finite within each row's length `in_lens` (all T when undefined), named
// by the public function `fn`; the kernels check them too, but name themselves.
void check_finite_logits(const at::Tensor& logits, const at::Tensor& in_lens, const char* fn) {
  const at::Tensor x = logits.contiguous();
  const int64_t B = x.size(0), T = x.size(1);
  const int64_t* lens = detail::ptr_or_null(in_lens);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "check_finite_logits", [&] {
    const scalar_t* p = x.data_ptr<scalar_t>();
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = lens ? lens[b] : T;
      for (int64_t t = 0; t < n; ++t) {
        MONA_CHECK(std::isfinite(p[b * T + t]), fn, ": logits: expected finite values, got ",
                   static_cast<double>(p[b * T + t]), " at [", b, ", ", t, "]");
      }
    }
  });
}

Checked check_logits_k(const at::Tensor& logits, const at::Tensor& k, const at::Tensor& in_lens,
                       const char* fn) {
  detail::check_tensor(logits, fn, "logits", 2, "[B, T]");
  const int64_t B = logits.size(0), T = logits.size(1);
  const at::Tensor il = detail::check_lengths(in_lens, fn, "in_lens", B, T);
  check_finite_logits(logits, il, fn);
  return {logits.contiguous(), il, check_k(k, fn, "k", B, T, il)};
}

}  // namespace

at::Tensor poisson_binomial_log_prob(const at::Tensor& logits, const at::Tensor& k,
                                     const at::Tensor& in_lens) {
  const auto c = check_logits_k(logits, k, in_lens, "mona::nn::poisson_binomial_log_prob");
  return PoissonBinomialFn::apply(c.logits, CbArgs{c.in_lens, c.k, {}});
}

at::Tensor cb_log_prob(const at::Tensor& logits, const at::Tensor& b,
                       const at::Tensor& in_lens) {
  const char* fn = "mona::nn::cb_log_prob";
  detail::check_tensor(logits, fn, "logits", 2, "[B, T]");
  const at::Tensor il =
      detail::check_lengths(in_lens, fn, "in_lens", logits.size(0), logits.size(1));
  check_finite_logits(logits, il, fn);
  auto [bc, k] = check_b(b, logits, fn, il);
  return CbLogProbFn::apply(logits.contiguous(), CbArgs{il, k, bc});
}

at::Tensor cb_log_table(const at::Tensor& logits, const at::Tensor& k,
                        const at::Tensor& in_lens) {
  const auto c = check_logits_k(logits, k, in_lens, "mona::nn::cb_log_table");
  return CbTableFn::apply(c.logits, CbArgs{c.in_lens, c.k, {}});
}

at::Tensor cb_marginals(const at::Tensor& logits, const at::Tensor& k,
                        const at::Tensor& in_lens) {
  const auto c = check_logits_k(logits, k, in_lens, "mona::nn::cb_marginals");
  const at::Tensor x = c.logits.detach();
  const CbArgs a{c.in_lens, c.k, {}};
  const auto g = cb_grid(x, a);
  const at::Tensor table = build_table(x, g);
  at::Tensor m = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "cb_marginals", [&] {
    core::cb_marginals(x.data_ptr<scalar_t>(), table.data_ptr<scalar_t>(),
                       m.data_ptr<scalar_t>(), g);
  });
  return m;
}

at::Tensor cb_idb_step_log_probs(const at::Tensor& logits, const at::Tensor& b,
                                 const at::Tensor& in_lens) {
  const char* fn = "mona::nn::cb_idb_step_log_probs";
  detail::check_tensor(logits, fn, "logits", 2, "[B, T]");
  const at::Tensor il =
      detail::check_lengths(in_lens, fn, "in_lens", logits.size(0), logits.size(1));
  check_finite_logits(logits, il, fn);
  auto [bc, k] = check_b(b, logits, fn, il);
  return StepFn<StepKind::kIdb>::apply(logits.contiguous(), CbArgs{il, k, bc});
}

at::Tensor cb_bb_step_log_probs(const at::Tensor& logits, const at::Tensor& b,
                                const at::Tensor& in_lens) {
  const char* fn = "mona::nn::cb_bb_step_log_probs";
  detail::check_tensor(logits, fn, "logits", 2, "[B, T]");
  const at::Tensor il =
      detail::check_lengths(in_lens, fn, "in_lens", logits.size(0), logits.size(1));
  check_finite_logits(logits, il, fn);
  auto [bc, k] = check_b(b, logits, fn, il);
  return StepFn<StepKind::kBb>::apply(logits.contiguous(), CbArgs{il, k, bc});
}

at::Tensor cb_db_step_log_probs(const at::Tensor& logits, const at::Tensor& order,
                                const at::Tensor& k, const at::Tensor& in_lens) {
  const char* fn = "mona::nn::cb_db_step_log_probs";
  const auto c = check_logits_k(logits, k, in_lens, fn);
  const int64_t K = max_of(c.k);
  MONA_CHECK(order.defined(), fn, ": order: expected a defined int64 CPU tensor");
  MONA_CHECK(order.device().is_cpu() && order.scalar_type() == at::kLong, fn,
             ": order: expected a defined int64 CPU tensor, got ", order.scalar_type(), " on ", order.device());
  MONA_CHECK(order.dim() == 2 && order.size(0) == logits.size(0) && order.size(1) == K, fn,
              ": order: expected sizes [B, K] = [", logits.size(0), ", ", K,
              "] (K = max k), got ", order.sizes());
  return StepFn<StepKind::kDb>::apply(c.logits, CbArgs{c.in_lens, c.k, order.contiguous()});
}

CbSample cb_sample_idb(const at::Tensor& logits, const at::Tensor& k, core::Rng& rng,
                       const at::Tensor& in_lens) {
  const auto c = check_logits_k(logits, k, in_lens, "mona::nn::cb_sample_idb");
  const at::Tensor x = c.logits.detach();
  const CbArgs a{c.in_lens, c.k, {}};
  const auto g = cb_grid(x, a);
  const at::Tensor table = build_table(x, g);
  at::Tensor b = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "cb_sample_idb", [&] {
    core::cb_sample_idb(x.data_ptr<scalar_t>(), table.data_ptr<scalar_t>(), rng,
                        b.data_ptr<scalar_t>(), static_cast<scalar_t*>(nullptr), g);
  });
  CbSample s;
  s.b = b;
  s.step_log_probs = StepFn<StepKind::kIdb>::apply(c.logits, CbArgs{c.in_lens, c.k, b});
  return s;
}

CbSample cb_sample_bb(const at::Tensor& logits, const at::Tensor& k, core::Rng& rng,
                      const at::Tensor& in_lens) {
  const auto c = check_logits_k(logits, k, in_lens, "mona::nn::cb_sample_bb");
  const at::Tensor x = c.logits.detach();
  const CbArgs a{c.in_lens, c.k, {}};
  const auto g = cb_grid(x, a);
  const at::Tensor table = build_table(x, g);
  at::Tensor b = at::empty_like(x);
  at::Tensor pos = at::empty({g.batch, g.out_len}, x.options().dtype(at::kLong));
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "cb_sample_bb", [&] {
    core::cb_sample_bb(x.data_ptr<scalar_t>(), table.data_ptr<scalar_t>(), rng,
                       b.data_ptr<scalar_t>(), pos.data_ptr<int64_t>(),
                       static_cast<scalar_t*>(nullptr), g);
  });
  CbSample s;
  s.b = b;
  s.positions = pos;
  s.step_log_probs = StepFn<StepKind::kBb>::apply(c.logits, CbArgs{c.in_lens, c.k, b});
  return s;
}

CbSample cb_sample_db(const at::Tensor& logits, const at::Tensor& k, core::Rng& rng,
                      const at::Tensor& in_lens) {
  const auto c = check_logits_k(logits, k, in_lens, "mona::nn::cb_sample_db");
  const at::Tensor x = c.logits.detach();
  const CbArgs a{c.in_lens, c.k, {}};
  const auto g = cb_grid(x, a);
  const at::Tensor table = build_table(x, g);
  at::Tensor b = at::empty_like(x);
  at::Tensor order = at::empty({g.batch, g.out_len}, x.options().dtype(at::kLong));
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "cb_sample_db", [&] {
    core::cb_sample_db(x.data_ptr<scalar_t>(), table.data_ptr<scalar_t>(), rng,
                       b.data_ptr<scalar_t>(), order.data_ptr<int64_t>(),
                       static_cast<scalar_t*>(nullptr), g);
  });
  CbSample s;
  s.b = b;
  s.positions = order;
  s.step_log_probs = StepFn<StepKind::kDb>::apply(c.logits, CbArgs{c.in_lens, c.k, order});
  return s;
}

at::Tensor cb_marginal_log_likelihood(const at::Tensor& logits, const at::Tensor& log_emit,
                                      const at::Tensor& in_lens, const at::Tensor& out_lens) {
  const char* fn = "mona::nn::cb_marginal_log_likelihood";
  detail::check_tensor(logits, fn, "logits", 2, "[B, T]");
  detail::check_tensor(log_emit, fn, "log_emit", 3, "[B, U, T]");
  const int64_t B = logits.size(0), T = logits.size(1), U = log_emit.size(1);
  MONA_CHECK(log_emit.size(0) == B && log_emit.size(2) == T, fn,
              ": log_emit: expected sizes [B, U, T] with B = ", B, ", T = ", T,
              " (those of logits), got ", log_emit.sizes());
  MONA_CHECK(log_emit.scalar_type() == logits.scalar_type(), fn, ": log_emit: expected dtype ",
              logits.scalar_type(), " (that of logits), got ", log_emit.scalar_type());
  const at::Tensor il = detail::check_lengths(in_lens, fn, "in_lens", B, T);
  check_finite_logits(logits, il, fn);
  at::Tensor ol = detail::check_lengths(out_lens, fn, "out_lens", B, U);
  if (!ol.defined()) ol = at::full({B}, U, at::TensorOptions().dtype(at::kLong));
  const int64_t* l = ol.data_ptr<int64_t>();
  const int64_t* n = detail::ptr_or_null(il);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t nb = n ? n[b] : T;
    MONA_CHECK(l[b] <= nb, fn, ": out_lens[", b, "] = ", l[b],
                " (labels L) must be <= the number of frames ", nb,
                " (in_lens, default T): P(c) = 0");
  }
  return MarginalFn::apply(logits.contiguous(), log_emit.contiguous(), CbArgs{il, ol, {}});
}

}  // namespace mona::nn
