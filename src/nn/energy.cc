// Energy functions; see include/mona/nn/energy.h.
#include "mona/nn/energy.h"

#include <torch/torch.h>

#include "raw_tensor.h"
#include "mona/nn/functional.h"
#include "mona/nn/unrolled_linear.h"
#include "mona/core/error.h"

namespace mona::nn {

namespace {
using detail::scalar_value;

// A query as a contiguous vector; a 1-D contiguous query is used as is (what reshape and
// contiguous would return) without dispatching ops.
at::Tensor flat_query(const at::Tensor& query) {
  if (query.dim() == 1 && query.is_contiguous()) return query;
  torch::NoGradGuard no_grad;
  return query.reshape({-1}).contiguous();
}
}  // namespace

void EnergyOptions::validate(const char* who) const {
  MONA_CHECK(query_dim > 0, who, ": query_dim must be > 0, got ", query_dim);
  MONA_CHECK(memory_dim > 0, who, ": memory_dim must be > 0, got ", memory_dim);
  MONA_CHECK(attention_dim >= 0, who, ": attention_dim must be >= 0, got ", attention_dim);
  MONA_CHECK(std::isfinite(init_r), who, ": init_r must be finite, got ", init_r);
}

AdditiveEnergy::AdditiveEnergy(const EnergyOptions& o, bool monotonic)
    : dim_(o.attention_dim > 0 ? o.attention_dim : o.memory_dim), monotonic_(monotonic) {
  o.validate(monotonic ? "MonotonicAdditiveEnergy" : "AdditiveEnergy");
  query_proj = register_module("query_proj",
                               torch::nn::Linear(torch::nn::LinearOptions(o.query_dim, dim_)));
  memory_proj = register_module(
      "memory_proj", torch::nn::Linear(torch::nn::LinearOptions(o.memory_dim, dim_).bias(false)));
  const double bound = 1.0 / std::sqrt(static_cast<double>(dim_));
  v = register_parameter("v", torch::empty({dim_}).uniform_(-bound, bound));
  if (monotonic_) {
    g = register_parameter("g", torch::full({}, bound));  // 1/sqrt(d), 002 App. G
    r = register_parameter("r", torch::full({}, o.init_r));
  }
}

at::Tensor AdditiveEnergy::effective_v() const {
  return monotonic_ ? g * v / v.norm() : v;
}

namespace {

// Energy::unroll's default: each step is forward() on its query.
class ForwardEachStep : public UnrolledEnergy {
 public:
  ForwardEachStep(Energy& energy, int64_t steps) : energy_(energy), steps_(steps) {}
  at::Tensor step(const at::Tensor& query, const at::Tensor& keys) override {
    MONA_CHECK(taken_ < steps_, "mona::nn::UnrolledEnergy::step: all ", steps_, " steps the energy was unrolled for are taken");
    ++taken_;
    return energy_.forward(query.unsqueeze(1), keys);
  }

 private:
  Energy& energy_;
  int64_t steps_, taken_ = 0;
};

// AdditiveEnergy's steps: the query projection unrolled, v (or g v / ||v||) computed once.
class UnrolledAdditiveEnergy : public UnrolledEnergy {
 public:
  UnrolledAdditiveEnergy(UnrolledLinear query_proj, at::Tensor v, at::Tensor r)
      : query_proj_(std::move(query_proj)), v_(std::move(v)), r_(std::move(r)) {}
  at::Tensor step(const at::Tensor& query, const at::Tensor& keys) override {
    return additive_energy(query_proj_.step(query), keys, v_, r_);  // [B, 1, T]
  }

 private:
  UnrolledLinear query_proj_;
  at::Tensor v_, r_;
};

}  // namespace

std::unique_ptr<UnrolledEnergy> Energy::unroll(int64_t batch, int64_t steps) {
  MONA_CHECK(batch >= 0 && steps >= 0, "mona::nn::Energy::unroll: expected batch >= 0 and steps >= 0, got batch ",
             batch, ", steps ", steps);
  return std::make_unique<ForwardEachStep>(*this, steps);
}

std::unique_ptr<UnrolledEnergy> AdditiveEnergy::unroll(int64_t batch, int64_t steps) {
  return std::make_unique<UnrolledAdditiveEnergy>(
      UnrolledLinear(query_proj->weight, query_proj->bias, batch, steps), effective_v(),
      monotonic_ ? r : at::Tensor());
}

at::Tensor AdditiveEnergy::keys(const at::Tensor& memory) { return memory_proj(memory); }

at::Tensor AdditiveEnergy::forward(const at::Tensor& queries, const at::Tensor& keys) {
  // [B, U, d] against [B, T, d] -> [B, U, T]: tanh and the product with v fused, one pass
  // each way (mona/core/additive_energy.h).
  return additive_energy(query_proj(queries), keys, effective_v(), monotonic_ ? r : at::Tensor());
}

EnergyScorer AdditiveEnergy::scorer(const at::Tensor& query) {
  torch::NoGradGuard no_grad;
  EnergyScorer s;
  s.kind = EnergyScorer::Kind::kTanh;
  s.dim = dim_;
  s.query = query_proj(query.reshape({-1})).contiguous();
  s.weight = effective_v().to(s.query.scalar_type()).contiguous();
  s.offset = monotonic_ ? scalar_value(r) : 0.0;
  s.query_data = s.query.data_ptr();
  s.weight_data = s.weight.data_ptr();
  return s;
}

ScaledDotEnergy::ScaledDotEnergy(const EnergyOptions& o) : dim_(o.query_dim) {
  o.validate("ScaledDotEnergy");
  memory_proj = register_module(
      "memory_proj", torch::nn::Linear(torch::nn::LinearOptions(o.memory_dim, dim_).bias(false)));
  g = register_parameter("g", torch::full({}, 1.0 / std::sqrt(static_cast<double>(dim_))));
  r = register_parameter("r", torch::full({}, o.init_r));
}

at::Tensor ScaledDotEnergy::keys(const at::Tensor& memory) { return memory_proj(memory); }

at::Tensor ScaledDotEnergy::forward(const at::Tensor& queries, const at::Tensor& keys) {
  return g * torch::matmul(queries, keys.transpose(1, 2)) + r;
}

EnergyScorer ScaledDotEnergy::scorer(const at::Tensor& query) {
  EnergyScorer s;
  s.kind = EnergyScorer::Kind::kDot;
  s.dim = dim_;
  // A 1-D contiguous query is read in place (no tensor op, no reference count traffic);
  // anything else is flattened into a tensor the scorer keeps.
  const void* in_place =
      query.dim() == 1 && query.is_contiguous() ? detail::dense_cpu_data(query) : nullptr;
  if (in_place != nullptr) {
    s.query_data = in_place;
  } else {
    s.query = flat_query(query);
    s.query_data = s.query.data_ptr();
  }
  dot_form(s.scale, s.offset);
  return s;
}

bool ScaledDotEnergy::dot_form(double& scale, double& offset) const {
  scale = scalar_value(g);
  offset = scalar_value(r);
  return true;
}

}  // namespace mona::nn
