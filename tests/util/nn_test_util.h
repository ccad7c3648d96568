// Helpers for the LibTorch-layer tests: finite differences over tensors.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>

#include "util/test_util.h"

namespace mona::test {

/// Central finite-difference gradient of the scalar f() with respect to the entries of
/// x (a double tensor modified in place and restored).
inline torch::Tensor numeric_grad(const std::function<double()>& f, torch::Tensor x,
                                  double h = 1e-6) {
  torch::NoGradGuard no_grad;
  torch::Tensor g = torch::zeros_like(x);
  auto flat = x.view({-1});
  auto gflat = g.view({-1});
  for (int64_t k = 0; k < flat.numel(); ++k) {
    const double x0 = flat[k].item<double>();
    flat[k] = x0 + h;
    const double fp = f();
    flat[k] = x0 - h;
    const double fm = f();
    flat[k] = x0;
    gflat[k] = (fp - fm) / (2 * h);
  }
  return g;
}

/// Asserts |a - n| <= rtol * max(1, max|n|) entrywise.
/// The numeric gradient is a central difference in float64 with h = 1e-6: truncation error
/// ~h^2 |f'''| ~ 1e-12 and rounding error ~1e-16 |f| / h ~ 1e-10 |f|, so rtol 1e-7 .. 1e-6
/// leaves a margin of ~100x for the small losses of the tests (measured: <= 5e-10 relative
/// on every OpenBLAS family and core kernel target tried).
inline void expect_grad_close(const torch::Tensor& analytic, const torch::Tensor& numeric,
                              double rtol, const std::string& what) {
  ASSERT_TRUE(analytic.defined()) << what << ": no gradient";
  ASSERT_EQ(analytic.sizes(), numeric.sizes()) << what;
  const double scale = std::max(1.0, numeric.abs().max().item<double>());
  const double err = (analytic - numeric).abs().max().item<double>();
  EXPECT_LE(err, rtol * scale) << what << ": max error " << err << " (scale " << scale << ")";
}


}  // namespace mona::test
