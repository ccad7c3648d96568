// The LibTorch layer reports bad arguments with mona's type (mona::ArgumentError, a
// std::invalid_argument), not LibTorch's c10::Error, and keeps the value in the message.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "mona/core/error.h"
#include "mona/nn/attention.h"
#include "mona/nn/functional.h"

TEST(NnErrors, ArgumentChecksThrowMonasArgumentError) {
  mona::nn::AttentionOptions o;
  o.query_dim = 4;
  o.memory_dim = 4;
  o.chunk_size = 0;
  try {
    mona::nn::make_attention("mocha", o);
    FAIL() << "chunk_size 0 was accepted";
  } catch (const mona::ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("chunk_size"), std::string::npos) << e.what();
  }
  // A tensor of the wrong rank: the message names the argument and its sizes.
  const auto p = torch::full({2, 3}, 0.5, torch::kDouble);
  try {
    mona::nn::monotonic_alignment(p);
    FAIL() << "a 2-D p was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mona::nn::make_attention("bogus", o), mona::Error);
}

TEST(NnErrors, ValuesThatFailAChecksArePrintedSoThatTheyVisiblyFailIt) {
  const auto p = torch::full({1, 1, 3}, 0.5, torch::kFloat);
  p[0][0][2] = 1.0f + 1.0f / (1 << 23);
  try {
    mona::nn::monotonic_alignment(p);
    FAIL() << "p > 1 was accepted";
  } catch (const mona::ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("got 1.0000001 at [0, 0, 2]"), std::string::npos) << e.what();
  }
}
