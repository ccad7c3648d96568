// PartitionedAdam against LibTorch's own torch::optim::Adam and
// torch::nn::utils::clip_grad_norm_: the same step bit for bit whatever the number of parts
// (parts stepped at once on their own threads), checkpoints interchangeable with one Adam's,
// the cut into parts, and errors naming the argument.
#include "mona/train/optimizer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

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
  return torch::optim::AdamOptions(0.01).betas({0.9, 0.98}).eps(1e-8).weight_decay(1e-4);
}

// One training step's end as mona's trainer takes it: the parts' norms, the factor, then
// each part clipped and stepped, parts r >= 1 on threads of their own while part 0 runs.
void partitioned_step(PartitionedAdam& adam, double clip_norm) {
  const int64_t n = adam.parts();
  std::vector<std::vector<at::Tensor>> norms(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) norms[static_cast<size_t>(r)] = adam.grad_norms(r);
  const at::Tensor factor = adam.clip_factor(norms, clip_norm);
  std::vector<std::thread> others;
  for (int64_t r = 1; r < n; ++r) others.emplace_back([&adam, &factor, r] { adam.step(r, factor); });
  adam.step(0, factor);
  for (auto& t : others) t.join();
}

void expect_params_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, const std::string& at) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t j = 0; j < a.size(); ++j) EXPECT_TRUE(torch::equal(a[j], b[j])) << at << ", parameter " << j;
}

// Adam's update of a parameter reads only its own gradient and moments, and the clipping
// factor is computed from the same per-parameter norms in the same order: so the result
// is the same floating-point operations as LibTorch's, and must be equal bit for bit.
TEST(PartitionedAdam, StepsAsTorchAdamWithClipGradNormDoes) {
  for (const int64_t parts : {1, 2, 3, 6}) {
    for (const double clip : {0.0, 1.0, 1e6}) {  // off, acting, not acting (factor clamped to 1)
      auto reference = adam_test_params(5);
      auto ours = clones_of(reference);
      torch::optim::Adam adam(reference, adam_test_options());
      PartitionedAdam partitioned(ours, adam_test_options(), parts);
      for (int step = 0; step < 4; ++step) {
        const double lr = 0.01 / (1 + step);
        for (auto& group : adam.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
        partitioned.set_learning_rate(lr);
        set_adam_test_grads(reference, step);
        set_adam_test_grads(ours, step);
        if (clip > 0) torch::nn::utils::clip_grad_norm_(reference, clip);
        adam.step();
        if (clip > 0) {
          partitioned_step(partitioned, clip);
        } else {
          for (int64_t r = 0; r < parts; ++r) partitioned.step(r, at::Tensor());
        }
        expect_params_equal(reference, ours,
                            "parts " + std::to_string(parts) + ", clip " + std::to_string(clip) + ", step " +
                                std::to_string(step));
      }
    }
  }
}

// A checkpoint holds one Adam over all parameters: what PartitionedAdam saves, one
// torch::optim::Adam loads (and the other way round), with any number of parts on either
// side; continuing from it equals the uninterrupted run bit for bit.
TEST(PartitionedAdam, SavesAndLoadsAsOneTorchAdam) {
  const auto run_steps = [](auto&& step_fn, std::vector<at::Tensor>& params, int from, int to) {
    for (int step = from; step < to; ++step) {
      set_adam_test_grads(params, step);
      step_fn();
    }
  };
  auto uninterrupted = adam_test_params(9);
  auto saved_by_parts = clones_of(uninterrupted), saved_by_torch = clones_of(uninterrupted);
  torch::optim::Adam reference(uninterrupted, adam_test_options());
  run_steps([&] { reference.step(); }, uninterrupted, 0, 6);

  // 3 parts write after 3 steps; one torch Adam and 2 parts continue.
  PartitionedAdam three(saved_by_parts, adam_test_options(), 3);
  run_steps([&] { for (int64_t r = 0; r < 3; ++r) three.step(r, at::Tensor()); }, saved_by_parts, 0, 3);
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
    expect_params_equal(uninterrupted, params, "3 parts saved, torch Adam loaded");
  }
  {
    auto params = clones_of(saved_by_parts);
    PartitionedAdam two(params, adam_test_options(), 2);
    torch::serialize::InputArchive in;
    in.load_from(dir / "parts.pt");
    two.load(in);
    run_steps([&] { partitioned_step(two, 1e6); }, params, 3, 6);
    expect_params_equal(uninterrupted, params, "3 parts saved, 2 parts loaded");
  }
  // One torch Adam (a checkpoint of earlier mona versions) writes; 4 parts continue.
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
  run_steps([&] { for (int64_t r = 0; r < 4; ++r) four.step(r, at::Tensor()); }, params, 3, 6);
  expect_params_equal(uninterrupted, params, "torch Adam saved, 4 parts loaded");
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

TEST(PartitionedAdam, NamesTheArgumentItRefuses) {
  auto params = adam_test_params(3);
  EXPECT_ERROR_CONTAINS(PartitionedAdam({}, adam_test_options(), 1), "params", "got none");
  EXPECT_ERROR_CONTAINS(PartitionedAdam(params, adam_test_options(), 0), "parts", "got 0");
  EXPECT_ERROR_CONTAINS(PartitionedAdam(params, adam_test_options(), 7), "parts", "1 to 6", "got 7");
  PartitionedAdam adam(params, adam_test_options(), 2);
  EXPECT_ERROR_CONTAINS(adam.range(2), "part", "0 to 1", "got 2");
  EXPECT_ERROR_CONTAINS(adam.step(-1, at::Tensor()), "part", "got -1");
  EXPECT_ERROR_CONTAINS(adam.clip_factor({{}}, 1.0), "norms", "2 lists", "got 1");
  EXPECT_ERROR_CONTAINS(adam.clip_factor({{}, {}}, 0.0), "max_norm", "got 0");
  // No gradient anywhere: nothing to clip, and the steps change nothing.
  adam.clear_grads();
  EXPECT_FALSE(adam.clip_factor({adam.grad_norms(0), adam.grad_norms(1)}, 1.0).defined());
  const auto before = clones_of(params);
  adam.step(0, at::Tensor());
  adam.step(1, at::Tensor());
  expect_params_equal(before, params, "no gradients");
}

}  // namespace
}  // namespace mona::test
