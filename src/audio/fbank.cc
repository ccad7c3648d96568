// Kaldi log-mel filterbank, online (mona/audio/fbank.h).
#include "mona/audio/fbank.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <sstream>

#include "fft.h"
#include "mona/core/error.h"
#include "mona/core/rng.h"

namespace mona::audio {
namespace {

constexpr double kPi = 3.14159265358979323846;
// FLT_EPSILON, the floor of every log, as in Kaldi and torchaudio.
constexpr double kLogFloor = static_cast<double>(FLT_EPSILON);

double mel_scale(double hz) { return 1127.0 * std::log(1.0 + hz / 700.0); }

// The effective high edge in Hz (Kaldi: <= 0 is an offset from Nyquist).
double effective_high_freq(const FbankOptions& o) {
  const double nyquist = 0.5 * o.sample_rate;
  return o.high_freq <= 0 ? nyquist + o.high_freq : o.high_freq;
}

// One triangular bin: weights[k - first] for FFT bins first .. first + weights.size() - 1.
struct MelBin {
  int64_t first = 0;
  std::vector<double> weights;
};

// Kaldi's mel banks over the FFT bins k = 0 .. P/2 - 1 (the Nyquist bin gets no weight).
// Throws ArgumentError naming the options and the first mel bin that covers no FFT bin
// (too many bins for the FFT length and band): the one feasibility check, run by
// FbankOptions::validate and by OnlineFbank's constructor. `o` passed check_fields.
std::vector<MelBin> mel_banks(const FbankOptions& o) {
  const int64_t padded = o.padded_window_size();
  const int64_t num_fft_bins = padded / 2;
  const double bin_width = static_cast<double>(o.sample_rate) / static_cast<double>(padded);
  const double mel_low = mel_scale(o.low_freq);
  const double mel_high = mel_scale(effective_high_freq(o));
  const double delta = (mel_high - mel_low) / (o.num_mel_bins + 1);
  std::vector<double> fft_mel(static_cast<size_t>(num_fft_bins));  // mel of FFT bin k
  for (int64_t k = 0; k < num_fft_bins; ++k) {
    fft_mel[static_cast<size_t>(k)] = mel_scale(bin_width * static_cast<double>(k));
  }
  std::vector<MelBin> banks(static_cast<size_t>(o.num_mel_bins));
  for (int b = 0; b < o.num_mel_bins; ++b) {
    const double left = mel_low + b * delta;
    const double center = mel_low + (b + 1.0) * delta;
    const double right = mel_low + (b + 2.0) * delta;
    MelBin& bank = banks[static_cast<size_t>(b)];
    int64_t first = -1;
    for (int64_t k = 0; k < num_fft_bins; ++k) {
      const double mel = fft_mel[static_cast<size_t>(k)];
      const double up = (mel - left) / (center - left);
      const double down = (right - mel) / (right - center);
      const double w = std::max(0.0, std::min(up, down));
      if (w > 0) {
        if (first < 0) first = k;
        bank.weights.resize(static_cast<size_t>(k - first + 1), 0.0);
        bank.weights[static_cast<size_t>(k - first)] = w;
      }
    }
    MONA_CHECK(first >= 0, "FbankOptions: num_mel_bins = ", o.num_mel_bins,
               " is too many for an FFT of ", padded, " points (frame_length_ms = ",
               o.frame_length_ms, " at sample_rate = ", o.sample_rate,
               " Hz) between low_freq = ", o.low_freq, " Hz and a high edge of ",
               effective_high_freq(o), " Hz (high_freq = ", o.high_freq, "): mel bin ", b,
               " covers no FFT bin; use fewer mel bins, longer frames or a wider band");
    bank.first = first;
  }
  return banks;
}

std::vector<double> window_function(const FbankOptions& o) {
  const int64_t n = o.window_size();
  std::vector<double> w(static_cast<size_t>(n));
  const double a = 2.0 * kPi / static_cast<double>(n - 1);
  for (int64_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(i);
    double v = 1.0;
    if (o.window == "povey") {
      v = std::pow(0.5 - 0.5 * std::cos(a * x), 0.85);
    } else if (o.window == "hanning") {
      v = 0.5 - 0.5 * std::cos(a * x);
    } else if (o.window == "hamming") {
      v = 0.54 - 0.46 * std::cos(a * x);
    } else if (o.window == "blackman") {
      v = o.blackman_coeff - 0.5 * std::cos(a * x) + (0.5 - o.blackman_coeff) * std::cos(2 * a * x);
    }  // rectangular: 1
    w[static_cast<size_t>(i)] = v;
  }
  return w;
}

// A standard normal draw (Box-Muller, one of the pair; u1 in (0, 1]).
double gauss(core::Rng& rng) {
  const double u1 = 1.0 - rng.uniform();
  const double u2 = rng.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}

template <class T>
std::string field(const char* name, const T& v) {
  return std::string(name) + "=" + detail::message(v);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// FbankOptions

int64_t FbankOptions::window_size() const {
  return static_cast<int64_t>(static_cast<double>(sample_rate) * frame_length_ms * 0.001);
}

int64_t FbankOptions::window_shift() const {
  return static_cast<int64_t>(static_cast<double>(sample_rate) * frame_shift_ms * 0.001);
}

int64_t FbankOptions::padded_window_size() const {
  const int64_t n = window_size();
  if (!round_to_power_of_two) return n;
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

int64_t FbankOptions::num_frames(int64_t num_samples) const {
  MONA_CHECK(num_samples >= 0, "FbankOptions::num_frames: num_samples: expected >= 0, got ",
             num_samples);
  const int64_t size = window_size(), shift = window_shift();
  MONA_CHECK(size >= 1 && shift >= 1, "FbankOptions::num_frames: window_size() = ", size,
             " and window_shift() = ", shift, " must be positive (call validate())");
  if (snip_edges) return num_samples < size ? 0 : 1 + (num_samples - size) / shift;
  return (num_samples + shift / 2) / shift;
}

int64_t FbankOptions::frame_start(int64_t frame) const {
  const int64_t size = window_size(), shift = window_shift();
  return snip_edges ? frame * shift : frame * shift + shift / 2 - size / 2;
}

double FbankOptions::frame_end_ms(int64_t frame) const {
  return 1000.0 * static_cast<double>(frame_start(frame) + window_size()) / sample_rate;
}

namespace {

// Every field in its range: validate() but for the mel banks' feasibility (mel_banks), which
// needs the fields checked first.
void check_fields(const FbankOptions& o) {
  using detail::check;
  check(o.sample_rate > 0, "FbankOptions: sample_rate: expected > 0 Hz, got ",
        o.sample_rate);
  // At most 1e6 ms (1000 s), so that the sample counts below are computed without overflow.
  check(std::isfinite(o.frame_length_ms) && o.frame_length_ms > 0 && o.frame_length_ms <= 1e6,
        "FbankOptions: frame_length_ms: expected a value in (0, 1e6], got ", o.frame_length_ms);
  check(std::isfinite(o.frame_shift_ms) && o.frame_shift_ms > 0 && o.frame_shift_ms <= 1e6,
        "FbankOptions: frame_shift_ms: expected a value in (0, 1e6], got ", o.frame_shift_ms);
  check(o.window_size() >= 2 && o.window_size() <= (int64_t{1} << 24),
        "FbankOptions: frame_length_ms = ", o.frame_length_ms, " at sample_rate = ",
        o.sample_rate, " Hz gives a window of ", o.window_size(),
        " samples; expected [2, 2^24]");
  check(o.window_shift() >= 1, "FbankOptions: frame_shift_ms = ", o.frame_shift_ms,
        " at sample_rate = ", o.sample_rate, " Hz gives a shift of ", o.window_shift(),
        " samples; expected >= 1");
  check(o.padded_window_size() % 2 == 0,
        "FbankOptions: round_to_power_of_two = false with a ", o.window_size(),
        "-sample window: the FFT length must be even (change frame_length_ms)");
  check(std::isfinite(o.dither) && o.dither >= 0, "FbankOptions: dither: expected a finite value >= 0, got ",
        o.dither);
  check(o.preemphasis >= 0 && o.preemphasis <= 1,
        "FbankOptions: preemphasis: expected [0, 1], got ", o.preemphasis);
  check(o.window == "povey" || o.window == "hamming" || o.window == "hanning" ||
            o.window == "rectangular" || o.window == "blackman",
        "FbankOptions: window: expected povey, hamming, hanning, rectangular or blackman, got \"",
        o.window, "\"");
  check(std::isfinite(o.blackman_coeff), "FbankOptions: blackman_coeff: expected finite, got ",
        o.blackman_coeff);
  check(o.num_mel_bins >= 3, "FbankOptions: num_mel_bins: expected >= 3, got ",
        o.num_mel_bins);
  const double nyquist = 0.5 * o.sample_rate;
  check(o.low_freq >= 0 && o.low_freq < nyquist, "FbankOptions: low_freq: expected [0, ",
        nyquist, ") Hz (Nyquist), got ", o.low_freq);
  const double high = effective_high_freq(o);
  check(high > 0 && high <= nyquist && high > o.low_freq, "FbankOptions: high_freq = ",
        o.high_freq, " gives a high edge of ", high, " Hz; expected (low_freq = ", o.low_freq,
        ", ", nyquist, "] (<= 0 counts from Nyquist)");
  check(std::isfinite(o.energy_floor) && o.energy_floor >= 0,
        "FbankOptions: energy_floor: expected >= 0, got ", o.energy_floor);
}

}  // namespace

void FbankOptions::validate() const {
  check_fields(*this);
  (void)mel_banks(*this);  // every mel bin covers an FFT bin
}

std::string FbankOptions::to_string() const {
  const std::vector<std::string> f = {
      field("sample_rate", sample_rate),
      field("frame_length_ms", frame_length_ms),
      field("frame_shift_ms", frame_shift_ms),
      field("dither", dither),
      field("preemphasis", preemphasis),
      field("remove_dc_offset", remove_dc_offset ? "true" : "false"),
      field("window", window),
      field("blackman_coeff", blackman_coeff),
      field("round_to_power_of_two", round_to_power_of_two ? "true" : "false"),
      field("num_mel_bins", num_mel_bins),
      field("low_freq", low_freq),
      field("high_freq", high_freq),
      field("energy_floor", energy_floor),
      field("use_energy", use_energy ? "true" : "false"),
      field("use_log_fbank", use_log_fbank ? "true" : "false"),
      field("use_power", use_power ? "true" : "false"),
      field("snip_edges", snip_edges ? "true" : "false"),
      field("raw_energy", raw_energy ? "true" : "false"),
  };
  std::string s = "FbankOptions(";
  for (size_t i = 0; i < f.size(); ++i) s += (i ? ", " : "") + f[i];
  return s + ")";
}

// ---------------------------------------------------------------------------------------
// OnlineFbank

struct OnlineFbank::Impl {
  FbankOptions opts;
  uint64_t seed;
  int64_t size, shift, padded, bins;
  std::vector<double> window;
  std::vector<MelBin> banks;
  internal::RealFft fft;
  std::vector<double> frame;     // [size] the frame being processed
  std::vector<double> spectrum;  // [padded / 2] power or magnitude

  core::Rng rng;
  std::vector<float> held;  // samples [offset, offset + held.size())
  int64_t offset = 0;       // absolute index of held[0]
  int64_t received = 0;     // samples accepted
  int64_t done = 0;         // frames computed
  bool finished = false;
  Features pending;         // computed, not yet taken

  explicit Impl(const FbankOptions& o, uint64_t s)
      : opts((check_fields(o), o)),  // validate(), with mel_banks run once, below
        seed(s),
        size(o.window_size()),
        shift(o.window_shift()),
        padded(o.padded_window_size()),
        bins(o.num_bins()),
        window(window_function(o)),
        banks(mel_banks(o)),
        fft(o.padded_window_size()),
        frame(static_cast<size_t>(size)),
        spectrum(static_cast<size_t>(padded / 2)),
        rng(s) {
    pending.num_bins = bins;
  }

  int64_t start_of(int64_t t) const { return opts.frame_start(t); }

  // Frames whose samples have all arrived (all frames, once finished).
  int64_t frames_available() const {
    if (finished || opts.snip_edges) return opts.num_frames(received);
    // Frame t is complete when start_of(t) + size <= received; and it exists whatever the
    // rest of the signal when t < num_frames(received).
    const int64_t last_start = received - size;  // start_of(t) <= last_start
    const int64_t rhs = last_start - start_of(0);  // start_of(t) = t * shift + start_of(0)
    const int64_t complete = rhs < 0 ? 0 : rhs / shift + 1;
    return std::min(complete, opts.num_frames(received));
  }

  // Sample i of the signal, reflected into [0, received) (Kaldi's extract_window). Not yet
  // finished, a frame that is complete never reaches past `received`.
  double sample(int64_t i) const {
    const int64_t n = received;
    while (i < 0 || i >= n) i = i < 0 ? -i - 1 : 2 * n - 1 - i;
    return static_cast<double>(held[static_cast<size_t>(i - offset)]);
  }

  void compute_frame(int64_t t, float* out) {
    const int64_t start = start_of(t);
    double* w = frame.data();
    if (start >= 0 && start + size <= received) {
      const float* src = held.data() + (start - offset);
      for (int64_t s = 0; s < size; ++s) w[s] = static_cast<double>(src[s]);
    } else {
      for (int64_t s = 0; s < size; ++s) w[s] = sample(start + s);
    }
    if (opts.dither > 0) {
      for (int64_t s = 0; s < size; ++s) w[s] += opts.dither * gauss(rng);
    }
    if (opts.remove_dc_offset) {
      double sum = 0;
      for (int64_t s = 0; s < size; ++s) sum += w[s];
      const double mean = sum / static_cast<double>(size);
      for (int64_t s = 0; s < size; ++s) w[s] -= mean;
    }
    double energy = 0;
    if (opts.raw_energy && opts.use_energy) {
      for (int64_t s = 0; s < size; ++s) energy += w[s] * w[s];
    }
    if (opts.preemphasis != 0) {
      const double c = opts.preemphasis;
      for (int64_t s = size - 1; s > 0; --s) w[s] -= c * w[s - 1];
      w[0] -= c * w[0];
    }
    double* in = fft.input();
    for (int64_t s = 0; s < size; ++s) in[s] = w[s] * window[static_cast<size_t>(s)];
    for (int64_t s = size; s < padded; ++s) in[s] = 0.0;
    if (!opts.raw_energy && opts.use_energy) {
      for (int64_t s = 0; s < size; ++s) energy += in[s] * in[s];
    }
    fft.execute();
    const fftw_complex* x = fft.output();
    for (int64_t k = 0; k < padded / 2; ++k) {
      const double p = x[k][0] * x[k][0] + x[k][1] * x[k][1];
      spectrum[static_cast<size_t>(k)] = opts.use_power ? p : std::sqrt(p);
    }
    int64_t j = 0;
    if (opts.use_energy) {
      double e = std::log(std::max(energy, kLogFloor));
      if (opts.energy_floor > 0) e = std::max(e, std::log(opts.energy_floor));
      out[j++] = static_cast<float>(e);
    }
    for (const MelBin& bank : banks) {
      const double* p = spectrum.data() + bank.first;
      double m = 0;
      for (size_t k = 0; k < bank.weights.size(); ++k) m += bank.weights[k] * p[k];
      if (opts.use_log_fbank) m = std::log(std::max(m, kLogFloor));
      out[j++] = static_cast<float>(m);
    }
  }

  void compute_available() {
    const int64_t avail = frames_available();
    if (avail > done) {
      pending.data.resize(static_cast<size_t>((pending.num_frames + avail - done) * bins));
      for (; done < avail; ++done, ++pending.num_frames) {
        compute_frame(done, pending.row(pending.num_frames));
      }
    }
    // Keep only what frames to come can read: from the next frame's start on (the whole
    // signal while that start is negative, for the reflection at the left edge; the
    // reflection at the right edge stays inside the last frame, see fbank.h).
    const int64_t keep_from = finished ? received : std::max<int64_t>(0, start_of(done));
    const int64_t drop = std::min<int64_t>(keep_from, received) - offset;
    if (drop > 0) {
      held.erase(held.begin(), held.begin() + drop);
      offset += drop;
    }
  }
};

OnlineFbank::OnlineFbank(const FbankOptions& opts, uint64_t dither_seed)
    : impl_(std::make_unique<Impl>(opts, dither_seed)) {}
OnlineFbank::~OnlineFbank() = default;
OnlineFbank::OnlineFbank(OnlineFbank&&) noexcept = default;
OnlineFbank& OnlineFbank::operator=(OnlineFbank&&) noexcept = default;

void OnlineFbank::accept_waveform(const float* samples, size_t n) {
  Impl& m = *impl_;
  MONA_CHECK(!m.finished, "OnlineFbank::accept_waveform: called after input_finished() (",
             m.received, " samples accepted); call reset() to start a new signal");
  if (n == 0) return;
  MONA_CHECK(samples != nullptr, "OnlineFbank::accept_waveform: samples is null with n = ", n);
  // A NaN or infinity (a broken decoder, a float file) would make every frame it reaches NaN.
  const float* bad = std::find_if(samples, samples + n, [](float x) { return !std::isfinite(x); });
  MONA_CHECK(bad == samples + n, "OnlineFbank::accept_waveform: samples[", bad - samples, "] = ", *bad,
             " (sample ", m.received + (bad - samples), " of the signal): expected finite samples");
  m.held.insert(m.held.end(), samples, samples + n);
  m.received += static_cast<int64_t>(n);
  m.compute_available();
}

void OnlineFbank::input_finished() {
  Impl& m = *impl_;
  if (m.finished) return;
  m.finished = true;
  m.compute_available();
}

int64_t OnlineFbank::num_frames_ready() const { return impl_->done; }

Features OnlineFbank::take_frames() {
  Features out;
  std::swap(out, impl_->pending);
  impl_->pending.num_bins = impl_->bins;
  out.num_bins = impl_->bins;
  return out;
}

int64_t OnlineFbank::num_samples_held() const {
  return static_cast<int64_t>(impl_->held.size());
}
int64_t OnlineFbank::num_samples_accepted() const { return impl_->received; }
bool OnlineFbank::is_finished() const { return impl_->finished; }

void OnlineFbank::reset() {
  Impl& m = *impl_;
  m.rng.reseed(m.seed);
  m.held.clear();
  m.offset = m.received = m.done = 0;
  m.finished = false;
  m.pending = Features();
  m.pending.num_bins = m.bins;
}

const FbankOptions& OnlineFbank::options() const { return impl_->opts; }

Features compute_fbank(const FbankOptions& opts, const std::vector<float>& samples,
                       uint64_t dither_seed) {
  OnlineFbank fbank(opts, dither_seed);
  fbank.accept_waveform(samples.data(), samples.size());
  fbank.input_finished();
  return fbank.take_frames();
}

}  // namespace mona::audio
