// SpecAugment's time warp (mona/audio/spec_augment.h) against an independent implementation
// of the same interpolation: LibTorch's linear upsampling (at::upsample_linear1d, the kernel
// of torch.nn.functional.interpolate(mode="linear", align_corners=False)) on each of the two
// pieces. Here, beside the trainer that applies it, because the audio tests do not link
// LibTorch.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "mona/audio/spec_augment.h"
#include "mona/core/rng.h"
#include "util/test_util.h"

namespace mona::test {
namespace {

audio::Features random_features(int64_t frames, int64_t bins, uint64_t seed) {
  core::Rng rng(seed);
  audio::Features f;
  f.num_frames = frames;
  f.num_bins = bins;
  for (int64_t i = 0; i < frames * bins; ++i) f.data.push_back(static_cast<float>(20.0 * rng.uniform() - 10.0));
  return f;
}

// Frames [begin, begin + m) of f resampled to n frames by LibTorch, in double: [n, bins].
at::Tensor torch_resample(const audio::Features& f, int64_t begin, int64_t m, int64_t n) {
  const at::Tensor all =
      at::from_blob(const_cast<float*>(f.data.data()), {f.num_frames, f.num_bins}, at::kFloat).to(at::kDouble);
  const at::Tensor piece = all.narrow(0, begin, m).t().unsqueeze(0);  // [1, bins, m]: channels are the bins
  return at::upsample_linear1d(piece, {n}, /*align_corners=*/false).squeeze(0).t();
}

TEST(TimeWarp, EachPieceIsLibTorchsLinearInterpolation) {
  for (int64_t T : {2, 3, 7, 40, 101}) {
    const audio::Features in = random_features(T, 6, static_cast<uint64_t>(T));
    for (int64_t center = 1; center < T; ++center) {
      for (int64_t warped = 1; warped < T; ++warped) {
        audio::Features out = in;
        audio::time_warp(out, center, warped);
        const at::Tensor got = at::from_blob(out.data.data(), {T, in.num_bins}, at::kFloat).to(at::kDouble);
        const at::Tensor expected =
            at::cat({torch_resample(in, 0, center, warped), torch_resample(in, center, T - center, T - warped)});
        // The reference runs in double (LibTorch's source positions and weights in double, as
        // time_warp's positions); time_warp rounds its two weights to float and multiplies
        // and adds in float: a few float roundings of values in [-10, 10], whose ulp is
        // 9.5e-7, so 1e-5 (about 10 ulps) bounds it.
        ASSERT_TRUE(at::allclose(got, expected, /*rtol=*/0, /*atol=*/1e-5))
            << "T " << T << " center " << center << " warped " << warped << " largest difference "
            << (got - expected).abs().max().item<float>();
      }
    }
  }
}

}  // namespace
}  // namespace mona::test
