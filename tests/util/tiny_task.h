// The tiny monotonic task the LibTorch-layer tests train on: input ids 4..9, output
// 13 - x (a fixed symbol mapping, one output per input, monotonic one-to-one alignment),
// lengths 3-7; a small model and a short Adam run on it.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "mona/nn/seq2seq.h"

namespace mona::test {

inline std::vector<int64_t> tiny_task_output(const std::vector<int64_t>& in) {
  std::vector<int64_t> out;
  for (int64_t x : in) out.push_back(13 - x);
  return out;
}

/// A random input of 3-7 symbols from 4..9. With `distinct_neighbours` no symbol follows
/// itself, so where the attention stands can be read off the content (a counting task
/// would need far more training than a unit test has).
inline std::vector<int64_t> tiny_task_input(std::mt19937_64& gen, bool distinct_neighbours) {
  std::uniform_int_distribution<int64_t> len(3, 7), sym(4, 9);
  std::vector<int64_t> x(static_cast<size_t>(len(gen)));
  for (size_t i = 0; i < x.size(); ++i) {
    do {
      x[i] = sym(gen);
    } while (distinct_neighbours && i > 0 && x[i] == x[i - 1]);
  }
  return x;
}

/// Pads a batch of sequences into ids [B, T] and lengths [B] (int64).
inline std::pair<torch::Tensor, torch::Tensor> pad_batch(const std::vector<std::vector<int64_t>>& seqs) {
  int64_t T = 0;
  for (auto& s : seqs) T = std::max<int64_t>(T, static_cast<int64_t>(s.size()));
  auto x = torch::zeros({static_cast<int64_t>(seqs.size()), T}, torch::kLong);
  auto l = torch::zeros({static_cast<int64_t>(seqs.size())}, torch::kLong);
  for (size_t b = 0; b < seqs.size(); ++b) {
    for (size_t t = 0; t < seqs[b].size(); ++t) x[b][t] = seqs[b][t];
    l[b] = static_cast<int64_t>(seqs[b].size());
  }
  return {x, l};
}

/// A model of a few thousand parameters for the task (vocabularies of 10 ids).
inline nn::ModelOptions tiny_model_options(const std::string& mechanism) {
  nn::ModelOptions o;
  o.input_vocab = 10;
  o.output_vocab = 10;
  o.embedding_dim = 16;
  o.encoder_layers = 1;
  o.encoder_hidden = 32;
  o.decoder_embedding_dim = 16;
  o.decoder_hidden = 32;
  o.attention = mechanism;
  o.attention_options.attention_dim = 16;
  return o;
}

/// tiny_model_options with MoChA chunks of 2, r = -1 and the scaled dot-product monotonic
/// energy (002 eq. 17): unbounded, so the pre-sigmoid noise drives p to 0/1 within a few
/// hundred steps (the weight-normalised additive one, eq. 16, is bounded by g sqrt(d) and
/// needs far longer runs to become discrete).
inline nn::ModelOptions tiny_monotonic_options(const std::string& mechanism) {
  nn::ModelOptions o = tiny_model_options(mechanism);
  o.attention_options.chunk_size = 2;
  o.attention_options.init_r = -1.0;
  o.attention_options.monotonic_energy = "dot";
  return o;
}

/// How train_tiny trains: `steps` Adam steps at `learning_rate` on batches of 32 drawn
/// with tiny_task_input(gen, distinct_neighbours), gradient norm clipped at 5, the
/// length penalty of 003 (nn::LengthPenaltyOptions defaults) when `length_penalty`.
struct TinyTraining {
  int steps = 500;
  uint64_t seed = 1;
  double learning_rate = 0.02;
  bool distinct_neighbours = true;
  bool length_penalty = false;
};

/// Trains a model with `options` on the task; returns it in eval mode.
inline std::shared_ptr<nn::Seq2Seq> train_tiny(const nn::ModelOptions& options, const TinyTraining& how) {
  torch::manual_seed(how.seed);
  auto model = std::make_shared<nn::Seq2Seq>(options);
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(how.learning_rate));
  std::mt19937_64 gen(how.seed);
  nn::LengthPenaltyOptions lp;
  model->train();
  for (int step = 0; step < how.steps; ++step) {
    std::vector<std::vector<int64_t>> xs, ys;
    for (int b = 0; b < 32; ++b) {
      xs.push_back(tiny_task_input(gen, how.distinct_neighbours));
      ys.push_back(tiny_task_output(xs.back()));
    }
    auto [x, xl] = pad_batch(xs);
    auto [y, yl] = pad_batch(ys);
    opt.zero_grad();
    lp.step = step;
    auto loss = how.length_penalty ? model->loss(x, xl, y, yl, {}, nullptr, nullptr, &lp)
                                   : model->loss(x, xl, y, yl, {});
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model->parameters(), 5.0);
    opt.step();
  }
  model->eval();
  return model;
}

/// A model trained on the task and how long its training took.
struct TrainedTiny {
  std::shared_ptr<nn::Seq2Seq> model;
  double seconds = 0;
};

/// The GMM family's model of the task (tiny_model_options(mechanism)), trained once per
/// mechanism and test binary: 300 Adam steps (MONA_TINY_STEPS overrides) at 0.01 with 003's
/// length penalty, on inputs that may repeat a symbol.
inline const TrainedTiny& trained_gmm_tiny(const std::string& mechanism) {
  static std::map<std::string, TrainedTiny> cache;
  auto it = cache.find(mechanism);
  if (it != cache.end()) return it->second;
  const auto t0 = std::chrono::steady_clock::now();
  TinyTraining how;
  const char* env = std::getenv("MONA_TINY_STEPS");
  how.steps = env ? std::atoi(env) : 300;
  how.learning_rate = 0.01;
  how.distinct_neighbours = false;
  how.length_penalty = true;
  auto model = train_tiny(tiny_model_options(mechanism), how);
  TrainedTiny t{model, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  return cache.emplace(mechanism, t).first->second;
}

}  // namespace mona::test
