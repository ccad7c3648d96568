// mona/nn/energy.h: attention energy functions (LibTorch modules).
//
// An energy maps a decoder state (query) s [Dq] and a memory entry h_j [Dh] to a scalar
// e_j. Every energy here splits into a per-entry part, the key k_j = f(h_j), computed once
// per memory entry (never per decoder step), and a per-step part on the query:
//
//   AdditiveEnergy           e_j = v^T tanh(W_s s + W_h h_j + b)                 002 eq. 15,
//                                                                                000 eq. 5
//   MonotonicAdditiveEnergy  e_j = g v^T/||v|| tanh(W_s s + W_h h_j + b) + r     002 eq. 16
//   ScaledDotEnergy          e_j = g s^T W h_j + r                               002 eq. 17
//
// keys(h) gives k_j = W_h h_j (additive) or W h_j (dot), shape [..., T, Dk]. forward()
// scores a batch of queries against the keys, with autograd (the additive energies' tanh
// and product with v as one fused kernel each way, mona::nn::additive_energy). unroll()
// scores the queries of an RNN decoder's training steps, one step at a time, with what the
// steps share computed once per sequence (the additive energies' v, their query
// projection's weight gradients). scorer() prepares one query
// for online decoding: EnergyScorer evaluates e_j for a single key from raw memory, with
// no tensor allocation, so that the hard online step pays for the entries it inspects only.
//
// Initialisation follows 002 sec. 2.4: g = 1/sqrt(Dk); r = init_r, negative so that 1 - p
// starts near 1 and attention does not decay at once (default -4, as 002 App. D.1.2 and 000
// use for speech; 002 App. G reports -5 to -1 all working).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <cstdint>
#include <memory>

#include "mona/core/scan.h"

namespace mona::nn {


/// Evaluates one prepared query against single keys; no autograd, no allocation.
/// It may read the query passed to Energy::scorer in place: keep that tensor alive while
/// the scorer is in use.
/// For kind kTanh: e = scale * sum_k weight[k] tanh(query[k] + key[k]) + offset.
/// For kind kDot:  e = scale * sum_k query[k] key[k] + offset.
struct EnergyScorer {
  enum class Kind { kTanh, kDot };
  Kind kind = Kind::kDot;
  int64_t dim = 0;       ///< Dk, the key size
  at::Tensor query;      ///< [Dk] projected query (contiguous, the keys' dtype), or undefined
                         ///< when the caller's query is read in place
  at::Tensor weight;     ///< [Dk] v (kTanh only)
  const void* query_data = nullptr;   ///< query.data_ptr(), read once by the energy
  const void* weight_data = nullptr;  ///< weight.data_ptr() (kTanh only)
  double scale = 1.0;
  double offset = 0.0;

  /// Energy of the key at `key` (Dk contiguous values of the query's dtype).
  template <class T>
  double operator()(const T* key) const {
    const T* q = static_cast<const T*>(query_data);
    T acc = 0;
    if (kind == Kind::kTanh) {
      const T* v = static_cast<const T*>(weight_data);
      for (int64_t k = 0; k < dim; ++k) acc += v[k] * std::tanh(q[k] + key[k]);
    } else {
      acc = core::dot(q, key, dim);  // the online step's dot product (per kernel target)
    }
    return scale * static_cast<double>(acc) + offset;
  }
};

/// An energy's steps over one training sequence (Energy::unroll): the energies of each
/// step's query, as Energy::forward gives them for that query alone, to rounding.
class UnrolledEnergy {
 public:
  virtual ~UnrolledEnergy() = default;
  /// The next step's energies: query [B, Dq] against keys [B, T, Dk] -> [B, 1, T] (autograd).
  /// Errors: those of Energy::forward, and a step beyond the `steps` of Energy::unroll.
  virtual at::Tensor step(const at::Tensor& query, const at::Tensor& keys) = 0;
};

/// Common interface of the energy functions.
class Energy : public torch::nn::Module {
 public:
  /// Keys of memory entries: memory [..., T, Dh] -> [..., T, Dk].
  virtual at::Tensor keys(const at::Tensor& memory) = 0;
  /// Energies of queries [B, U, Dq] against keys [B, T, Dk] -> [B, U, T] (autograd).
  virtual at::Tensor forward(const at::Tensor& queries, const at::Tensor& keys) = 0;
  /// The steps of one training sequence of `batch` rows and at most `steps` steps, where
  /// step i's query is known only after step i-1 (Attention::unroll). By default each step
  /// calls forward() with that query; the additive energies compute what the steps share
  /// once (the normalised v of 002 eq. 16) and take their query projection's weight
  /// gradients once for all steps (mona/nn/unrolled_linear.h). The parameters are read
  /// when the steps are made. Throws mona::ArgumentError for batch < 0 or steps < 0.
  virtual std::unique_ptr<UnrolledEnergy> unroll(int64_t batch, int64_t steps);
  /// One query [Dq] prepared for scoring single keys online (no autograd).
  virtual EnergyScorer scorer(const at::Tensor& query) = 0;
  /// For an energy of the form e = scale * <query, key> + offset (the query used as it is):
  /// sets scale and offset and returns true, so that the online step scores keys without
  /// preparing a scorer; other energies return false.
  virtual bool dot_form(double& scale, double& offset) const {
    (void)scale;
    (void)offset;
    return false;
  }
  /// Key size Dk.
  virtual int64_t key_dim() const = 0;
};

/// Sizes and initial values of an energy function.
struct EnergyOptions {
  int64_t query_dim = 0;      ///< Dq, size of the decoder state
  int64_t memory_dim = 0;     ///< Dh, size of a memory entry
  int64_t attention_dim = 0;  ///< d, hidden size of the additive energies (0: = Dh)
  double init_r = -4.0;       ///< initial offset r (monotonic energies)
  /// Throws mona::ArgumentError naming the field and its value unless query_dim > 0,
  /// memory_dim > 0, attention_dim >= 0 and init_r is finite.
  void validate(const char* who) const;
};

/// v^T tanh(W_s s + W_h h + b) (002 eq. 15 / 000 eq. 5); with `monotonic` the weight
/// normalised and offset form g v^T/||v|| tanh(...) + r of 002 eq. 16.
class AdditiveEnergy : public Energy {
 public:
  explicit AdditiveEnergy(const EnergyOptions& options, bool monotonic = false);
  at::Tensor keys(const at::Tensor& memory) override;
  at::Tensor forward(const at::Tensor& queries, const at::Tensor& keys) override;
  std::unique_ptr<UnrolledEnergy> unroll(int64_t batch, int64_t steps) override;
  EnergyScorer scorer(const at::Tensor& query) override;
  int64_t key_dim() const override { return dim_; }

  torch::nn::Linear query_proj{nullptr};   ///< W_s and b
  torch::nn::Linear memory_proj{nullptr};  ///< W_h (no bias)
  at::Tensor v;                            ///< [d]
  at::Tensor g, r;                         ///< scalars (monotonic form only)

 protected:
  at::Tensor effective_v() const;  // v, or g v / ||v||
  int64_t dim_;
  bool monotonic_;
};

/// g v^T/||v|| tanh(W_s s + W_h h + b) + r (002 eq. 16).
class MonotonicAdditiveEnergy : public AdditiveEnergy {
 public:
  explicit MonotonicAdditiveEnergy(const EnergyOptions& options)
      : AdditiveEnergy(options, /*monotonic=*/true) {}
};

/// g s^T W h + r (002 eq. 17). The key is W h (size Dq).
class ScaledDotEnergy : public Energy {
 public:
  explicit ScaledDotEnergy(const EnergyOptions& options);
  at::Tensor keys(const at::Tensor& memory) override;
  at::Tensor forward(const at::Tensor& queries, const at::Tensor& keys) override;
  EnergyScorer scorer(const at::Tensor& query) override;
  bool dot_form(double& scale, double& offset) const override;
  int64_t key_dim() const override { return dim_; }

  torch::nn::Linear memory_proj{nullptr};  ///< W (no bias)
  at::Tensor g, r;                         ///< scalars

 private:
  int64_t dim_;
};

}  // namespace mona::nn
