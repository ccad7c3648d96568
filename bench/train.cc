// bench/train: the training kernels against the standard formulation in plain ATen ops with
// autograd (issue 6), float32, forward + backward.
//
//   alignment  mona::nn::monotonic_alignment (002 eqs. 13-14, mona/core/monotonic.h) against
//              the closed form of 002 eq. 30 / 000 eq. 23 as the papers' public code writes
//              it, row by row:  cp = exclusive cumprod of (1 - p) evaluated as
//              exp(cumsum(log(clamp(1 - p, 1e-10, 1)))) shifted right by one, and
//              alpha_i = p_i * cp * cumsum(alpha_{i-1} / clamp(cp, 1e-10, 1)).
//   mocha      mona::nn::mocha_chunkwise (000 eq. 17, w = 4) against the MovingSum form of
//              000 eq. 25 with the row maximum of u subtracted before exp; MovingSum is a
//              conv1d with a ones filter over the padded row.
//
// Inputs, per [B, U, T] shape: "normal": logit(p) ~ N(-2, 2^2); "hard": many p near 0
// (90% of entries with logit(p) ~ N(-12, 2^2), the rest with logit(p) ~ N(4, 2^2), so that
// the exclusive cumprod of 1 - p underflows along a row). MoChA takes alpha = the float64
// expected alignment of those p (cast to float32) and u ~ N(0, 1) ("normal") or
// u ~ N(0, 30^2) ("hard": exp(u - max u) underflows inside whole chunks).
// The upstream gradient dL/dout is N(0, 1).
//
// Accuracy: maximum absolute error of the output and of every input gradient against an
// independent float64 reference (long double loops of the recurrence and of its adjoint,
// written here, not mona's kernels). Non-finite values are counted separately.
// Bandwidth: bytes of inputs, outputs and gradients that fwd+bwd must move at least
// (alignment: p, alpha | dL/dalpha, p, alpha, dL/dp = 6 arrays; mocha: alpha, u, beta |
// dL/dbeta, alpha, u, dL/dalpha, dL/du = 8 arrays) per second, beside a memcpy probe
// (bytes read + written per second) measured in the same run.
//
// Threads: --threads=N runs every point with N threads (ATen's and mona's OpenMP team);
// --threads=1,2 registers every point once per count, so that with
// --benchmark_enable_random_interleaving the repetitions of the one- and two-thread points
// alternate at random within one process and a thread speedup is a ratio of one run, both
// sides timed under the same load of this shared machine (bench/run-benchmarks.in).
//
// Usage: mona_bench_train [--kernel-target | --blas-kernels] [--quick] [--csv=FILE] [--threads=N[,N...]]
//                         [--reps=N] [gbench flags]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <omp.h>
#include <torch/autograd.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common.h"
#include "mona/core/cpu.h"
#include "mona/nn/functional.h"
#include "mona/nn/threads.h"

namespace {

mona::bench::Flags g_config("train.csv");

struct Shape {
  int64_t B, U, T;
  std::string str() const {
    return std::to_string(B) + "x" + std::to_string(U) + "x" + std::to_string(T);
  }
};

// ---------------------------------------------------------------------------------------
// Inputs

struct Inputs {
  at::Tensor p, g_align;       // [B, U, T] float32
  at::Tensor alpha, u, g_beta;  // MoChA inputs, float32
  at::Tensor alpha_prev;        // MAtChA's: row i holds alpha_{i-1} (row 0 the delta at j = 0)
  std::vector<long double> p64, alpha64, u64;
};

/// float64 (long double) expected alignment and its adjoint, one batch element at a time:
/// q[i,0] = prev[0]; q[i,j] = (1 - p[i,j-1]) q[i,j-1] + prev[j]; alpha = p q (002 eqs. 13-14).
void ref_alignment(const std::vector<long double>& p, const Shape& s, const float* G,
                   std::vector<long double>& alpha, std::vector<long double>& grad_p) {
  const int64_t U = s.U, T = s.T;
  alpha.assign(p.size(), 0.0L);
  grad_p.assign(p.size(), 0.0L);
  std::vector<long double> q(static_cast<size_t>(U * T)), carry(T), Gt(T);
  for (int64_t b = 0; b < s.B; ++b) {
    const long double* pb = p.data() + b * U * T;
    long double* ab = alpha.data() + b * U * T;
    for (int64_t i = 0; i < U; ++i) {
      long double qq = 0;
      for (int64_t j = 0; j < T; ++j) {
        const long double prev = i == 0 ? (j == 0 ? 1.0L : 0.0L) : ab[(i - 1) * T + j];
        qq = j == 0 ? prev : (1 - pb[i * T + j - 1]) * qq + prev;
        q[i * T + j] = qq;
        ab[i * T + j] = pb[i * T + j] * qq;
      }
    }
    if (G == nullptr) continue;
    const float* Gb = G + b * U * T;
    long double* gp = grad_p.data() + b * U * T;
    std::fill(carry.begin(), carry.end(), 0.0L);
    for (int64_t i = U - 1; i >= 0; --i) {
      long double gq_next = 0;
      for (int64_t j = T - 1; j >= 0; --j) {
        const long double Gij = static_cast<long double>(Gb[i * T + j]) + carry[j];
        const long double pij = pb[i * T + j];
        gp[i * T + j] = q[i * T + j] * (Gij - gq_next);
        const long double gq = Gij * pij + (1 - pij) * gq_next;
        Gt[j] = gq;  // dL/dalpha[i-1, j]
        gq_next = gq;
      }
      carry = Gt;
    }
  }
}

/// float64 (long double) MoChA beta and gradients per row, with the chunk max m[k] and
/// S[k] = sum_{l in chunk(k)} exp(u[l] - m[k]) (000 eq. 17):
///   beta[j] = sum_{k=j}^{j+w-1} alpha[k] s(k, j),   s(k, j) = exp(u[j] - m[k]) / S[k]
///   ga[k] = sum_{j in chunk(k)} g[j] s(k, j)
///   dL/du[m] = sum_{k=m}^{m+w-1} alpha[k] s(k, m) (g[m] - ga[k]).
void ref_mocha(const std::vector<long double>& alpha, const std::vector<long double>& u,
               const float* G, int64_t rows, int64_t T, int64_t w,
               std::vector<long double>& beta, std::vector<long double>& grad_alpha,
               std::vector<long double>& grad_u) {
  beta.assign(alpha.size(), 0.0L);
  grad_alpha.assign(alpha.size(), 0.0L);
  grad_u.assign(alpha.size(), 0.0L);
  std::vector<long double> m(T), S(T);
  for (int64_t r = 0; r < rows; ++r) {
    const long double* a = alpha.data() + r * T;
    const long double* ur = u.data() + r * T;
    const float* g = G + r * T;
    for (int64_t k = 0; k < T; ++k) {
      const int64_t lo = std::max<int64_t>(0, k - w + 1);
      long double mk = ur[lo];
      for (int64_t l = lo; l <= k; ++l) mk = std::max(mk, ur[l]);
      long double sk = 0;
      for (int64_t l = lo; l <= k; ++l) sk += std::exp(ur[l] - mk);
      m[k] = mk;
      S[k] = sk;
    }
    auto s = [&](int64_t k, int64_t j) { return std::exp(ur[j] - m[k]) / S[k]; };
    for (int64_t k = 0; k < T; ++k) {
      const int64_t lo = std::max<int64_t>(0, k - w + 1);
      long double ga = 0;
      for (int64_t j = lo; j <= k; ++j) {
        beta[r * T + j] += a[k] * s(k, j);
        ga += static_cast<long double>(g[j]) * s(k, j);
      }
      grad_alpha[r * T + k] = ga;
      for (int64_t j = lo; j <= k; ++j) {
        grad_u[r * T + j] += a[k] * s(k, j) * (static_cast<long double>(g[j]) - ga);
      }
    }
  }
}

at::Tensor to_f32(const std::vector<long double>& v, const Shape& s) {
  at::Tensor t = at::empty({s.B, s.U, s.T}, at::kFloat);
  float* d = t.data_ptr<float>();
  for (size_t i = 0; i < v.size(); ++i) d[i] = static_cast<float>(v[i]);
  return t;
}

std::vector<long double> to_ld(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kDouble).contiguous();
  const double* d = c.data_ptr<double>();
  return std::vector<long double>(d, d + c.numel());
}

Inputs make_inputs(const Shape& s, const std::string& which, uint64_t seed) {
  torch::manual_seed(seed);
  Inputs in;
  const std::vector<int64_t> sz = {s.B, s.U, s.T};
  at::Tensor logit;
  if (which == "normal") {
    logit = at::randn(sz, at::kDouble) * 2 - 2;
  } else {
    const at::Tensor near0 = at::randn(sz, at::kDouble) * 2 - 12;
    const at::Tensor near1 = at::randn(sz, at::kDouble) * 2 + 4;
    logit = at::where(at::rand(sz, at::kDouble) < 0.9, near0, near1);
  }
  // p is float32; the reference sees exactly the same float32 values.
  in.p = at::sigmoid(logit).to(at::kFloat);
  in.p64 = to_ld(in.p);
  in.g_align = at::randn(sz, at::kFloat);
  std::vector<long double> a64, unused;
  ref_alignment(in.p64, s, nullptr, a64, unused);
  in.alpha = to_f32(a64, s);
  in.alpha64 = to_ld(in.alpha);
  in.u = at::randn(sz, at::kFloat) * (which == "normal" ? 1.0 : 30.0);
  in.u64 = to_ld(in.u);
  in.g_beta = at::randn(sz, at::kFloat);
  in.alpha_prev = at::zeros(sz, at::kFloat);
  in.alpha_prev.select(1, 0).select(1, 0).fill_(1.0);
  if (s.U > 1) in.alpha_prev.narrow(1, 1, s.U - 1).copy_(in.alpha.narrow(1, 0, s.U - 1));
  return in;
}

// ---------------------------------------------------------------------------------------
// The two formulations

at::Tensor aten_alignment(const at::Tensor& p) {
  const int64_t B = p.size(0), U = p.size(1), T = p.size(2);
  at::Tensor prev = at::zeros({B, T}, p.options().requires_grad(false));
  prev.select(1, 0).fill_(1.0);
  const at::Tensor zero_col = at::zeros({B, 1}, p.options().requires_grad(false));
  std::vector<at::Tensor> rows;
  rows.reserve(static_cast<size_t>(U));
  for (int64_t i = 0; i < U; ++i) {
    const at::Tensor pi = p.select(1, i);
    const at::Tensor log1mp = at::log(at::clamp(1 - pi, 1e-10, 1.0));
    const at::Tensor cs = at::cumsum(log1mp, 1);
    const at::Tensor cp = at::exp(at::cat({zero_col, cs.narrow(1, 0, T - 1)}, 1));  // exclusive
    const at::Tensor a = pi * cp * at::cumsum(prev / at::clamp(cp, 1e-10, 1.0), 1);
    rows.push_back(a);
    prev = a;
  }
  return at::stack(rows, 1);
}

/// MovingSum(x, back, forward)[j] = sum_{k = j - back + 1}^{j + forward - 1} x[k] (000 eq. 18)
at::Tensor moving_sum(const at::Tensor& x, int64_t back, int64_t forward) {
  const at::Tensor padded = at::constant_pad_nd(x.unsqueeze(1), {back - 1, forward - 1}, 0.0);
  const at::Tensor ones = at::ones({1, 1, back + forward - 1}, x.options().requires_grad(false));
  return at::conv1d(padded, ones).squeeze(1);
}

at::Tensor aten_mocha(const at::Tensor& alpha, const at::Tensor& u, int64_t w) {
  const int64_t B = alpha.size(0), U = alpha.size(1), T = alpha.size(2);
  const at::Tensor a = alpha.reshape({B * U, T}), uu = u.reshape({B * U, T});
  const at::Tensor exp_u = at::exp(uu - std::get<0>(at::max(uu, 1, true)));
  const at::Tensor beta = exp_u * moving_sum(a / moving_sum(exp_u, w, 1), 1, w);
  return beta.reshape({B, U, T});
}

constexpr int64_t kW = 4;

struct Outputs {
  at::Tensor out;
  std::vector<at::Tensor> grads;
};

// One forward + backward of `op` on the prepared inputs. Each input enters as a new leaf
// that shares the prepared tensor's storage (detach, no copy): a training step receives p, u
// and alpha from the layers below and does not copy them, so a copy here would add two passes
// over an input to the time that the copy bound (the op's own arrays) is read against.
Outputs run(const std::string& op, const std::string& impl, const Inputs& in) {
  if (op == "alignment") {
    at::Tensor p = in.p.detach().requires_grad_(true);
    at::Tensor alpha = impl == "mona" ? mona::nn::monotonic_alignment(p) : aten_alignment(p);
    auto g = torch::autograd::grad({alpha}, {p}, {in.g_align});
    return {alpha, g};
  }
  if (op == "matcha") {  // mona only: no closed form in plain ATen ops at these sizes
    at::Tensor a = in.alpha_prev.detach().requires_grad_(true);
    at::Tensor p = in.p.detach().requires_grad_(true);
    at::Tensor u = in.u.detach().requires_grad_(true);
    at::Tensor beta = mona::nn::matcha_chunkwise(a, p, u);
    auto g = torch::autograd::grad({beta}, {a, p, u}, {in.g_beta});
    return {beta, g};
  }
  at::Tensor a = in.alpha.detach().requires_grad_(true);
  at::Tensor u = in.u.detach().requires_grad_(true);
  at::Tensor beta = impl == "mona" ? mona::nn::mocha_chunkwise(a, u, kW) : aten_mocha(a, u, kW);
  auto g = torch::autograd::grad({beta}, {a, u}, {in.g_beta});
  return {beta, g};
}

struct Accuracy {
  double err_out = 0, err_grad = 0;
  double ref_out = 0, ref_grad = 0;  // largest |reference value|, to judge the errors
  int64_t nonfinite = 0;
};

void compare(const at::Tensor& t, const std::vector<long double>& ref, double& err,
             double& ref_max, int64_t& nonfinite) {
  const at::Tensor c = t.detach().to(at::kDouble).contiguous();
  const double* d = c.data_ptr<double>();
  for (int64_t i = 0; i < c.numel(); ++i) {
    ref_max = std::max(ref_max, static_cast<double>(std::fabs(ref[i])));
    if (!std::isfinite(d[i])) {
      ++nonfinite;
      continue;
    }
    err = std::max(err, static_cast<double>(std::fabs(static_cast<long double>(d[i]) - ref[i])));
  }
}

Accuracy accuracy(const std::string& op, const std::string& impl, const Inputs& in,
                  const Shape& s) {
  Accuracy acc;
  if (op == "matcha") {
    // No reference at these sizes (tests/reference/matcha_reference.h is O(T^3) per row and
    // more; tests/core/test_matcha.cc compares with it on small grids).
    acc.err_out = acc.err_grad = acc.ref_out = acc.ref_grad = NAN;
    return acc;
  }
  torch::manual_seed(0);
  const Outputs o = run(op, impl, in);
  if (op == "alignment") {
    std::vector<long double> alpha, gp;
    ref_alignment(in.p64, s, in.g_align.data_ptr<float>(), alpha, gp);
    compare(o.out, alpha, acc.err_out, acc.ref_out, acc.nonfinite);
    compare(o.grads[0], gp, acc.err_grad, acc.ref_grad, acc.nonfinite);
  } else {
    std::vector<long double> beta, ga, gu;
    ref_mocha(in.alpha64, in.u64, in.g_beta.data_ptr<float>(), s.B * s.U, s.T, kW, beta, ga,
              gu);
    compare(o.out, beta, acc.err_out, acc.ref_out, acc.nonfinite);
    compare(o.grads[0], ga, acc.err_grad, acc.ref_grad, acc.nonfinite);
    compare(o.grads[1], gu, acc.err_grad, acc.ref_grad, acc.nonfinite);
  }
  return acc;
}

// ---------------------------------------------------------------------------------------
// Registration and reporting

struct Point {
  std::string op, impl, which;
  Shape shape{0, 0, 0};
  int64_t iters = 0;
  double bytes = 0;  // minimal bytes moved by one fwd+bwd (or one copy)
  Accuracy acc;
  int threads = 1;   // ATen's and mona's OpenMP team while the point runs
  int reps = 0;      // repetitions (set by add)
};
std::map<std::string, Point> g_points;
std::map<std::string, Inputs> g_inputs;
std::vector<int> g_thread_counts = {1};  // --threads=N[,N...]

// The thread count a point runs with, set before its first call: the calling thread's
// OpenMP team, which ATen's intra-op operators (OpenMP build) and mona's kernels both take.
// Not at::set_num_threads: it also rebuilds caffe2's pthreadpool at every call, whose new
// threads spin before they sleep (bench/notes.md, "The expected alignment on two threads:
// where bench/train's point loses"); main calls it once, with the largest count.
// OpenBLAS's pool stays on the calling thread whatever the count.
void use_threads(int threads) { omp_set_num_threads(threads); }

void bm_train(benchmark::State& st, std::string key) {
  const Point& p = g_points.at(key);
  const Inputs& in = g_inputs.at(p.shape.str() + "/" + p.which);
  use_threads(p.threads);
  // One untimed call first, as a training loop's steps after its first: the outputs' and
  // gradients' memory is then memory glibc already holds, not pages faulted in by the first
  // of the timed calls.
  run(p.op, p.impl, in);
  for (auto _ : st) {
    Outputs o = run(p.op, p.impl, in);
    benchmark::DoNotOptimize(o.grads[0].data_ptr());
  }
}

void bm_copy(benchmark::State& st, std::string key) {  // one thread at any count (memcpy)
  const int64_t bytes = g_points.at(key).shape.T;
  std::vector<char> src(static_cast<size_t>(bytes), 1), dst(static_cast<size_t>(bytes), 0);
  for (auto _ : st) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::ClobberMemory();
  }
}

// The points whose ratios the report's verdicts read: mona's expected alignment and MoChA
// (over the copy bound, and two threads over one) and the copy probes (the bound). Each
// repetition takes well under a second; they run kVerdictRepsFactor (bench/common.h) times
// as many repetitions as the others, as bench/decode's verdict points do.
bool verdict_point(const Point& p) {
  return p.op == "copy" || (p.impl == "mona" && (p.op == "alignment" || p.op == "mocha"));
}

// Registers `p` once per thread count, named `name` (+ "/threads:N" with several counts),
// as `fn` called with that name (its key in g_points).
void add(const std::string& name, const Point& p, void (*fn)(benchmark::State&, std::string)) {
  for (int threads : g_thread_counts) {
    const std::string full = g_thread_counts.size() > 1 ? name + "/threads:" + std::to_string(threads) : name;
    benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(full.c_str(), fn, full);
    b->Iterations(p.iters)->Unit(benchmark::kMillisecond);
    Point q = p;
    q.threads = threads;
    q.reps = g_config.reps * (verdict_point(p) && !g_config.quick ? mona::bench::kVerdictRepsFactor : 1);
    mona::bench::repeat_min(b, q.reps);
    g_points[full] = std::move(q);
  }
}

void register_all() {
  const bool q = g_config.quick;
  // memcpy of as many bytes as the kernels' points move (their bytes lie between 8 and 64
  // MiB, read + written), so that each point's copy bound is taken at its own working set's
  // cache level (the report takes the nearest probe), and one of 256 MiB (DRAM).
  for (int64_t mb : {4, 8, 16, 32, 256}) {
    const int64_t bytes = (q ? std::min<int64_t>(mb, 8) : mb) << 20;
    Point p{"copy", "memcpy", "", Shape{1, 1, bytes}, q ? 3 : (mb <= 8 ? 200 : 10),
            2.0 * static_cast<double>(bytes), {}};
    const std::string name = "probe/copy/" + std::to_string(mb) + "MiB";
    add(name, p, bm_copy);
  }
  const std::vector<Shape> shapes =
      q ? std::vector<Shape>{{4, 10, 50}, {2, 5, 200}}
        : std::vector<Shape>{{32, 100, 500}, {8, 50, 2000}};
  uint64_t seed = 11;
  for (const Shape& s : shapes) {
    for (const std::string which : {"normal", "hard"}) {
      g_inputs[s.str() + "/" + which] = make_inputs(s, which, seed++);
      const Inputs& in = g_inputs[s.str() + "/" + which];
      for (const std::string op : {"alignment", "mocha", "matcha"}) {
        for (const std::string impl : {"mona", "aten"}) {
          if (op == "matcha" && impl == "aten") continue;
          Point p{op, impl, which, s, 0, 0, {}};
          // MAtChA costs O(T^2) per row: 6-11 s per fwd+bwd at these shapes.
          p.iters = q ? 2 : (op == "matcha" ? 1 : (impl == "mona" ? 30 : 5));
          const double n = static_cast<double>(s.B * s.U * s.T);
          // The arrays the two calls take and return, each moved once (issue 22's copy bound):
          // alignment p -> alpha | grad_alpha -> grad_p; MoChA alpha, u -> beta | grad_beta ->
          // grad_alpha, grad_u; MAtChA alpha_prev, p, u -> beta | grad_beta -> three
          // gradients. The backward reads its forward's inputs and outputs a second time
          // (alignment p and alpha: 6 arrays); that traffic is the kernels' cost, not the bound.
          p.bytes = n * sizeof(float) * (op == "alignment" ? 4 : op == "mocha" ? 6 : 8);
          p.acc = accuracy(op, impl, in, s);
          const std::string name = "train/" + op + "/" + impl + "/" + s.str() + "/" + which;
          add(name, p, bm_train);
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--kernel-target") {  // which compiled version of the core kernels runs here
      std::printf("%s\n", mona::core::kernel_target());
      return 0;
    }
    if (std::string(argv[i]) == "--blas-kernels") {  // OpenBLAS's kernel family that mona runs here
      std::printf("%s\n", mona::nn::use_best_blas_kernels().c_str());
      return 0;
    }
  }
  // --threads=N[,N...]: taken here (Flags holds one count), the rest by parse_flags.
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--threads=", 0) != 0) {
      args.push_back(argv[i]);
      continue;
    }
    g_thread_counts.clear();
    std::stringstream list(a.substr(10));
    for (std::string item; std::getline(list, item, ',');) {
      size_t used = 0;
      int threads = 0;
      try {
        threads = std::stoi(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != item.size() || threads < 1) {
        std::fprintf(stderr, "mona_bench_train: --threads: expected counts >= 1 separated by commas, got '%s'\n",
                     a.substr(10).c_str());
        return 2;
      }
      g_thread_counts.push_back(threads);
    }
    if (g_thread_counts.empty()) g_thread_counts = {1};
  }
  std::vector<char*> rest =
      mona::bench::parse_flags(static_cast<int>(args.size()), args.data(), g_config, /*takes_threads=*/false);
  // As mona's programs run: the best OpenBLAS kernels, ATen's and mona's team at the largest
  // count (each point then sets its own, use_threads), and OpenBLAS's own pool kept to the
  // calling thread (mona/nn/threads.h), so that a one-thread point (the ATen peers' products
  // included) runs on one core only: the timer counts the calling thread's CPU time.
  mona::nn::set_threads(*std::max_element(g_thread_counts.begin(), g_thread_counts.end()));
  // ATen sets a thread's OpenMP team to its process-wide count at the thread's first
  // parallel operator; done now, so that it cannot undo use_threads later.
  at::internal::lazy_init_num_threads();
  use_threads(g_thread_counts.front());
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  register_all();
  mona::bench::MinRunReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  std::ostringstream csv;
  csv << "op,impl,case,B,U,T,dtype,threads,iters,reps,cpu_ns,real_ns,bytes,GBps,err_out,"
         "err_grad,nonfinite,ref_max_out,ref_max_grad\n";
  csv.precision(6);
  size_t rows = 0;
  for (const auto& r : reporter.runs) {
    const auto it = g_points.find(r.run_name.function_name);
    if (it == g_points.end()) continue;
    const Point& p = it->second;
    const double cpu_ns = mona::bench::MinRunReporter::cpu_ns(r);
    csv << p.op << ',' << p.impl << ',' << (p.which.empty() ? "-" : p.which) << ','
        << p.shape.B << ',' << p.shape.U << ',' << p.shape.T << ",float32," << p.threads
        << ',' << p.iters << ',' << p.reps << ',' << cpu_ns << ','
        << mona::bench::MinRunReporter::real_ns(r) << ',' << p.bytes << ',' << p.bytes / cpu_ns
        << ',' << p.acc.err_out << ',' << p.acc.err_grad << ',' << p.acc.nonfinite << ','
        << p.acc.ref_out << ',' << p.acc.ref_grad << '\n';
    ++rows;
  }
  return mona::bench::write_csv("mona_bench_train", g_config.csv, csv.str(), rows);
}
