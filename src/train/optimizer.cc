// PartitionedAdam; see include/mona/train/optimizer.h.
#include "mona/train/optimizer.h"

#include <torch/torch.h>

#include <string>

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

std::vector<at::Tensor> PartitionedAdam::grad_norms(int64_t r) const {
  const auto [first, last] = range(r);
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> norms;
  for (size_t j = first; j < last; ++j) {
    // As torch::nn::utils::clip_grad_norm_ computes each term (norm_type 2).
    if (params_[j].grad().defined()) norms.push_back(params_[j].grad().data().norm(2.0));
  }
  return norms;
}

at::Tensor PartitionedAdam::clip_factor(const std::vector<std::vector<at::Tensor>>& norms, double max_norm) const {
  detail::check(norms.size() == parts_.size(), "PartitionedAdam::clip_factor: norms: expected ", parts_.size(),
                " lists (one per part), got ", norms.size());
  detail::check(max_norm > 0, "PartitionedAdam::clip_factor: max_norm: expected > 0, got ", max_norm);
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> all;
  for (const auto& part : norms) all.insert(all.end(), part.begin(), part.end());
  if (all.empty()) return {};
  // clip_grad_norm_'s total, factor and clamp, operation for operation (torch/nn/utils/clip_grad.h).
  const at::Tensor total = all.size() == 1 ? all[0] : torch::stack(all).norm(2.0);
  return torch::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);
}

void PartitionedAdam::step(int64_t r, const at::Tensor& clip_factor) {
  const auto [first, last] = range(r);
  if (clip_factor.defined()) {
    torch::NoGradGuard no_grad;
    for (size_t j = first; j < last; ++j) {
      if (params_[j].grad().defined()) params_[j].grad().data().mul_(clip_factor);
    }
  }
  parts_[static_cast<size_t>(r)]->step();
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
