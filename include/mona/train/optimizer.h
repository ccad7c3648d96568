// mona/train/optimizer.h: Adam with global-norm gradient clipping, over parameters cut into
// parts that threads update at once.
//
// One training step ends in work over every parameter: adding the shards' gradients, the
// gradient norm, clipping, Adam. PartitionedAdam cuts the parameters into contiguous runs of
// about equal size, so that thread r updates part r, and takes each part's work as two
// passes over its parameters (mona/core/adam.h): the shards' gradients summed with the sum of
// their squares, then clipping, weight decay and Adam's update together. LibTorch's
// torch::optim::Adam with torch::nn::utils::clip_grad_norm_ computes the same arithmetic in
// about a dozen passes, each an operator; on the G2P recipe's model the passes took about a
// tenth of a two-thread training step (bench/notes.md, "The optimizer step as two passes").
// The results are LibTorch's to rounding (tests/train/test_optimizer.cc compares them); they
// do not depend on the number of parts: an update reads only its parameter's gradient and
// moments, and the clipping norm adds the parameters' terms in parameter order.
//
// The moments and step counts are kept in torch::optim::Adam's own state (one Adam per
// part), and saved and loaded as one torch::optim::Adam over all parameters (one group, in
// order) saves and loads them, so a checkpoint does not depend on the number of parts: a run
// written with train.threads = 2 resumes with 1, and the checkpoints of earlier mona versions
// load.
//
// No equation of the papers (../shared/papers) is implemented here: the update is Adam
// (amsgrad off) as LibTorch computes it, over float or double parameters of any shape.
// Different parts may be stepped on different threads at once; one part must not be stepped
// from two threads at once.
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
  /// Throws mona::ArgumentError when params is empty, parts is not in [1, params.size()], a
  /// parameter is neither float nor double or not contiguous (naming its index), or
  /// options ask for amsgrad.
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

  /// Adds the gradients of `others` into part r's gradients and returns the sum of the
  /// squares of each of part r's gradients after it (0 for a parameter without one): its
  /// terms of the clipping norm. Each entry of `others` lists tensors parallel to the
  /// constructor's `params` (a replica's parameters, mona/train/trainer.h) whose .grad() are
  /// added in the order of `others`; undefined ones are skipped, and a parameter without a
  /// gradient takes the first defined one. Any thread; parts in parallel. Throws
  /// mona::ArgumentError when an entry of `others` does not hold params.size() tensors or a
  /// gradient's shape or dtype differs from its parameter's.
  std::vector<double> sum_gradients(int64_t r, const std::vector<std::vector<at::Tensor>>& others = {});
  /// torch::nn::utils::clip_grad_norm_'s factor min(1, max_norm / (||g|| + 1e-6)), ||g|| the
  /// square root of every part's terms (sum_gradients of parts 0 .. parts() - 1, added in
  /// that order, i.e. in parameter order, in double). Throws mona::ArgumentError when
  /// squares does not hold parts() lists or max_norm <= 0.
  double clip_factor(const std::vector<std::vector<double>>& squares, double max_norm) const;
  /// Adam's step on part r's parameters that have a gradient, the gradient multiplied by
  /// `clip_factor` first (1: no clipping); the gradients themselves are left as they are.
  /// Any thread; parts in parallel. Returns whether every updated parameter is finite
  /// (false: the step made one NaN or infinite, core::adam_update). Throws
  /// mona::ArgumentError when clip_factor is not in [0, 1].
  bool step(int64_t r, double clip_factor);

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
