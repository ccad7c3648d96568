// mona/train/optimizer.h: Adam with global-norm gradient clipping, over parameters cut into
// parts that threads update at once.
//
// One training step ends in work over every parameter: adding the shards' gradients, the
// gradient norm, clipping, Adam. On the G2P recipe's model (445,101 parameters) Adam alone
// takes about 2 ms, a tenth of a two-thread step, and one thread doing it leaves the others
// idle. PartitionedAdam cuts the parameters into contiguous runs of about equal size, each
// with a torch::optim::Adam of its own, so that thread r updates part r. Adam's update of
// a parameter reads only that parameter's gradient and moments, so the parts together take
// exactly the step one torch::optim::Adam over all parameters takes, whatever the number of
// parts; the clipping factor is torch::nn::utils::clip_grad_norm_'s, from the same norms in
// the same order (tests/train/test_optimizer.cc compares both, bit for bit).
//
// Its state is saved and loaded as one torch::optim::Adam over all parameters (one group,
// in order) saves and loads it, so a checkpoint does not depend on the number of parts:
// a run written with train.threads = 2 resumes with 1, and the checkpoints of earlier
// mona versions load.
//
// No equation of the papers (../shared/papers) is implemented here: the update is LibTorch's
// Adam, applied to parameters of any shape and dtype. Different parts may be stepped on
// different threads at once; one part must not be stepped from two threads at once.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <torch/optim/adam.h>
#include <torch/serialize/archive.h>

namespace mona::train {

class PartitionedAdam {
 public:
  /// Adam with `options` over `params` (each a leaf tensor with requires_grad), cut into
  /// `parts` contiguous runs: part r ends with the parameter at which the running count of
  /// elements reaches (r + 1) / parts of the total, each part keeping at least one parameter.
  /// Throws mona::ArgumentError when params is empty or parts is not in [1, params.size()].
  PartitionedAdam(std::vector<at::Tensor> params, const torch::optim::AdamOptions& options, int64_t parts);

  int64_t parts() const { return static_cast<int64_t>(ends_.size()); }
  /// Part r's parameters: the indices [first, last) into the constructor's `params`.
  /// Throws mona::ArgumentError when r is not in [0, parts()).
  std::pair<size_t, size_t> range(int64_t r) const;

  /// Sets the learning rate of every part (train.optimizer's decay schedule).
  void set_learning_rate(double learning_rate);
  /// Drops every gradient (undefined, not zero): the next backward pass assigns them rather
  /// than adding into zeros.
  void clear_grads();

  /// The L2 norm of each of part r's gradients (0-dim tensors, parameters without a
  /// gradient skipped), the terms of the clipping norm. Any thread; parts in parallel.
  std::vector<at::Tensor> grad_norms(int64_t r) const;
  /// torch::nn::utils::clip_grad_norm_'s factor min(1, max_norm / (||g|| + 1e-6)), ||g|| the
  /// L2 norm of all gradients, from grad_norms() of every part, in part order: a 0-dim
  /// tensor. With no gradient at all, undefined (nothing to clip). Throws
  /// mona::ArgumentError when norms does not hold parts() lists or max_norm <= 0.
  at::Tensor clip_factor(const std::vector<std::vector<at::Tensor>>& norms, double max_norm) const;
  /// Multiplies part r's gradients by `clip_factor` (when it is defined) and takes Adam's
  /// step on part r's parameters (those with a gradient). Any thread; parts in parallel.
  void step(int64_t r, const at::Tensor& clip_factor);

  /// The moments and step counts of all parts, written as torch::optim::Adam::save writes
  /// one Adam over all parameters.
  void save(torch::serialize::OutputArchive& archive) const;
  /// Reads what save() (or a torch::optim::Adam over the same parameters) wrote. Throws
  /// what torch::optim::Adam::load throws when the archive does not fit the parameters.
  void load(torch::serialize::InputArchive& archive);

 private:
  std::vector<at::Tensor> params_;
  torch::optim::AdamOptions options_;
  std::vector<size_t> ends_;  // part r is [r == 0 ? 0 : ends_[r - 1], ends_[r])
  std::vector<std::unique_ptr<torch::optim::Adam>> parts_;
};

}  // namespace mona::train
