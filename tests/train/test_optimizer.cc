// PartitionedAdam against LibTorch's own torch::optim::Adam and
// torch::nn::utils::clip_grad_norm_: the same step to float rounding, and bit for bit the
// same whatever the number of parts (parts stepped at once on their own threads); the
// shards' gradients added in order; checkpoints interchangeable with one Adam's; the cut
// into parts; errors naming the argument.
#include "mona/train/optimizer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "mona/core/error.h"
#include "util/temp_dir.h"

namespace mona::test {
namespace {
using train::PartitionedAdam;

// Parameters of mixed sizes (a matrix, vectors, a scalar), float32 as mona's models.
std::vector<at::Tensor> adam_test_params(uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<at::Tensor> p;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{40, 30}, {30}, {7, 5}, {1}, {200}, {3, 3, 3}}) {
    p.push_back(torch::randn(shape).requires_grad_(true));
  }
  return p;
}

std::vector<at::Tensor> clones_of(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone().requires_grad_(true));
  return out;
}

// Step `step`'s gradients: random, large enough that clipping at 1 acts; parameter 3 has
// none on odd steps (Adam and the norm skip it, as a parameter unused by a batch).
void set_adam_test_grads(std::vector<at::Tensor>& params, int step) {
  torch::manual_seed(1000 + step);
  for (size_t j = 0; j < params.size(); ++j) {
    const at::Tensor g = torch::randn_like(params[j]) * 0.5;
    params[j].mutable_grad() = (j == 3 && step % 2 == 1) ? at::Tensor() : g;
  }
}

torch::optim::AdamOptions adam_test_options() {
  return torch::optim::AdamOptions(0.01).betas({0.9, 0.98}).eps(1e-8).weight_decay(1e-2);
}

// One training step's end as mona's trainer takes it: the parts' sums of squares, the
// factor, then each part clipped and stepped, parts r >= 1 on threads of their own while
// part 0 runs. clip_norm 0: no clipping.
void partitioned_step(PartitionedAdam& adam, double clip_norm) {
  const int64_t n = adam.parts();
  std::vector<std::vector<double>> squares(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) squares[static_cast<size_t>(r)] = adam.sum_gradients(r);
  const double factor = clip_norm > 0 ? adam.clip_factor(squares, clip_norm) : 1.0;
  std::vector<std::thread> others;
  for (int64_t r = 1; r < n; ++r) others.emplace_back([&adam, factor, r] { adam.step(r, factor); });
  adam.step(0, factor);
  for (auto& t : others) t.join();
}

void expect_params_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, const std::string& at) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t j = 0; j < a.size(); ++j) EXPECT_TRUE(torch::equal(a[j], b[j])) << at << ", parameter " << j;
}

// The same arithmetic as LibTorch's, each element's operations in another order (fused
// multiply-adds, the quotient's factors) and the clipping norm summed in double where
// clip_grad_norm_ sums in float: each step's update step_size * m / denom differs by a few
// roundings of its own size (at most step_size / (1 - beta1) ~ 10 lr here, m / denom being
// at most about 1 / sqrt(1 - beta2) ~ 7) and the parameter by one rounding of itself.
// Allowance per step: 2 float eps of |p| plus 16 float eps of 70 lr (about a dozen
// roundings of the largest update); the steps add up. Seen: at most 1.1 eps of |p| and
// 27 eps of the learning rates' sum. A term of the update left out is far outside it (the
// test options' weight decay alone moves an update by about 1e-2 of itself).
void expect_params_close_to_torch(const std::vector<at::Tensor>& torch_params, const std::vector<at::Tensor>& ours,
                                  double lr_sum, int steps, const std::string& at) {
  ASSERT_EQ(torch_params.size(), ours.size());
  const double eps = std::numeric_limits<float>::epsilon();
  for (size_t j = 0; j < ours.size(); ++j) {
    const at::Tensor diff = (torch_params[j] - ours[j]).abs();
    const at::Tensor allowed = 2 * eps * steps * torch_params[j].abs() + 16 * eps * 70 * lr_sum;
    EXPECT_TRUE((diff <= allowed).all().item<bool>())
        << at << ", parameter " << j << ": largest difference " << diff.max().item<double>() << ", allowed at least "
        << allowed.min().item<double>();
  }
}

// Against torch::optim::Adam with clip_grad_norm_, and the parts against one part: an
// update reads only its parameter's data and the norm adds the terms in parameter order,
// so the parts change nothing, bit for bit.
TEST(PartitionedAdam, StepsAsTorchAdamWithClipGradNormDoes) {
  for (const double clip : {0.0, 1.0, 1e6}) {  // off, acting, not acting (factor clamped to 1)
    auto reference = adam_test_params(5);
    torch::optim::Adam adam(reference, adam_test_options());
    auto one_part = clones_of(reference);
    PartitionedAdam whole(one_part, adam_test_options(), 1);
    std::vector<std::vector<at::Tensor>> by_parts;
    std::vector<std::unique_ptr<PartitionedAdam>> partitioned;
    for (const int64_t parts : {2, 3, 6}) {
      by_parts.push_back(clones_of(reference));
      partitioned.push_back(std::make_unique<PartitionedAdam>(by_parts.back(), adam_test_options(), parts));
    }
    double lr_sum = 0;
    for (int step = 0; step < 4; ++step) {
      const double lr = 0.01 / (1 + step);
      lr_sum += lr;
      for (auto& group : adam.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
      set_adam_test_grads(reference, step);
      if (clip > 0) torch::nn::utils::clip_grad_norm_(reference, clip);
      adam.step();
      whole.set_learning_rate(lr);
      set_adam_test_grads(one_part, step);
      partitioned_step(whole, clip);
      const std::string at = "clip " + std::to_string(clip) + ", step " + std::to_string(step);
      expect_params_close_to_torch(reference, one_part, lr_sum, step + 1, at);
      for (size_t k = 0; k < partitioned.size(); ++k) {
        partitioned[k]->set_learning_rate(lr);
        set_adam_test_grads(by_parts[k], step);
        partitioned_step(*partitioned[k], clip);
        expect_params_equal(one_part, by_parts[k], at + ", " + std::to_string(partitioned[k]->parts()) + " parts");
      }
    }
  }
}

// The shards' gradients (replicas' parameters) added into the model's in the order of the
// shards, a parameter without a gradient taking the first shard's, and the sum of squares
// of the result per parameter.
TEST(PartitionedAdam, AddsTheShardsGradientsInOrder) {
  auto params = adam_test_params(7);
  PartitionedAdam adam(params, adam_test_options(), 2);
  std::vector<std::vector<at::Tensor>> shards = {clones_of(params), clones_of(params)};
  set_adam_test_grads(params, 1);  // parameter 3 without a gradient
  set_adam_test_grads(shards[0], 2);
  set_adam_test_grads(shards[1], 3);  // parameter 3 without a gradient
  std::vector<at::Tensor> expected;
  for (size_t j = 0; j < params.size(); ++j) {
    expected.push_back(j == 3 ? shards[0][j].grad().clone()
                              : (params[j].grad() + shards[0][j].grad()) + shards[1][j].grad());
  }
  std::vector<double> squares;
  for (int64_t r = 0; r < 2; ++r) {
    const auto part = adam.sum_gradients(r, shards);
    squares.insert(squares.end(), part.begin(), part.end());
  }
  ASSERT_EQ(squares.size(), params.size());
  for (size_t j = 0; j < params.size(); ++j) {
    EXPECT_TRUE(torch::equal(params[j].grad(), expected[j])) << "parameter " << j;
    // Float squares are exact in double; their sum in double within n roundings.
    const double exact = expected[j].to(torch::kDouble).pow(2).sum().item<double>();
    EXPECT_NEAR(squares[j], exact, (expected[j].numel() + 2) * std::numeric_limits<double>::epsilon() * exact)
        << "parameter " << j;
  }
}

// A checkpoint holds one Adam over all parameters: what PartitionedAdam saves, one
// torch::optim::Adam loads (and the other way round), with any number of parts on either
// side. Continuing with parts equals the uninterrupted run of parts bit for bit; continuing
// with LibTorch's Adam (or after it) equals it to float rounding.
TEST(PartitionedAdam, SavesAndLoadsAsOneTorchAdam) {
  const auto run_steps = [](auto&& step_fn, std::vector<at::Tensor>& params, int from, int to) {
    for (int step = from; step < to; ++step) {
      set_adam_test_grads(params, step);
      step_fn();
    }
  };
  const double lr = adam_test_options().lr();
  auto by_torch = adam_test_params(9);
  auto by_parts = clones_of(by_torch);
  auto saved_by_parts = clones_of(by_torch), saved_by_torch = clones_of(by_torch);
  torch::optim::Adam reference(by_torch, adam_test_options());
  run_steps([&] { reference.step(); }, by_torch, 0, 6);
  PartitionedAdam uninterrupted(by_parts, adam_test_options(), 1);
  run_steps([&] { partitioned_step(uninterrupted, 0); }, by_parts, 0, 6);

  // 3 parts write after 3 steps; one torch Adam and 2 parts continue.
  PartitionedAdam three(saved_by_parts, adam_test_options(), 3);
  run_steps([&] { partitioned_step(three, 0); }, saved_by_parts, 0, 3);
  torch::serialize::OutputArchive out_parts;
  three.save(out_parts);
  TempDir dir;
  out_parts.save_to(dir / "parts.pt");
  {
    auto params = clones_of(saved_by_parts);
    torch::optim::Adam adam(params, adam_test_options());
    torch::serialize::InputArchive in;
    in.load_from(dir / "parts.pt");
    adam.load(in);
    run_steps([&] { adam.step(); }, params, 3, 6);
    expect_params_close_to_torch(params, by_parts, 6 * lr, 6, "3 parts saved, torch Adam loaded");
  }
  {
    auto params = clones_of(saved_by_parts);
    PartitionedAdam two(params, adam_test_options(), 2);
    torch::serialize::InputArchive in;
    in.load_from(dir / "parts.pt");
    two.load(in);
    run_steps([&] { partitioned_step(two, 1e6); }, params, 3, 6);
    expect_params_equal(by_parts, params, "3 parts saved, 2 parts loaded");
  }
  // One torch Adam (a checkpoint of earlier mona versions) writes; 4 parts continue, from
  // its moments and step counts (a lost step count would change every bias correction).
  torch::optim::Adam torch_adam(saved_by_torch, adam_test_options());
  run_steps([&] { torch_adam.step(); }, saved_by_torch, 0, 3);
  torch::serialize::OutputArchive out_torch;
  torch_adam.save(out_torch);
  out_torch.save_to(dir / "torch.pt");
  auto params = clones_of(saved_by_torch);
  PartitionedAdam four(params, adam_test_options(), 4);
  torch::serialize::InputArchive in;
  in.load_from(dir / "torch.pt");
  four.load(in);
  run_steps([&] { partitioned_step(four, 0); }, params, 3, 6);
  expect_params_close_to_torch(by_torch, params, 6 * lr, 6, "torch Adam saved, 4 parts loaded");
}

// The cut: contiguous, covering, none empty, part r ending with the parameter at which the
// running count of elements reaches (r + 1) / parts of the total.
TEST(PartitionedAdam, CutsTheParametersIntoRunsOfAboutEqualSize) {
  const auto cut = [](const std::vector<int64_t>& sizes, int64_t parts) {
    std::vector<at::Tensor> params;
    for (int64_t n : sizes) params.push_back(torch::zeros({n}).requires_grad_(true));
    PartitionedAdam adam(params, adam_test_options(), parts);
    std::vector<std::pair<size_t, size_t>> out;
    for (int64_t r = 0; r < adam.parts(); ++r) out.push_back(adam.range(r));
    return out;
  };
  using Ranges = std::vector<std::pair<size_t, size_t>>;
  // Total 24: the running count reaches 12 at the third parameter.
  EXPECT_EQ(cut({10, 1, 1, 10, 1, 1}, 2), (Ranges{{0, 3}, {3, 6}}));
  // Total 30, thirds at 10 and 20: reached at the first and the second parameter.
  EXPECT_EQ(cut({10, 10, 5, 5}, 3), (Ranges{{0, 1}, {1, 2}, {2, 4}}));
  // One large parameter first: it reaches every fraction, but each later part keeps one.
  EXPECT_EQ(cut({100, 1, 1}, 3), (Ranges{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(cut({100, 1, 1, 1}, 2), (Ranges{{0, 1}, {1, 4}}));
  EXPECT_EQ(cut({5, 5, 5}, 1), (Ranges{{0, 3}}));
}

// The update writes the parameters in place as LibTorch's in-place operators do: their
// version counters move, so a graph that saved a parameter before the step refuses it.
TEST(PartitionedAdam, StepIsAnInPlaceChangeOfTheParameters) {
  auto params = adam_test_params(4);
  PartitionedAdam adam(params, adam_test_options(), 2);
  const at::Tensor saved = (params[0] * params[0]).sum();  // saves params[0] for its backward
  const auto version = params[0]._version();
  set_adam_test_grads(params, 0);
  partitioned_step(adam, 0);
  EXPECT_GT(params[0]._version(), version);
  EXPECT_THROW(saved.backward(), c10::Error);
}

TEST(PartitionedAdam, NamesTheArgumentItRefuses) {
  auto params = adam_test_params(3);
  EXPECT_ERROR_CONTAINS(PartitionedAdam({}, adam_test_options(), 1), "params", "got none");
  EXPECT_ERROR_CONTAINS(PartitionedAdam(params, adam_test_options(), 0), "parts", "got 0");
  EXPECT_ERROR_CONTAINS(PartitionedAdam(params, adam_test_options(), 7), "parts", "1 to 6", "got 7");
  EXPECT_ERROR_CONTAINS(PartitionedAdam(params, adam_test_options().amsgrad(true), 1), "amsgrad");
  EXPECT_ERROR_CONTAINS(PartitionedAdam({params[0], torch::zeros({3}, torch::kLong)}, adam_test_options(), 1),
                        "params[1]", "float or double", "Long");
  EXPECT_ERROR_CONTAINS(PartitionedAdam({torch::zeros({4, 3}).t()}, adam_test_options(), 1), "params[0]", "contiguous");
  PartitionedAdam adam(params, adam_test_options(), 2);
  EXPECT_ERROR_CONTAINS(adam.range(2), "part", "0 to 1", "got 2");
  EXPECT_ERROR_CONTAINS(adam.step(-1, 1.0), "part", "got -1");
  EXPECT_ERROR_CONTAINS(adam.clip_factor({{}}, 1.0), "squares", "2 lists", "got 1");
  EXPECT_ERROR_CONTAINS(adam.clip_factor({{}, {}}, 0.0), "max_norm", "got 0");
  EXPECT_ERROR_CONTAINS(adam.sum_gradients(0, {clones_of(params), {params[0]}}), "others[1]", "6 tensors", "got 1");
  set_adam_test_grads(params, 0);
  auto shard = clones_of(params);
  shard[0].mutable_grad() = torch::zeros({2, 2});
  EXPECT_ERROR_CONTAINS(adam.sum_gradients(0, {shard}), "gradient of params[0]", "[40, 30]", "[2, 2]");
  EXPECT_ERROR_CONTAINS(adam.step(0, 1.5), "clip", "got 1.5");
  // No gradient anywhere: nothing to clip, and the steps change nothing.
  adam.clear_grads();
  EXPECT_EQ(adam.clip_factor({adam.sum_gradients(0), adam.sum_gradients(1)}, 1.0), 1.0);
  const auto before = clones_of(params);
  adam.step(0, 1.0);
  adam.step(1, 1.0);
  expect_params_equal(before, params, "no gradients");
}

}  // namespace
}  // namespace mona::test
