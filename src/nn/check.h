// Internal: the argument checks of the LibTorch adapters. One block per entry point,
// messages naming the function, the argument and the values found (mona::ArgumentError,
// MONA_CHECK).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mona/core/error.h"
#include "mona/core/grid.h"

namespace mona::nn::detail {

/// A defined CPU float32/float64 tensor of rank `dim` ("[B, U, T]" describes the dims).
inline void check_tensor(const at::Tensor& t, const char* fn, const char* name, int64_t dim,
                         const char* dims) {
  MONA_CHECK(t.defined(), fn, ": ", name, " must be a defined tensor");
  MONA_CHECK(t.device().is_cpu(), fn, ": ", name, ": expected a CPU tensor, got device ",
              t.device(), " (mona's kernels run on the CPU; call .cpu() explicitly)");
  MONA_CHECK(t.dim() == dim, fn, ": ", name, ": expected ", dim, " dims ", dims, ", got ",
              t.sizes());
  MONA_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble, fn, ": ", name,
              ": expected dtype float32 or float64, got ", t.scalar_type());
}

/// `t` has the dtype of a prepared memory's `values` (which prepare checked against the
/// module's parameters), so that a query or state of another dtype is named here, not by a
/// LibTorch kernel.
inline void check_memory_dtype(const at::Tensor& t, const at::Tensor& values, const char* fn, const char* name) {
  MONA_CHECK(!values.defined() || t.scalar_type() == values.scalar_type(), fn, ": ", name, ": expected dtype ",
             values.defined() ? values.scalar_type() : t.scalar_type(), " (that of the memory), got ", t.scalar_type());
}

/// `t` has the same sizes and dtype as `ref`.
inline void check_like(const at::Tensor& t, const at::Tensor& ref, const char* fn,
                       const char* name, const char* ref_name) {
  MONA_CHECK(t.sizes() == ref.sizes(), fn, ": ", name, ": expected sizes ", ref.sizes(),
              " (those of ", ref_name, "), got ", t.sizes());
  MONA_CHECK(t.scalar_type() == ref.scalar_type(), fn, ": ", name, ": expected dtype ",
              ref.scalar_type(), " (that of ", ref_name, "), got ", t.scalar_type());
}

/// `t` has sizes `sizes` (described by `dims`, e.g. "[B, U, T]") and the dtype of `ref`.
inline void check_sizes(const at::Tensor& t, at::IntArrayRef sizes, const at::Tensor& ref,
                        const char* fn, const char* name, const char* dims,
                        const char* ref_name) {
  MONA_CHECK(t.sizes() == sizes, fn, ": ", name, ": expected sizes ", dims, " = ", sizes,
              ", got ", t.sizes());
  MONA_CHECK(t.scalar_type() == ref.scalar_type(), fn, ": ", name, ": expected dtype ",
              ref.scalar_type(), " (that of ", ref_name, "), got ", t.scalar_type());
}

/// additive_energy's arguments (mona/nn/functional.h): query [B, U, d] (or [B, d], one step),
/// keys [B, T, d] and w [d], of one dtype.
inline void check_energy_args(const at::Tensor& query, const at::Tensor& keys,
                              const at::Tensor& w, const char* fn) {
  check_tensor(query, fn, "query", query.defined() && query.dim() == 2 ? 2 : 3, "[B, U, d]");
  check_tensor(keys, fn, "keys", 3, "[B, T, d]");
  check_tensor(w, fn, "w", 1, "[d]");
  const int64_t d = query.size(-1);
  MONA_CHECK(keys.size(0) == query.size(0) && keys.size(2) == d, fn,
             ": keys: expected sizes [B, T, d] with B = ", query.size(0), " and d = ",
             d, " (those of query), got ", keys.sizes());
  MONA_CHECK(w.size(0) == d, fn, ": w: expected sizes [d] = [", d,
             "], got ", w.sizes());
  MONA_CHECK(keys.scalar_type() == query.scalar_type(), fn, ": keys: expected dtype ",
             query.scalar_type(), " (that of query), got ", keys.scalar_type());
  MONA_CHECK(w.scalar_type() == query.scalar_type(), fn, ": w: expected dtype ",
             query.scalar_type(), " (that of query), got ", w.scalar_type());
}

/// attention_context's arguments (mona/nn/functional.h): weights [B, T] and values
/// [B, T, d], of one dtype.
inline void check_context_args(const at::Tensor& weights, const at::Tensor& values,
                               const char* fn) {
  check_tensor(weights, fn, "weights", 2, "[B, T]");
  check_tensor(values, fn, "values", 3, "[B, T, d]");
  MONA_CHECK(values.size(0) == weights.size(0) && values.size(1) == weights.size(1), fn,
             ": values: expected sizes [B, T, d] with [B, T] = [", weights.size(0), ", ",
             weights.size(1), "] (those of weights), got ", values.sizes());
  MONA_CHECK(values.scalar_type() == weights.scalar_type(), fn, ": values: expected dtype ",
             weights.scalar_type(), " (that of weights), got ", values.scalar_type());
}

/// mona's backward passes are first order: they compute the gradients with the core kernels
/// and record no graph. Differentiating through one (create_graph=True, which keeps grad
/// mode on while the backward pass runs) where a saved tensor or an incoming gradient
/// requires grad would return gradients silently missing the second-order terms, so it is
/// refused with c10::NotImplementedError (Python: NotImplementedError), as the backward
/// operators of torch.ops.mona are. `fn` names the function whose node it is.
inline void check_first_order(const char* fn, const std::vector<at::Tensor>& saved,
                              const std::vector<at::Tensor>& grads) {
  if (!at::GradMode::is_enabled()) return;
  auto any_requires_grad = [](const std::vector<at::Tensor>& ts) {
    for (const at::Tensor& t : ts) {
      if (t.defined() && t.requires_grad()) return true;
    }
    return false;
  };
  if (any_requires_grad(saved) || any_requires_grad(grads)) {
    C10_THROW_ERROR(NotImplementedError,
                    std::string(fn) + ": mona's backward passes are first order: double backward "
                    "(create_graph=True through this function) is not implemented");
  }
}

/// Keeps `t` for a node's backward pass under `key` in ctx->saved_data, with the version
/// counter it has now: for the arguments a node reads but does not differentiate (lengths,
/// counts, an order), which may be undefined, as save_for_backward's list may not. Keeps
/// nothing for an undefined tensor.
inline void keep_for_backward(torch::autograd::AutogradContext* ctx, const std::string& key, const at::Tensor& t) {
  if (!t.defined()) return;
  ctx->saved_data[key] = t;
  // An inference tensor has no version counter, and nothing outside inference mode can
  // change it in place.
  if (!t.is_inference()) ctx->saved_data[key + "@version"] = static_cast<int64_t>(t._version());
}

/// What keep_for_backward kept under `key`, or an undefined tensor when it kept none.
/// Throws mona::ArgumentError naming `fn` and `key` when the tensor was changed in place
/// after the forward pass (its version counter moved): the backward pass would read other
/// values than the forward pass did (autograd refuses its saved tensors the same way).
inline at::Tensor kept_for_backward(torch::autograd::AutogradContext* ctx, const std::string& key, const char* fn) {
  auto it = ctx->saved_data.find(key);
  if (it == ctx->saved_data.end()) return {};
  at::Tensor t = it->second.toTensor();
  auto version = ctx->saved_data.find(key + "@version");
  if (version != ctx->saved_data.end()) {
    MONA_CHECK(static_cast<int64_t>(t._version()) == version->second.toInt(), fn, ": ", key,
               " was modified in place after the forward pass (version ", t._version(), ", saved at version ",
               version->second.toInt(), "); the gradient needs the values the forward pass read");
  }
  return t;
}

/// Optional lengths [B] with values in [0, max]; returns a contiguous int64 CPU tensor
/// (undefined if `lens` is).
inline at::Tensor check_lengths(const at::Tensor& lens, const char* fn, const char* name,
                                int64_t batch, int64_t max) {
  if (!lens.defined()) return lens;
  MONA_CHECK(lens.device().is_cpu(), fn, ": ", name, ": expected a CPU tensor, got device ",
              lens.device());
  MONA_CHECK(lens.dim() == 1 && lens.size(0) == batch, fn, ": ", name,
              ": expected shape [B] = [", batch, "], got ", lens.sizes());
  MONA_CHECK(lens.scalar_type() == at::kLong || lens.scalar_type() == at::kInt, fn, ": ",
              name, ": expected dtype int64 (or int32), got ", lens.scalar_type());
  at::Tensor l = lens.to(at::kLong).contiguous();
  const int64_t* v = l.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    MONA_CHECK(v[b] >= 0 && v[b] <= max, fn, ": ", name, "[", b, "] must lie in [0, ", max,
                "], got ", v[b]);
  }
  return l;
}

/// The data of `t` as T* (int64 by default: lengths), nullptr when `t` is undefined (an
/// absent optional argument or output).
template <class T = int64_t>
inline T* ptr_or_null(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

/// The core Grid of a [B, U, T] problem with optional checked lengths.
inline core::Grid make_grid(int64_t B, int64_t U, int64_t T, const at::Tensor& in_lens,
                            const at::Tensor& out_lens) {
  core::Grid g;
  g.batch = B;
  g.out_len = U;
  g.in_len = T;
  g.in_lens = ptr_or_null(in_lens);
  g.out_lens = ptr_or_null(out_lens);
  return g;
}

}  // namespace mona::nn::detail
