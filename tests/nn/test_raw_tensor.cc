// label: nn
// src/nn/raw_tensor.h: the online step's checked shortcuts around data_ptr(), item() and
// the out= reuse test agree with the tensor API on dense CPU tensors, and say "no" (so
// the caller takes the tensor-API path) for anything else.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../src/nn/raw_tensor.h"

namespace raw = mona::nn::detail;

TEST(RawTensor, DataIsWhatDataPtrReturns) {
  const at::Tensor base = torch::arange(24, torch::kDouble).reshape({4, 6});
  for (const at::Tensor& t : {base, base.select(0, 2), base.narrow(1, 3, 2), base.t()}) {
    EXPECT_EQ(raw::dense_cpu_data(t), t.data_ptr());
  }
  const at::Tensor f = torch::ones({5}, torch::kFloat).narrow(0, 1, 3);
  EXPECT_EQ(raw::dense_cpu_data(f), f.data_ptr());
  EXPECT_EQ(raw::dense_cpu_data(at::Tensor()), nullptr);
  EXPECT_EQ(raw::dense_cpu_impl(at::Tensor()), nullptr);
  EXPECT_EQ(raw::dense_cpu_data(torch::ones({3, 3}).to_sparse()), nullptr);
}

TEST(RawTensor, ScalarValueEqualsItem) {
  EXPECT_EQ(raw::scalar_value(torch::full({}, 0.1, torch::kDouble)), 0.1);
  EXPECT_EQ(raw::scalar_value(torch::full({}, 0.1f, torch::kFloat)), static_cast<double>(0.1f));
  EXPECT_EQ(raw::scalar_value(torch::full({1}, -3.5, torch::kDouble)), -3.5);
  // A one-element view into a larger buffer: the element at the view's offset.
  const at::Tensor buf = torch::arange(10, torch::kDouble);
  EXPECT_EQ(raw::scalar_value(buf.narrow(0, 7, 1)), 7.0);
  // Other dtypes go through item().
  EXPECT_EQ(raw::scalar_value(torch::full({}, 5, torch::kLong)), 5.0);
  EXPECT_EQ(raw::scalar_value(torch::full({}, 0.25, torch::kHalf)), 0.25);
  EXPECT_THROW(raw::scalar_value(torch::ones({2})), c10::Error);
}

TEST(RawTensor, ReusableOutputOnlyWhenNothingElseSeesIt) {
  const auto dbl = at::kDouble;
  at::Tensor t = torch::zeros({8}, dbl);
  EXPECT_TRUE(raw::reusable_output(t, 8, dbl));
  EXPECT_FALSE(raw::reusable_output(t, 7, dbl)) << "size";
  EXPECT_FALSE(raw::reusable_output(t, 8, at::kFloat)) << "dtype";
  EXPECT_FALSE(raw::reusable_output(at::Tensor(), 8, dbl)) << "undefined";
  EXPECT_FALSE(raw::reusable_output(torch::zeros({2, 4}, dbl), 8, dbl)) << "rank";
  {
    const at::Tensor alias = t;  // another handle on the same tensor
    EXPECT_FALSE(raw::reusable_output(t, 8, dbl));
  }
  {
    const at::Tensor view = t.view({2, 4});  // shares the storage
    EXPECT_FALSE(raw::reusable_output(t, 8, dbl));
  }
  EXPECT_TRUE(raw::reusable_output(t, 8, dbl)) << "reusable again once the others are gone";
  at::Tensor tail = torch::zeros({9}, dbl).narrow(0, 1, 8);  // sole owner, but offset 1
  EXPECT_FALSE(raw::reusable_output(tail, 8, dbl));
  at::Tensor leaf = torch::zeros({8}, torch::TensorOptions().dtype(dbl).requires_grad(true));
  const at::Tensor product = leaf * 2;  // the graph (its AccumulateGrad node) refers to `leaf`
  EXPECT_FALSE(raw::reusable_output(leaf, 8, dbl));
}
