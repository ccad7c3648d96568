// Attention modules; see include/mona/nn/attention.h.
#include "mona/nn/attention.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "check.h"
#include "mona/core/mocha.h"
#include "mona/core/scan.h"
#include "mona/core/softmax.h"
#include "mona/nn/functional.h"
#include "mona/nn/gmm_attention.h"
#include "raw_tensor.h"
#include "mona/core/error.h"

namespace mona::nn {

// ---------------------------------------------------------------------------------------
// Options and factories

void AttentionOptions::validate(const char* who) const {
  MONA_CHECK(query_dim > 0, who, ": query_dim must be > 0, got ", query_dim);
  MONA_CHECK(memory_dim > 0, who, ": memory_dim must be > 0, got ", memory_dim);
  MONA_CHECK(attention_dim >= 0, who, ": attention_dim must be >= 0, got ", attention_dim);
  MONA_CHECK(query_dim <= kMaxModelSize && memory_dim <= kMaxModelSize && attention_dim <= kMaxModelSize, who,
             ": query_dim, memory_dim and attention_dim must be <= ", kMaxModelSize, ", got ", query_dim, ", ",
             memory_dim, " and ", attention_dim);
  MONA_CHECK(energy == "additive" || energy == "dot", who,
              ": energy must be \"additive\" or \"dot\", got \"", energy, "\"");
  MONA_CHECK(monotonic_energy == "additive" || monotonic_energy == "dot", who,
              ": monotonic_energy must be \"additive\" or \"dot\", got \"", monotonic_energy,
              "\"");
  MONA_CHECK(std::isfinite(noise_std) && noise_std >= 0, who,
              ": noise_std must be finite and >= 0, got ", noise_std);
  MONA_CHECK(std::isfinite(init_r), who, ": init_r must be finite, got ", init_r);
  MONA_CHECK(chunk_size >= 1, who, ": chunk_size w must be >= 1, got ", chunk_size);
  MONA_CHECK(tau > 0 && tau < 1, who, ": tau must lie in (0, 1), got ",
              tau);
  gmm.validate(who);
}

void GmmAttentionOptions::validate(const char* who) const {
  MONA_CHECK(num_heads >= 1 && num_heads <= kMaxModelSize, who, ": gmm.num_heads must lie in [1, ", kMaxModelSize,
             "], got ", num_heads);
  MONA_CHECK(std::isfinite(window_radius) && window_radius > 0, who,
             ": gmm.window_radius must be finite and > 0, got ", window_radius);
  MONA_CHECK(window_width >= 1, who, ": gmm.window_width c must be >= 1, got ", window_width);
  MONA_CHECK(std::isfinite(max_step), who, ": gmm.max_step must be finite, got ", max_step);
  MONA_CHECK(std::isfinite(min_variance) && min_variance > 0, who,
             ": gmm.min_variance must be finite and > 0, got ", min_variance);
  MONA_CHECK(std::isfinite(max_variance) && (max_variance == 0 || max_variance > min_variance), who,
             ": gmm.max_variance must be 0 (no clamp) or finite and > gmm.min_variance = ", min_variance, ", got ",
             max_variance);
  MONA_CHECK(std::isfinite(init_step_bias), who, ": gmm.init_step_bias must be finite, got ",
             init_step_bias);
}

std::shared_ptr<Energy> make_energy(const std::string& kind, const EnergyOptions& options,
                                    bool monotonic) {
  if (kind == "additive") {
    if (monotonic) return std::make_shared<MonotonicAdditiveEnergy>(options);
    return std::make_shared<AdditiveEnergy>(options);
  }
  MONA_CHECK(kind == "dot", "make_energy: kind must be \"additive\" or \"dot\", got \"", kind,
              "\"");
  return std::make_shared<ScaledDotEnergy>(options);
}

const std::vector<MechanismInfo>& mechanisms() {
  static const std::vector<MechanismInfo> table = {
      {"soft", false, "energy, attention_dim", "002 eqs. 1-3"},
      {"monotonic", true, "monotonic_energy, attention_dim, init_r, noise_std, tau, sample",
       "002 eqs. 6-14, Algorithm 1"},
      {"mocha", true,
       "monotonic_energy, energy, attention_dim, init_r, noise_std, tau, sample, chunk_size",
       "000 eqs. 14-26"},
      {"matcha", true, "monotonic_energy, energy, attention_dim, init_r, noise_std, tau, sample",
       "000 App. C"},
      {"gmm", false, "gmm.num_heads, gmm.max_step, gmm.min_variance, gmm.max_variance, gmm.init_step_bias",
       "003 eqs. 4-8"},
      {"sagmm", false, "gmm.num_heads, gmm.max_step, gmm.min_variance, gmm.max_variance, gmm.init_step_bias",
       "003 eqs. 9-12"},
      {"sagmm-tr", true,
       "gmm.num_heads, gmm.max_step, gmm.min_variance, gmm.max_variance, gmm.init_step_bias, gmm.window_radius",
       "003 eqs. 9-16"},
      {"sagmm-fixed", true,
       "gmm.num_heads, gmm.max_step, gmm.min_variance, gmm.max_variance, gmm.init_step_bias, gmm.window_width",
       "003 eqs. 9-12, 17-20"},
  };
  return table;
}

const MechanismInfo* find_mechanism(const std::string& name) {
  for (const auto& m : mechanisms()) {
    if (name == m.name) return &m;
  }
  return nullptr;
}

std::string mechanism_names() {
  std::string names;
  for (const auto& m : mechanisms()) names += (names.empty() ? "" : ", ") + std::string(m.name);
  return names;
}

std::shared_ptr<Attention> make_attention(const std::string& mechanism,
                                          const AttentionOptions& options) {
  MONA_CHECK(find_mechanism(mechanism) != nullptr, "make_attention: mechanism must be one of ",
             mechanism_names(), "; got \"", mechanism, "\"");
  if (mechanism == "soft") return std::make_shared<SoftAttention>(options);
  if (mechanism == "monotonic") return std::make_shared<MonotonicAttention>(options);
  if (mechanism == "mocha") return std::make_shared<MoChA>(options);
  if (mechanism == "matcha") return std::make_shared<MAtChA>(options);
  // The GMM family: the name says whether positions are source aware and which window.
  const core::GmmWindow window = mechanism == "sagmm-tr"      ? core::GmmWindow::kAdaptive
                                 : mechanism == "sagmm-fixed" ? core::GmmWindow::kFixed
                                                              : core::GmmWindow::kNone;
  return std::make_shared<GmmAttention>(options, /*source_aware=*/mechanism != "gmm", window);
}

namespace {

EnergyOptions energy_options(const AttentionOptions& o) {
  EnergyOptions e;
  e.query_dim = o.query_dim;
  e.memory_dim = o.memory_dim;
  e.attention_dim = o.attention_dim;
  e.init_r = o.init_r;
  return e;
}

void check_query(const at::Tensor& q, const Memory& m, int64_t dq, const char* fn) {
  detail::check_tensor(q, fn, "query", 2, "[B, Dq]");
  MONA_CHECK(q.size(0) == m.batch() && q.size(1) == dq, fn, ": query: expected [B, Dq] = [",
              m.batch(), ", ", dq, "], got ", q.sizes());
  detail::check_memory_dtype(q, m.values, fn, "query");
}

void check_queries(const at::Tensor& q, const Memory& m, int64_t dq, const char* fn) {
  detail::check_tensor(q, fn, "queries", 3, "[B, U, Dq]");
  MONA_CHECK(q.size(0) == m.batch() && q.size(2) == dq, fn,
              ": queries: expected [B, U, Dq] = [", m.batch(), ", U, ", dq, "], got ", q.sizes());
  detail::check_memory_dtype(q, m.values, fn, "queries");
}

void check_state(const at::Tensor& s, const Memory& m, const char* fn) {
  detail::check_tensor(s, fn, "state", 2, "[B, T]");
  MONA_CHECK(s.size(0) == m.batch() && s.size(1) == m.in_len(), fn,
              ": state: expected the previous alignment [B, T] = [", m.batch(), ", ",
              m.in_len(), "], got ", s.sizes());
  detail::check_memory_dtype(s, m.values, fn, "state");
}

double sigmoid(double e) { return 1.0 / (1.0 + std::exp(-e)); }

// `t` as a 1-D tensor of n values of `dtype` for a hard step to write: kept when it already
// is one whose storage nothing else refers to (the out= convention), else a new one. A
// hard step's fixed cost is what bounds its speed, and an allocation is most of it.
at::Tensor& output_tensor(at::Tensor& t, int64_t n, at::ScalarType dtype) {
  if (!detail::reusable_output(t, n, dtype)) {
    t = at::empty({n}, at::TensorOptions().dtype(dtype));
  }
  return t;
}

// The data of a tensor that output_tensor has just made or kept (dense, CPU, dtype T):
// what data_ptr<T>() returns, without its checks, which a hard step would pay per call.
template <class T>
T* output_data(const at::Tensor& t) {
  return t.unsafeGetTensorImpl()->unsafe_data<T>();
}

// The outputs of an exhausted hard step, in the query's dtype: the zero context [n] (what
// torch::zeros({n}, query.options()) returns, without a dispatched fill) and no weights
// ([0]: no entry attended).
void exhausted_outputs(HardStepOutput& out, int64_t n, const at::Tensor& query) {
  output_tensor(out.context, n, query.scalar_type());
  std::memset(const_cast<void*>(detail::dense_cpu_data(out.context)), 0, out.context.nbytes());
  output_tensor(out.weights, 0, query.scalar_type());
}

// Every field of a hard step's output set to "nothing happened yet"; the tensors stay
// (they are reused or replaced by the step that fills them).
void reset_fields(HardStepOutput& out) {
  out.status = core::ScanStatus::kNeedMoreInput;
  out.index = -1;
  out.begin = -1;
  out.monotonic_energies = 0;
  out.chunk_energies = 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// OnlineMemory

at::Tensor OnlineMemory::values() const {
  return values_.defined() ? values_.narrow(0, row(released_), size_ - released_) : at::Tensor();
}
at::Tensor OnlineMemory::keys() const {
  return keys_.defined() ? keys_.narrow(0, row(released_), size_ - released_) : at::Tensor();
}
at::Tensor OnlineMemory::chunk_keys() const {
  return chunk_keys_.defined() ? chunk_keys_.narrow(0, row(released_), size_ - released_) : at::Tensor();
}

void OnlineMemory::reset() {
  size_ = 0;
  base_ = 0;
  released_ = 0;
  finished_ = false;
}

void OnlineMemory::release_before(int64_t position) {
  released_ = std::max(released_, std::min(position, size_));
  const int64_t dropped = released_ - base_, kept = size_ - released_;
  if (dropped < std::max<int64_t>(16, kept)) return;  // amortised: move once per doubling
  // Move rows [dropped, dropped + kept) to the front; the source and target may overlap,
  // hence memmove on the raw storage rather than a tensor copy.
  auto shift = [&](at::Tensor& buf) {
    if (!buf.defined() || kept == 0) return;
    const size_t row_bytes = static_cast<size_t>(buf.size(1)) * buf.element_size();
    auto* p = static_cast<char*>(buf.data_ptr());
    std::memmove(p, p + static_cast<size_t>(dropped) * row_bytes, static_cast<size_t>(kept) * row_bytes);
  };
  shift(values_);
  shift(keys_);
  shift(chunk_keys_);
  base_ = released_;
}

void OnlineMemory::append(const at::Tensor& v, const at::Tensor& k, const at::Tensor& ck) {
  const int64_t n = v.size(0);
  const int64_t stored = size_ - base_;
  auto grow = [&](at::Tensor& buf, const at::Tensor& x) {
    if (!x.defined()) return;
    const int64_t cap = buf.defined() ? buf.size(0) : 0;
    if (!buf.defined() || buf.scalar_type() != x.scalar_type() || buf.size(1) != x.size(1)) {
      MONA_CHECK(size_ == 0, "OnlineMemory: frames changed dtype or size mid-stream: the memory holds ",
                 buf.scalar_type(), " rows of ", buf.size(1), " values, got ", x.scalar_type(), " ", x.sizes());
      buf = at::empty({std::max<int64_t>(16, n), x.size(1)}, x.options());
    } else if (stored + n > cap) {
      at::Tensor bigger = at::empty({std::max(2 * cap, stored + n), x.size(1)}, x.options());
      bigger.narrow(0, 0, stored).copy_(buf.narrow(0, 0, stored));
      buf = bigger;
    }
    buf.narrow(0, stored, n).copy_(x);
  };
  grow(values_, v);
  grow(keys_, k);
  grow(chunk_keys_, ck);
  values_data_ = values_.defined() ? values_.data_ptr() : nullptr;
  keys_data_ = keys_.defined() ? keys_.data_ptr() : nullptr;
  chunk_keys_data_ = chunk_keys_.defined() ? chunk_keys_.data_ptr() : nullptr;
  value_dim_ = values_.defined() ? values_.size(1) : 0;
  key_dim_ = keys_.defined() ? keys_.size(1) : 0;
  chunk_key_dim_ = chunk_keys_.defined() ? chunk_keys_.size(1) : 0;
  dtype_ = values_.defined() ? values_.scalar_type() : at::kFloat;
  size_ += n;
}

// ---------------------------------------------------------------------------------------
// Attention (shared parts)

void Attention::check_dtype(const at::Tensor& t, const char* fn, const char* name) const {
  const auto params = parameters();
  if (params.empty()) return;
  MONA_CHECK(t.scalar_type() == params.front().scalar_type(), fn, ": ", name, ": expected dtype ",
             params.front().scalar_type(), " (that of the module's parameters), got ", t.scalar_type());
}

Memory Attention::prepare(const at::Tensor& memory, const at::Tensor& lengths) {
  const char* fn = "Attention::prepare";
  detail::check_tensor(memory, fn, "memory", 3, "[B, T, Dh]");
  check_dtype(memory, fn, "memory");
  MONA_CHECK(memory.size(2) == options_.memory_dim, fn, ": memory: expected Dh = ",
              options_.memory_dim, " (AttentionOptions.memory_dim), got ", memory.sizes());
  Memory m;
  // Contiguous once here rather than at every step's context (nn::attention_context reads rows
  // in place): an LSTM's batch-first output is a transposed view.
  m.values = memory.contiguous();
  m.lengths = detail::check_lengths(lengths, fn, "lengths", memory.size(0), memory.size(1));
  m.keys = main_energy().keys(memory);
  if (Energy* c = chunk_energy()) m.chunk_keys = c->keys(memory);
  return m;
}

at::Tensor Attention::initial_state(const Memory& memory) const {
  at::Tensor a0 = torch::zeros({memory.batch(), memory.in_len()}, memory.values.options());
  if (memory.in_len() > 0) a0.select(1, 0).fill_(1.0);
  return a0;
}

void Attention::reseed_noise(uint64_t seed) {
  noise_gen_ = at::make_generator<at::CPUGeneratorImpl>(seed);
}

UnrolledAttention Attention::unroll(const Memory& memory, int64_t steps) {
  MONA_CHECK(steps >= 0, "Attention::unroll: steps: expected >= 0, got ", steps);
  MONA_CHECK(memory.values.defined(), "Attention::unroll: memory: expected a prepared memory (Attention::prepare)");
  return UnrolledAttention(*this, memory, steps, share_steps(memory, steps));
}

std::unique_ptr<SharedSteps> Attention::share_steps(const Memory& memory, int64_t steps) {
  auto shared = std::make_unique<SharedSteps>();
  shared->main = main_energy().unroll(memory.batch(), steps);
  if (Energy* chunk = chunk_energy()) shared->chunk = chunk->unroll(memory.batch(), steps);
  return shared;
}

StepOutput UnrolledAttention::step(const at::Tensor& query, const at::Tensor& state) {
  MONA_CHECK(taken_ < steps_, "UnrolledAttention::step: all ", steps_, " steps of Attention::unroll are taken");
  StepOutput out = attention_->step_with(shared_.get(), query, memory_, state);
  ++taken_;
  return out;
}

at::Tensor Attention::main_energy_step(SharedSteps* shared, const at::Tensor& query, const at::Tensor& keys) {
  return shared != nullptr ? shared->main->step(query, keys) : main_energy().forward(query.unsqueeze(1), keys);
}

at::Tensor Attention::chunk_energy_step(SharedSteps* shared, const at::Tensor& query, const at::Tensor& keys) {
  return shared != nullptr ? shared->chunk->step(query, keys) : chunk_energy()->forward(query.unsqueeze(1), keys);
}

at::Tensor Attention::training_noise(const at::Tensor& energy) {
  if (!is_training() || options_.noise_std == 0) return {};
  return at::randn(energy.sizes(), noise_gen_, energy.options());
}

at::Tensor Attention::selection_probability(const at::Tensor& energy) {
  const at::Tensor noise = training_noise(energy);
  return torch::sigmoid(noise.defined() ? energy + options_.noise_std * noise : energy);
}

void Attention::extend(OnlineMemory& memory, const at::Tensor& frames) {
  const char* fn = "Attention::extend";
  at::Tensor f = frames.dim() == 1 ? frames.unsqueeze(0) : frames;
  detail::check_tensor(f, fn, "frames", 2, "[n, Dh]");
  MONA_CHECK(f.size(1) == options_.memory_dim, fn, ": frames: expected Dh = ",
              options_.memory_dim, ", got ", f.sizes());
  // The module's dtype at a stream's first frames; then the memory's, which is the same
  // and costs no walk over the parameters per frame.
  if (memory.size() == 0) {
    check_dtype(f, fn, "frames");
  } else {
    MONA_CHECK(f.scalar_type() == memory.dtype(), fn, ": frames: expected dtype ", memory.dtype(),
               " (that of the memory so far), got ", f.scalar_type());
  }
  MONA_CHECK(!memory.finished(), fn, ": the stream's input is already finished; reset() it");
  if (f.size(0) == 0) return;
  torch::NoGradGuard no_grad;
  // One entry at a time: a matrix product's rounding can depend on how many rows it gets
  // (a one-row product and a many-row one take different BLAS kernels on some CPUs), and an
  // entry's keys must not depend on how the input was split into accept() calls, so that
  // streaming and offline decoding are the same arithmetic on every CPU.
  Energy* chunk = chunk_energy();
  for (int64_t r = 0; r < f.size(0); ++r) {
    const at::Tensor row = f.narrow(0, r, 1);
    memory.append(row, main_energy().keys(row), chunk ? chunk->keys(row) : at::Tensor());
  }
}

namespace {
void check_hard_query(const at::Tensor& query, const OnlineMemory& memory, int64_t dq,
                      const char* fn) {
  MONA_CHECK(query.defined() && query.is_cpu(), fn,
              ": query: expected a defined CPU tensor",
              query.defined() ? std::string(", got device ") + query.device().str() : "");
  MONA_CHECK(query.numel() == dq, fn, ": query: expected Dq = ", dq, " values, got ",
              query.sizes());
  if (memory.size() > 0) {
    MONA_CHECK(query.scalar_type() == memory.dtype(), fn,
                ": query: expected dtype ", memory.dtype(),
                " (that of the memory), got ", query.scalar_type());
  }
}
}  // namespace

void Attention::scan(const at::Tensor& query, const OnlineMemory& memory, HardState& state,
                     HardStepOutput& out) {
  reset_fields(out);
  if (state.exhausted) {
    out.status = core::ScanStatus::kExhausted;
    exhausted_outputs(out, options_.memory_dim, query);
    return;
  }
  core::ScanOptions so;
  so.tau = options_.tau;
  so.sample = options_.sample;
  core::Rng* rng = nullptr;  // sampling: the stream's own generator
  if (so.sample) {
    if (!state.sample_rng_started) {
      state.sample_rng.reseed(options_.seed);
      state.sample_rng_started = true;
    }
    rng = &state.sample_rng;
  }
  core::ScanResult r;
  if (memory.size() == 0) {
    r = core::monotonic_scan(0, 0, memory.finished(), [](int64_t) { return 0.0; }, so, rng);
  } else {
    const int64_t dk = memory.key_dim_;
    const int64_t n = memory.size();
    MONA_CHECK(state.resume >= memory.first(), "Attention::hard_step: state: the scan resumes at memory entry ",
               state.resume, ", released already (the memory holds entries from ", memory.first(), " on)");
    MONA_CHECK(state.resume <= n, "Attention::hard_step: state: the scan resumes at memory entry ", state.resume,
               ", past the ", n, " entries the memory has received (a state of another stream, or of a memory"
               " since reset?); start from a fresh HardState");
    // The common case, a dot-product energy and a query vector read in place, goes straight
    // to core::dot_threshold_scan (one kernel: the dot products and the decisions
    // e = scale * <query, key> + offset >= logit(tau)); the keys are the key buffer itself
    // (rows [0, size) are the keys), not a narrowed view: no tensor op per step.
    double scale = 1, offset = 0;
    const void* query_data = nullptr;
    if (!so.sample && query.dim() == 1 && query.is_contiguous() && main_energy().dot_form(scale, offset)) {
      query_data = detail::dense_cpu_data(query);
    }
    if (query_data != nullptr) {
      AT_DISPATCH_FLOATING_TYPES(memory.dtype_, "hard_scan", [&] {
        // The kernel itself, as PreparedHardStep calls it: the checks of core::dot_threshold_scan
        // hold here (Dk >= 1; first() <= resume <= n, checked above), and the kernel target is
        // decided once per process. 3-4% of this step's time at T = U = 100 (bench/notes.md).
        static const core::DotThresholdScanKernel<scalar_t> kernel = core::dot_threshold_scan_kernel<scalar_t>();
        r = kernel(static_cast<const scalar_t*>(query_data),
                   static_cast<const scalar_t*>(memory.keys_data_) + memory.row(state.resume) * dk, dk,
                   state.resume, n, memory.finished(), scale, offset, threshold_rule_);
      });
    } else {
      const EnergyScorer scorer = main_energy().scorer(query);
      const int64_t row_bytes = dk * static_cast<int64_t>(elementSize(memory.dtype_));
      AT_DISPATCH_FLOATING_TYPES(memory.dtype_, "hard_scan", [&] {
        const scalar_t* kp = static_cast<const scalar_t*>(memory.keys_data_);
        // The scan reads the keys row after row: each energy first asks for the head of the
        // next row, so a memory that is not in cache costs bandwidth, not latency.
        auto energy_at = [&](int64_t j, auto&& score) {
          if (j + 1 < n) core::prefetch_row(kp + memory.row(j + 1) * dk, row_bytes);
          return score(kp + memory.row(j) * dk);
        };
        if (so.sample) {
          r = core::monotonic_scan(
              state.resume, n, memory.finished(),
              [&](int64_t j) { return sigmoid(energy_at(j, scorer)); }, so, rng);
        } else if (scorer.kind == EnergyScorer::Kind::kDot) {  // a query that is not one vector
          r = core::dot_threshold_scan(static_cast<const scalar_t*>(scorer.query_data),
                                       kp + memory.row(state.resume) * dk, dk, state.resume, n,
                                       memory.finished(), scorer.scale, scorer.offset, threshold_rule_);
        } else {
          r = core::threshold_scan(
              state.resume, n, memory.finished(),
              [&](int64_t j) { return energy_at(j, scorer); }, threshold_rule_);
        }
      });
    }
  }
  out.monotonic_energies = r.inspected;
  switch (r.status) {
    case core::ScanStatus::kChose:
      out.status = core::ScanStatus::kChose;
      out.index = r.index;
      state.t = r.index;
      state.resume = r.index;
      if (chunk_energy() == nullptr) {
        // Plain hard monotonic attention: the context is a copy of h[index] with weight 1.
        // Made here, from the value buffer and without dispatched tensor ops, because this
        // is the whole per-step cost besides the energies (what values().select(0,
        // index).clone() and ones({1}) would return).
        const int64_t dh = memory.value_dim_;
        output_tensor(out.context, dh, memory.dtype_);
        output_tensor(out.weights, 1, memory.dtype_);
        out.begin = r.index;
        AT_DISPATCH_FLOATING_TYPES(memory.dtype_, "hard_context", [&] {
          const scalar_t* row = static_cast<const scalar_t*>(memory.values_data_) + memory.row(r.index) * dh;
          std::copy(row, row + dh, output_data<scalar_t>(out.context));
          *output_data<scalar_t>(out.weights) = scalar_t(1);
        });
      }
      break;
    case core::ScanStatus::kNeedMoreInput:
      out.status = core::ScanStatus::kNeedMoreInput;
      state.resume = r.index;
      break;
    case core::ScanStatus::kExhausted:
      out.status = core::ScanStatus::kExhausted;
      state.exhausted = true;
      exhausted_outputs(out, options_.memory_dim, query);
      break;
  }
}

void Attention::chunk_context(const at::Tensor& query, const OnlineMemory& memory,
                              int64_t begin, int64_t end, HardStepOutput& out) {
  Energy* energy = chunk_energy();
  if (energy == nullptr) energy = &main_energy();
  const EnergyScorer scorer = energy->scorer(query);
  // The buffers themselves (rows [0, size) are valid), not narrowed views: no tensor op.
  const bool chunk_keys = energy == chunk_energy();
  MONA_CHECK(begin >= memory.first(), "Attention::hard_step: the chunk starts at memory entry ", begin,
             ", released already (the memory holds entries from ", memory.first(), " on)");
  const int64_t n = end - begin + 1;
  const int64_t dk = chunk_keys ? memory.chunk_key_dim_ : memory.key_dim_;
  const int64_t dh = memory.value_dim_;
  // Energies and weights of the chunk: per-thread scratch that only grows, so a step
  // allocates nothing once the chunk sizes have been seen.
  thread_local std::vector<double> u, w;
  if (u.size() < static_cast<size_t>(n)) {
    u.resize(static_cast<size_t>(n));
    w.resize(static_cast<size_t>(n));
  }
  output_tensor(out.context, dh, memory.dtype_);  // zeroed below
  output_tensor(out.weights, n, memory.dtype_);
  AT_DISPATCH_FLOATING_TYPES(memory.dtype_, "chunk_context", [&] {
    const scalar_t* kp = static_cast<const scalar_t*>(
        chunk_keys ? memory.chunk_keys_data_ : memory.keys_data_);
    for (int64_t k = 0; k < n; ++k) u[k] = scorer(kp + memory.row(begin + k) * dk);
    core::chunk_softmax(u.data(), 0, n - 1, w.data());
    const scalar_t* vp = static_cast<const scalar_t*>(memory.values_data_);
    scalar_t* cp = output_data<scalar_t>(out.context);
    std::fill(cp, cp + dh, scalar_t(0));
    scalar_t* wp = output_data<scalar_t>(out.weights);
    for (int64_t k = 0; k < n; ++k) {
      const scalar_t wk = static_cast<scalar_t>(w[k]);
      wp[k] = wk;
      const scalar_t* row = vp + memory.row(begin + k) * dh;
      for (int64_t d = 0; d < dh; ++d) cp[d] += wk * row[d];
    }
  });
  out.begin = begin;
  out.chunk_energies = n;
}

// ---------------------------------------------------------------------------------------
// SoftAttention

SoftAttention::SoftAttention(const AttentionOptions& options) : Attention(options) {
  options_.validate("SoftAttention");
  energy = register_module("energy", make_energy(options_.energy, energy_options(options_),
                                                 /*monotonic=*/false));
  reseed_noise(options_.seed);
}

StepOutput SoftAttention::step_with(SharedSteps* shared, const at::Tensor& query, const Memory& memory,
                                    const at::Tensor&) {
  check_query(query, memory, options_.query_dim, "SoftAttention::step");
  const at::Tensor e = main_energy_step(shared, query, memory.keys);
  StepOutput out;
  out.weights = masked_softmax(e, memory.lengths).squeeze(1);
  out.context = attention_context(out.weights, memory.values);
  return out;
}

SequenceOutput SoftAttention::forward(const at::Tensor& queries, const Memory& memory,
                                      const at::Tensor& out_lengths) {
  check_queries(queries, memory, options_.query_dim, "SoftAttention::forward");
  const at::Tensor e = energy->forward(queries, memory.keys);
  SequenceOutput out;
  out.weights = masked_softmax(e, memory.lengths, out_lengths);
  out.contexts = torch::bmm(out.weights, memory.values);
  return out;
}

void SoftAttention::hard_step_into(const at::Tensor& query, const OnlineMemory& memory,
                                   HardState& state, HardStepOutput& out) {
  check_hard_query(query, memory, options_.query_dim, "SoftAttention::hard_step");
  reset_fields(out);
  if (!memory.finished()) return;  // soft attention needs the whole input
  if (memory.size() == 0) {
    out.status = core::ScanStatus::kExhausted;
    exhausted_outputs(out, options_.memory_dim, query);
    state.exhausted = true;
    return;
  }
  chunk_context(query, memory, 0, memory.size() - 1, out);
  out.status = core::ScanStatus::kChose;
  out.index = memory.size() - 1;
}

// ---------------------------------------------------------------------------------------
// MonotonicAttention

MonotonicAttention::MonotonicAttention(const AttentionOptions& options) : Attention(options) {
  options_.validate("MonotonicAttention");
  monotonic = register_module(
      "monotonic", make_energy(options_.monotonic_energy, energy_options(options_), true));
  reseed_noise(options_.seed);
}

StepOutput MonotonicAttention::expected_step(SharedSteps* shared, const at::Tensor& query, const Memory& memory,
                                             const at::Tensor& state, ChunkRule rule, const char* fn) {
  check_query(query, memory, options_.query_dim, fn);
  check_state(state, memory, fn);
  const at::Tensor e = main_energy_step(shared, query, memory.keys);
  const at::Tensor u = rule == ChunkRule::kNone ? at::Tensor() : chunk_energy_step(shared, query, memory.chunk_keys);
  const MonotonicStepOutput s = monotonic_attention_step(e, training_noise(e), options_.noise_std, state, u,
                                                         memory.values, rule, options_.chunk_size, memory.lengths);
  StepOutput out;
  out.state = s.alpha;
  out.weights = s.weights;
  out.context = s.context;
  return out;
}

StepOutput MonotonicAttention::step_with(SharedSteps* shared, const at::Tensor& query,
                                         const Memory& memory, const at::Tensor& state) {
  return expected_step(shared, query, memory, state, ChunkRule::kNone, "MonotonicAttention::step");
}

SequenceOutput MonotonicAttention::forward(const at::Tensor& queries, const Memory& memory,
                                           const at::Tensor& out_lengths) {
  check_queries(queries, memory, options_.query_dim, "MonotonicAttention::forward");
  const at::Tensor p = selection_probability(monotonic->forward(queries, memory.keys));
  SequenceOutput out;
  out.alignment = monotonic_alignment(p, memory.lengths, out_lengths);
  out.weights = out.alignment;
  out.contexts = torch::bmm(out.weights, memory.values);
  return out;
}

void MonotonicAttention::hard_step_into(const at::Tensor& query, const OnlineMemory& memory,
                                        HardState& state, HardStepOutput& out) {
  check_hard_query(query, memory, options_.query_dim, "MonotonicAttention::hard_step");
  // On kChose, scan() has set the context h[index], the weight 1 and begin = index
  // (this mechanism has no chunk energy).
  scan(query, memory, state, out);
}

// ---------------------------------------------------------------------------------------
// PreparedHardStep: MonotonicAttention::hard_step_into's scan and context with the per-call
// work done at construction.

template <class T>
PreparedHardStep<T>::PreparedHardStep(Attention& attention, const OnlineMemory& memory)
    : memory_(memory),
      rule_(attention.threshold_rule_),
      scan_(core::dot_threshold_scan_kernel<T>()),
      zeros_(static_cast<size_t>(attention.options().memory_dim), T(0)) {
  const char* fn = "PreparedHardStep";
  const AttentionOptions& o = attention.options();
  MONA_CHECK(dynamic_cast<MonotonicAttention*>(&attention) != nullptr && attention.chunk_energy() == nullptr, fn,
             ": attention: expected hard monotonic attention (\"monotonic\"); MoChA, MAtChA, soft and GMM attention"
             " build their context from several entries (use hard_step_into)");
  MONA_CHECK(!o.sample, fn, ": attention: expected the threshold rule (options.sample = false); sampling draws"
             " per entry (use hard_step_into)");
  MONA_CHECK(attention.main_energy().dot_form(scale_, offset_), fn, ": attention: expected a dot-product"
             " monotonic energy (monotonic_energy \"dot\", 002 eq. 17), got \"", o.monotonic_energy, "\"");
  constexpr at::ScalarType dtype = std::is_same_v<T, float> ? at::kFloat : at::kDouble;
  MONA_CHECK(memory.size() == 0 || memory.dtype() == dtype, fn, ": memory: expected dtype ", dtype,
             " (the step's), got ", memory.dtype());
}

template class PreparedHardStep<float>;
template class PreparedHardStep<double>;

// ---------------------------------------------------------------------------------------
// MoChA

MoChA::MoChA(const AttentionOptions& options) : MonotonicAttention(options) {
  options_.validate("MoChA");
  chunk = register_module("chunk", make_energy(options_.energy, energy_options(options_), false));
}

StepOutput MoChA::step_with(SharedSteps* shared, const at::Tensor& query, const Memory& memory,
                            const at::Tensor& state) {
  return expected_step(shared, query, memory, state, ChunkRule::kFixed, "MoChA::step");
}

SequenceOutput MoChA::forward(const at::Tensor& queries, const Memory& memory,
                              const at::Tensor& out_lengths) {
  SequenceOutput out = MonotonicAttention::forward(queries, memory, out_lengths);
  const at::Tensor u = chunk->forward(queries, memory.chunk_keys);
  out.weights = mocha_chunkwise(out.alignment, u, options_.chunk_size, memory.lengths,
                                out_lengths);
  out.contexts = torch::bmm(out.weights, memory.values);
  return out;
}

void MoChA::hard_step_into(const at::Tensor& query, const OnlineMemory& memory,
                           HardState& state, HardStepOutput& out) {
  check_hard_query(query, memory, options_.query_dim, "MoChA::hard_step");
  scan(query, memory, state, out);
  if (out.status == core::ScanStatus::kChose) {
    chunk_context(query, memory, core::mocha_chunk_start(out.index, options_.chunk_size),
                  out.index, out);
  }
}

// ---------------------------------------------------------------------------------------
// MAtChA

MAtChA::MAtChA(const AttentionOptions& options) : MonotonicAttention(options) {
  options_.validate("MAtChA");
  chunk = register_module("chunk", make_energy(options_.energy, energy_options(options_), false));
}

StepOutput MAtChA::step_with(SharedSteps* shared, const at::Tensor& query, const Memory& memory,
                             const at::Tensor& state) {
  return expected_step(shared, query, memory, state, ChunkRule::kAdaptive, "MAtChA::step");
}

SequenceOutput MAtChA::forward(const at::Tensor& queries, const Memory& memory,
                               const at::Tensor& out_lengths) {
  check_queries(queries, memory, options_.query_dim, "MAtChA::forward");
  const at::Tensor p = selection_probability(monotonic->forward(queries, memory.keys));
  const at::Tensor u = chunk->forward(queries, memory.chunk_keys);
  SequenceOutput out;
  out.alignment = monotonic_alignment(p, memory.lengths, out_lengths);
  // Row i of alpha_prev is alpha_{i-1}: the initial alignment, then alpha shifted down.
  const int64_t U = queries.size(1);
  const at::Tensor alpha_prev = torch::cat(
      {initial_state(memory).unsqueeze(1), out.alignment.narrow(1, 0, std::max<int64_t>(U - 1, 0))},
      1).narrow(1, 0, U);
  out.weights = matcha_chunkwise(alpha_prev, p, u, memory.lengths, out_lengths);
  out.contexts = torch::bmm(out.weights, memory.values);
  return out;
}

void MAtChA::hard_step_into(const at::Tensor& query, const OnlineMemory& memory,
                            HardState& state, HardStepOutput& out) {
  check_hard_query(query, memory, options_.query_dim, "MAtChA::hard_step");
  const int64_t previous = state.t;
  scan(query, memory, state, out);
  if (out.status == core::ScanStatus::kChose) chunk_context(query, memory, previous, out.index, out);
}

}  // namespace mona::nn
