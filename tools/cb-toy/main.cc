// mona-cb-toy: the toy experiment of 004 sec. 3.1 (recipes/cb-toy/README.md).
//
// Population P: T Bernoulli emission variables with logits theta*_t ~ N(0, sigma^2), and
// categorical labels over a vocabulary of C symbols whose distribution at frame t depends on
// the previous label (or a start symbol): logits phi*[t, prev, c] ~ N(0, sigma^2). A sequence
// is drawn by sampling b ~ prod_t Bernoulli(sigmoid(theta*_t)) and appending
// c ~ P_t(. | previous label) at every frame with b_t = 1; only c is observed.
//
// Model Q: the same family (theta [T], phi [T, C + 1, C]), initialised at 0, fitted by Adam on
// fresh batches of N sequences with one estimator of mona/nn/cb_estimators.h (M samples per
// sequence, leave-one-out baseline for the REINFORCE estimators). Reported per estimator
// (mean and spread over seeds): the MSE between population and fitted parameters (as
// probabilities), the held-out exact log Q(c) (004 eq. 34), the mean sample reward, and the
// estimator's variance across the M samples of a sequence, next to the exact gradient
// (enumeration of all 2^T alignments).
//
// Usage: mona-cb-toy [--quick] [--out DIR] [--T 10] [--C 3] [--N 32] [--M 4] [--sigma 1]
//                    [--updates 4000] [--seeds 3] [--lr 0.05] [--temperature 0.5]
//                    [--estimators reinforce,cb,db,idb,idb-alt,bb,bb-alt,st-idb,st-bb,exact]
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "mona/core/error.h"
#include "mona/core/rng.h"
#include "mona/io/files.h"
#include "mona/io/plot.h"
#include "mona/nn/cb_estimators.h"
#include "mona/nn/conditional_bernoulli.h"
#include "../cli_validators.h"

namespace {

using mona::core::Rng;
using torch::Tensor;
namespace mn = mona::nn;

const auto kD = torch::TensorOptions().dtype(torch::kDouble);
const auto kL = torch::TensorOptions().dtype(torch::kLong);

// The estimators the toy runs, in the table's order: the default of --estimators.
const std::vector<std::string> kEstimators = {"reinforce", "cb",     "db",     "idb",   "idb-alt",
                                              "bb",        "bb-alt", "st-idb", "st-bb", "exact"};

struct Config {
  int64_t T = 10, C = 3, N = 32, M = 4, updates = 4000, seeds = 3, eval_n = 256, var_n = 64;
  double sigma = 1.0, lr = 0.05, temperature = 0.5;
  int64_t curve_every = 25;
  std::string out = "cb-toy-out";
  std::vector<std::string> estimators = kEstimators;
};

// An estimator spec: the library estimator plus the direction (for "-alt").
struct Spec {
  std::string name;
  mn::CbEstimator est;
  mn::CbDirection dir = mn::CbDirection::kForward;
};

Spec parse_spec(const std::string& s) {
  Spec sp{s, mn::CbEstimator::kCb};
  std::string base = s;
  if (s.size() > 4 && s.substr(s.size() - 4) == "-alt") {
    base = s.substr(0, s.size() - 4);
    sp.dir = mn::CbDirection::kAlternate;
  }
  sp.est = mn::parse_cb_estimator(base);
  return sp;
}

// "a, b, ..." of the names.
std::string comma_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// --estimators NAME,NAME,...: the names, each one of kEstimators once; an empty list or an
// empty name is refused (an empty string would otherwise mean the default, all of them).
std::vector<std::string> split_estimators(const std::string& list) {
  if (list.empty()) throw std::invalid_argument("expected one or more of " + comma_list(kEstimators) + ", got \"\"");
  std::vector<std::string> names;
  std::stringstream ss(list + ",");  // a trailing ',' would otherwise pass unseen
  std::string e;
  while (std::getline(ss, e, ',')) {
    if (std::find(kEstimators.begin(), kEstimators.end(), e) == kEstimators.end()) {
      throw std::invalid_argument((e.empty() ? "empty estimator name in '" + list + "'"
                                             : "unknown estimator '" + e + "'") +
                                  " (expected " + comma_list(kEstimators) + ")");
    }
    if (std::find(names.begin(), names.end(), e) != names.end()) {
      throw std::invalid_argument("estimator '" + e + "' given twice in '" + list + "'");
    }
    names.push_back(e);
  }
  return names;
}

struct Population {
  Tensor theta, phi;  // [T], [T, C + 1, C]
};

// A batch of observed label sequences: labels [N, T] (padded with 0), prev [N, T] (previous
// label or C for the start), L [N].
struct Batch {
  Tensor labels, prev, L;
};

Batch sample_batch(const Population& P, int64_t N, Rng& rng) {
  const int64_t T = P.theta.size(0), C = P.phi.size(2);
  const Tensor pb = torch::sigmoid(P.theta).contiguous();
  const Tensor pc = torch::softmax(P.phi, -1).contiguous();
  const double* pbp = pb.data_ptr<double>();
  const double* pcp = pc.data_ptr<double>();
  Batch b{torch::zeros({N, T}, kL), torch::zeros({N, T}, kL), torch::zeros({N}, kL)};
  auto* lp = b.labels.data_ptr<int64_t>();
  auto* pp = b.prev.data_ptr<int64_t>();
  auto* Lp = b.L.data_ptr<int64_t>();
  for (int64_t n = 0; n < N; ++n) {
    int64_t prev = C, l = 0;
    for (int64_t t = 0; t < T; ++t) {
      if (!rng.bernoulli(pbp[t])) continue;
      const double u = rng.uniform();
      const double* row = pcp + (t * (C + 1) + prev) * C;
      int64_t c = C - 1;
      double cum = 0;
      for (int64_t k = 0; k < C; ++k) {
        cum += row[k];
        if (u < cum) {
          c = k;
          break;
        }
      }
      lp[n * T + l] = c;
      pp[n * T + l] = prev;
      prev = c;
      ++l;
    }
    Lp[n] = l;
  }
  return b;
}

// log_emit[n, l, t] = log softmax(phi[t, prev_{n,l}])[c_{n,l}]: [N, T, T] (U = T).
Tensor log_emit_of(const Tensor& phi, const Batch& b) {
  const int64_t T = phi.size(0), C = phi.size(2), N = b.labels.size(0);
  const Tensor ls = torch::log_softmax(phi, -1).permute({1, 2, 0}).reshape({(C + 1) * C, T});
  const Tensor idx = (b.prev * C + b.labels).reshape({-1});
  return ls.index_select(0, idx).reshape({N, T, T});
}

// Enumeration over all 2^T alignments: J = log Q(L) + E_{b|L}[sum_l log_emit] per row [N].
Tensor enumerate_J(const Tensor& logits, const Tensor& E, const Tensor& L) {
  const int64_t N = logits.size(0), T = logits.size(1), S = int64_t(1) << T;
  Tensor B = torch::zeros({S, T}, kD);
  auto a = B.accessor<double, 2>();
  for (int64_t s = 0; s < S; ++s)
    for (int64_t t = 0; t < T; ++t) a[s][t] = double((s >> t) & 1);
  const Tensor cnt = B.sum(1).to(torch::kLong);                               // [S]
  const Tensor logpb = torch::matmul(torch::log_sigmoid(logits), B.t()) +
                       torch::matmul(torch::log_sigmoid(-logits), (1 - B).t());  // [N, S]
  const Tensor li = (B.cumsum(1) - 1).clamp(0, T - 1).to(torch::kLong);        // [S, T]
  const Tensor Eg = E.gather(1, li.unsqueeze(0).expand({N, S, T}));           // [N, S, T]
  const Tensor rew = (Eg * B.unsqueeze(0)).sum(2);                            // [N, S]
  const Tensor keep = cnt.unsqueeze(0) == L.unsqueeze(1);                     // [N, S]
  const Tensor ninf = torch::full({}, -INFINITY, kD);
  const Tensor lp = torch::where(keep, logpb, ninf);
  const Tensor logPL = torch::logsumexp(lp, 1);
  const Tensor w = torch::exp(lp - logPL.unsqueeze(1));
  return logPL + (w * torch::where(keep, rew, torch::zeros_like(rew))).sum(1);
}

double mse(const Tensor& a, const Tensor& b) { return (a - b).pow(2).mean().item<double>(); }

struct Curve {
  std::vector<double> step, mse_bern, mse_cat, heldout;
};

struct RunResult {
  double mse_bern = 0, mse_cat = 0, heldout = 0, reward = 0, var_logits = 0, var_emit = 0,
         exact_sq = 0, err_sq = 0, seconds = 0;
  Curve curve;
};

// Per-sample gradient rows of one estimator call on a batch, rows repeated M times.
struct SampleGrads {
  Tensor gx, gE;  // [N, M, T], [N, M, T, T] (per-sample estimates of grad J)
  double reward = 0;
};

SampleGrads sample_grads(const Spec& sp, const Tensor& theta, const Tensor& phi, const Batch& b,
                         int64_t M, double temperature, int64_t step, Rng& rng,
                         Tensor* loss_graph_E = nullptr, Tensor* logE_out = nullptr) {
  const int64_t N = b.labels.size(0), T = theta.size(0);
  const bool exact = sp.est == mn::CbEstimator::kExact;
  const int64_t m = exact ? 1 : M;
  const Tensor logE = log_emit_of(phi, b);
  Tensor E = logE.detach().repeat_interleave(m, 0).requires_grad_();
  Tensor X = theta.detach().unsqueeze(0).expand({N * m, T}).clone().requires_grad_();
  const Tensor L = b.L.repeat_interleave(m, 0);
  mn::CbEstimatorOptions o;
  o.samples = 1;
  o.group = m;
  o.baseline = m >= 2 ? mn::CbBaseline::kLeaveOneOut : mn::CbBaseline::kNone;
  o.direction = sp.dir;
  o.step = step;
  o.temperature = temperature;
  mn::CbEstimatorStats st;
  Tensor loss = mn::cb_estimator_loss(sp.est, X, E, rng, o, {}, L, &st);
  loss.backward();
  SampleGrads g;
  const double scale = -double(N * m);  // loss = -mean over rows
  g.gx = (X.grad() * scale).reshape({N, m, T});
  g.gE = (E.grad() * scale).reshape({N, m, T, T});
  g.reward = st.reward;
  if (loss_graph_E) *loss_graph_E = E.grad().reshape({N, m, T, T}).sum(1);
  if (logE_out) *logE_out = logE;
  return g;
}

RunResult run(const Config& cfg, const Spec& sp, int64_t seed) {
  const auto t0 = std::chrono::steady_clock::now();
  torch::manual_seed(1000 + seed);
  Population P{torch::randn({cfg.T}, kD) * cfg.sigma,
               torch::randn({cfg.T, cfg.C + 1, cfg.C}, kD) * cfg.sigma};
  Rng data_rng(77 + 1000 * seed), est_rng(5 + 1000 * seed), eval_rng(999 + seed);
  const Batch eval = sample_batch(P, cfg.eval_n, eval_rng);
  const Batch var_batch = sample_batch(P, cfg.var_n, eval_rng);
  Tensor theta = torch::zeros({cfg.T}, kD).requires_grad_();
  Tensor phi = torch::zeros({cfg.T, cfg.C + 1, cfg.C}, kD).requires_grad_();
  RunResult res;

  // Estimator variance at Q = P (the same point for every estimator; at Q = 0 every
  // alignment has the same reward and the global estimators' variance vanishes): per-sample
  // estimates across the M samples of each sequence, against the exact grad J.
  {
    Rng vr(31 + seed);
    const SampleGrads g = sample_grads(sp, P.theta, P.phi, var_batch,
                                       std::max<int64_t>(cfg.M, 2), cfg.temperature, 0, vr);
    Tensor X = P.theta.unsqueeze(0).expand({cfg.var_n, cfg.T}).clone().requires_grad_();
    Tensor E = log_emit_of(P.phi, var_batch).requires_grad_();
    const Tensor J = enumerate_J(X, E, var_batch.L);
    const auto ge = torch::autograd::grad({J.sum()}, {X, E});
    if (sp.est == mn::CbEstimator::kExact) {
      res.var_logits = res.var_emit = 0;  // deterministic (and it targets log P(c), not J)
      res.err_sq = std::nan("");
    } else {
      res.var_logits = g.gx.var(1).sum(1).mean().item<double>();
      res.var_emit = g.gE.var(1).sum({1, 2}).mean().item<double>();
      res.err_sq = (g.gx - ge[0].unsqueeze(1)).pow(2).sum(2).mean().item<double>();
    }
    res.exact_sq = ge[0].pow(2).sum(1).mean().item<double>();
  }

  torch::optim::Adam opt({theta, phi}, torch::optim::AdamOptions(cfg.lr));
  const Tensor pb_true = torch::sigmoid(P.theta), pc_true = torch::softmax(P.phi, -1);
  auto evaluate = [&](int64_t step) {
    torch::NoGradGuard ng;
    res.curve.step.push_back(double(step));
    res.curve.mse_bern.push_back(mse(torch::sigmoid(theta), pb_true));
    res.curve.mse_cat.push_back(mse(torch::softmax(phi, -1), pc_true));
    // An estimator that diverged (non-finite parameters, e.g. at a too large --lr) has no
    // held-out likelihood: NaN, which the table and plots show as n/a, and the other
    // estimators' runs are kept (the likelihood refuses non-finite logits).
    if (!torch::isfinite(theta).all().item<bool>() || !torch::isfinite(phi).all().item<bool>()) {
      res.curve.heldout.push_back(std::nan(""));
      return;
    }
    const Tensor X = theta.unsqueeze(0).expand({cfg.eval_n, cfg.T}).contiguous();
    const Tensor ll = mn::cb_marginal_log_likelihood(X, log_emit_of(phi, eval), {}, eval.L);
    res.curve.heldout.push_back(ll.mean().item<double>());
  };
  double reward_sum = 0;
  int64_t reward_n = 0;
  for (int64_t u = 0; u < cfg.updates; ++u) {
    if (u % cfg.curve_every == 0) evaluate(u);
    const Batch b = sample_batch(P, cfg.N, data_rng);
    opt.zero_grad();
    Tensor gE_sum, logE;
    const SampleGrads g =
        sample_grads(sp, theta, phi, b, cfg.M, cfg.temperature, u, est_rng, &gE_sum, &logE);
    const int64_t m = g.gx.size(1);
    // Gradient of the loss -mean_rows(objective): -(mean over samples and sequences).
    theta.mutable_grad() = -g.gx.mean(at::IntArrayRef{0, 1}).detach();
    torch::autograd::backward({logE}, {gE_sum});
    (void)m;
    opt.step();
    if (!torch::isfinite(theta).all().item<bool>() || !torch::isfinite(phi).all().item<bool>()) {
      std::fprintf(stderr, "mona-cb-toy: %s seed %lld diverged at update %lld (non-finite parameters; lower --lr?)\n",
                   sp.name.c_str(), static_cast<long long>(seed), static_cast<long long>(u));
      break;  // its last figures are NaN (n/a); the other runs are kept
    }
    if (u >= cfg.updates - std::max<int64_t>(1, cfg.updates / 10)) {
      reward_sum += g.reward;
      ++reward_n;
    }
  }
  evaluate(cfg.updates);
  res.mse_bern = res.curve.mse_bern.back();
  res.mse_cat = res.curve.mse_cat.back();
  res.heldout = res.curve.heldout.back();
  res.reward = sp.est == mn::CbEstimator::kExact ? std::nan("") : reward_sum / double(reward_n);
  res.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

double population_heldout(const Config& cfg, int64_t seed) {
  torch::manual_seed(1000 + seed);
  Population P{torch::randn({cfg.T}, kD) * cfg.sigma,
               torch::randn({cfg.T, cfg.C + 1, cfg.C}, kD) * cfg.sigma};
  Rng eval_rng(999 + seed);
  const Batch eval = sample_batch(P, cfg.eval_n, eval_rng);
  torch::NoGradGuard ng;
  const Tensor X = P.theta.unsqueeze(0).expand({cfg.eval_n, cfg.T}).contiguous();
  return mn::cb_marginal_log_likelihood(X, log_emit_of(P.phi, eval), {}, eval.L)
      .mean()
      .item<double>();
}

// ---- output ------------------------------------------------------------------------------
std::string fmt(double v, int prec = 4) {
  if (!std::isfinite(v)) return "n/a";
  std::ostringstream s;
  s << std::setprecision(prec) << v;
  return s.str();
}

std::pair<double, double> mean_sd(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m += x;
  m /= double(v.size());
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return {m, v.size() > 1 ? std::sqrt(s / double(v.size() - 1)) : 0.0};
}

std::string pm(const std::vector<double>& v, int prec = 3) {
  const auto [m, s] = mean_sd(v);
  if (!std::isfinite(m)) return "n/a";
  return fmt(m, prec) + " ± " + fmt(s, 2);
}

// Two panels over the updates, one line per estimator (mean of the seeds): the MSE of the
// Bernoulli probabilities (log scale) and the held-out log Q(c). Points that are not finite
// are left out (a diverged run shows as a shorter line).
void plot(const std::string& path, const std::vector<std::string>& names,
          const std::vector<Curve>& curves, const Config& cfg) {
  namespace io = mona::io;
  io::LineChart mse, heldout;
  mse.title = "MSE(sigmoid(theta), population)";
  mse.x.label = heldout.x.label = "update";
  mse.y = {"mean squared error (log scale)", io::Scale::kLog};
  heldout.title = "held-out log Q(c) per sequence (eq. 34)";
  heldout.y.label = "log Q(c), nats";
  mse.markers = heldout.markers = false;
  double best = -INFINITY, worst = INFINITY;
  for (size_t s = 0; s < curves.size(); ++s) {
    const Curve& c = curves[s];
    // Colours by estimator, the same in both panels (and one legend for the figure).
    io::Series m{names[s], {}, {}, false, static_cast<int>(s)}, h = m;
    for (size_t i = 0; i < c.step.size(); ++i) {
      if (std::isfinite(c.mse_bern[i])) {
        m.x.push_back(c.step[i]);
        m.y.push_back(std::max(c.mse_bern[i], 1e-12));
      }
      if (std::isfinite(c.heldout[i])) {
        h.x.push_back(c.step[i]);
        h.y.push_back(c.heldout[i]);
        best = std::max(best, c.heldout[i]);
        worst = std::min(worst, c.heldout[i]);
      }
    }
    if (!m.x.empty()) mse.series.push_back(m);
    if (!h.x.empty()) heldout.series.push_back(h);
  }
  // A window of 1.5 nats below the best curve; curves leaving it are clipped (eq. 1 with
  // forcing diverges by tens of nats, which would flatten the others).
  if (worst < best - 1.5) heldout.y.min = best - 1.5;
  std::vector<io::LineChart> panels;
  for (auto* chart : {&mse, &heldout})
    if (!chart->series.empty()) panels.push_back(*chart);
  if (panels.empty()) {
    std::cerr << "mona-cb-toy: no finite curve to plot; " << path << " not written\n";
    return;
  }
  const std::string caption = "004 sec. 3.1 toy: T=" + std::to_string(cfg.T) +
                              " C=" + std::to_string(cfg.C) + " N=" + std::to_string(cfg.N) +
                              " M=" + std::to_string(cfg.M) + " sigma=" + fmt(cfg.sigma) +
                              ", mean of " + std::to_string(cfg.seeds) + " seeds";
  io::write_line_chart_png(path, panels, {540, 480, io::Legend::kRight, caption});
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  bool quick = false;
  std::string estimators;
  // Arguments: CLI11, errors in mona's style (one line "mona-cb-toy: error: ...", exit 2).
  CLI::App app{"mona-cb-toy: the toy experiment of 004 sec. 3.1 (recipes/cb-toy/README.md)"};
  app.add_flag("--quick", quick, "a few seconds' smoke run (T <= 6, 30 updates, 1 seed)");
  app.add_option("--out", cfg.out, "output directory (table.md, runs.csv, curves.csv, plot.png)");
  using mona::tools::integer_in;
  using mona::tools::number_above;
  app.add_option("--T", cfg.T, "frames (the exact gradient enumerates 2^T alignments)")
      ->check(integer_in(1, 14));
  app.add_option("--C", cfg.C, "label vocabulary size")->check(integer_in(1));
  app.add_option("--N", cfg.N, "sequences per batch")->check(integer_in(1));
  app.add_option("--M", cfg.M, "samples per sequence")->check(integer_in(1));
  app.add_option("--sigma", cfg.sigma, "std of the population logits")
      ->check(number_above(0, true));
  app.add_option("--updates", cfg.updates, "Adam updates per run")->check(integer_in(1));
  app.add_option("--seeds", cfg.seeds, "runs per estimator")->check(integer_in(1));
  app.add_option("--lr", cfg.lr, "Adam learning rate")->check(number_above(0, false));
  app.add_option("--temperature", cfg.temperature, "relaxation temperature (st-*)")
      ->check(number_above(0, false));
  app.add_option("--estimators", estimators, "comma-separated, any of: " + comma_list(kEstimators) + " (default: all)")
      ->check(CLI::Validator(
          [](std::string& list) -> std::string {
            try {
              split_estimators(list);
              return "";
            } catch (const std::invalid_argument& e) {
              return e.what();
            }
          },
          "LIST"));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const std::string what = e.what();
    std::cerr << "mona-cb-toy: error: " << what.substr(0, what.find('\n'))
              << " (see mona-cb-toy --help)\n";
    return 2;
  }
  try {
    if (app.count("--estimators") > 0) cfg.estimators = split_estimators(estimators);
    if (quick) {
      cfg.T = std::min<int64_t>(cfg.T, 6);
      cfg.updates = 30;
      cfg.seeds = 1;
      cfg.N = 8;
      cfg.eval_n = 32;
      cfg.var_n = 8;
      cfg.curve_every = 10;
    }
    std::vector<Spec> specs;
    for (const auto& e : cfg.estimators) specs.push_back(parse_spec(e));
    torch::set_num_threads(1);
    std::filesystem::create_directories(cfg.out);

    // runs.csv, curves.csv and table.md are built in memory and written together at the
    // end (mona::io::write_files_atomic: temporary files renamed into place), so that a run
    // interrupted after minutes leaves the results of the last finished run as they were.
    std::ostringstream runs, curves;
    runs << "estimator,seed,mse_bernoulli,mse_categorical,heldout_logQ,population_logP,"
            "sample_reward,var_logits,var_log_emit,exact_grad_sq,err_sq_vs_exact,seconds\n";
    curves << "estimator,seed,update,mse_bernoulli,mse_categorical,heldout_logQ\n";
    std::vector<double> pop;
    for (int64_t s = 0; s < cfg.seeds; ++s) pop.push_back(population_heldout(cfg, s));
    std::vector<std::vector<RunResult>> all;
    std::vector<Curve> mean_curves;
    for (const auto& sp : specs) {
      std::vector<RunResult> rs;
      for (int64_t s = 0; s < cfg.seeds; ++s) {
        rs.push_back(run(cfg, sp, s));
        const auto& r = rs.back();
        runs << sp.name << ',' << s << ',' << r.mse_bern << ',' << r.mse_cat << ',' << r.heldout
             << ',' << pop[size_t(s)] << ',' << r.reward << ',' << r.var_logits << ','
             << r.var_emit << ',' << r.exact_sq << ',' << r.err_sq << ',' << r.seconds << '\n';
        for (size_t i = 0; i < r.curve.step.size(); ++i)
          curves << sp.name << ',' << s << ',' << r.curve.step[i] << ',' << r.curve.mse_bern[i]
                 << ',' << r.curve.mse_cat[i] << ',' << r.curve.heldout[i] << '\n';
        std::cerr << sp.name << " seed " << s << ": mse_bern " << fmt(r.mse_bern) << " mse_cat "
                  << fmt(r.mse_cat) << " heldout " << fmt(r.heldout) << " (" << fmt(r.seconds, 3)
                  << " s)\n";
      }
      Curve mc = rs[0].curve;
      for (size_t i = 0; i < mc.step.size(); ++i) {
        double b = 0, c = 0, h = 0;
        for (const auto& r : rs) {
          b += r.curve.mse_bern[i];
          c += r.curve.mse_cat[i];
          h += r.curve.heldout[i];
        }
        mc.mse_bern[i] = b / double(rs.size());
        mc.mse_cat[i] = c / double(rs.size());
        mc.heldout[i] = h / double(rs.size());
      }
      mean_curves.push_back(mc);
      all.push_back(rs);
    }

    // Markdown table: mean ± sd over seeds.
    std::ostringstream md;
    md << "| estimator | 004 | unbiased for grad J | MSE Bernoulli p | MSE categorical p | "
          "held-out log Q(c) | sample reward | var(grad logits) | var / ‖grad J‖² | "
          "E‖g - grad J‖² | s/run |\n";
    md << "|---|---|---|---|---|---|---|---|---|---|---|\n";
    const std::map<std::string, std::string> eq = {
        {"reinforce", "eq. 1"}, {"cb", "eq. 21"},    {"db", "eq. 22"},
        {"idb", "eq. 24"},      {"idb-alt", "eqs. 24-25"}, {"bb", "eq. 27"},
        {"bb-alt", "eq. 27 alt."}, {"st-idb", "eqs. 31, 33"}, {"st-bb", "eqs. 28, 33"},
        {"exact", "eq. 34"}};
    for (size_t k = 0; k < specs.size(); ++k) {
      std::vector<double> mb, mcat, ho, rw, vl, rel, err, sec;
      for (const auto& r : all[k]) {
        mb.push_back(r.mse_bern);
        mcat.push_back(r.mse_cat);
        ho.push_back(r.heldout);
        rw.push_back(r.reward);
        vl.push_back(r.var_logits);
        rel.push_back(r.var_logits / r.exact_sq);
        err.push_back(r.err_sq);
        sec.push_back(r.seconds);
      }
      const auto& sp = specs[k];
      const auto it = eq.find(sp.name);
      md << "| " << sp.name << " | " << (it == eq.end() ? "" : it->second) << " | "
         << (sp.est == mn::CbEstimator::kExact ? "exact (log P(c))"
                                                : (mn::cb_estimator_unbiased(sp.est) ? "yes" : "no"))
         << " | " << pm(mb) << " | " << pm(mcat) << " | " << pm(ho) << " | " << pm(rw) << " | "
         << pm(vl) << " | " << pm(rel) << " | " << pm(err) << " | " << fmt(mean_sd(sec).first, 3)
         << " |\n";
    }
    md << "\nPopulation held-out log P(c): " << pm(pop) << " (" << cfg.eval_n
       << " held-out sequences per seed).\n";
    // Errors name the file ("write DIR/runs.csv: ..."); then none of the three was replaced
    // unless the message says so.
    mona::io::write_files_atomic({{cfg.out + "/runs.csv", runs.str()},
                                  {cfg.out + "/curves.csv", curves.str()},
                                  {cfg.out + "/table.md", md.str()}});
    std::vector<std::string> names;
    for (const auto& sp : specs) names.push_back(sp.name);
    plot(cfg.out + "/plot.png", names, mean_curves, cfg);
    std::cout << md.str();
  } catch (const c10::Error& e) {  // without LibTorch's stack trace
    const std::string what = e.what_without_backtrace();
    std::cerr << "mona-cb-toy: error: " << what.substr(0, what.find('\n')) << "\n";
    return 1;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    std::cerr << "mona-cb-toy: error: " << what.substr(0, what.find('\n')) << "\n";
    return 1;
  }
  return 0;
}
