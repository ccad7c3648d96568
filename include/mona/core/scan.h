// mona/core/scan.h: the hard monotonic attention scan of test time (002 Algorithm 1,
// 000 Algorithm 1 lines 4-9), one output step, online.
//
// For output step i the scan starts at the memory entry chosen at step i - 1 (t_{i-1};
// t_0 = entry 0) and inspects entries j = t_{i-1}, t_{i-1} + 1, ... left to right. At
// each it asks the caller for p_choose(j) = sigmoid(e[i, j]) (002 eqs. 6-7) and stops at
// the first j with
//   threshold mode (default, 002 sec. 2.5):  p_choose(j) >= tau           (tau in (0, 1))
//   sampling mode  (002 eq. 8):             z_j ~ Bernoulli(p_choose(j)) = 1
// The probabilities are requested lazily, one entry at a time, so only inspected entries
// cost an energy evaluation: over a whole output sequence at most T + U entries are
// inspected (each step re-inspects at most its start entry), which makes decoding linear.
//
// Online use: only the first `available` memory entries exist so far. The scan reports
// one of three outcomes:
//   kChose          entry `index` was chosen: t_i = index, the context is built there;
//   kNeedMoreInput  every available entry from the start was rejected and the input is
//                   not finished: call again, with start = `index` (the first entry not
//                   yet inspected), once more entries have arrived. No entry is inspected
//                   twice, so threshold and sampling decisions are never redrawn;
//   kExhausted      the input is finished and no entry was chosen: the context is the
//                   zero vector (002 sec. 2.2) and `index` = available.
// Monotonic attention never moves left: a chosen index is always >= start.
//
// threshold_scan is the same scan in threshold mode, given energies e[i, j] rather than
// probabilities: it decides sigmoid(e) >= tau by comparing e with logit(tau)
// (EnergyThreshold), which is what the online step runs (docs/math.md section 3);
// dot_threshold_scan is that scan with dot-product energies as one kernel (compiled per
// target, mona/core/cpu.h), the online step of attention with dot-product energies.
//
// Errors (mona::Error): start < 0 or start > available, tau outside (0, 1), sampling
// mode without a generator, a p_choose value outside [0, 1] or NaN (names the index).
#pragma once

#include <cmath>
#include <cstdint>

#include "mona/core/error.h"
#include "mona/core/rng.h"

namespace mona::core {

/// What a scan step decided.
enum class ScanStatus {
  kChose,          ///< an entry was chosen; ScanResult::index is t_i
  kNeedMoreInput,  ///< ran out of available entries; resume at ScanResult::index
  kExhausted,      ///< finished input scanned without choosing; context is zero
};

/// Outcome of monotonic_scan.
struct ScanResult {
  ScanStatus status = ScanStatus::kExhausted;
  int64_t index = 0;      ///< chosen entry, or where to resume, or `available`
  int64_t inspected = 0;  ///< number of p_choose evaluations made by this call
};

/// How entries are chosen.
struct ScanOptions {
  double tau = 0.5;        ///< choose when p_choose >= tau (002 sec. 2.5)
  bool sample = false;     ///< draw z ~ Bernoulli(p_choose) instead (002 eq. 8)

  /// Throws mona::ArgumentError unless 0 < tau < 1.
  void validate() const {
    detail::check(tau > 0.0 && tau < 1.0,
                  "ScanOptions.tau must lie in (0, 1), got ", tau);
  }
};

/// One hard monotonic attention step over memory entries [start, available).
/// `p_choose_at(j)` returns the selection probability of entry j (any floating type); it
/// is called once per inspected entry, in increasing j. `input_finished` says whether
/// more entries can still arrive. `rng` is required in sampling mode (else ignored).
template <class PChooseAt>
ScanResult monotonic_scan(int64_t start, int64_t available, bool input_finished,
                          PChooseAt&& p_choose_at, const ScanOptions& options = {},
                          Rng* rng = nullptr) {
  options.validate();
  detail::check(start >= 0, "monotonic_scan: start must be >= 0, got ", start);
  detail::check(start <= available, "monotonic_scan: start (", start,
                ") must not exceed available (", available, ")");
  detail::check(!options.sample || rng != nullptr,
                "monotonic_scan: rng must not be null in sampling mode");
  ScanResult result;
  for (int64_t j = start; j < available; ++j) {
    const double p = static_cast<double>(p_choose_at(j));
    ++result.inspected;
    detail::check(p >= 0.0 && p <= 1.0, "monotonic_scan: p_choose(", j,
                  ") must lie in [0, 1], got ", p);
    const bool choose = options.sample ? rng->bernoulli(p) : p >= options.tau;
    if (choose) {
      result.status = ScanStatus::kChose;
      result.index = j;
      return result;
    }
  }
  result.status = input_finished ? ScanStatus::kExhausted : ScanStatus::kNeedMoreInput;
  result.index = available;
  return result;
}

/// Asks the CPU to start loading a memory row of `row_bytes` bytes at `row` into cache, as
/// the scans do for the row after the one they score, so that a memory that is not in
/// cache costs bandwidth rather than latency. Only the first 256 bytes (4 cache lines) are
/// asked for: they start the hardware's stream prefetcher on the row, and asking for every
/// line costs more than it saves when the memory is in cache. No effect on results.
inline void prefetch_row(const void* row, int64_t row_bytes) {
#if defined(__GNUC__)
  const char* c = static_cast<const char*>(row);
  const int64_t ahead = row_bytes < 256 ? row_bytes : 256;
  for (int64_t b = 0; b < ahead; b += 64) __builtin_prefetch(c + b);
#else
  (void)row;
  (void)row_bytes;
#endif
}

/// The threshold rule of 002 sec. 2.5, z = 1[sigmoid(e) >= tau], decided on the energy e
/// itself: sigmoid is increasing, so z = 1[e >= logit(tau)]. An energy more than 1e-6
/// from logit(tau) decides by that comparison alone; within the margin (far wider than the
/// rounding of log and exp) the sigmoid is evaluated and compared with tau, so every
/// decision equals the one sigmoid(e) >= tau makes in double, for the cost of one
/// comparison on all but a vanishing fraction of energies. That holds for tau up to about
/// 1 - 1e-9: closer to 1 the double sigmoid's steps near tau (1.1e-16 / (1 - tau) in e)
/// are wider than the margin, and the comparison with logit(tau), which agrees with an
/// exact sigmoid there, is the finer decision of the two. NaN chooses nothing (as p >= tau
/// would not).
class EnergyThreshold {
 public:
  /// Throws mona::Error unless 0 < tau < 1.
  explicit EnergyThreshold(double tau = 0.5)
      : tau_(tau), logit_(std::log(tau / (1.0 - tau))), lo_(logit_ - 1e-6), hi_(logit_ + 1e-6) {
    detail::check(tau > 0.0 && tau < 1.0,
                  "EnergyThreshold: tau must lie in (0, 1), got ", tau);
  }
  double tau() const { return tau_; }
  /// Whether an entry of energy e is chosen: sigmoid(e) >= tau.
  bool chooses(double e) const {
    if (e > hi_) return true;
    if (!(e >= lo_)) return false;  // also NaN
    return 1.0 / (1.0 + std::exp(-e)) >= tau_;
  }

 private:
  double tau_, logit_, lo_, hi_;
};

/// monotonic_scan in threshold mode (002 Algorithm 1 with z = 1[p >= tau], p = sigmoid(e)
/// of 002 eqs. 6-7), given energies instead of probabilities: the same
/// steps, outcomes and ScanResult, with `energy_at(j)` (any floating type) called once per
/// inspected entry, in increasing j, and `rule` deciding. This is the form the online step
/// runs (one comparison per entry, no sigmoid); monotonic_scan remains the general one
/// (sampling, probabilities). Errors (mona::Error): start < 0 or start > available.
template <class EnergyAt>
ScanResult threshold_scan(int64_t start, int64_t available, bool input_finished,
                          EnergyAt&& energy_at, const EnergyThreshold& rule) {
  detail::check(start >= 0, "threshold_scan: start must be >= 0, got ", start);
  detail::check(start <= available, "threshold_scan: start (", start,
                ") must not exceed available (", available, ")");
  ScanResult result;
  for (int64_t j = start; j < available; ++j) {
    if (rule.chooses(static_cast<double>(energy_at(j)))) {
      result.status = ScanStatus::kChose;
      result.index = j;
      result.inspected = j - start + 1;
      return result;
    }
  }
  result.status = input_finished ? ScanStatus::kExhausted : ScanStatus::kNeedMoreInput;
  result.index = available;
  result.inspected = available - start;
  return result;
}

/// <a, b> = sum_k a[k] b[k] over n values, as the online step computes energies: partial
/// sums in four vector registers of the kernel target (mona/core/cpu.h: 16, 32 or 64 bytes
/// each on the baseline, x86-64-v3, x86-64-v4), combined in a fixed order. The result
/// depends on the inputs and the kernel target only. T: float or double.
template <class T>
T dot(const T* a, const T* b, int64_t n);

/// threshold_scan with dot-product energies, the whole loop in one kernel call (no call per
/// entry): entry j's energy is e_j = scale * dot(query, row_j, dim) + offset (002 eq. 17,
/// with the keys row_j = W h_j computed once per entry), where row_j = keys + (j - start) *
/// dim: `keys` points at entry start's row and the rows follow each other. Inspects j = start,
/// start + 1, ... while j < available, until rule.chooses(e_j); the result is threshold_scan's.
/// Errors (mona::Error): dim < 1, start < 0 or start > available, a null query or keys when
/// start < available.
template <class T>
ScanResult dot_threshold_scan(const T* query, const T* keys, int64_t dim, int64_t start, int64_t available,
                              bool input_finished, double scale, double offset, const EnergyThreshold& rule);

/// dot_threshold_scan's kernel for the target this CPU runs (mona/core/cpu.h), without the
/// argument checks, as a function pointer: for a caller that makes one scan per output step,
/// millions of times, and has established once that dim >= 1 and 0 <= start <= available
/// hold at every call (mona::nn::PreparedHardStep). Same arguments and result as
/// dot_threshold_scan; outside those conditions the behaviour is undefined. Throws
/// mona::Error like every dispatched kernel when MONA_KERNEL_TARGET names a target this CPU
/// cannot run.
template <class T>
using DotThresholdScanKernel = ScanResult (*)(const T* query, const T* keys, int64_t dim, int64_t start,
                                              int64_t available, bool input_finished, double scale, double offset,
                                              const EnergyThreshold& rule);
template <class T>
DotThresholdScanKernel<T> dot_threshold_scan_kernel();

}  // namespace mona::core
