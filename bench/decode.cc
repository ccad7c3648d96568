// bench/decode: test-time decoding speed of the attention mechanisms (issue 6), the synthetic
// setup of 002 Appendix F and 000 Appendix B, run through mona's public online step.
//
// Setup. Memory h [T, d] and decoder states s [U, d], entries uniform in [-1, 1], d = 256.
// Energies are dot products: every energy of the module is a ScaledDotEnergy (g s^T W h + r)
// whose W is set to the identity, g to 1 and r to 0, so e = s^T h as in the papers. One
// trial produces all U context vectors of one output sequence: U calls of
// Attention::hard_step_into(s_i, memory, state, out) over a finished OnlineMemory, the online
// step a streaming decoder makes, with one HardStepOutput reused across the steps (the out=
// form: the context is written into the previous step's tensor once the caller has let go of
// it). SoftAttention attends over the whole finished memory; MonotonicAttention and MoChA scan
// from t_{i-1}. The memory is built once per data set
// with Attention::extend (its keys W h, one product per entry, identical for every mechanism, timed
// separately as "extend"); each point cycles through a pool of independent data sets.
//
// Peer: "plain_loop", the same algorithm as a plain row-major Eigen loop over raw arrays
// (bench/peers.cc, compiled with -march=native) of keys, values and queries, as mona's online
// memory holds them, on the same data sets, at T = U = 100 on the grid's warm pool and in the
// cold scaling sweep.
//
// mona's raw-array step (nn::PreparedHardStep, with and without the copy of the chosen row)
// runs on the grid's pool at T = U = 100 and in the cold sweep at T = U = 1000. It and
// hard_step_into also run on an L2-resident pool at T = U = 100 ("<step>_l2": the grid's first
// data sets, as many as fill half of the L2, at least 2), the cache level probe/bestdot reads.
// Cache-resident pools are warmed by one untimed trial per data set (warm_up).
//
// Also timed in the same run (roofline probes):
//   probe/bestdot:<candidate>: one d-dimensional dot product in a tight loop over an
//               L2-resident memory, by the fastest dot products this CPU runs (bench/peers.h:
//               vectors of the CPU's widest ISA with 2, 4 or 8 accumulators, Eigen's); the
//               report takes the fastest candidate as what one inspected entry must cost;
//   probe/dot:  the same loop with mona's own dot product (mona::core::dot, the online step's);
//               probe/dot_grid_set: mona's loop over as many bytes as a grid point at
//               T = U = 100 cycles through, i.e. rows from the same cache level;
//   probe/gemm: the same dot products as one large GEMM (ATen/OpenBLAS), the machine's
//               attainable arithmetic throughput;
//   probe/alloc: one at::empty of d values, what a step returning new tensors would add
//               (twice) to each step.
//
// Usage: mona_bench_decode [--quick] [--csv=FILE] [--threads=N] [--reps=N]
//                          [google-benchmark flags]
// The CSV has one row per point (minimum over repetitions of the mean over trials).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "common.h"
#include "mona/core/scan.h"
#include "mona/nn/attention.h"
#include "mona/nn/energy.h"
#include "mona/nn/threads.h"
#include "peers.h"

namespace {

using mona::nn::Attention;
using mona::nn::HardState;
using mona::core::ScanStatus;
using mona::nn::OnlineMemory;

constexpr int64_t kDim = 256;

mona::bench::Flags g_config("decode.csv");

/// What a registered benchmark measures (the CSV row's key columns).
struct Point {
  std::string kind;       // "grid" | "scaling" | "extend" | "probe"
  std::string mechanism;  // soft | monotonic | mocha | dot | gemm
  int64_t w = 0;          // chunk size (MoChA), 1 for monotonic, 0 for soft
  at::ScalarType dtype = at::kDouble;
  int64_t T = 0, U = 0;
  int64_t trials = 0;
  int reps = 0;  // repetitions actually run (set by add)
};
std::map<std::string, Point> g_points;

const char* dtype_name(at::ScalarType t) { return t == at::kDouble ? "float64" : "float32"; }

/// A mechanism with dot-product energies e = s^T h (W = I, g = 1, r = 0), in eval mode.
std::shared_ptr<Attention> make_mechanism(const std::string& mechanism, int64_t w,
                                          at::ScalarType dtype) {
  mona::nn::AttentionOptions o;
  o.query_dim = kDim;
  o.memory_dim = kDim;
  o.energy = "dot";
  o.monotonic_energy = "dot";
  o.chunk_size = std::max<int64_t>(w, 1);
  o.noise_std = 0.0;
  o.tau = 0.5;
  auto att = mona::nn::make_attention(mechanism, o);
  att->to(dtype);
  att->eval();
  torch::NoGradGuard no_grad;
  for (const auto& m : att->modules(/*include_self=*/false)) {
    if (auto* e = dynamic_cast<mona::nn::ScaledDotEnergy*>(m.get())) {
      e->memory_proj->weight.copy_(at::eye(kDim, at::TensorOptions().dtype(dtype)));
      e->g.fill_(1.0);
      e->r.fill_(0.0);
    }
  }
  return att;
}

/// One synthetic data set: a finished memory of T frames and U query rows.
struct DataSet {
  OnlineMemory memory;
  std::vector<at::Tensor> queries;
  at::Tensor keys, h, s;  // keys (= h, W = I), values and queries as plain arrays (the peer's input)
};

std::vector<DataSet> make_pool(Attention& att, int64_t T, int64_t U, at::ScalarType dtype,
                               int64_t n, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<DataSet> pool(static_cast<size_t>(n));
  const auto opt = at::TensorOptions().dtype(dtype);
  for (auto& ds : pool) {
    at::Tensor h = at::rand({T, kDim}, opt) * 2 - 1;
    at::Tensor s = at::rand({U, kDim}, opt) * 2 - 1;
    att.extend(ds.memory, h);
    ds.memory.finish();
    for (int64_t i = 0; i < U; ++i) ds.queries.push_back(s.select(0, i));
    ds.keys = h.clone();
    ds.h = h;
    ds.s = s;
  }
  return pool;
}

// How many data sets a point cycles through. The grid cycles through 10 (2 beyond T = 1000),
// which at T = U <= 100 stay in the caches, as a decoder's memory does while it is being
// decoded. The scaling sweep ("cold") instead gives every trial a data set no earlier trial
// of the point touched: a pool of cold_bytes(), 256 MiB, so that the sizes read their memory
// from beyond the L2 (a [1000, 256] float64 memory with its keys is 4 MiB; at T = 100 it is
// 400 KiB) and, where the L3 is smaller than the pool, from DRAM; the growth with T then
// measures the algorithm rather than the cache level the memory happens to fit in. (A pool
// of 4x a 260 MiB L3 was tried: every repetition builds its pool, and the decode benchmark
// took over 25 minutes instead of about 10.) The report states the pool's size against the
// L3 glibc reports.
double cold_bytes() { return 256.0 * (1 << 20); }
int64_t pool_size(int64_t T, int64_t U, at::ScalarType dtype, bool cold) {
  if (!cold) return T <= 1000 ? 10 : 2;
  const double bytes = static_cast<double>((2 * T + U) * kDim) * at::elementSize(dtype);
  return std::max<int64_t>(2, static_cast<int64_t>(std::ceil(cold_bytes() / bytes)));
}

// The L2 this benchmark sizes its L2-resident pool by: glibc's per-core figure (from CPUID),
// 1 MiB where it reports none.
int64_t l2_bytes() {
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l2 > 0 ? static_cast<int64_t>(l2) : int64_t{1} << 20;
}

// The data sets of an L2-resident pool: as many as fill at most half of the L2 (the other
// half for the step's own state, the stack and the benchmark's loop), and at least 2. So few
// data sets alone would let the branch predictor learn their sequences of stops: the trials
// take their queries in changing orders (query_orders).
int64_t l2_pool_size(int64_t T, int64_t U, at::ScalarType dtype) {
  const int64_t bytes = (2 * T + U) * kDim * static_cast<int64_t>(at::elementSize(dtype));
  return std::max<int64_t>(2, l2_bytes() / 2 / bytes);
}

// One untimed trial on every data set of a cache-resident pool (the grid's, the L2 pool)
// before the timed ones, its counts then set back to zero. make_pool wrote more than the pool
// the steps read (the peer's copies of the keys, the queries' tensors), so without it the
// first pass over the pool measured the caches refilling rather than the regime the grid
// describes, the memory in the caches while it is decoded: at T = U = 100, float32,
// hard_step_into took 1.2-1.5x as long per step over 100 trials right after make_pool as
// over 2000 (bench/notes.md, "The grid's pool warmed before it is timed"). Cold pools (the
// scaling sweep) are not warmed: every trial there is meant to read from beyond the L2.
template <class Decode>
void warm_up(std::vector<DataSet>& pool, const Decode& decode, int64_t& inspected, int64_t& emitted) {
  for (DataSet& ds : pool) decode(ds);
  inspected = 0;
  emitted = 0;
}

// The order in which a trial of an L2-resident pool takes its U queries. That pool holds only
// 2-3 data sets, and a trial repeating one of them in the same order repeats its sequence of
// stop/continue decisions, which the branch predictor then learns: a probe of the plain loop
// at T = U = 100 ran 7-9% faster on 2-3 distinct sequences than on 40 (bench/notes.md, "The
// benchmark's review"). Each trial therefore starts at one of kQueryOrders fixed random
// offsets into its data set's queries and takes them in order from there, cyclically: the
// same i.i.d. queries, read in sequence as a decoder's arrive (a random permutation made the
// queries' rows miss the prefetcher: about twice the time per entry, bench/notes.md), but a
// path through the memory, and so a sequence of decisions, that no earlier trial had. (The
// grid's 10 data sets showed no such learning; its trials keep the given order.)
constexpr size_t kQueryOrders = 61;
std::vector<std::vector<int64_t>> query_orders(int64_t U, bool shuffled) {
  std::vector<std::vector<int64_t>> orders(shuffled ? kQueryOrders : 1);
  std::mt19937_64 rng(0x5eedu + static_cast<uint64_t>(U));
  for (auto& o : orders) {
    const int64_t offset = shuffled ? static_cast<int64_t>(rng() % static_cast<uint64_t>(U)) : 0;
    o.resize(static_cast<size_t>(U));
    for (int64_t i = 0; i < U; ++i) o[static_cast<size_t>(i)] = (offset + i) % U;
  }
  return orders;
}

/// The decode benchmark: one iteration = one trial = U hard steps.
/// `sets` > 0: a pool of that many data sets (the L2-resident pool) instead of pool_size's,
/// its queries taken in the orders of query_orders.
void bm_decode(benchmark::State& st, std::string mechanism, int64_t w, at::ScalarType dtype,
               int64_t T, int64_t U, bool cold, int64_t sets) {
  auto att = make_mechanism(mechanism, w, dtype);
  auto pool = make_pool(*att, T, U, dtype, g_config.quick ? 2 : sets > 0 ? sets : pool_size(T, U, dtype, cold),
                        1000003u * static_cast<uint64_t>(T) + static_cast<uint64_t>(U));
  torch::NoGradGuard no_grad;
  int64_t inspected = 0, emitted = 0, trials = 0;
  size_t k = 0;
  // One output for the whole run, as a decoding server keeps one per stream: its tensors are
  // written in place from the first step on (the out= convention of hard_step_into).
  mona::nn::HardStepOutput out;
  const auto orders = query_orders(U, /*shuffled=*/sets > 0);
  const auto decode = [&](DataSet& ds) {
    HardState state;
    const std::vector<int64_t>& order = orders[static_cast<size_t>(trials) % orders.size()];
    for (int64_t i = 0; i < U; ++i) {
      att->hard_step_into(ds.queries[static_cast<size_t>(order[static_cast<size_t>(i)])], ds.memory, state, out);
      inspected += out.monotonic_energies + out.chunk_energies;
      emitted += out.status == ScanStatus::kChose;
      benchmark::DoNotOptimize(out);  // the step is an out-of-line call; this keeps `out` live
    }
  };
  if (!cold) warm_up(pool, decode, inspected, emitted);
  for (auto _ : st) {
    DataSet& ds = pool[k];
    k = (k + 1) % pool.size();
    decode(ds);
    ++trials;
  }
  st.counters["inspected"] = static_cast<double>(inspected) / static_cast<double>(trials);
  st.counters["emitted"] = static_cast<double>(emitted) / static_cast<double>(trials);
  st.counters["data_sets"] = static_cast<double>(pool.size());
}

/// The peer: the same decoding as a plain Eigen loop (bench/peers.h) on the same data sets.
void bm_plain_loop(benchmark::State& st, at::ScalarType dtype, int64_t T, int64_t U, bool cold) {
  auto att = make_mechanism("monotonic", 1, dtype);
  auto pool = make_pool(*att, T, U, dtype, g_config.quick ? 2 : pool_size(T, U, dtype, cold),
                        1000003u * static_cast<uint64_t>(T) + static_cast<uint64_t>(U));
  int64_t inspected = 0, emitted = 0, trials = 0;
  size_t k = 0;
  at::Tensor context = at::zeros({kDim}, at::TensorOptions().dtype(dtype));
  AT_DISPATCH_FLOATING_TYPES(dtype, "plain_loop", [&] {
    const auto decode = [&](DataSet& ds) {
      inspected += mona::bench::plain_loop_decode<scalar_t>(emitted, ds.keys.data_ptr<scalar_t>(), ds.h.data_ptr<scalar_t>(),
                                                             ds.s.data_ptr<scalar_t>(), T, U, kDim,
                                                             context.data_ptr<scalar_t>());
      benchmark::DoNotOptimize(context.data_ptr<scalar_t>());
    };
    if (!cold) warm_up(pool, decode, inspected, emitted);
    for (auto _ : st) {
      DataSet& ds = pool[k];
      k = (k + 1) % pool.size();
      decode(ds);
      ++trials;
    }
  });
  st.counters["inspected"] = static_cast<double>(inspected) / static_cast<double>(trials);
  st.counters["emitted"] = static_cast<double>(emitted) / static_cast<double>(trials);
  st.counters["data_sets"] = static_cast<double>(pool.size());
}

/// mona's online step on raw arrays (nn::PreparedHardStep: the checks, the energy's form
/// and the kernel target established once per stream) on a pool of `sets` data sets, the
/// first ones of the grid's or the sweep's pool. With `copy` the chosen value row is copied
/// into a caller's buffer after every step, as the peer does; without, the step's context
/// is the row in place, which the caller reads. `shuffled`: the queries in the orders of
/// query_orders (the L2-resident pool).
void bm_prepared(benchmark::State& st, at::ScalarType dtype, int64_t T, int64_t U, int64_t sets, bool copy,
                 bool cold, bool shuffled) {
  auto att = make_mechanism("monotonic", 1, dtype);
  auto pool = make_pool(*att, T, U, dtype, g_config.quick ? 2 : sets,
                        1000003u * static_cast<uint64_t>(T) + static_cast<uint64_t>(U));
  int64_t inspected = 0, emitted = 0, trials = 0;
  size_t k = 0;
  AT_DISPATCH_FLOATING_TYPES(dtype, "prepared", [&] {
    std::vector<std::unique_ptr<mona::nn::PreparedHardStep<scalar_t>>> steps;
    for (DataSet& ds : pool) steps.push_back(std::make_unique<mona::nn::PreparedHardStep<scalar_t>>(*att, ds.memory));
    std::vector<scalar_t> context(static_cast<size_t>(kDim));
    const auto orders = query_orders(U, shuffled);
    const auto decode = [&](DataSet& ds) {
      const mona::nn::PreparedHardStep<scalar_t>& step = *steps[static_cast<size_t>(&ds - pool.data())];
      HardState state;
      const scalar_t* s = ds.s.data_ptr<scalar_t>();
      const std::vector<int64_t>& order = orders[static_cast<size_t>(trials) % orders.size()];
      for (int64_t i = 0; i < U; ++i) {
        const auto out = step.step(s + order[static_cast<size_t>(i)] * kDim, state);
        inspected += out.monotonic_energies;
        emitted += out.status == ScanStatus::kChose;
        if (copy) {
          std::copy(out.context, out.context + kDim, context.data());
        } else {
          benchmark::DoNotOptimize(out.context);
        }
      }
      benchmark::DoNotOptimize(context.data());
    };
    if (!cold) warm_up(pool, decode, inspected, emitted);
    for (auto _ : st) {
      DataSet& ds = pool[k];
      k = (k + 1) % pool.size();
      decode(ds);
      ++trials;
    }
  });
  st.counters["inspected"] = static_cast<double>(inspected) / static_cast<double>(trials);
  st.counters["emitted"] = static_cast<double>(emitted) / static_cast<double>(trials);
  st.counters["data_sets"] = static_cast<double>(pool.size());
}

/// Attention::extend of T frames (keys W h; the same for every mechanism).
void bm_extend(benchmark::State& st, at::ScalarType dtype, int64_t T) {
  auto att = make_mechanism("monotonic", 1, dtype);
  torch::manual_seed(7);
  at::Tensor h = at::rand({T, kDim}, at::TensorOptions().dtype(dtype)) * 2 - 1;
  OnlineMemory mem;
  for (auto _ : st) {
    mem.reset();
    att->extend(mem, h);
    benchmark::DoNotOptimize(mem.size());
  }
}

/// Tight dot-product loop: n dot products of a query with the rows of a [n, d] memory, by
/// the routine mona's online step uses (mona::core::dot, compiled per kernel target), or
/// with `candidate` >= 0 by that candidate of bench/peers.h's best dot products.
template <class S>
__attribute__((noinline)) S dot_rows(int candidate, const S* q, const S* h, int64_t n, int64_t d, S* out) {
  if (candidate >= 0) return mona::bench::best_dot_rows(candidate, q, h, n, d, out);
  S total = 0;
  for (int64_t j = 0; j < n; ++j) {
    const S acc = mona::core::dot(q, h + j * d, d);
    out[j] = acc;
    total += acc;
  }
  return total;
}

// n = 256 rows: 512 KiB of doubles, L2-resident. n = kGridRows: as many bytes as a grid
// point at T = U = 100 cycles through (10 data sets of T keys, T values and U queries), so
// the rows come from the same cache level as the decoder's.
constexpr int64_t kGridRows = 10 * (100 + 100 + 100);
void bm_probe_dot(benchmark::State& st, at::ScalarType dtype, int64_t n, int candidate) {
  torch::manual_seed(3);
  const auto opt = at::TensorOptions().dtype(dtype);
  at::Tensor h = at::rand({n, kDim}, opt) * 2 - 1, q = at::rand({kDim}, opt) * 2 - 1;
  at::Tensor out = at::empty({n}, opt);
  AT_DISPATCH_FLOATING_TYPES(dtype, "probe_dot", [&] {
    for (auto _ : st) {
      benchmark::DoNotOptimize(dot_rows<scalar_t>(candidate, q.data_ptr<scalar_t>(), h.data_ptr<scalar_t>(),
                                                  n, kDim, out.data_ptr<scalar_t>()));
    }
  });
  st.counters["dots"] = static_cast<double>(n);
}

void bm_probe_gemm(benchmark::State& st, at::ScalarType dtype) {
  const int64_t n = 1024;
  torch::manual_seed(4);
  const auto opt = at::TensorOptions().dtype(dtype);
  at::Tensor a = at::rand({n, kDim}, opt), b = at::rand({kDim, n}, opt), c = at::empty({n, n}, opt);
  for (auto _ : st) {
    at::mm_out(c, a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  st.counters["dots"] = static_cast<double>(n * n);
}

/// What a step returning new tensors would add: one tensor allocation (at::empty of d
/// values; such a step makes two, context and weights). hard_step_into avoids them.
void bm_probe_alloc(benchmark::State& st, at::ScalarType dtype) {
  for (auto _ : st) {
    at::Tensor t = at::empty({kDim}, at::TensorOptions().dtype(dtype));
    benchmark::DoNotOptimize(t.data_ptr());
  }
  st.counters["dots"] = 1;
}

// The points the report's verdicts read: the roofline probes, the grid's T = U = 100 row
// (speedup over soft attention, cost per inspected entry) and the scaling sweep's 100 and
// 1000 (the 1000/100 ratios). They run kVerdictRepsFactor (bench/common.h) times as many
// repetitions as the others.
bool verdict_point(const Point& p) {
  return p.kind == "probe" || (p.kind == "grid" && p.T == 100 && p.U == 100) ||
         (p.kind == "scaling" && p.T <= 1000);
}

void add(const std::string& name, Point p, benchmark::internal::Benchmark* b) {
  b->Iterations(p.trials)->Unit(benchmark::kMicrosecond);
  // A single-trial point (soft attention at T = U = 10000, tens of seconds) runs once.
  const bool more = verdict_point(p) && !g_config.quick;
  p.reps = p.trials == 1 ? 1 : g_config.reps * (more ? mona::bench::kVerdictRepsFactor : 1);
  mona::bench::repeat_min(b, p.reps);
  g_points[name] = p;
}

void register_all() {
  const bool q = g_config.quick;
  const std::vector<at::ScalarType> dtypes = {at::kDouble, at::kFloat};
  struct Mech {
    std::string name;
    int64_t w;
  };
  const std::vector<Mech> mechs = {{"soft", 0}, {"monotonic", 1}, {"mocha", 2}, {"mocha", 4},
                                   {"mocha", 8}};
  auto label = [](const Mech& m) {
    return m.name == "mocha" ? "mocha_w" + std::to_string(m.w) : m.name;
  };
  for (auto dt : dtypes) {
    const std::string dn = dtype_name(dt);
    // Roofline probes first, so that they run next to the points they normalise.
    {
      const std::string name = "probe/dot/" + dn;
      add(name, Point{"probe", "dot", 0, dt, 256, 1, q ? 100 : 20000},
          benchmark::RegisterBenchmark(name.c_str(), bm_probe_dot, dt, int64_t{256}, -1));
    }
    const auto candidates = mona::bench::best_dot_candidates();
    for (size_t c = 0; c < candidates.size(); ++c) {
      const std::string name = "probe/bestdot:" + candidates[c] + "/" + dn;
      add(name, Point{"probe", "bestdot:" + candidates[c], 0, dt, 256, 1, q ? 100 : 20000},
          benchmark::RegisterBenchmark(name.c_str(), bm_probe_dot, dt, int64_t{256}, static_cast<int>(c)));
    }
    {
      const std::string name = "probe/dot_grid_set/" + dn;
      add(name, Point{"probe", "dot_grid_set", 0, dt, kGridRows, 1, q ? 10 : 2000},
          benchmark::RegisterBenchmark(name.c_str(), bm_probe_dot, dt, kGridRows, -1));
    }
    // The best dot products over the grid's working set too: the floor of an inspected entry
    // whose key comes from where the grid's keys come from (beyond the L2 on some machines).
    for (size_t c = 0; c < candidates.size(); ++c) {
      const std::string name = "probe/bestdot_grid_set:" + candidates[c] + "/" + dn;
      add(name, Point{"probe", "bestdot_grid_set:" + candidates[c], 0, dt, kGridRows, 1, q ? 10 : 2000},
          benchmark::RegisterBenchmark(name.c_str(), bm_probe_dot, dt, kGridRows, static_cast<int>(c)));
    }
    {
      const std::string name = "probe/gemm/" + dn;
      add(name, Point{"probe", "gemm", 0, dt, 1024, 1024, q ? 2 : 50},
          benchmark::RegisterBenchmark(name.c_str(), bm_probe_gemm, dt));
    }
    {
      const std::string name = "probe/alloc/" + dn;
      add(name, Point{"probe", "alloc", 0, dt, 1, 1, q ? 100 : 200000},
          benchmark::RegisterBenchmark(name.c_str(), bm_probe_alloc, dt));
    }
    // The T x U grid of the papers (T = U is its diagonal).
    const std::vector<int64_t> sizes =
        q ? std::vector<int64_t>{10, 20}
          : std::vector<int64_t>{10, 20, 30, 40, 50, 60, 70, 80, 90, 100};
    for (const auto& m : mechs) {
      for (int64_t T : sizes) {
        for (int64_t U : sizes) {
          const std::string name = "grid/" + label(m) + "/" + dn + "/T:" + std::to_string(T) +
                                   "/U:" + std::to_string(U);
          add(name, Point{"grid", m.name, m.w, dt, T, U, q ? 3 : 100},
              benchmark::RegisterBenchmark(name.c_str(), bm_decode, m.name, m.w, dt, T, U,
                                           /*cold=*/false, /*sets=*/int64_t{0}));
        }
      }
    }
    // The plain-loop peer where the report compares: the grid's largest T = U and the sweep.
    {
      const int64_t n = sizes.back();
      const std::string name = "grid/plain_loop/" + dn + "/T:" + std::to_string(n) + "/U:" + std::to_string(n);
      add(name, Point{"grid", "plain_loop", 1, dt, n, n, q ? 3 : 100},
          benchmark::RegisterBenchmark(name.c_str(), bm_plain_loop, dt, n, n, false));
    }
    // mona's raw-array step beside them (the row in place, and copied as the peer does).
    for (const bool copy : {false, true}) {
      const int64_t n = sizes.back();
      const std::string mech = copy ? "prepared_copy" : "prepared";
      const std::string name = "grid/" + mech + "/" + dn + "/T:" + std::to_string(n) + "/U:" + std::to_string(n);
      add(name, Point{"grid", mech, 1, dt, n, n, q ? 3 : 100},
          benchmark::RegisterBenchmark(name.c_str(), bm_prepared, dt, n, n, pool_size(n, n, dt, false), copy,
                                       /*cold=*/false, /*shuffled=*/false));
    }
    // The same steps over an L2-resident pool, the cache level of probe/bestdot: the per-entry
    // cost against the best dot product with the keys read from where the probe reads them.
    // The mechanism names the step and the pool: "<step>_l2:<data sets>:<L2 KiB>", step one of
    // monotonic (hard_step_into), prepared, prepared_copy.
    {
      const int64_t n = sizes.back(), sets = q ? 2 : l2_pool_size(n, n, dt);
      const std::string pool = "_l2:" + std::to_string(sets) + ":" + std::to_string(l2_bytes() >> 10);
      const auto name_of = [&](const std::string& mech) {
        return "grid/" + mech + "/" + dn + "/T:" + std::to_string(n) + "/U:" + std::to_string(n);
      };
      const std::string mono = "monotonic" + pool;
      add(name_of(mono), Point{"grid", mono, 1, dt, n, n, q ? 3 : 100},
          benchmark::RegisterBenchmark(name_of(mono).c_str(), bm_decode, "monotonic", int64_t{1}, dt, n, n,
                                       /*cold=*/false, sets));
      for (const bool copy : {false, true}) {
        const std::string mech = (copy ? "prepared_copy" : "prepared") + pool;
        add(name_of(mech), Point{"grid", mech, 1, dt, n, n, q ? 3 : 100},
            benchmark::RegisterBenchmark(name_of(mech).c_str(), bm_prepared, dt, n, n, sets, copy, /*cold=*/false,
                                         /*shuffled=*/true));
      }
    }
    // Scaling sweep T = U in {100, 1000, 10000}.
    const std::vector<int64_t> big =
        q ? std::vector<int64_t>{100} : std::vector<int64_t>{100, 1000, 10000};
    for (const auto& m : mechs) {
      for (int64_t n : big) {
        int64_t trials = n <= 100 ? 100 : n <= 1000 ? 20 : 3;
        if (m.name == "soft") trials = n <= 100 ? 100 : n <= 1000 ? 5 : 1;
        if (q) trials = 2;
        const std::string name = "scaling/" + label(m) + "/" + dn + "/T=U:" + std::to_string(n);
        add(name, Point{"scaling", m.name, m.w, dt, n, n, trials},
            benchmark::RegisterBenchmark(name.c_str(), bm_decode, m.name, m.w, dt, n, n,
                                         /*cold=*/true, /*sets=*/int64_t{0}));
      }
    }
    for (int64_t n : big) {
      const std::string name = "scaling/plain_loop/" + dn + "/T=U:" + std::to_string(n);
      add(name, Point{"scaling", "plain_loop", 1, dt, n, n, q ? 2 : n <= 100 ? 100 : n <= 1000 ? 20 : 3},
          benchmark::RegisterBenchmark(name.c_str(), bm_plain_loop, dt, n, n, true));
    }
    for (const bool copy : {false, true}) {
      for (int64_t n : big) {
        const std::string mech = copy ? "prepared_copy" : "prepared";
        const std::string name = "scaling/" + mech + "/" + dn + "/T=U:" + std::to_string(n);
        add(name, Point{"scaling", mech, 1, dt, n, n, q ? 2 : n <= 100 ? 100 : n <= 1000 ? 20 : 3},
            benchmark::RegisterBenchmark(name.c_str(), bm_prepared, dt, n, n, pool_size(n, n, dt, true), copy,
                                         /*cold=*/true, /*shuffled=*/false));
      }
    }
    for (int64_t n : big) {
      const std::string name = "extend/" + dn + "/T:" + std::to_string(n);
      add(name, Point{"extend", "extend", 0, dt, n, 0, q ? 2 : (n <= 1000 ? 50 : 5)},
          benchmark::RegisterBenchmark(name.c_str(), bm_extend, dt, n));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest = mona::bench::parse_flags(argc, argv, g_config, /*takes_threads=*/true);
  // As mona's programs run (mona/nn/threads.h): the best OpenBLAS kernels, ATen's team at
  // --threads and OpenBLAS's own pool kept to the calling thread, so that the GEMM probe and
  // Attention::extend's products run on the one core the timer counts.
  mona::nn::set_threads(g_config.threads);
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  register_all();
  mona::bench::MinRunReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  using mona::bench::MinRunReporter;
  std::ostringstream csv;
  // data_sets: how many data sets the point cycled through (pool_size, l2_pool_size; 0 for
  // the probes and extend, which keep their own inputs), which the report reads.
  csv << "kind,mechanism,w,dtype,T,U,d,threads,trials,reps,cpu_ns,real_ns,inspected,emitted,"
         "dots,data_sets\n";
  size_t rows = 0;
  for (const auto& r : reporter.runs) {
    const auto it = g_points.find(r.run_name.function_name);
    if (it == g_points.end()) continue;
    const Point& p = it->second;
    csv << p.kind << ',' << p.mechanism << ',' << p.w << ',' << dtype_name(p.dtype) << ','
        << p.T << ',' << p.U << ',' << kDim << ',' << g_config.threads << ',' << p.trials << ','
        << p.reps << ',' << MinRunReporter::cpu_ns(r) << ',' << MinRunReporter::real_ns(r) << ','
        << MinRunReporter::counter(r, "inspected") << ',' << MinRunReporter::counter(r, "emitted")
        << ',' << MinRunReporter::counter(r, "dots") << ',' << MinRunReporter::counter(r, "data_sets") << '\n';
    ++rows;
  }
  return mona::bench::write_csv("mona_bench_decode", g_config.csv, csv.str(), rows);
}
