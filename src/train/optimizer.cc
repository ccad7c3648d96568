// PartitionedAdam; see include/mona/train/optimizer.h.
#include "mona/train/optimizer.h"

#include <torch/torch.h>

#include <cmath>
#include <string>

#include "mona/core/adam.h"
#include "mona/core/error.h"

namespace mona::train {
namespace {

// The key under which torch::optim::Optimizer keeps a parameter's state (its TensorImpl's
// address, as LibTorch's own optimizers and torch/optim/serialize.h write it).
std::string state_key(const at::Tensor& param) { return c10::guts::to_string(param.unsafeGetTensorImpl()); }

}  // namespace

PartitionedAdam::PartitionedAdam(std::vector<at::Tensor> params, const torch::optim::AdamOptions& options,
                                 int64_t parts)
    : params_(std::move(params)), options_(options) {
  detail::check(!params_.empty(), "PartitionedAdam: params: expected at least one parameter, got none");
  detail::check(parts >= 1 && static_cast<size_t>(parts) <= params_.size(), "PartitionedAdam: parts: expected 1 to ",
                params_.size(), " (one per parameter at most), got ", parts);
  detail::check(!options_.amsgrad(), "PartitionedAdam: options: amsgrad is not supported");
  for (size_t j = 0; j < params_.size(); ++j) {
    const at::Tensor& p = params_[j];
    detail::check(p.defined() && (p.scalar_type() == at::kFloat || p.scalar_type() == at::kDouble), "PartitionedAdam: params[",
                  j, "]: expected a float or double tensor, got ", p.defined() ? c10::toString(p.scalar_type()) : "none");
    detail::check(p.is_cpu() && p.is_contiguous(), "PartitionedAdam: params[", j, "]: expected a contiguous CPU tensor");
  }
  int64_t total = 0;
  for (const auto& p : params_) total += p.numel();
  // Part r ends after the first parameter at which the running count reaches (r + 1) / parts
  // of the total, but leaves at least one parameter to each later part.
  const size_t n = params_.size(), k = static_cast<size_t>(parts);
  int64_t seen = 0;
  size_t j = 0;
  for (size_t r = 0; r + 1 < k; ++r) {
    const size_t last_allowed = n - (k - 1 - r);  // parts r + 1 .. k - 1 keep a parameter each
    do {
      seen += params_[j].numel();
      ++j;
    } while (j < last_allowed && seen * parts < total * static_cast<int64_t>(r + 1));
    ends_.push_back(j);
  }
  ends_.push_back(n);
  for (int64_t r = 0; r < parts; ++r) {
    const auto [first, last] = range(r);
    parts_.push_back(std::make_unique<torch::optim::Adam>(
        std::vector<at::Tensor>(params_.begin() + static_cast<std::ptrdiff_t>(first),
                                params_.begin() + static_cast<std::ptrdiff_t>(last)),
        options_));
  }
}

std::pair<size_t, size_t> PartitionedAdam::range(int64_t r) const {
  detail::check(r >= 0 && r < parts(), "PartitionedAdam: part: expected 0 to ", parts() - 1, ", got ", r);
  return {r == 0 ? 0 : ends_[static_cast<size_t>(r) - 1], ends_[static_cast<size_t>(r)]};
}

void PartitionedAdam::set_learning_rate(double learning_rate) {
  options_.lr(learning_rate);
  for (auto& part : parts_) {
    for (auto& group : part->param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(learning_rate);
  }
}

void PartitionedAdam::clear_grads() {
  for (auto& p : params_) p.mutable_grad() = at::Tensor();
}

std::vector<double> PartitionedAdam::sum_gradients(int64_t r, const std::vector<std::vector<at::Tensor>>& others) {
  const auto [first, last] = range(r);
  const char* fn = "PartitionedAdam::sum_gradients";
  for (size_t s = 0; s < others.size(); ++s) {
    detail::check(others[s].size() == params_.size(), fn, ": others[", s, "]: expected ", params_.size(),
                  " tensors (one per parameter), got ", others[s].size());
  }
  std::vector<double> squares;
  for (size_t j = first; j < last; ++j) {
    at::Tensor& grad = params_[j].mutable_grad();
    std::vector<const at::Tensor*> added;
    for (const auto& other : others) {
      const at::Tensor& g = other[j].grad();
      if (!g.defined()) continue;
      if (!grad.defined()) {
        grad = g;  // as autograd would have assigned it
      } else {
        added.push_back(&g);
      }
    }
    if (!grad.defined()) {
      squares.push_back(0);
      continue;
    }
    auto check_grad = [&](const at::Tensor& g) {
      detail::check(g.sizes() == params_[j].sizes() && g.scalar_type() == params_[j].scalar_type() && g.is_cpu(), fn,
                    ": the gradient of params[", j, "]: expected ", params_[j].scalar_type(), " ", params_[j].sizes(),
                    " (its parameter's), got ", g.scalar_type(), " ", g.sizes());
    };
    check_grad(grad);
    if (!grad.is_contiguous()) grad = grad.contiguous();
    std::vector<at::Tensor> kept;  // the added gradients, contiguous (copied only where they were not)
    AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "sum_gradients", [&] {
      std::vector<const scalar_t*> data;
      for (const at::Tensor* g : added) {
        check_grad(*g);
        kept.push_back(g->contiguous());
        data.push_back(kept.back().data_ptr<scalar_t>());
      }
      squares.push_back(core::sum_gradients(grad.data_ptr<scalar_t>(), data.data(),
                                            static_cast<int64_t>(data.size()), grad.numel()));
    });
  }
  return squares;
}

double PartitionedAdam::clip_factor(const std::vector<std::vector<double>>& squares, double max_norm) const {
  detail::check(squares.size() == parts_.size(), "PartitionedAdam::clip_factor: squares: expected ", parts_.size(),
                " lists (one per part), got ", squares.size());
  detail::check(max_norm > 0, "PartitionedAdam::clip_factor: max_norm: expected > 0, got ", max_norm);
  double total = 0;
  for (const auto& part : squares) {
    for (double s : part) total += s;
  }
  // clip_grad_norm_'s factor (torch/nn/utils/clip_grad.h), the norm in double.
  return std::min(1.0, max_norm / (std::sqrt(total) + 1e-6));
}

bool PartitionedAdam::step(int64_t r, double clip_factor) {
  const auto [first, last] = range(r);
  bool finite = true;
  auto& state = parts_[static_cast<size_t>(r)]->state();
  torch::NoGradGuard no_grad;
  for (size_t j = first; j < last; ++j) {
    at::Tensor& p = params_[j];
    if (!p.grad().defined()) continue;
    // The parameter's moments, made at its first step as torch::optim::Adam makes them.
    auto& slot = state[state_key(p)];
    if (!slot) {
      auto fresh = std::make_unique<torch::optim::AdamParamState>();
      fresh->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
      fresh->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
      slot = std::move(fresh);
    }
    auto& s = static_cast<torch::optim::AdamParamState&>(*slot);
    if (!s.exp_avg().is_contiguous()) s.exp_avg(s.exp_avg().contiguous());  // e.g. as a checkpoint stored them
    if (!s.exp_avg_sq().is_contiguous()) s.exp_avg_sq(s.exp_avg_sq().contiguous());
    s.step(s.step() + 1);
    const core::AdamCoefficients c = core::AdamCoefficients::at(s.step(), options_.lr(), std::get<0>(options_.betas()),
                                                                std::get<1>(options_.betas()), options_.eps(),
                                                                options_.weight_decay(), clip_factor);
    const at::Tensor grad = p.grad().contiguous();
    AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "adam_update", [&] {
      finite &= core::adam_update(p.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(), s.exp_avg().data_ptr<scalar_t>(),
                        s.exp_avg_sq().data_ptr<scalar_t>(), p.numel(), c);
    });
    // Written in place, as LibTorch's in-place operators write it: a graph that saved the
    // parameter before this step refuses to use it in its backward pass.
    torch::autograd::impl::bump_version(p);
  }
  return finite;
}

void PartitionedAdam::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::Adam whole(params_, options_);
  for (const auto& part : parts_) {
    for (const auto& [key, state] : part->state()) whole.state()[key] = state->clone();
  }
  whole.save(archive);
}

void PartitionedAdam::load(torch::serialize::InputArchive& archive) {
  torch::optim::Adam whole(params_, options_);
  whole.load(archive);
  for (int64_t r = 0; r < parts(); ++r) {
    const auto [first, last] = range(r);
    auto& state = parts_[static_cast<size_t>(r)]->state();
    state.clear();
    for (size_t j = first; j < last; ++j) {
      const std::string key = state_key(params_[j]);
      const auto it = whole.state().find(key);
      if (it != whole.state().end()) state[key] = it->second->clone();
    }
  }
}

}  // namespace mona::train
