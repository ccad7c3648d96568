// Edit distance and error rates (mona/train/metrics.h).
#include "mona/train/metrics.h"

#include <algorithm>
#include <limits>

#include "mona/core/error.h"

namespace mona::train {

int64_t edit_distance(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  // Keep the shorter sequence along the row so memory is O(min(|a|, |b|)).
  const auto& longer = a.size() >= b.size() ? a : b;
  const auto& shorter = a.size() >= b.size() ? b : a;
  const std::size_t n = shorter.size();
  std::vector<int64_t> row(n + 1);
  for (std::size_t j = 0; j <= n; ++j) row[j] = static_cast<int64_t>(j);
  for (std::size_t i = 1; i <= longer.size(); ++i) {
    int64_t diag = row[0];  // D[i-1][j-1]
    row[0] = static_cast<int64_t>(i);
    for (std::size_t j = 1; j <= n; ++j) {
      const int64_t up = row[j];  // D[i-1][j]
      const int64_t sub = diag + (longer[i - 1] == shorter[j - 1] ? 0 : 1);
      row[j] = std::min({up + 1, row[j - 1] + 1, sub});
      diag = up;
    }
  }
  return row[n];
}

void ErrorCounts::add(const ErrorCounts& other) {
  token_errors += other.token_errors;
  ref_tokens += other.ref_tokens;
  sequence_errors += other.sequence_errors;
  sequences += other.sequences;
}

double ErrorCounts::token_error_rate() const {
  if (ref_tokens == 0) {
    return token_errors == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  }
  return static_cast<double>(token_errors) / static_cast<double>(ref_tokens);
}

double ErrorCounts::sequence_error_rate() const {
  if (sequences == 0) return 0.0;
  return static_cast<double>(sequence_errors) / static_cast<double>(sequences);
}

ErrorCounts score(const std::vector<std::string>& hypothesis,
                  const std::vector<std::vector<std::string>>& references) {
  detail::check(!references.empty(),
                "score: references: expected at least one reference, got none");
  int64_t best_dist = -1;
  int64_t best_len = 0;
  for (const auto& ref : references) {
    const int64_t d = edit_distance(hypothesis, ref);
    const int64_t len = static_cast<int64_t>(ref.size());
    if (best_dist < 0 || d < best_dist || (d == best_dist && len > best_len)) {
      best_dist = d;
      best_len = len;
    }
  }
  ErrorCounts c;
  c.token_errors = best_dist;
  c.ref_tokens = best_len;
  c.sequence_errors = best_dist == 0 ? 0 : 1;
  c.sequences = 1;
  return c;
}

}  // namespace mona::train
