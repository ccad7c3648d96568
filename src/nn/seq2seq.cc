// Sequence-to-sequence model; see include/mona/nn/seq2seq.h.
#include "mona/nn/seq2seq.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "check.h"
#include "mona/audio/cmvn.h"
#include "mona/nn/gmm_attention.h"
#include "mona/nn/lstm.h"
#include "mona/core/error.h"
#include "mona/data/tokens.h"

namespace mona::nn {

void SmoothingOptions::validate() const {
  MONA_CHECK(uniform >= 0 && uniform < 1, "SmoothingOptions: uniform: expected a value in [0, 1), got ", uniform);
  MONA_CHECK(localized.empty() || localized.size() == 4,
             "SmoothingOptions: localized: expected 4 weights (offsets -2, -1, +1, +2) or none, got ",
             localized.size());
  for (size_t k = 0; k < localized.size(); ++k) {
    MONA_CHECK(std::isfinite(localized[k]) && localized[k] >= 0, "SmoothingOptions: localized[", k,
               "]: expected a finite weight >= 0, got ", localized[k]);
  }
}

namespace {
using data::kBos;
using data::kEos;
using data::kPad;
using data::kUnk;

constexpr int64_t kConvStride = 2;  // each of the two 3x3 convolutions (pad 1) halves time
int64_t conv_out(int64_t n) { return n > 0 ? (n - 1) / kConvStride + 1 : 0; }

// The parameters of a one-layer unidirectional LSTM module and of an LSTM cell, computed
// with mona::nn::lstm_layer, lstm_cell and UnrolledLstmCell (the modules keep them and their
// names).
LstmWeights lstm_weights(const torch::nn::LSTM& m) {
  const auto p = m->named_parameters(false);
  return {p["weight_ih_l0"], p["weight_hh_l0"], p["bias_ih_l0"], p["bias_hh_l0"]};
}
LstmWeights lstm_weights(const torch::nn::LSTMCell& m) {
  return {m->weight_ih, m->weight_hh, m->bias_ih, m->bias_hh};
}
}  // namespace

namespace detail {
// Inverted dropout (torch::dropout's), its keep mask drawn from `generator` when given.
at::Tensor dropout(const at::Tensor& x, double p, bool training, at::Generator* generator) {
  if (!training || p == 0) return x;
  if (generator == nullptr) return torch::dropout(x, p, true);
  const at::Tensor keep = at::empty_like(x).bernoulli_(1 - p, *generator);
  return x * keep * (1 / (1 - p));
}
}  // namespace detail

void ModelOptions::validate() const {
  const char* w = "ModelOptions";
  MONA_CHECK(input_kind == "symbols" || input_kind == "features" || input_kind == "audio", w,
              ": input_kind must be \"symbols\", \"features\" or \"audio\", got \"", input_kind, "\"");
  if (input_kind == "symbols") {
    MONA_CHECK(input_vocab > 0, w, ": input_vocab must be > 0 for symbol inputs, got ", input_vocab);
    MONA_CHECK(embedding_dim > 0, w, ": embedding_dim must be > 0, got ", embedding_dim);
  } else {
    if (input_kind == "audio") {
      features.validate();
      MONA_CHECK(feature_dim == features.num_bins(), w, ": feature_dim must equal features.num_bins() = ",
                 features.num_bins(), " for audio inputs, got ", feature_dim);
    }
    MONA_CHECK(feature_dim > 0, w, ": feature_dim must be > 0 for feature inputs, got ", feature_dim);
    MONA_CHECK(conv_channels > 0, w, ": conv_channels must be > 0, got ", conv_channels);
  }
  MONA_CHECK(encoder_layers >= 1, w, ": encoder_layers must be >= 1, got ", encoder_layers);
  MONA_CHECK(encoder_hidden > 0, w, ": encoder_hidden must be > 0, got ", encoder_hidden);
  MONA_CHECK(projection_dim >= 0, w, ": projection_dim must be >= 0, got ", projection_dim);
  MONA_CHECK(time_reduction_layers >= 0 && time_reduction_layers < encoder_layers, w,
             ": time_reduction_layers must lie in [0, encoder_layers = ", encoder_layers, "), got ",
             time_reduction_layers);
  MONA_CHECK(time_reduction_layers == 0 || !bidirectional, w,
             ": time_reduction_layers must be 0 with a bidirectional encoder, got ", time_reduction_layers);
  MONA_CHECK(lookahead >= 0, w, ": lookahead must be >= 0, got ", lookahead);
  MONA_CHECK(lookahead == 0 || !bidirectional, w, ": lookahead must be 0 with a bidirectional encoder "
              "(it already sees the whole input), got ", lookahead);
  MONA_CHECK(output_vocab > data::kNumReserved, w, ": output_vocab must be > ", data::kNumReserved,
             " (the reserved tokens of mona/data/tokens.h and at least one more), got ", output_vocab);
  MONA_CHECK(decoder_embedding_dim > 0, w, ": decoder_embedding_dim must be > 0, got ", decoder_embedding_dim);
  MONA_CHECK(decoder_hidden > 0, w, ": decoder_hidden must be > 0, got ", decoder_hidden);
  MONA_CHECK(dropout >= 0 && dropout < 1, w, ": dropout must lie in [0, 1), got ", dropout);
  MONA_CHECK(p_eos >= 0 && p_eos <= 1, w, ": p_eos must lie in [0, 1], got ", p_eos);
  MONA_CHECK(ctc_weight >= 0 && ctc_weight < 1, w, ": ctc_weight must lie in [0, 1), got ", ctc_weight);
  MONA_CHECK(find_mechanism(attention) != nullptr, w, ": attention must be one of ",
             mechanism_names(), "; got \"", attention, "\"");
  // Upper bounds: the layers' sizes are products of these (an LSTM's input is
  // (lookahead + 1) x its embedding), which overflowed int64 or exhausted memory in LibTorch
  // without naming the option.
  const std::pair<const char*, int64_t> sizes[] = {
      {"input_vocab", input_vocab},         {"output_vocab", output_vocab},   {"embedding_dim", embedding_dim},
      {"feature_dim", feature_dim},         {"conv_channels", conv_channels}, {"encoder_hidden", encoder_hidden},
      {"projection_dim", projection_dim},   {"decoder_embedding_dim", decoder_embedding_dim},
      {"decoder_hidden", decoder_hidden},   {"encoder_layers", encoder_layers}};
  for (const auto& [name, value] : sizes) {
    MONA_CHECK(value <= kMaxModelSize, w, ": ", name, " must be <= ", kMaxModelSize, ", got ", value);
  }
  MONA_CHECK(lookahead <= kMaxLookahead, w, ": lookahead must be <= ", kMaxLookahead, ", got ", lookahead);
}

// ---------------------------------------------------------------------------------------
// Encoder

Encoder::Encoder(const ModelOptions& o) : options_(o) {
  o.validate();
  int64_t in_dim = 0;
  if (o.input_kind == "symbols") {
    embedding = register_module(
        "embedding",
        torch::nn::Embedding(torch::nn::EmbeddingOptions(o.input_vocab, o.embedding_dim).padding_idx(kPad)));
    in_dim = o.embedding_dim;
  } else {
    auto conv = [](int64_t in, int64_t out) {
      return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).stride(kConvStride).padding(1));
    };
    conv1 = register_module("conv1", conv(1, o.conv_channels));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(o.conv_channels));
    conv2 = register_module("conv2", conv(o.conv_channels, o.conv_channels));
    bn2 = register_module("bn2", torch::nn::BatchNorm2d(o.conv_channels));
    in_dim = o.conv_channels * conv_out(conv_out(o.feature_dim));
    feature_mean_ = register_buffer("feature_mean", torch::zeros({o.feature_dim}));
    feature_inv_std_ = register_buffer("feature_inv_std", torch::ones({o.feature_dim}));
  }
  in_dim *= o.lookahead + 1;
  for (int64_t l = 0; l < o.encoder_layers; ++l) {
    auto lstm = torch::nn::LSTM(
        torch::nn::LSTMOptions(in_dim, o.encoder_hidden).batch_first(true).bidirectional(o.bidirectional));
    lstms_.push_back(register_module("lstm" + std::to_string(l), lstm));
    in_dim = o.encoder_hidden * (o.bidirectional ? 2 : 1);
    if (o.projection_dim > 0) {
      projections_.push_back(register_module("proj" + std::to_string(l),
                                             torch::nn::Linear(in_dim, o.projection_dim)));
      in_dim = o.projection_dim;
    }
  }
  output_dim_ = in_dim;
}

int64_t Encoder::subsampling() const {
  return (options_.input_kind == "symbols" ? 1 : kConvStride * kConvStride) << options_.time_reduction_layers;
}

int64_t Encoder::last_input_of(int64_t m) const {
  const int64_t kept = m << options_.time_reduction_layers;  // the front-end output entry m keeps
  if (options_.input_kind == "symbols") return kept;
  return (kept + 1) * kConvStride * kConvStride - 1;
}

at::Tensor Encoder::normalize(const at::Tensor& frames) const {
  if (!feature_mean_.defined()) return frames;
  return (frames - feature_mean_.to(frames.scalar_type())) * feature_inv_std_.to(frames.scalar_type());
}

void Encoder::set_normalization(const at::Tensor& mean, const at::Tensor& inv_std) {
  const char* fn = "Encoder::set_normalization";
  MONA_CHECK(feature_mean_.defined(), fn, ": a symbols model has no feature normalisation");
  MONA_CHECK(mean.defined() && mean.dim() == 1 && mean.size(0) == options_.feature_dim, fn,
             ": mean: expected [F = ", options_.feature_dim, "], got ", mean.defined() ? mean.sizes() : at::IntArrayRef{});
  MONA_CHECK(inv_std.defined() && inv_std.dim() == 1 && inv_std.size(0) == options_.feature_dim, fn,
             ": inv_std: expected [F = ", options_.feature_dim, "], got ",
             inv_std.defined() ? inv_std.sizes() : at::IntArrayRef{});
  // The values obey GlobalCmvn::from's rule (finite mean, finite inv_std > 0), the one the
  // statistics a trainer computes pass: a NaN or 0 here would make every frame NaN or 0.
  auto values = [](const at::Tensor& t) {
    const at::Tensor d = t.detach().to(at::kCPU, at::kDouble).contiguous();
    return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
  };
  try {
    (void)audio::GlobalCmvn::from(values(mean), values(inv_std));
  } catch (const ArgumentError& e) {
    ::mona::detail::fail(fn, ": ", e.what());
  }
  torch::NoGradGuard no_grad;
  feature_mean_.copy_(mean);
  feature_inv_std_.copy_(inv_std);
}

int64_t Encoder::output_length(int64_t T) const {
  int64_t n = options_.input_kind == "symbols" ? (options_.append_eos ? T + 1 : T) : conv_out(conv_out(T));
  for (int64_t l = 0; l < options_.time_reduction_layers; ++l) n = (n + 1) / 2;
  return n;
}

at::Tensor Encoder::run_layers(at::Tensor x, const at::Tensor& lengths) {
  const int64_t T = x.size(1);
  for (size_t l = 0; l < lstms_.size(); ++l) {
    if (l > 0 && static_cast<int64_t>(l) <= options_.time_reduction_layers) {
      x = x.slice(1, 0, x.size(1), 2);  // time reduction after layer l - 1: keep 0, 2, 4, ..
    }
    if (options_.bidirectional) {
      auto packed = torch::nn::utils::rnn::pack_padded_sequence(x, lengths.clamp_min(1), true, false);
      auto out = std::get<0>(lstms_[l]->forward_with_packed_input(packed));
      x = std::get<0>(torch::nn::utils::rnn::pad_packed_sequence(out, true, 0.0, T));
    } else {
      x = lstm_layer(x, lstm_weights(lstms_[l])).y;
    }
    if (options_.dropout > 0 && l + 1 < lstms_.size()) {
      x = detail::dropout(x, options_.dropout, is_training(), dropout_generator);
    }
    if (!projections_.empty()) x = projections_[l]->forward(x);
  }
  return x;
}

namespace {
// Throws mona::ArgumentError unless `ids` (int64, [B, T] or [n]) holds symbol ids: every
// id in [0, V), and every id at a real position (t < lengths[b]; every position when
// `lengths` is undefined) <unk> or a symbol, not one of the markers <pad>, <s> and </s>
// (data/tokens.h), which the model places itself: an input </s> would end the input early,
// a target </s> the output. Names the first bad id, e.g. "Encoder::forward: inputs[1, 3]
// = 2 (</s>): expected <unk> (3) or a symbol id in [4, 40)". `lengths`: [B] int64,
// contiguous (detail::check_lengths).
void check_ids(const at::Tensor& ids, int64_t V, const char* fn, const char* name,
               const at::Tensor& lengths = at::Tensor()) {
  const at::Tensor c = ids.contiguous();
  const int64_t* id = c.data_ptr<int64_t>();
  const int64_t T = c.dim() == 2 ? c.size(1) : c.numel();
  const int64_t rows = T == 0 ? 0 : c.numel() / T;
  const int64_t* len = lengths.defined() ? lengths.data_ptr<int64_t>() : nullptr;
  for (int64_t b = 0; b < rows; ++b) {
    const int64_t real = len != nullptr ? len[b] : T;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t v = id[b * T + t];
      if (v >= 0 && v < V && (v >= kUnk || t >= real)) continue;
      const std::string index = c.dim() == 2 ? std::to_string(b) + ", " + std::to_string(t) : std::to_string(t);
      const std::string marker = v >= 0 && v < kUnk ? std::string(" (") + data::kReservedSymbols[v] + ")" : "";
      mona::detail::fail(fn, ": ", name, "[", index, "] = ", v, marker, ": expected <unk> (", kUnk,
                         ") or a symbol id in [", data::kNumReserved, ", ", V, ")");
    }
  }
}

// Streamed feature frames [n, F] must be finite: names the first NaN or infinite value, e.g.
// "Encoder::stream: inputs[3, 17] = nan: expected finite feature values" (a NaN frame would
// otherwise turn every later output of the stream into NaN without a word).
void check_finite_frames(const at::Tensor& frames, const char* fn) {
  const at::Tensor c = frames.contiguous();
  const int64_t F = c.size(1);
  AT_DISPATCH_FLOATING_TYPES(c.scalar_type(), "check_finite_frames", [&] {
    const scalar_t* x = c.data_ptr<scalar_t>();
    const int64_t n = c.numel();
    const scalar_t* bad = std::find_if(x, x + n, [](scalar_t v) { return !std::isfinite(v); });
    if (bad == x + n) return;
    const int64_t at = bad - x;
    mona::detail::fail(fn, ": inputs[", at / F, ", ", at % F, "] = ", static_cast<double>(*bad),
                       ": expected finite feature values");
  });
}
}  // namespace

std::pair<at::Tensor, at::Tensor> Encoder::forward(const at::Tensor& inputs, const at::Tensor& lengths) {
  const char* fn = "Encoder::forward";
  MONA_CHECK(inputs.defined() && inputs.device().is_cpu(), fn, ": inputs: expected a CPU tensor");
  MONA_CHECK(inputs.dim() == 2 || inputs.dim() == 3, fn,
             ": inputs: expected 2 dims (symbols [B, T]) or 3 (frames [B, T, F]), got ",
             inputs.sizes());
  const at::Tensor lens = detail::check_lengths(lengths, fn, "lengths", inputs.size(0), inputs.size(1));
  MONA_CHECK(lens.defined(), fn, ": lengths must be given");
  at::Tensor x;
  at::Tensor out_lens = lens;
  if (options_.input_kind == "symbols") {
    MONA_CHECK(inputs.dim() == 2 && inputs.scalar_type() == at::kLong, fn,
                ": inputs: expected int64 symbols [B, T], got ", inputs.scalar_type(), " ", inputs.sizes());
    const int64_t V = options_.input_vocab;
    check_ids(inputs, V, fn, "inputs", lens);
    if (options_.append_eos) {  // x[b, lens[b]] = </s>; padding stays <pad>
      at::Tensor with_eos = torch::cat({inputs, torch::zeros({inputs.size(0), 1}, inputs.options())}, 1);
      with_eos.scatter_(1, lens.unsqueeze(1), kEos);
      out_lens = lens + 1;
      x = embedding(with_eos);
    } else {
      x = embedding(inputs);
    }
  } else {
    MONA_CHECK(inputs.dim() == 3 && inputs.size(2) == options_.feature_dim, fn,
                ": inputs: expected features [B, T, F = ", options_.feature_dim, "], got ", inputs.sizes());
    MONA_CHECK(inputs.scalar_type() == conv1->weight.scalar_type(), fn, ": inputs: expected features of dtype ",
               conv1->weight.scalar_type(), " (the model's), got ", inputs.scalar_type());
    // No frames at all (audio shorter than one frame): one padding frame, so that the
    // convolutions have an input; every length is 0, so it is masked out like any padding
    // and the memory holds no entry, as streaming such audio gives.
    const at::Tensor frames =
        inputs.size(1) > 0 ? inputs : torch::zeros({inputs.size(0), 1, inputs.size(2)}, inputs.options());
    const int64_t T = frames.size(1);
    auto time_mask = [](const at::Tensor& l, int64_t n, const at::TensorOptions& opt) {
      return (torch::arange(n, torch::kLong).unsqueeze(0) < l.unsqueeze(1)).to(opt.dtype());
    };
    x = normalize(frames) * time_mask(lens, T, inputs.options()).unsqueeze(2);  // zero padding frames
    x = torch::relu(bn1(conv1(x.unsqueeze(1))));                    // [B, C, T1, F1]
    const at::Tensor l1 = (lens - 1).div(2, "floor") + 1;
    const at::Tensor l1z = torch::where(lens > 0, l1, torch::zeros_like(l1));
    x = x * time_mask(l1z, x.size(2), x.options()).unsqueeze(1).unsqueeze(3);  // as padded alone
    x = torch::relu(bn2(conv2(x)));                                  // [B, C, T2, F2]
    out_lens = torch::where(l1z > 0, (l1z - 1).div(2, "floor") + 1, torch::zeros_like(l1z));
    x = x.permute({0, 2, 1, 3}).reshape({x.size(0), x.size(2), -1});
  }
  if (options_.lookahead > 0) x = widen(x, out_lens);
  at::Tensor memory = run_layers(x, out_lens);
  // The padding frame of no frames at all gives no entry: T' = 0, as for any T the header's.
  if (options_.input_kind != "symbols" && inputs.size(1) == 0) memory = memory.narrow(1, 0, 0);
  for (int64_t l = 0; l < options_.time_reduction_layers; ++l) out_lens = (out_lens + 1).div(2, "floor");
  return {memory, out_lens};
}

at::Tensor Encoder::widen(const at::Tensor& x, const at::Tensor& lengths) const {
  const int64_t B = x.size(0), T = x.size(1), D = x.size(2);
  const at::Tensor valid = torch::arange(T, torch::kLong).unsqueeze(0) < lengths.unsqueeze(1);
  const at::Tensor xm = x * valid.to(x.scalar_type()).unsqueeze(2);  // zeros past each end
  std::vector<at::Tensor> parts{xm};
  for (int64_t s = 1; s <= options_.lookahead; ++s) {  // parts[s][b, t] = xm[b, t + s]
    const int64_t n = std::min(s, T);
    parts.push_back(torch::cat({xm.slice(1, n), torch::zeros({B, n, D}, xm.options())}, 1));
  }
  return torch::cat(parts, 2);
}

at::Tensor Encoder::conv1_frame(const EncoderStream& s, int64_t k, int64_t T) {
  const int64_t F = options_.feature_dim;
  std::vector<at::Tensor> rows;
  for (int64_t t = 2 * k - 1; t <= 2 * k + 1; ++t) {
    rows.push_back(t >= 0 && t < T ? s.raw_frames[static_cast<size_t>(t - s.raw_first)]
                                   : torch::zeros({F}, s.raw_frames.front().options()));
  }
  auto window = torch::stack(rows).view({1, 1, 3, F});
  auto y = torch::conv2d(window, conv1->weight, conv1->bias, at::IntArrayRef({1, 2}), at::IntArrayRef({0, 1}));
  return torch::relu(bn1(y)).view({options_.conv_channels, -1});  // [C, F1]
}

at::Tensor Encoder::conv2_frame(const EncoderStream& s, int64_t m, int64_t T1) {
  const auto& ref = s.conv1_frames.front();
  std::vector<at::Tensor> rows;
  for (int64_t t = 2 * m - 1; t <= 2 * m + 1; ++t) {
    rows.push_back(t >= 0 && t < T1 ? s.conv1_frames[static_cast<size_t>(t - s.conv1_first)] : torch::zeros_like(ref));
  }
  auto window = torch::stack(rows, 1).unsqueeze(0);  // [1, C, 3, F1]
  auto y = torch::conv2d(window, conv2->weight, conv2->bias, at::IntArrayRef({1, 2}), at::IntArrayRef({0, 1}));
  return torch::relu(bn2(y)).reshape({-1});  // [C * F2], channel-major as in forward()
}

std::vector<at::Tensor> Encoder::stream_front_end(EncoderStream& s, const at::Tensor& inputs, bool finished) {
  const char* fn = "Encoder::stream";
  MONA_CHECK(!s.finished, fn, ": the stream is already finished");
  MONA_CHECK(!is_training(), fn, ": call eval() before streaming");
  const bool symbols = options_.input_kind == "symbols";
  if (inputs.defined() && inputs.numel() > 0) {
    if (symbols) {
      MONA_CHECK(inputs.dim() == 1 && inputs.scalar_type() == at::kLong, fn,
                  ": inputs: expected int64 symbols [n], got ", inputs.scalar_type(), " ", inputs.sizes());
      check_ids(inputs, options_.input_vocab, fn, "inputs");
    } else {
      MONA_CHECK(inputs.dim() == 2 && inputs.size(1) == options_.feature_dim, fn,
                  ": inputs: expected frames [n, F = ", options_.feature_dim, "], got ", inputs.sizes());
      MONA_CHECK(inputs.scalar_type() == conv1->weight.scalar_type(), fn, ": inputs: expected frames of dtype ",
                 conv1->weight.scalar_type(), " (the model's), got ", inputs.scalar_type());
      check_finite_frames(inputs, fn);
    }
  }
  s.finished = finished;
  // Encoder-layer inputs that became available: [n, D] rows.
  std::vector<at::Tensor> layer_in;
  if (symbols) {
    at::Tensor ids = inputs.defined() && inputs.numel() > 0 ? inputs : torch::zeros({0}, torch::kLong);
    if (finished && options_.append_eos) ids = torch::cat({ids, torch::full({1}, kEos, torch::kLong)});
    if (ids.numel() > 0) {
      auto e = embedding(ids);
      for (int64_t t = 0; t < e.size(0); ++t) layer_in.push_back(e[t]);
    }
  } else {
    if (inputs.defined()) {
      const at::Tensor frames = normalize(inputs);
      for (int64_t t = 0; t < frames.size(0); ++t) s.raw_frames.push_back(frames[t].clone());
      s.raw_total += inputs.size(0);
    }
    const int64_t T = s.raw_total;
    const int64_t T1_final = conv_out(T);
    while (true) {  // first conv layer frames whose receptive field is complete
      const int64_t k = s.conv1_total;
      const bool ready = finished ? k < T1_final : 2 * k + 1 < T;
      if (!ready) break;
      s.conv1_frames.push_back(conv1_frame(s, k, finished ? T : T + 1));
      ++s.conv1_total;
    }
    const int64_t T1 = s.conv1_total;
    const int64_t T2_final = conv_out(T1_final);
    while (true) {
      const int64_t m = s.conv2_done;
      const bool ready = finished ? m < T2_final : 2 * m + 1 < T1;
      if (!ready) break;
      layer_in.push_back(conv2_frame(s, m, finished ? T1 : T1 + 1));
      ++s.conv2_done;
    }
    // Drop what no later output reads: conv1 output k reads frames 2k - 1 .. 2k + 1, conv2
    // output m reads conv1 outputs 2m - 1 .. 2m + 1.
    while (!s.raw_frames.empty() && s.raw_first < 2 * s.conv1_total - 1) {
      s.raw_frames.pop_front();
      ++s.raw_first;
    }
    while (!s.conv1_frames.empty() && s.conv1_first < 2 * s.conv2_done - 1) {
      s.conv1_frames.pop_front();
      ++s.conv1_first;
    }
  }
  if (options_.lookahead > 0) {  // row t leaves once row t + k has arrived (or the input ends)
    auto& q = s.lookahead_rows;
    q.insert(q.end(), layer_in.begin(), layer_in.end());
    layer_in.clear();
    const auto k = static_cast<size_t>(options_.lookahead);
    while (!q.empty() && (q.size() > k || finished)) {
      std::vector<at::Tensor> window;
      for (size_t j = 0; j <= k; ++j) window.push_back(j < q.size() ? q[j] : torch::zeros_like(q[0]));
      layer_in.push_back(torch::cat(window));
      q.erase(q.begin());
    }
  }
  return layer_in;
}

at::Tensor Encoder::stream(EncoderStream& s, const at::Tensor& inputs, bool finished) {
  std::vector<at::Tensor> layer_in = stream_front_end(s, inputs, finished);
  if (options_.bidirectional) {  // offline only: wait for the whole input
    for (auto& r : layer_in) s.pending_inputs.push_back(r);
    if (!finished || s.pending_inputs.empty()) return torch::zeros({0, output_dim_});
    auto x = torch::stack(s.pending_inputs).unsqueeze(0);
    auto lens = torch::full({1}, x.size(1), torch::kLong);
    return run_layers(x, lens)[0];
  }
  std::vector<at::Tensor> out;
  for (auto& row : layer_in) {  // one element at a time: chunking never changes results
    const at::Tensor entry = stream_layers({&s}, {row})[0];
    if (entry.defined()) out.push_back(entry);
  }
  if (out.empty()) return torch::zeros({0, output_dim_});
  return torch::stack(out);
}

std::vector<at::Tensor> Encoder::stream_layers(const std::vector<EncoderStream*>& streams,
                                               const std::vector<at::Tensor>& rows) {
  MONA_CHECK(!options_.bidirectional, "Encoder::stream_layers: a bidirectional encoder cannot stream");
  MONA_CHECK(streams.size() == rows.size(), "Encoder::stream_layers: ", streams.size(), " streams but ",
             rows.size(), " rows");
  const size_t S = streams.size();
  std::vector<at::Tensor> out(S);
  for (EncoderStream* s : streams) {
    if (s->h.empty()) {
      s->h.resize(lstms_.size());
      s->c.resize(lstms_.size());
    }
    if (s->layer_outputs.empty()) s->layer_outputs.assign(static_cast<size_t>(options_.time_reduction_layers), 0);
  }
  std::vector<size_t> active(S);  // streams whose row is still going up the stack
  for (size_t k = 0; k < S; ++k) active[k] = k;
  std::vector<at::Tensor> x(S);
  for (size_t k = 0; k < S; ++k) x[k] = rows[k].view({1, -1});
  for (size_t l = 0; l < lstms_.size() && !active.empty(); ++l) {
    if (l > 0 && static_cast<int64_t>(l) <= options_.time_reduction_layers) {
      std::vector<size_t> kept;  // time reduction: odd elements of each stream stop here
      for (size_t k : active) {
        if (streams[k]->layer_outputs[l - 1]++ % 2 == 0) kept.push_back(k);
      }
      active = std::move(kept);
      if (active.empty()) break;
    }
    // One LSTM step for every active stream: states [1, S', H].
    std::vector<at::Tensor> xs, hs, cs;
    bool fresh = true;
    for (size_t k : active) {
      xs.push_back(x[k]);
      fresh = fresh && !streams[k]->h[l].defined();
    }
    const int64_t Sa = static_cast<int64_t>(active.size()), H = options_.encoder_hidden;
    at::Tensor h0, c0;  // [S', H]; undefined: zeros
    if (!fresh) {
      for (size_t k : active) {
        const EncoderStream& s = *streams[k];
        hs.push_back(s.h[l].defined() ? s.h[l] : torch::zeros({1, 1, H}, xs[0].options()));
        cs.push_back(s.c[l].defined() ? s.c[l] : torch::zeros({1, 1, H}, xs[0].options()));
      }
      h0 = (Sa == 1 ? hs[0] : torch::cat(hs, 1)).view({Sa, H});
      c0 = (Sa == 1 ? cs[0] : torch::cat(cs, 1)).view({Sa, H});
    }
    // batch_first: [S', 1, D] (one time step of S' sequences)
    const at::Tensor in = Sa == 1 ? xs[0].view({1, 1, -1}) : torch::cat(xs, 0).view({Sa, 1, -1});
    const LstmLayerOutput res = lstm_layer(in, lstm_weights(lstms_[l]), h0, c0);
    at::Tensor y = res.y;
    if (!projections_.empty()) y = projections_[l]->forward(y);
    for (size_t a = 0; a < active.size(); ++a) {
      EncoderStream& s = *streams[active[a]];
      const int64_t i = static_cast<int64_t>(a);
      s.h[l] = res.h.narrow(0, i, 1).view({1, 1, H});
      s.c[l] = res.c.narrow(0, i, 1).view({1, 1, H});
      x[active[a]] = active.size() == 1 ? y.view({1, -1}) : y.select(0, i).view({1, -1});
    }
  }
  for (size_t k : active) out[k] = x[k].view({-1});
  return out;
}

// ---------------------------------------------------------------------------------------
// Decoder

Decoder::Decoder(const ModelOptions& o, int64_t memory_dim) : options_(o) {
  embedding = register_module("embedding", torch::nn::Embedding(o.output_vocab, o.decoder_embedding_dim));
  cell = register_module("cell", torch::nn::LSTMCell(o.decoder_embedding_dim + memory_dim, o.decoder_hidden));
  output = register_module("output", torch::nn::Linear(o.decoder_hidden + memory_dim, o.output_vocab));
  AttentionOptions a = o.attention_options;
  a.query_dim = o.decoder_hidden;
  a.memory_dim = memory_dim;
  attention = register_module("attention", make_attention(o.attention, a));
}

at::Tensor Decoder::output_logits(const at::Tensor& h, const at::Tensor& context) {
  return output(detail::dropout(torch::cat({h, context}, -1), options_.dropout, is_training(), dropout_generator));
}

std::pair<at::Tensor, at::Tensor> Decoder::forward(const at::Tensor& y_in, const Memory& memory,
                                                   at::Tensor* states) {
  const int64_t B = y_in.size(0), U = y_in.size(1);
  at::Tensor h = torch::zeros({B, options_.decoder_hidden}, memory.values.options());
  at::Tensor c = torch::zeros_like(h);
  at::Tensor state = attention->initial_state(memory);
  // The embeddings of all steps at once, split into steps by one unbind (one backward node
  // for all steps, where a select per step would scatter into a zero [B, U, E] tensor each).
  const std::vector<at::Tensor> emb = embedding(y_in).unbind(1);  // U x [B, E]
  // The cell's U steps with their weight gradients taken once, after the last step's
  // backward (mona/nn/lstm.h); each step's input is [embedding, context], side by side.
  // The attention's U steps likewise: its energies' query projections unrolled the same way
  // (mona/nn/unrolled_linear.h), what the steps share computed once (Attention::unroll).
  UnrolledLstmCell unrolled(lstm_weights(cell), B, U);
  UnrolledAttention attention_steps = attention->unroll(memory, U);
  std::vector<at::Tensor> hs, contexts, weights, kept;
  for (int64_t i = 0; i < U; ++i) {
    StepOutput att = attention_steps.step(h, state);
    auto hc = unrolled.step({emb[i], att.context}, h, c);
    h = std::get<0>(hc);
    c = std::get<1>(hc);
    hs.push_back(h);
    contexts.push_back(att.context);
    weights.push_back(att.weights);
    state = att.state;
    if (states && state.defined()) kept.push_back(state);
  }
  if (states) *states = kept.empty() ? at::Tensor() : torch::stack(kept, 1);
  // The output layer reads nothing the recursion produces later: one product for all steps.
  return {output_logits(torch::stack(hs, 1), torch::stack(contexts, 1)), torch::stack(weights, 1)};
}

at::Tensor Decoder::expected_step(int64_t y_prev, at::Tensor& h, at::Tensor& c, at::Tensor& alignment,
                                  const Memory& memory, at::Tensor* weights) {
  StepOutput att = attention->step(h, memory, alignment);
  auto emb = embedding(torch::full({1}, y_prev, torch::kLong));
  auto hc = lstm_cell(torch::cat({emb, att.context}, 1), h, c, lstm_weights(cell));
  h = std::get<0>(hc);
  c = std::get<1>(hc);
  alignment = att.state;
  if (weights) *weights = att.weights;
  return torch::log_softmax(output_logits(h, att.context), -1).view({-1});
}

DecoderState Decoder::initial_state() const {
  DecoderState s;
  const auto opt = embedding->weight.options();
  s.h = torch::zeros({1, options_.decoder_hidden}, opt);
  s.c = torch::zeros({1, options_.decoder_hidden}, opt);
  return s;
}

DecoderStep Decoder::hard_step(int64_t y_prev, const DecoderState& state, const OnlineMemory& memory) {
  DecoderStep step;
  step.next = state;
  step.attention = attention->hard_step(state.h.view({-1}), memory, step.next.attention);
  step.status = step.attention.status;
  if (step.status == core::ScanStatus::kNeedMoreInput) return step;
  const at::Tensor ctx = step.attention.context.view({1, -1});
  auto emb = embedding(torch::full({1}, y_prev, torch::kLong));
  auto hc = lstm_cell(torch::cat({emb, ctx}, 1), state.h, state.c, lstm_weights(cell));
  step.next.h = std::get<0>(hc);
  step.next.c = std::get<1>(hc);
  step.log_probs = torch::log_softmax(output_logits(step.next.h, ctx), -1).view({-1});
  return step;
}

// ---------------------------------------------------------------------------------------
// Seq2Seq

Seq2Seq::Seq2Seq(ModelOptions options) : options_(std::move(options)) {
  options_.validate();
  encoder = register_module("encoder", std::make_shared<Encoder>(options_));
  decoder = register_module("decoder", std::make_shared<Decoder>(options_, encoder->output_dim()));
  if (options_.ctc_weight > 0) {
    ctc_output = register_module("ctc_output", torch::nn::Linear(encoder->output_dim(), options_.output_vocab + 1));
  }
}

std::pair<at::Tensor, at::Tensor> Seq2Seq::encode(const at::Tensor& inputs, const at::Tensor& lengths,
                                                   at::Tensor* appended) {
  auto [memory, mlens] = encoder->forward(inputs, lengths);
  return with_eos_frame(memory, mlens, appended);
}

std::pair<at::Tensor, at::Tensor> Seq2Seq::with_eos_frame(at::Tensor memory, at::Tensor mlens, at::Tensor* appended) {
  if (options_.p_eos > 0) {
    EosBatch e = append_eos_frame(memory, mlens, is_training() ? options_.p_eos : 1.0,
                                  decoder->dropout_generator ? *decoder->dropout_generator : at::Generator());
    memory = e.memory;
    mlens = e.lengths;
    if (appended) *appended = e.appended;
  }
  return {memory, mlens};
}

at::Tensor Seq2Seq::loss(const at::Tensor& inputs, const at::Tensor& lengths, const at::Tensor& targets,
                         const at::Tensor& target_lengths, const SmoothingOptions& smoothing,
                         at::Tensor* weights, int64_t* tokens,
                         const LengthPenaltyOptions* length_penalty, const BatchTotals* totals,
                         LossTerms* terms) {
  const char* fn = "Seq2Seq::loss";
  MONA_CHECK(inputs.defined(), fn, ": inputs: expected a tensor, got an undefined one");
  MONA_CHECK(targets.dim() == 2 && targets.scalar_type() == at::kLong, fn,
              ": targets: expected int64 [B, U], got ", targets.scalar_type(), " ", targets.sizes());
  MONA_CHECK(targets.size(0) == inputs.size(0), fn, ": targets: batch ", targets.size(0),
              " differs from inputs' ", inputs.size(0));
  const at::Tensor tl = detail::check_lengths(target_lengths, fn, "target_lengths", targets.size(0), targets.size(1));
  MONA_CHECK(tl.defined(), fn, ": target_lengths must be given");
  check_ids(targets, options_.output_vocab, fn, "targets", tl);
  smoothing.validate();
  if (length_penalty) {
    MONA_CHECK(std::isfinite(length_penalty->lambda) && length_penalty->lambda >= 0, fn,
                ": LengthPenaltyOptions.lambda must be finite and >= 0, got ",
                length_penalty->lambda);
  }
  auto* gmm = dynamic_cast<GmmAttention*>(decoder->attention.get());
  const bool penalise = length_penalty && gmm && length_penalty->lambda > 0 &&
                        (length_penalty->until_step < 0 ||
                         length_penalty->step < length_penalty->until_step);
  at::Tensor appended;
  const auto [encoded, encoded_lengths] = encoder->forward(inputs, lengths);
  at::Tensor ctc_nll;  // [B]: -log P_ctc(y_b | h_b), 0 where no path exists
  if (ctc_output) {
    const at::Tensor ctc_log_probs = torch::log_softmax(ctc_output->forward(encoded), -1).transpose(0, 1);
    ctc_nll = at::ctc_loss(ctc_log_probs, targets, encoded_lengths, tl, /*blank=*/options_.output_vocab,
                           at::Reduction::None, /*zero_infinity=*/true);
  }
  auto [memory, mlens] = with_eos_frame(encoded, encoded_lengths, &appended);
  const Memory mem = decoder->attention->prepare(memory, mlens);
  const int64_t B = targets.size(0), U = targets.size(1) + 1, V = options_.output_vocab;
  // y_in = <s> y_1 .. y_L ; y_out = y_1 .. y_L </s> ; padding beyond.
  at::Tensor y_out = torch::full({B, U}, kPad, torch::kLong);
  y_out.narrow(1, 0, U - 1).copy_(targets);
  const at::Tensor pos = torch::arange(U, torch::kLong).unsqueeze(0).expand({B, U});
  y_out = torch::where(pos == tl.unsqueeze(1), torch::full_like(y_out, kEos), y_out);
  at::Tensor valid = pos <= tl.unsqueeze(1);  // [B, U]
  // 003 sec. 2.4: </s> is trained only where the EOS frame was appended.
  if (appended.defined()) valid = valid & ((pos != tl.unsqueeze(1)) | appended.unsqueeze(1));
  y_out = torch::where(valid, y_out, torch::full_like(y_out, kPad));
  at::Tensor y_in = torch::cat({torch::full({B, 1}, kBos, torch::kLong), y_out.narrow(1, 0, U - 1)}, 1);
  y_in = torch::where(y_in == kEos, torch::full_like(y_in, kPad), y_in);
  at::Tensor states;
  auto [logits, w] = decoder->forward(y_in, mem, penalise ? &states : nullptr);
  const at::Tensor log_probs = torch::log_softmax(logits, -1);  // [B, U, V]
  // Target distribution q [B, U, V].
  const auto fopt = log_probs.options();
  at::Tensor q = torch::zeros({B, U, V}, fopt);
  const at::Tensor validf = valid.to(fopt.dtype());
  q.scatter_add_(2, y_out.unsqueeze(2), validf.unsqueeze(2));
  if (!smoothing.localized.empty()) {
    const int64_t offsets[4] = {-2, -1, 1, 2};
    for (int k = 0; k < 4; ++k) {
      const int64_t d = offsets[k];
      if (std::abs(d) >= U) continue;
      // neighbour index i + d must be a valid position of the same sequence
      at::Tensor nb = torch::roll(y_out, -d, 1);
      at::Tensor nb_valid = torch::roll(valid, -d, 1) & valid;
      if (d > 0) nb_valid.narrow(1, U - d, d).fill_(false);
      else nb_valid.narrow(1, 0, -d).fill_(false);
      q.scatter_add_(2, nb.unsqueeze(2), (nb_valid.to(fopt.dtype()) * smoothing.localized[k]).unsqueeze(2));
    }
    q = q / q.sum(-1, true).clamp_min(1e-30);
  }
  if (smoothing.uniform > 0) {
    q = (1 - smoothing.uniform) * q + smoothing.uniform / static_cast<double>(V) * validf.unsqueeze(2);
  }
  const int64_t n = (tl + 1).sum().item<int64_t>();  // the valid positions: U_b + 1 each
  if (tokens) *tokens = n;
  if (weights) *weights = w;
  if (totals) {
    MONA_CHECK(totals->tokens >= n && totals->sequences >= B, fn, ": BatchTotals of ", totals->tokens,
               " tokens and ", totals->sequences, " sequences cannot hold this shard's ", n, " and ", B);
  }
  const int64_t token_divisor = totals ? totals->tokens : n, sequence_divisor = totals ? totals->sequences : B;
  const double per_token = 1.0 / static_cast<double>(std::max<int64_t>(token_divisor, 1));
  const at::Tensor cross_entropy = -(q * log_probs).sum() * per_token;
  at::Tensor loss = cross_entropy;
  at::Tensor ctc;
  if (ctc_nll.defined()) {
    ctc = ctc_nll.sum() * per_token;
    loss = (1 - options_.ctc_weight) * cross_entropy + options_.ctc_weight * ctc;
  }
  if (terms) *terms = LossTerms{cross_entropy, ctc};
  if (penalise) {
    // Heads folded into the batch: mu [B, U, H] -> [B*H, U, 1], nu [B, H, T] -> [B*H, T].
    const int64_t H = states.size(2), T = mem.in_len();
    const at::Tensor mu = states.permute({0, 2, 1}).reshape({B * H, U, 1});
    const at::Tensor nu = gmm->positions(mem).first.reshape({B * H, T});
    const at::Tensor per_head = gmm_length_penalty(
        mu, nu, length_penalty->lambda, mlens.repeat_interleave(H), (tl + 1).repeat_interleave(H));
    loss = loss + per_head.view({B, H}).sum() / static_cast<double>(sequence_divisor);
  }
  return loss;
}

}  // namespace mona::nn
