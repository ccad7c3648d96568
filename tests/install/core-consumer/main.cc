// Uses the installed mona::core: the expected alignment of hard monotonic attention
// (mona/core/monotonic.h) for one tiny input, against the values worked out by hand from
// its recurrence, and the one-step kernel against the full grid. Exits 1 on a mismatch.
#include <mona/core/cpu.h>
#include <mona/core/error.h>
#include <mona/core/monotonic.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  // B = 1, U = 2 output steps, T = 3 memory entries; p[i][j] = P(stop at j | step i).
  const std::vector<double> p = {0.5, 0.25, 1.0,   //
                                 0.5, 0.5, 0.5};
  // By hand, with alpha_{-1} = delta at j = 0 and
  //   q[i, j] = (1 - p[i, j-1]) q[i, j-1] + alpha[i-1, j],  alpha[i, j] = p[i, j] q[i, j]:
  //   row 0: q = 1, 0.5, 0.375           alpha = 0.5, 0.125, 0.375
  //   row 1: q = 0.5, 0.375, 0.5625      alpha = 0.25, 0.1875, 0.28125
  // Every number is a short binary fraction, so the kernel's double arithmetic is exact.
  const std::vector<double> expected = {0.5, 0.125, 0.375,  //
                                        0.25, 0.1875, 0.28125};
  std::vector<double> alpha(6, -1.0);
  mona::core::Grid grid;
  grid.batch = 1;
  grid.out_len = 2;
  grid.in_len = 3;
  mona::core::monotonic_alignment(p.data(), nullptr, alpha.data(), grid);

  // One step at a time (mona::core::monotonic_alignment_step) gives the same rows.
  std::vector<double> row = {1.0, 0.0, 0.0}, stepped;
  for (int i = 0; i < 2; ++i) {
    mona::core::monotonic_alignment_step(p.data() + 3 * i, row.data(), row.data(), 1, 3, nullptr);
    stepped.insert(stepped.end(), row.begin(), row.end());
  }

  int bad = 0;
  for (int k = 0; k < 6; ++k) {
    std::printf("alpha[%d][%d] = %-8g step %-8g expected %g\n", k / 3, k % 3, alpha[k],
                stepped[k], expected[k]);
    bad += alpha[k] != expected[k] || stepped[k] != expected[k];
  }

  // And an error names the argument: p outside [0, 1].
  bool refused = false;
  try {
    const std::vector<double> bad_p = {0.5, 2.0, 0.5, 0.5, 0.5, 0.5};
    mona::core::monotonic_alignment(bad_p.data(), nullptr, alpha.data(), grid);
  } catch (const mona::Error& e) {
    std::printf("p = 2 refused: %s\n", e.what());
    refused = true;
  }
  std::printf("kernel target: %s\n", mona::core::kernel_target());
  if (bad != 0 || !refused) {
    std::printf("FAILED: %d mismatches, p = 2 %s\n", bad, refused ? "refused" : "accepted");
    return 1;
  }
  std::printf("core consumer: OK\n");
  return 0;
}
