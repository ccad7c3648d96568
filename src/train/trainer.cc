// Training runs, checkpoints and evaluation; see include/mona/train/trainer.h.
#include "mona/train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <atomic>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

#include "mona/audio/audio_file.h"
#include "mona/audio/cmvn.h"
#include "mona/audio/fbank.h"
#include "mona/audio/spec_augment.h"
#include "mona/core/error.h"
#include "mona/data/manifest.h"
#include "mona/stream/incremental.h"
#include "mona/stream/stream.h"
#include "mona/io/yaml.h"
#include "mona/io/files.h"
#include "mona/io/log.h"
#include "mona/io/plot.h"
#include "mona/nn/threads.h"
#include "worker_team.h"

namespace mona::train {
namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------
// TrainedModel and checkpoints

std::vector<int64_t> TrainedModel::encode_input(const std::vector<std::string>& tokens) const {
  return input_vocab.encode(tokens);
}

std::vector<std::string> TrainedModel::decode_output(const std::vector<int64_t>& ids) const {
  return output_vocab.decode(ids);
}

bool TrainedModel::takes_audio() const { return config.model.input_kind == "audio"; }

at::Tensor TrainedModel::audio_features(const std::string& path) const {
  const audio::FbankOptions& f = config.model.features;
  audio::Features x = audio::compute_fbank(f, audio::read_audio(path, f.sample_rate).samples);
  return torch::from_blob(x.data.data(), {x.num_frames, x.num_bins}, torch::kFloat).clone();
}

at::Tensor TrainedModel::input_tensor(const std::vector<std::string>& input) const {
  if (takes_audio()) {
    detail::check(input.size() == 1, "input_tensor: an audio model reads one audio file, got ", input.size(),
                  " input tokens");
    return audio_features(input[0]);
  }
  return torch::tensor(input_vocab.encode_or_unk(input), torch::kLong);
}

std::vector<data::Example> read_examples(const Config& config, const std::string& path, std::vector<int64_t>* lines) {
  return config.model.input_kind == "audio" ? data::read_manifest(path, lines) : data::read_tsv(path, lines);
}

namespace {
constexpr const char* kFormat = "mona-checkpoint-1";

std::string read_string(torch::serialize::InputArchive& a, const char* key) {
  c10::IValue v;
  a.read(key, v);
  return v.toStringRef();
}
int64_t read_int(torch::serialize::InputArchive& a, const char* key) {
  c10::IValue v;
  a.read(key, v);
  return v.toInt();
}
double read_double(torch::serialize::InputArchive& a, const char* key) {
  c10::IValue v;
  a.read(key, v);
  return v.toDouble();
}
// A key that checkpoints of earlier versions lack (the log's window, the minutes): `absent`
// for those.
c10::IValue read_or(torch::serialize::InputArchive& a, const char* key, c10::IValue absent) {
  c10::IValue v;
  return a.try_read(key, v) ? v : absent;
}

at::Generator global_generator() { return at::globalContext().defaultGenerator(at::kCPU); }

// Reads the checkpoint's archive: container checks first (mona::Error naming the file),
// then LibTorch's own parsing (its errors are rewrapped with the file name).
void open_archive(const std::string& path, torch::serialize::InputArchive& archive) {
  const std::string payload = io::read_checkpoint(path);
  try {
    std::istringstream in(payload);
    archive.load_from(in);
    detail::check_data(read_string(archive, "meta/format") == kFormat, "checkpoint ", path,
                  ": not a ", kFormat, " archive");
  } catch (const mona::Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    detail::fail_data("checkpoint ", path, ": unreadable archive (", what, ")");
  }
}

std::shared_ptr<nn::Seq2Seq> build_model(Config& config, const data::Vocabulary& in,
                                         const data::Vocabulary& out) {
  config.model = with_data_sizes(config.model, in.size(), out.size());
  return std::make_shared<nn::Seq2Seq>(config.model);
}

// The keys under `node` as "prefix.key" -> value (one-line YAML).
void flatten(const YAML::Node& node, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& kv : node) flatten(kv.second, prefix + "." + kv.first.as<std::string>(), out);
    return;
  }
  if (node.IsScalar()) {
    out[prefix] = node.Scalar();
    return;
  }
  YAML::Emitter e;
  e.SetSeqFormat(YAML::Flow);
  e.SetMapFormat(YAML::Flow);
  e << node;
  out[prefix] = e.c_str();
}

// train.init_from: copies every parameter and buffer of `from` into `to`'s of the same
// name. Throws mona::Error naming `path` and every one of `to`'s that `from` lacks or holds
// in another shape (both shapes); returns the names of `from`'s that `to` does not have.
std::vector<std::string> copy_matching_state(nn::Seq2Seq& to, nn::Seq2Seq& from, const std::string& path) {
  std::map<std::string, at::Tensor> theirs;
  for (const auto& p : from.named_parameters()) theirs[p.key()] = p.value();
  for (const auto& b : from.named_buffers()) theirs[b.key()] = b.value();
  std::vector<std::pair<std::string, at::Tensor>> ours;
  for (const auto& p : to.named_parameters()) ours.emplace_back(p.key(), p.value());
  for (const auto& b : to.named_buffers()) ours.emplace_back(b.key(), b.value());
  std::string missing;
  int n = 0;
  for (const auto& [name, tensor] : ours) {
    const auto it = theirs.find(name);
    if (it == theirs.end()) {
      missing += (n++ ? "; " : "") + name + " is not in it";
    } else if (!it->second.sizes().equals(tensor.sizes())) {
      std::ostringstream m;
      m << name << " is " << it->second.sizes() << " in it, " << tensor.sizes() << " here";
      missing += (n++ ? "; " : "") + m.str();
    }
  }
  detail::check(n == 0, "train.init_from ", path, ": cannot start this model from it: ", missing,
                " (the model options that shape these must equal the checkpoint's)");
  torch::NoGradGuard no_grad;
  for (auto& [name, tensor] : ours) {
    tensor.copy_(theirs.at(name));
    theirs.erase(name);
  }
  std::vector<std::string> unused;
  for (const auto& kv : theirs) unused.push_back(kv.first);
  return unused;
}

// Refuses a checkpoint whose model options (its configuration's `model` keys) differ from
// `config`'s, naming every key that differs with both values.
void check_model_options(const std::string& path, const std::string& checkpoint_config, const Config& config) {
  YAML::Node saved_yaml = io::parse_yaml(checkpoint_config, path + ":config");
  migrate_config(saved_yaml);
  const Config saved = config_from_yaml(saved_yaml, path + ":config");
  std::map<std::string, std::string> theirs, ours;
  flatten(config_to_yaml(saved)["model"], "model", theirs);
  flatten(config_to_yaml(config)["model"], "model", ours);
  std::string diff;
  int n = 0;
  for (const auto& [key, value] : ours) {
    const auto it = theirs.find(key);
    const std::string saved_value = it == theirs.end() ? "(absent)" : it->second;
    if (saved_value == value) continue;
    diff += (n++ ? "; " : "") + key + ": " + saved_value + " in the checkpoint, " + value +
            " in the configuration";
  }
  detail::check(n == 0, "checkpoint ", path, ": ", n == 1 ? "a model option differs" : "model options differ",
                " from the configuration (a resumed run keeps its model): ", diff,
                ". Resume with the checkpoint's values, or start a new run in another train.output_dir");
}
}  // namespace

void CheckpointIO::save(const std::string& path, const TrainedModel& t, const PartitionedAdam* optimizer,
                        const RunState& run) {
  torch::serialize::OutputArchive archive;
  archive.write("meta/format", c10::IValue(std::string(kFormat)));
  archive.write("meta/config", c10::IValue(io::to_yaml_text(config_to_yaml(t.config))));
  archive.write("meta/input_vocab", c10::IValue(t.input_vocab.to_text()));
  archive.write("meta/output_vocab", c10::IValue(t.output_vocab.to_text()));
  archive.write("meta/step", c10::IValue(t.step));
  archive.write("meta/epoch", c10::IValue(run.epoch));
  archive.write("meta/position", c10::IValue(run.position));
  archive.write("meta/best_ter", c10::IValue(run.best_ter));
  archive.write("meta/bad_evals", c10::IValue(run.bad_evals));
  archive.write("meta/window_loss", c10::IValue(run.window_loss));
  archive.write("meta/window_ctc", c10::IValue(run.window_ctc));
  archive.write("meta/window_steps", c10::IValue(run.window_steps));
  archive.write("meta/minutes", c10::IValue(run.minutes));
  torch::serialize::OutputArchive model_archive;
  t.model->save(model_archive);
  archive.write("model", model_archive);
  if (optimizer) {
    torch::serialize::OutputArchive opt_archive;
    optimizer->save(opt_archive);
    archive.write("optimizer", opt_archive);
  }
  {
    at::Generator gen = global_generator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    archive.write("rng/torch", gen.get_state(), /*is_buffer=*/true);
  }
  archive.write("rng/noise", t.model->decoder->attention->noise_state(), true);
  std::ostringstream out;
  archive.save_to(out);
  io::write_checkpoint_atomic(path, out.str());
}

TrainedModel TrainedModel::load(const std::string& path) {
  torch::serialize::InputArchive archive;
  open_archive(path, archive);
  TrainedModel t;
  try {
    YAML::Node config_yaml = io::parse_yaml(read_string(archive, "meta/config"), path + ":config");
    migrate_config(config_yaml);
    t.config = config_from_yaml(config_yaml, path + ":config");
    t.input_vocab = data::Vocabulary::from_text(read_string(archive, "meta/input_vocab"),
                                                path + ":input_vocab");
    t.output_vocab = data::Vocabulary::from_text(read_string(archive, "meta/output_vocab"),
                                                 path + ":output_vocab");
    t.step = read_int(archive, "meta/step");
    t.model = build_model(t.config, t.input_vocab, t.output_vocab);
    torch::serialize::InputArchive model_archive;
    archive.read("model", model_archive);
    t.model->load(model_archive);
  } catch (const mona::Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string what = e.what();
    detail::fail_data("checkpoint ", path, ": does not match its own configuration (",
                 what.substr(0, what.find('\n')), ")");
  }
  t.model->eval();
  return t;
}

RunState CheckpointIO::load_into(const std::string& path, TrainedModel& t, PartitionedAdam* optimizer) {
  torch::serialize::InputArchive archive;
  open_archive(path, archive);
  RunState run;
  try {
    check_model_options(path, read_string(archive, "meta/config"), t.config);
    t.step = read_int(archive, "meta/step");
    run.epoch = read_int(archive, "meta/epoch");
    run.position = read_int(archive, "meta/position");
    run.best_ter = read_double(archive, "meta/best_ter");
    run.bad_evals = read_int(archive, "meta/bad_evals");
    run.window_loss = read_or(archive, "meta/window_loss", 0.0).toDouble();
    run.window_ctc = read_or(archive, "meta/window_ctc", 0.0).toDouble();
    run.window_steps = read_or(archive, "meta/window_steps", int64_t{0}).toInt();
    run.minutes = read_or(archive, "meta/minutes", 0.0).toDouble();
    detail::check_data(data::Vocabulary::from_text(read_string(archive, "meta/input_vocab"), path) == t.input_vocab &&
                      data::Vocabulary::from_text(read_string(archive, "meta/output_vocab"), path) == t.output_vocab,
                  "checkpoint ", path, ": its vocabularies differ from this run's training data");
    torch::serialize::InputArchive model_archive;
    archive.read("model", model_archive);
    t.model->load(model_archive);
    if (optimizer) {
      torch::serialize::InputArchive opt_archive;
      archive.read("optimizer", opt_archive);
      optimizer->load(opt_archive);
    }
    at::Tensor torch_state, noise_state;
    archive.read("rng/torch", torch_state, true);
    archive.read("rng/noise", noise_state, true);
    {
      at::Generator gen = global_generator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(torch_state);
    }
    t.model->decoder->attention->set_noise_state(noise_state);
  } catch (const mona::Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string what = e.what();
    detail::fail_data("checkpoint ", path, ": cannot resume from it (", what.substr(0, what.find('\n')), ")");
  }
  return run;
}

// ---------------------------------------------------------------------------------------
// Evaluation

nn::Hypothesis decode_with_expected_alignment(const TrainedModel& t, const std::vector<int64_t>& input_ids,
                                              const nn::SearchOptions& search) {
  const int64_t vocab = t.input_vocab.size();
  for (size_t k = 0; k < input_ids.size(); ++k) {
    detail::check(input_ids[k] >= 0 && input_ids[k] < vocab, "decode_with_expected_alignment: input_ids[", k,
                  "]: expected an id in [0, ", vocab, "), got ", input_ids[k]);
  }
  return decode_with_expected_alignment(t, torch::tensor(input_ids, torch::kLong), search);
}

nn::Hypothesis decode_with_expected_alignment(const TrainedModel& t, const at::Tensor& x,
                                              const nn::SearchOptions& search) {
  torch::NoGradGuard no_grad;
  t.model->eval();
  auto [mem, ml] = t.model->encode(x.unsqueeze(0), torch::full({1}, x.size(0), torch::kLong));
  const nn::Memory m = t.model->decoder->attention->prepare(mem, ml);
  return nn::decode_expected(*t.model->decoder, m, search);
}

namespace {

// EvalResult::word_delays of one decoded audio input (see there).
io::EmissionDelays word_delays(const TrainedModel& t, const data::ReferenceSet& set, const std::vector<int64_t>& tokens,
                               const std::vector<int64_t>& inputs_read, const data::WordTimes& word_times) {
  const std::string& audio = set.input.at(0);
  const auto found = word_times.find(audio);
  detail::check_data(found != word_times.end(), "word times: no words listed for ", audio);
  std::vector<std::string> words;
  std::vector<double> ends_ms;
  for (const data::WordTime& w : found->second) {
    words.push_back(w.word);
    ends_ms.push_back(1000 * w.end);
  }
  detail::check_data(words == set.references.at(0), "word times: the words listed for ", audio,
                     " are not its transcript (", words.size(), " words against ", set.references.at(0).size(), ")");
  const audio::FbankOptions& f = t.config.model.features;
  std::vector<double> emitted_ms;
  for (int64_t g : inputs_read) emitted_ms.push_back(f.frame_end_ms(g - 1));  // the end of frame g - 1, the last read
  return io::emission_delays(t.output_vocab.decode(tokens), emitted_ms, words, ends_ms);
}

// What evaluate() keeps of one decoded input until every input is done (they are added up
// in input order, so that the totals do not depend on the thread count).
struct DecodedInput {
  EvalResult::Scored scored;
  io::LatencyCounts latency;
  io::EmissionDelays word_delays;
  double audio_seconds = 0, seconds = 0;
};

// One worker of evaluate(): its model (the caller's, or a replica computing with the
// caller's parameters) and its recognizer.
struct EvalWorker {
  TrainedModel t;
  std::unique_ptr<stream::Recognizer> recognizer;
};

// A replica of `model` (built from the same configuration) computes with `model`'s own
// parameter and buffer storage, no copy: training's shards (train.threads) and evaluation's
// workers. Gradients the replica held are dropped.
void share_parameters(nn::Seq2Seq& replica, const nn::Seq2Seq& model) {
  torch::NoGradGuard no_grad;
  const auto params = model.parameters(), buffers = model.buffers();
  const auto rp = replica.parameters(), rb = replica.buffers();
  detail::check(rp.size() == params.size() && rb.size() == buffers.size(), "share_parameters: replica: expected ",
                params.size(), " parameters and ", buffers.size(), " buffers (the model's), got ", rp.size(), " and ",
                rb.size());
  for (size_t j = 0; j < params.size(); ++j) {
    if (rp[j].data_ptr() != params[j].data_ptr()) rp[j].set_data(params[j]);
    rp[j].mutable_grad() = at::Tensor();
  }
  for (size_t j = 0; j < buffers.size(); ++j) {
    if (rb[j].data_ptr() != buffers[j].data_ptr()) rb[j].set_data(buffers[j]);
  }
}

}  // namespace

EvalResult evaluate(const TrainedModel& t, const std::vector<data::ReferenceSet>& sets,
                    const nn::SearchOptions& search, bool expected_attention, int64_t limit,
                    const EvalProgress& progress, const data::WordTimes* word_times, int64_t threads) {
  detail::check(!sets.empty(), "evaluate: sets: expected at least one input to decode, got none");
  detail::check(limit >= 0, "evaluate: limit: expected >= 0 (0: all), got ", limit);
  detail::check(threads >= 1, "evaluate: threads: expected >= 1, got ", threads);
  torch::NoGradGuard no_grad;
  const auto t0 = std::chrono::steady_clock::now();
  // With a limit, an evenly spaced subset (files are often sorted, e.g. alphabetically).
  const size_t n = limit > 0 ? std::min<size_t>(sets.size(), static_cast<size_t>(limit)) : sets.size();
  const size_t workers = std::min(n, static_cast<size_t>(threads));
  std::vector<EvalWorker> pool(workers);
  for (size_t w = 0; w < workers; ++w) {
    pool[w].t = t;
    if (w > 0) {  // a replica's initial values, drawn and replaced at once, leave training's random stream as it was
      at::Generator gen = global_generator();
      at::Tensor state;
      {
        std::lock_guard<std::mutex> lock(gen.mutex());
        state = gen.get_state();
      }
      pool[w].t.model = build_model(pool[w].t.config, t.input_vocab, t.output_vocab);
      share_parameters(*pool[w].t.model, *t.model);
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(state);
    }
    pool[w].t.model->eval();
    pool[w].recognizer = std::make_unique<stream::Recognizer>(pool[w].t.model, search);
  }
  std::unique_ptr<io::Progress> bar;
  if (progress.out) {
    bar = std::make_unique<io::Progress>(static_cast<int64_t>(n), *progress.out, progress.is_tty);
    io::ProgressOptions po = bar->options();
    po.label = progress.label;
    po.unit = "inputs";
    bar->set_options(po);
  }

  // Input q of the n: set k, read and decoded by worker w.
  auto decode_one = [&](EvalWorker& worker, size_t q) {
    const TrainedModel& m = worker.t;
    const size_t k = n == sets.size() ? q : q * sets.size() / n;
    const auto q0 = std::chrono::steady_clock::now();
    DecodedInput d;
    const at::Tensor x = m.input_tensor(sets[k].input);  // ids [T], or audio frames [T, F]
    if (m.takes_audio() && x.size(0) > 0) d.audio_seconds = m.config.model.features.frame_end_ms(x.size(0) - 1) / 1000;
    std::vector<int64_t> out;
    if (expected_attention) {
      out = decode_with_expected_alignment(m, x, search).tokens;
    } else if (search.beam == 0 || search.eos_only_after_input || search.eos_only_at_last_entry) {
      // Fed one element at a time: for greedy decoding's latency, and for the rules on when
      // </s> may come, which ask whether the input is still arriving (nn/search.h), so that
      // greedy and beam search are scored under the same rule, the one a stream runs.
      const int64_t length = x.size(0);
      const auto streamed = stream::recognize_incrementally(*worker.recognizer, x);
      out = streamed.result.tokens;
      if (search.beam == 0 && length > 0) d.latency = io::latency(streamed.inputs_read, length);
      if (search.beam == 0 && word_times != nullptr && m.takes_audio()) {
        d.word_delays = word_delays(m, sets[k], out, streamed.inputs_read, *word_times);
      }
    } else {
      out = worker.recognizer->recognize(x).tokens;
    }
    d.scored = {k, io::score(m.output_vocab.decode(out), sets[k].references)};
    d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - q0).count();
    return d;
  };

  std::vector<std::optional<DecodedInput>> decoded(n);
  auto stop_asked = [&] { return progress.stop != nullptr && *progress.stop != 0; };
  if (workers <= 1) {
    for (size_t q = 0; q < n && !stop_asked(); ++q) {
      decoded[q] = decode_one(pool[0], q);
      if (bar) bar->update_count(static_cast<int64_t>(q + 1));
    }
  } else {
    // Each worker takes the next input not yet taken; an input's failure stops the others
    // from taking more, and the first failing input's error (in input order) is thrown.
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex done_mutex;
    int64_t done = 0;
    std::vector<std::pair<size_t, std::exception_ptr>> errors;
    auto work = [&](EvalWorker& worker) {
      nn::run_operators_on_this_thread();
      torch::NoGradGuard worker_no_grad;  // grad mode is per thread
      while (!failed && !stop_asked()) {
        const size_t q = next++;  // once taken, an input is decoded: the first failing one always is
        if (q >= n) return;
        try {
          decoded[q] = decode_one(worker, q);
        } catch (...) {
          std::lock_guard<std::mutex> lock(done_mutex);
          errors.emplace_back(q, std::current_exception());
          failed = true;
          return;
        }
        std::lock_guard<std::mutex> lock(done_mutex);
        if (bar) bar->update_count(++done);
      }
    };
    std::vector<std::thread> running;
    for (auto& worker : pool) running.emplace_back(work, std::ref(worker));
    for (auto& r : running) r.join();
    if (!errors.empty()) std::rethrow_exception(std::min_element(errors.begin(), errors.end(), [](const auto& a, const auto& b) {
                                                  return a.first < b.first;
                                                })->second);
  }
  if (bar) bar->finish();

  EvalResult r;
  r.threads = static_cast<int64_t>(workers);  // >= 1: there is at least one input
  for (auto& d : decoded) {  // input order, whichever worker decoded it
    if (!d) {  // not taken: a stop was asked for
      r.stopped = true;
      continue;
    }
    r.scored.push_back(d->scored);
    r.counts.add(d->scored.counts);
    r.latency.add(d->latency);
    r.word_delays.add(d->word_delays);
    r.audio_seconds += d->audio_seconds;
    r.decode_seconds += d->seconds;
    ++r.inputs;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::vector<float> alignment_weights(const TrainedModel& t, const data::Example& ex) {
  torch::NoGradGuard no_grad;
  t.model->eval();
  const auto x = t.input_tensor(ex.input).unsqueeze(0);
  const auto y = torch::tensor(t.output_vocab.encode_or_unk(ex.output), torch::kLong).unsqueeze(0);
  at::Tensor w;
  t.model->loss(x, torch::full({1}, x.size(1), torch::kLong), y, torch::full({1}, y.size(1), torch::kLong),
                {}, &w);
  const at::Tensor wf = w[0].to(torch::kFloat).contiguous();
  return std::vector<float>(wf.data_ptr<float>(), wf.data_ptr<float>() + wf.numel());
}

std::vector<std::string> memory_labels(const TrainedModel& t, const std::vector<std::string>& input) {
  std::vector<std::string> labels;
  if (t.takes_audio()) {  // every 10th entry's time, in seconds
    // The end of the last frame the entry has read, as a stream reports an emission's time
    // (audio::FbankOptions::frame_end_ms; stream::StreamResult::times_ms).
    const int64_t frames = t.input_tensor(input).size(0);
    const nn::Encoder& encoder = *t.model->encoder;
    const int64_t entries = encoder.output_length(frames);
    labels.resize(static_cast<size_t>(entries));
    for (int64_t m = 0; m < entries; m += 10) {
      const int64_t frame = std::min(encoder.last_input_of(m), frames - 1);
      std::ostringstream label;
      label.precision(3);
      label << t.config.model.features.frame_end_ms(frame) / 1000 << "s";
      labels[static_cast<size_t>(m)] = label.str();
    }
  } else {
    std::vector<std::string> elements = input;  // what the encoder reads, one per input element
    if (t.config.model.input_kind == "symbols" && t.config.model.append_eos) {
      elements.push_back(data::kReservedSymbols[data::kEos]);
    }
    // One label per memory entry: the element it keeps (time reduction keeps every 2^r-th).
    const nn::Encoder& encoder = *t.model->encoder;
    const int64_t entries = encoder.output_length(static_cast<int64_t>(input.size()));
    for (int64_t m = 0; m < entries; ++m) {
      const int64_t e = std::min<int64_t>(encoder.last_input_of(m), static_cast<int64_t>(elements.size()) - 1);
      labels.push_back(e >= 0 ? elements[static_cast<size_t>(e)] : std::string());
    }
  }
  // 003's all-ones EOS frame, which evaluation always appends when p_eos > 0 (Seq2Seq::encode).
  if (t.config.model.p_eos > 0) labels.push_back("EOS frame");
  return labels;
}

// ---------------------------------------------------------------------------------------
// Training

std::vector<std::vector<size_t>> shard_batch(const std::vector<int64_t>& steps, size_t shards, double fixed_rows) {
  detail::check(!steps.empty(), "shard_batch: steps: expected at least one row, got none");
  detail::check(shards >= 1, "shard_batch: shards: expected at least 1, got ", shards);
  detail::check(fixed_rows >= 0 && std::isfinite(fixed_rows), "shard_batch: fixed_rows: expected a finite value >= 0, got ",
                fixed_rows);
  for (size_t b = 0; b < steps.size(); ++b) {
    detail::check(steps[b] >= 1, "shard_batch: steps[", b, "]: expected at least 1 step, got ", steps[b]);
  }
  std::vector<size_t> order(steps.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return steps[a] > steps[b]; });
  const size_t n = order.size();
  // Shard sizes from the front of `order` when every shard's cost stays within `bound`: each
  // shard takes as many rows as fit (more rows in a shard never raise a later one's longest
  // row), so the bound is feasible exactly when this covers every row.
  const auto cut = [&](double bound) {
    std::vector<size_t> sizes;
    for (size_t at = 0; at < n && sizes.size() < shards;) {
      const double fit = std::floor(bound / static_cast<double>(steps[order[at]]) - fixed_rows);
      if (fit < 1) break;
      const size_t take = std::min(n - at, static_cast<size_t>(std::min(fit, static_cast<double>(n))));
      sizes.push_back(take);
      at += take;
    }
    return sizes;
  };
  const auto covers = [&](const std::vector<size_t>& sizes) {
    return std::accumulate(sizes.begin(), sizes.end(), size_t{0}) == n;
  };
  // Bisection for the smallest bound that covers (covering is monotone in the bound): cut(hi)
  // covers, so its largest cost lies between the optimum and hi, which ends within a
  // relative 1e-12 of it (lo never covers).
  double lo = 0, hi = (fixed_rows + static_cast<double>(n)) * static_cast<double>(steps[order[0]]);
  while (hi - lo > 1e-12 * hi) {
    const double mid = lo + (hi - lo) / 2;
    (covers(cut(mid)) ? hi : lo) = mid;
  }
  const auto sizes = cut(hi);
  std::vector<std::vector<size_t>> out;
  size_t at = 0;
  for (size_t size : sizes) {
    out.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(at), order.begin() + static_cast<std::ptrdiff_t>(at + size));
    at += size;
  }
  return out;
}

namespace {

struct Encoded {
  std::vector<int64_t> input, output;
  at::Tensor frames;  // audio: log-mel frames [T, F] (input empty)
  int64_t length() const { return frames.defined() ? frames.size(0) : static_cast<int64_t>(input.size()); }
};

// The batches of one epoch: shuffled with the epoch's seed, bucketed by input length.
std::vector<std::vector<size_t>> epoch_batches(const std::vector<Encoded>& data, int64_t batch_size,
                                               uint64_t seed, int64_t epoch) {
  std::vector<size_t> order(data.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 gen(seed * 1000003ULL + static_cast<uint64_t>(epoch));
  std::shuffle(order.begin(), order.end(), gen);
  const size_t window = static_cast<size_t>(batch_size) * 50;
  for (size_t s = 0; s < order.size(); s += window) {
    const auto e = order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), s + window));
    std::stable_sort(order.begin() + static_cast<std::ptrdiff_t>(s), e, [&](size_t a, size_t b) {
      return data[a].length() < data[b].length();
    });
  }
  std::vector<std::vector<size_t>> batches;
  for (size_t s = 0; s < order.size(); s += static_cast<size_t>(batch_size)) {
    batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(s),
                         order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), s + batch_size)));
  }
  std::shuffle(batches.begin(), batches.end(), gen);
  return batches;
}

// Audio frames of a batch, zero-padded: [B, T, F] and lengths [B].
std::pair<at::Tensor, at::Tensor> pad_frames(const std::vector<Encoded>& data, const std::vector<size_t>& idx) {
  int64_t T = 1;
  for (size_t k : idx) T = std::max(T, data[k].length());
  const int64_t F = data[idx[0]].frames.size(1);
  at::Tensor x = torch::zeros({static_cast<int64_t>(idx.size()), T, F}, torch::kFloat);
  at::Tensor l = torch::zeros({static_cast<int64_t>(idx.size())}, torch::kLong);
  for (size_t b = 0; b < idx.size(); ++b) {
    const at::Tensor& f = data[idx[b]].frames;
    x[static_cast<int64_t>(b)].narrow(0, 0, f.size(0)).copy_(f);
    l[static_cast<int64_t>(b)] = f.size(0);
  }
  return {x, l};
}

std::pair<at::Tensor, at::Tensor> pad(const std::vector<Encoded>& data, const std::vector<size_t>& idx,
                                      bool outputs) {
  if (!outputs && data[idx[0]].frames.defined()) return pad_frames(data, idx);
  int64_t T = 0;
  for (size_t k : idx) T = std::max<int64_t>(T, static_cast<int64_t>((outputs ? data[k].output : data[k].input).size()));
  at::Tensor x = torch::zeros({static_cast<int64_t>(idx.size()), std::max<int64_t>(T, 1)}, torch::kLong);
  at::Tensor l = torch::zeros({static_cast<int64_t>(idx.size())}, torch::kLong);
  auto xa = x.accessor<int64_t, 2>();
  for (size_t b = 0; b < idx.size(); ++b) {
    const auto& s = outputs ? data[idx[b]].output : data[idx[b]].input;
    for (size_t t = 0; t < s.size(); ++t) xa[b][t] = s[t];
    l[b] = static_cast<int64_t>(s.size());
  }
  return {x, l};
}

void write_plots(const TrainedModel& t, const std::vector<data::Example>& examples, const std::string& dir,
                 int64_t step) {
  fs::create_directories(dir);
  for (size_t k = 0; k < examples.size(); ++k) {
    const auto& ex = examples[k];
    const auto w = alignment_weights(t, ex);
    auto out_labels = ex.output;
    out_labels.push_back(data::kReservedSymbols[data::kEos]);
    const auto in_labels = memory_labels(t, ex.input);
    const int64_t U = static_cast<int64_t>(out_labels.size()), T = static_cast<int64_t>(in_labels.size());
    std::ostringstream name;
    name << dir << "/step" << step << "_ex" << k << ".png";
    std::ostringstream title;
    title << t.config.model.attention << " alignment, step " << step;
    io::write_alignment_png(name.str(), w, U, T, in_labels, out_labels, title.str());
  }
}

}  // namespace

namespace {

// The files of a run in `dir` that a fresh run would replace.
std::vector<std::string> run_files(const std::string& dir) {
  std::vector<std::string> found;
  for (const char* name : {"last.ckpt", "best.ckpt", "train.jsonl"}) {
    if (fs::exists(fs::path(dir) / name)) found.emplace_back(name);
  }
  return found;
}

// Drops the records of the JSONL log at `path` whose "step" is past `step` (those a resumed
// run writes again), and a last line cut short by a kill; rewrites the file atomically, and
// only when something is dropped. Lines that are not JSON objects are kept as they are.
void truncate_log(const std::string& path, int64_t step) {
  if (!fs::exists(path)) return;
  const std::string text = io::read_file(path);
  std::string kept;
  bool dropped = false;
  for (size_t pos = 0; pos < text.size();) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {  // no newline: a record the kill interrupted
      dropped = true;
      break;
    }
    const std::string line = text.substr(pos, nl + 1 - pos);
    pos = nl + 1;
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
        j["step"].get<int64_t>() > step) {
      dropped = true;
      continue;
    }
    kept += line;
  }
  if (dropped) io::write_file_atomic(path, kept);
}

// Removes what a fresh run replaces in `dir`: the checkpoints and the step plots (the log is
// restarted when it is opened).
void remove_run(const std::string& dir) {
  fs::remove(fs::path(dir) / "last.ckpt");
  fs::remove(fs::path(dir) / "best.ckpt");
  const fs::path plots = fs::path(dir) / "plots";
  if (!fs::is_directory(plots)) return;
  for (const auto& e : fs::directory_iterator(plots)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step", 0) == 0 && e.path().extension() == ".png") fs::remove(e.path());
  }
}

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (size_t k = 0; k < names.size(); ++k) s += (k ? ", " : "") + names[k];
  return s;
}

// The samples, at f.sample_rate, of the audio file `path` that line `line` (1-based; 0:
// unknown) of the manifest `manifest`, configuration key `key` (data.train, data.dev), lists.
// Throws mona::DataError naming the key, manifest:line and the file when it cannot be read
// (audio::read_audio's message) or holds less than one frame of `f` (no features at all).
audio::Waveform read_listed_audio(const char* key, const std::string& manifest, int64_t line,
                                  const std::string& path, const audio::FbankOptions& f) {
  const std::string where =
      std::string(key) + ": " + manifest + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": ";
  audio::Waveform w;
  try {
    w = audio::read_audio(path, f.sample_rate);
  } catch (const DataError& e) {
    detail::fail_data(where, e.what());
  }
  detail::check_data(f.num_frames(static_cast<int64_t>(w.samples.size())) > 0, where, path, ": ", w.samples.size(),
                     " samples, shorter than one frame (", f.window_size(), " samples)");
  return w;
}

// Refuses what Trainer::run cannot do before anything is read or written: resume together
// with overwrite, a model it cannot train (input_kind "features": its data files hold
// symbols or audio paths, never feature frames), no training data, nothing to resume, or
// (for a fresh run) an output directory that holds a run.
void check_run_request(const Config& c, const RunOptions& options) {
  detail::check(!(options.resume && options.overwrite),
                "resume and overwrite exclude each other (--resume continues the run in ",
                c.train.output_dir, ", --overwrite replaces it)");
  detail::check(c.model.input_kind != "features", "model.input_kind: \"", c.model.input_kind,
                "\" models are not trained by mona's trainer (its data are symbol TSV files or audio "
                "manifests, not feature frames); use \"symbols\" or \"audio\"");
  detail::check(!c.data.train.empty(), "data.train: a training TSV file is required");
  detail::check(!fs::exists(c.train.output_dir) || fs::is_directory(c.train.output_dir), "train.output_dir ",
                c.train.output_dir, " exists and is not a directory");
  if (options.resume) {
    detail::check_data(fs::exists(c.train.output_dir + "/last.ckpt"), "--resume: no checkpoint to resume from at ",
                       c.train.output_dir + "/last.ckpt");
  } else if (!options.overwrite) {
    const auto found = run_files(c.train.output_dir);
    // --resume needs last.ckpt: a run stopped before its first checkpoint has none to go on from.
    const bool resumable = fs::exists(c.train.output_dir + "/last.ckpt");
    detail::check(found.empty(), "train.output_dir ", c.train.output_dir, " holds a run (", join_names(found), "); ",
                  resumable ? "continue it with --resume, choose" : "it has no last.ckpt to continue from: choose",
                  " another train.output_dir, or replace it with --overwrite");
  }
}

// The learning rate at `step`: train.optimizer.learning_rate, multiplied by decay_factor
// every decay_every steps (0: constant).
double learning_rate(const OptimizerConfig& o, int64_t step) {
  double lr = o.learning_rate;
  if (o.decay_every > 0) lr *= std::pow(o.decay_factor, static_cast<double>(step / o.decay_every));
  return lr;
}

// One call of Trainer::run: what it carries from step to step. Trainer::run calls, in
// order, the constructor (data, vocabularies, model, optimizer), resume_if_asked(),
// prepare_output_dir(), then train() (the step loop and finish()).
class TrainingRun {
 public:
  // Sets the thread count and the seed, reads the data, builds the vocabularies, the model
  // and the optimizer. Audio models: decodes every dev audio file once (check_dev_audio),
  // then reads the training features. Writes nothing. The run's clock (train.max_minutes)
  // starts here.
  TrainingRun(Config& c, const RunOptions& options, std::ostream& progress_out);

  // With options.resume, loads last.ckpt into the model and the optimizer (its model
  // options must equal the configuration's): before anything is written, so a checkpoint
  // that does not fit changes nothing on disk.
  void resume_if_asked();

  // Everything is checked: from here on the output directory changes. Creates it, removes
  // the old run with options.overwrite, drops the log records past the resumed step, writes
  // config.yaml and opens the log and the progress display.
  void prepare_output_dir();

  // The step loop, until train.max_steps, train.max_minutes, early stopping or a stop
  // request; then finish() or finish_stopped().
  TrainResult train();

 private:
  double minutes() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() / 60.0;
  }
  // The run's minutes over all its processes (the log's "minutes"): what the resumed
  // checkpoint had trained, then this process.
  double run_minutes() const { return minutes_before_ + minutes(); }
  // Saves a checkpoint of the run as it stands (the optimizer's state with `with_optimizer`:
  // last.ckpt).
  void save(const std::string& path, bool with_optimizer) {
    run_.minutes = run_minutes();
    CheckpointIO::save(path, t_, with_optimizer ? adam_.get() : nullptr, run_);
  }
  // The batch to train on next (a new epoch's batches when the current epoch is done).
  const std::vector<size_t>& next_batch();
  // Audio: reads every training utterance, computes its log-mel frames once (held in
  // memory for the run) and estimates the global normalisation (train.normalize_features).
  // `lines`: each example's line in data.train (read_examples), for messages.
  void read_audio_features(const std::vector<data::Example>& examples, const std::vector<int64_t>& lines);
  // Audio: reads every dev audio file (the plots' inputs are among them) as evaluate() will,
  // so that one that cannot be read or is shorter than one frame is refused now, naming
  // data.dev and its manifest line (`lines`), not at the first evaluation, eval_every steps
  // in. The samples are not kept (evaluate() reads them again).
  void check_dev_audio(const std::vector<int64_t>& lines) const;
  // SpecAugment (train.spec_augment) on a batch of raw frames [B, T, F] with lengths: the
  // time warp and the masks (drawn from the step's seed) of each utterance's frames; masked
  // cells take the feature mean, which the model normalises to 0, as SpecAugment masks
  // normalised features with 0.
  // `shard`: which shard of the step's batch x is (train_step), part of the masks' seed.
  void augment(at::Tensor& x, const at::Tensor& lengths, int64_t shard) const;
  // One optimizer step on the next batch: loss, backward, clipping, Adam. Throws
  // mona::ArgumentError when the loss is not finite (training diverged).
  //
  // With train.threads = n > 1 the batch is cut into at most n shards of about equal cost
  // (shard_batch, with kShardFixedRows), and shard k runs its forward and backward pass on its
  // own thread, on the model itself (k = 0) or on replica k (whose parameters and buffers
  // share the model's storage, bound before the step; its own gradients and its own training
  // noise, drawn from the seed, the step and k). Each shard's loss is divided by the whole
  // batch's token count (nn::BatchTotals), so the gradients, added into the model's in the
  // order of k, are the batch's: the same computation as one thread but for the order of
  // additions and the noise draws. Deterministic for a given thread count. Every thread runs
  // its operators and matrix products on itself (nn/threads.h): the model's small operators
  // cost mostly their dispatch, which only this splitting runs in parallel. The work over
  // every parameter that follows (the gradients' sum, the clipping norm's terms, clipping
  // and Adam) runs in n parts of the parameters, one per thread (PartitionedAdam).
  void train_step();
  // What one shard's pass (or a whole step, the shards' sums) gives: its share of the
  // batch's loss and of the CTC term (nn::LossTerms; 0 without a CTC head), its tokens.
  struct PassResult {
    double loss = 0, ctc = 0;
    int64_t tokens = 0;
    void add(const PassResult& o) {
      loss += o.loss;
      ctc += o.ctc;
      tokens += o.tokens;
    }
  };
  // Forward and backward pass of one shard (the batch rows `idx`) on `model`.
  PassResult shard_pass(nn::Seq2Seq& model, const std::vector<size_t>& idx, int64_t shard,
                        const nn::BatchTotals* totals);
  // Shows the step's loss and throughput, and every train.log_every steps writes a "train"
  // record with the mean loss since the last one (and the mean CTC term, "ctc", for a
  // model with a CTC head).
  void record_step(const PassResult& step);
  // Every train.plot_every steps, alignment plots of the first dev examples.
  void maybe_write_plots();
  // Writes last.ckpt, then decodes the dev set greedily online (train::evaluate), logs an
  // "eval" record (error rates, latency), writes best.ckpt when the token error rate improved
  // (always when there is no dev set) and last.ckpt again with the evaluation's outcome;
  // counts evaluations without improvement for early stopping. An evaluation that throws
  // leaves last.ckpt at this step (with the run state before the evaluation): resuming it
  // continues with the next step, losing no training.
  void evaluate_and_checkpoint();
  // End of a run that reached its end: a last evaluation unless the last step had one, the
  // final plots, the result.
  TrainResult finish();
  // End of a run asked to stop (options.stop held `stop_value`): last.ckpt at the step reached
  // and a "stopped" record, nothing else.
  TrainResult finish_stopped(int stop_value);
  TrainResult result() const;

  Config& c_;
  const RunOptions& options_;
  std::ostream& progress_out_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  const std::string last_path_, best_path_;
  std::vector<data::Example> dev_examples_;
  std::vector<data::ReferenceSet> dev_sets_;
  std::vector<data::Example> plot_examples_;
  TrainedModel t_;
  std::vector<Encoded> data_;
  std::unique_ptr<PartitionedAdam> adam_;  // one part per thread (train_step)
  // train.threads - 1 threads that run the shards and parts k >= 1 (train_step), each its
  // operators on itself alone; kept for the run, so that each keeps its allocator caches.
  std::unique_ptr<WorkerTeam> workers_;
  std::vector<std::shared_ptr<nn::Seq2Seq>> replicas_;  // train.threads - 1 copies (train_step)
  std::vector<at::Generator> replica_dropout_;          // their dropout generators
  RunState run_;
  std::optional<io::JsonlLog> log_;
  std::optional<io::Progress> progress_;
  std::vector<std::vector<size_t>> batches_;
  bool early_stopped_ = false;
  // Since the last "train" record (or this process's start): target tokens, and when it was
  // (the rate is this process's; the loss window is run_'s, which checkpoints keep).
  int64_t tokens_since_ = 0;
  std::chrono::steady_clock::time_point last_record_ = start_;
  double minutes_before_ = 0;  // run_.minutes of the resumed checkpoint
};

// shard_batch's fixed_rows for train_step: a recurrent step's fixed cost (operator dispatch)
// in rows of its arithmetic. Measured on the G2P recipe's MoChA model (bench/notes.md): one
// thread takes 21.3-22.0 ms per step with batches of 32 rows and 35.0-35.7 ms with 64 rows
// (the same length distribution), so (18 + 32) / (18 + 64) matches their ratio. Larger
// models have a smaller one; an estimate that is off only leaves one thread waiting a little
// longer for another.
constexpr double kShardFixedRows = 18;

// How long a thread of the step's team polls before it sleeps (worker_team.h): longer than
// the gaps between a step's forks, which are a fraction of a millisecond (bench/notes.md).
constexpr std::chrono::microseconds kTeamSpin{2000};

TrainingRun::TrainingRun(Config& c, const RunOptions& options, std::ostream& progress_out)
    : c_(c),
      options_(options),
      progress_out_(progress_out),
      last_path_(c.train.output_dir + "/last.ckpt"),
      best_path_(c.train.output_dir + "/best.ckpt") {
  c_.train.threads = usable_threads(c_.train.threads, "train.threads", &progress_out_);
  nn::set_threads(1);  // parallel over shards of the batch instead (train_step)
  torch::manual_seed(c_.train.seed);

  std::vector<int64_t> train_lines, dev_lines;
  const auto train_examples = read_examples(c_, c_.data.train, &train_lines);
  detail::check_data(!train_examples.empty(), "data.train: ", c_.data.train, " holds no examples");
  if (!c_.data.dev.empty()) {  // a dev file given is read and must hold examples; no dev set is data.dev: null
    dev_examples_ = read_examples(c_, c_.data.dev, &dev_lines);
    detail::check_data(!dev_examples_.empty(), "data.dev: ", c_.data.dev,
                       " holds no examples (leave data.dev out, or null, for a run without a dev set)");
  }
  dev_sets_ = data::group_references(dev_examples_);

  t_.config = c_;
  const bool audio = t_.takes_audio();
  if (audio) check_dev_audio(dev_lines);  // before the training features, which take longer
  std::optional<TrainedModel> init;  // train.init_from, for a fresh run
  if (!c_.train.init_from.empty() && !options.resume) {
    try {
      init = TrainedModel::load(c_.train.init_from);
    } catch (const DataError& e) {  // the key that named the file
      detail::fail_data("train.init_from: ", e.what());
    }
    // Before the vocabularies: an audio model's symbols are not this run's inputs at all.
    detail::check(init->config.model.input_kind == c_.model.input_kind, "train.init_from: ", c_.train.init_from,
                  " is a model of ", init->config.model.input_kind, " inputs; this run's model.input_kind is ",
                  c_.model.input_kind);
    t_.input_vocab = init->input_vocab;
    t_.output_vocab = init->output_vocab;
  }
  for (const auto& ex : train_examples) {
    if (!audio) t_.input_vocab.add_all(ex.input);
    t_.output_vocab.add_all(ex.output);
  }
  if (init) {
    for (const auto& [ours, theirs, what] : {std::tuple{&t_.input_vocab, &init->input_vocab, "input"},
                                             std::tuple{&t_.output_vocab, &init->output_vocab, "output"}}) {
      if (ours->size() == theirs->size()) continue;
      std::vector<int64_t> added(static_cast<size_t>(ours->size() - theirs->size()));
      std::iota(added.begin(), added.end(), theirs->size());
      detail::fail_data("train.init_from ", c_.train.init_from, ": data.train ", c_.data.train, " has ", added.size(),
                        " ", what, " token(s) outside the checkpoint's vocabulary: ", join_names(ours->decode(added)));
    }
  }
  t_.model = build_model(t_.config, t_.input_vocab, t_.output_vocab);
  t_.model->decoder->attention->reseed_noise(c_.train.seed);
  if (audio) {
    read_audio_features(train_examples, train_lines);
  } else {
    for (const auto& ex : train_examples) {
      data_.push_back({t_.input_vocab.encode(ex.input), t_.output_vocab.encode(ex.output), {}});
    }
  }
  if (init) {  // after the normalisation estimate: the checkpoint's encoder was trained on its own
    const auto unused = copy_matching_state(*t_.model, *init->model, c_.train.init_from);
    progress_out_ << "initialised from " << c_.train.init_from << " (step " << init->step << ")";
    if (!unused.empty()) progress_out_ << "; not used: " << join_names(unused);
    progress_out_ << "\n";
  }
  if (c_.train.threads > 1) {
    workers_ = std::make_unique<WorkerTeam>(c_.train.threads - 1, kTeamSpin,
                                            [] { nn::run_operators_on_this_thread(); });
  }
  for (int64_t k = 1; k < c_.train.threads; ++k) {
    Config replica_config = t_.config;
    replicas_.push_back(build_model(replica_config, t_.input_vocab, t_.output_vocab));
  }
  replica_dropout_.resize(replicas_.size());
  for (size_t k = 0; k < replicas_.size(); ++k) {
    replicas_[k]->encoder->dropout_generator = &replica_dropout_[k];
    replicas_[k]->decoder->dropout_generator = &replica_dropout_[k];
  }
  const auto& o = c_.train.optimizer;
  const auto params = t_.model->parameters();
  adam_ = std::make_unique<PartitionedAdam>(
      params, torch::optim::AdamOptions(o.learning_rate).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(o.weight_decay),
      std::min<int64_t>(c_.train.threads, static_cast<int64_t>(params.size())));
}

void TrainingRun::check_dev_audio(const std::vector<int64_t>& lines) const {
  for (size_t k = 0; k < dev_examples_.size(); ++k) {
    read_listed_audio("data.dev", c_.data.dev, k < lines.size() ? lines[k] : 0, dev_examples_[k].input.at(0),
                      c_.model.features);
  }
}

void TrainingRun::read_audio_features(const std::vector<data::Example>& examples, const std::vector<int64_t>& lines) {
  const auto t0 = std::chrono::steady_clock::now();
  const audio::FbankOptions& f = c_.model.features;
  audio::GlobalCmvn cmvn;
  int64_t samples = 0;
  for (size_t k = 0; k < examples.size(); ++k) {
    const audio::Waveform w = read_listed_audio("data.train", c_.data.train, k < lines.size() ? lines[k] : 0,
                                                examples[k].input[0], f);
    samples += static_cast<int64_t>(w.samples.size());
    audio::Features x = audio::compute_fbank(f, w.samples, c_.train.seed * 1000003ULL + k);
    cmvn.accumulate(x);
    Encoded e;
    e.output = t_.output_vocab.encode(examples[k].output);
    e.frames = torch::from_blob(x.data.data(), {x.num_frames, x.num_bins}, torch::kFloat).clone();
    data_.push_back(std::move(e));
  }
  if (c_.train.normalize_features) {
    cmvn.finalize();
    const auto as_tensor = [](const std::vector<double>& v) {
      return torch::tensor(std::vector<double>(v), torch::kDouble).to(torch::kFloat);
    };
    t_.model->encoder->set_normalization(as_tensor(cmvn.mean()), as_tensor(cmvn.inv_std()));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  progress_out_ << "features: " << examples.size() << " utterances, "
                << static_cast<double>(samples) / f.sample_rate / 3600 << " h of audio, "
                << data_.size() << " feature matrices held in memory (float32), computed in " << seconds
                << " s\n";
}

void TrainingRun::resume_if_asked() {
  if (!options_.resume) return;
  run_ = CheckpointIO::load_into(last_path_, t_, adam_.get());
  minutes_before_ = run_.minutes;
}

void TrainingRun::prepare_output_dir() {
  fs::create_directories(c_.train.output_dir);
  if (options_.overwrite) remove_run(c_.train.output_dir);
  const std::string log_path = c_.train.output_dir + "/train.jsonl";
  if (options_.resume) truncate_log(log_path, t_.step);
  io::save_yaml_atomic(c_.train.output_dir + "/config.yaml", config_to_yaml(t_.config));
  log_.emplace(log_path, /*append=*/options_.resume);
  progress_.emplace(c_.train.max_steps, progress_out_, options_.progress_is_tty);
  if (c_.train.max_minutes > 0) {  // counted from the start of run(), as the loop counts it
    progress_->set_time_budget(std::max(1e-3, 60 * (c_.train.max_minutes - minutes())));
  }
  const auto n_plots = std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(dev_examples_.size()),
                                                c_.train.plot_examples);
  plot_examples_.assign(dev_examples_.begin(), dev_examples_.begin() + n_plots);
}

TrainResult TrainingRun::train() {
  int64_t parameters = 0;
  for (const auto& p : t_.model->parameters()) parameters += p.numel();
  progress_out_ << "model: " << parameters << " parameters\n";
  t_.model->train();
  for (auto& r : replicas_) r->train();
  last_record_ = std::chrono::steady_clock::now();
  batches_ = epoch_batches(data_, c_.train.batch_size, c_.train.seed, run_.epoch);
  int stopped = 0;
  while (t_.step < c_.train.max_steps) {
    if (options_.stop && *options_.stop != 0) {
      stopped = static_cast<int>(*options_.stop);
      break;
    }
    if (c_.train.max_minutes > 0 && minutes() >= c_.train.max_minutes) break;
    train_step();
    maybe_write_plots();
    if (t_.step % c_.train.eval_every == 0) {
      evaluate_and_checkpoint();
      if (c_.train.patience > 0 && run_.bad_evals >= c_.train.patience) {
        early_stopped_ = true;
        break;
      }
    }
  }
  progress_->finish();
  return stopped != 0 ? finish_stopped(stopped) : finish();
}

const std::vector<size_t>& TrainingRun::next_batch() {
  if (run_.position >= static_cast<int64_t>(batches_.size())) {
    ++run_.epoch;
    run_.position = 0;
    batches_ = epoch_batches(data_, c_.train.batch_size, c_.train.seed, run_.epoch);
  }
  return batches_[static_cast<size_t>(run_.position++)];
}

void TrainingRun::augment(at::Tensor& x, const at::Tensor& lengths, int64_t shard) const {
  const audio::SpecAugmentOptions& opts = c_.train.spec_augment;
  if (!opts.enabled() || x.dim() != 3) return;
  const nn::Encoder& encoder = *t_.model->encoder;
  core::Rng rng(c_.train.seed * 1000003ULL + static_cast<uint64_t>(t_.step) * 64 + static_cast<uint64_t>(shard) +
                0x5eedULL);
  // Masked cells take the value whose normalisation is 0: the mean.
  const at::Tensor mean = encoder.feature_mean().to(at::kFloat).contiguous();
  const std::vector<float> mask_values(mean.data_ptr<float>(), mean.data_ptr<float>() + mean.numel());
  // x is pad()'s own tensor of float frames, written in place (the data set's frames, which
  // later epochs read again, are not touched).
  x = x.contiguous();
  for (int64_t b = 0; b < x.size(0); ++b) {
    audio::Features f;
    f.num_frames = lengths[b].item<int64_t>();
    f.num_bins = x.size(2);
    const float* row = x[b].data_ptr<float>();
    f.data.assign(row, row + f.num_frames * f.num_bins);
    audio::spec_augment(f, opts, rng, mask_values);
    std::copy(f.data.begin(), f.data.end(), x[b].data_ptr<float>());
  }
}

TrainingRun::PassResult TrainingRun::shard_pass(nn::Seq2Seq& model, const std::vector<size_t>& idx,
                                                int64_t shard, const nn::BatchTotals* totals) {
  auto [x, xl] = pad(data_, idx, false);
  augment(x, xl, shard);
  auto [y, yl] = pad(data_, idx, true);
  nn::LengthPenaltyOptions penalty;
  penalty.lambda = c_.train.length_penalty;
  penalty.until_step = c_.train.length_penalty_until;
  penalty.step = t_.step;
  PassResult r;
  nn::LossTerms terms;
  at::Tensor loss = model.loss(x, xl, y, yl, c_.train.smoothing, nullptr, &r.tokens,
                               c_.train.length_penalty > 0 ? &penalty : nullptr, totals, &terms);
  loss.backward();
  r.loss = loss.item<double>();
  if (terms.ctc.defined()) r.ctc = terms.ctc.item<double>();
  return r;
}

// Runs task(k) for k = 0 .. n - 1: task(0) on the calling thread, the others on `team`
// (null only when n is 1); returns the results in the order of k and rethrows the first
// exception (by k) once every task has ended.
template <class Task>
auto on_threads(WorkerTeam* team, size_t n, const Task& task) {
  using Result = decltype(task(size_t{0}));
  std::vector<Result> results;
  if (n == 1) {
    results.push_back(task(0));
    return results;
  }
  std::vector<std::optional<Result>> done(n);
  team->run(n, [&](size_t k) { done[k].emplace(task(k)); });
  for (auto& r : done) results.push_back(std::move(*r));
  return results;
}

void TrainingRun::train_step() {
  const auto& idx = next_batch();
  const auto& o = c_.train.optimizer;
  adam_->set_learning_rate(learning_rate(o, t_.step));
  adam_->clear_grads();
  PassResult step;
  size_t shards = 1;
  if (replicas_.empty() || idx.size() == 1) {
    step = shard_pass(*t_.model, idx, 0, nullptr);
  } else {
    nn::BatchTotals totals;
    totals.sequences = static_cast<int64_t>(idx.size());
    std::vector<int64_t> steps(idx.size());
    for (size_t b = 0; b < idx.size(); ++b) {
      const Encoded& e = data_[idx[b]];
      totals.tokens += static_cast<int64_t>(e.output.size()) + 1;
      steps[b] = t_.model->encoder->output_length(e.length()) + static_cast<int64_t>(e.output.size()) + 1;
    }
    std::vector<std::vector<size_t>> part = shard_batch(steps, replicas_.size() + 1, kShardFixedRows);
    for (auto& p : part) {
      for (size_t& b : p) b = idx[b];
    }
    shards = part.size();
    for (size_t k = 1; k < shards; ++k) {
      nn::Seq2Seq& replica = *replicas_[k - 1];
      share_parameters(replica, *t_.model);  // the model's own parameter and buffer storage (no copy)
      const uint64_t noise_seed = c_.train.seed * 1000003ULL + static_cast<uint64_t>(t_.step) * 64 + k;
      replica.decoder->attention->reseed_noise(noise_seed);
      replica_dropout_[k - 1] = at::make_generator<at::CPUGeneratorImpl>(noise_seed ^ 0xd0d0ULL);
    }
    const auto done = on_threads(workers_.get(), shards, [&](size_t k) {
      return shard_pass(k == 0 ? *t_.model : *replicas_[k - 1], part[k], static_cast<int64_t>(k), &totals);
    });
    step = done[0];
    for (size_t k = 1; k < shards; ++k) step.add(done[k]);
  }
  // The optimizer step, part r of the parameters on thread r: the shards' gradients added
  // into the model's (in the order of k) with the terms of the clipping norm, then clipping
  // and Adam (two passes over the part, mona/train/optimizer.h).
  std::vector<std::vector<at::Tensor>> shard_params;
  for (size_t k = 1; k < shards; ++k) shard_params.push_back(replicas_[k - 1]->parameters());
  const size_t parts = static_cast<size_t>(adam_->parts());
  const auto squares = on_threads(workers_.get(), parts, [&](size_t r) {
    return adam_->sum_gradients(static_cast<int64_t>(r), shard_params);
  });
  const double clip_factor = o.clip_norm > 0 ? adam_->clip_factor(squares, o.clip_norm) : 1.0;
  const auto finite = on_threads(workers_.get(), parts, [&](size_t r) {
    return adam_->step(static_cast<int64_t>(r), clip_factor) ? 1 : 0;
  });
  ++t_.step;
  detail::check(std::isfinite(step.loss), "training diverged: loss is ", step.loss, " at step ", t_.step,
                " (lower train.optimizer.learning_rate?)");
  // A step that made a parameter NaN or infinite (too large a learning rate) would fail in
  // the next forward pass, in whichever operator first checks its input.
  detail::check(std::count(finite.begin(), finite.end(), 0) == 0, "training diverged: the update of step ", t_.step,
                " made parameters NaN or infinite (lower train.optimizer.learning_rate?)");
  record_step(step);
}

void TrainingRun::record_step(const PassResult& step) {
  run_.window_loss += step.loss;
  run_.window_ctc += step.ctc;
  ++run_.window_steps;
  tokens_since_ += step.tokens;
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_record_).count();
  const double tokens_per_second = dt > 0 ? tokens_since_ / dt : 0;
  progress_->update(t_.step, step.loss, tokens_per_second);
  if (t_.step % c_.train.log_every != 0) return;
  const auto steps = static_cast<double>(run_.window_steps);
  nlohmann::json record = {{"event", "train"}, {"step", t_.step}, {"loss", run_.window_loss / steps},
                           {"learning_rate", learning_rate(c_.train.optimizer, t_.step)},
                           {"tokens_per_second", tokens_per_second}, {"minutes", run_minutes()}};
  if (t_.model->ctc_output) record["ctc"] = run_.window_ctc / steps;
  log_->write(record);
  run_.window_loss = 0;
  run_.window_ctc = 0;
  run_.window_steps = 0;
  tokens_since_ = 0;
  last_record_ = std::chrono::steady_clock::now();
}

void TrainingRun::maybe_write_plots() {
  if (c_.train.plot_every <= 0 || t_.step % c_.train.plot_every != 0 || plot_examples_.empty()) return;
  write_plots(t_, plot_examples_, c_.train.output_dir + "/plots", t_.step);
  t_.model->train();
}

void TrainingRun::evaluate_and_checkpoint() {
  // last.ckpt first: an evaluation that fails never loses the steps trained since the last one.
  save(last_path_, true);
  nlohmann::json rec{{"event", "eval"}, {"step", t_.step}, {"minutes", run_minutes()}};
  if (!dev_sets_.empty()) {
    nn::SearchOptions greedy = c_.decode;
    greedy.beam = 0;
    EvalProgress shown;
    shown.out = &progress_out_;
    shown.is_tty = options_.progress_is_tty;
    shown.label = "dev eval (step " + std::to_string(t_.step) + ")";
    shown.stop = options_.stop;  // a stop ends the evaluation too: last.ckpt is saved already
    const EvalResult ev = evaluate(t_, dev_sets_, greedy, false, c_.train.eval_limit, shown, nullptr, c_.train.threads);
    if (ev.stopped) {  // no record of a part of the dev set; the caller ends the run (finish_stopped)
      t_.model->train();
      return;
    }
    const double ter = ev.counts.token_error_rate();
    rec["dev_token_error_rate"] = ter;
    rec["dev_sequence_error_rate"] = ev.counts.sequence_error_rate();
    rec["dev_inputs_per_second"] = ev.inputs_per_second();
    const bool emitted = ev.latency.sequences > 0;  // latency is null when nothing was emitted
    rec["dev_average_proportion"] = emitted ? nlohmann::json(ev.latency.average_proportion()) : nullptr;
    rec["dev_average_lagging"] = emitted ? nlohmann::json(ev.latency.average_lagging()) : nullptr;
    rec["dev_early_token_share"] = emitted ? nlohmann::json(ev.latency.early_token_share()) : nullptr;
    if (ter < run_.best_ter) {
      run_.best_ter = ter;
      run_.bad_evals = 0;
      save(best_path_, false);
      rec["best"] = true;
    } else {
      ++run_.bad_evals;
    }
    // Again, with the evaluation's outcome (the best score, the evaluations without
    // improvement), which a resumed run continues from.
    save(last_path_, true);
  } else {
    save(best_path_, false);
  }
  log_->write(rec);
  t_.model->train();
}

TrainResult TrainingRun::finish() {
  if (t_.step % c_.train.eval_every != 0 || t_.step == 0) evaluate_and_checkpoint();
  if (options_.stop && *options_.stop != 0) return finish_stopped(static_cast<int>(*options_.stop));
  if (!plot_examples_.empty()) write_plots(t_, plot_examples_, c_.train.output_dir + "/plots", t_.step);
  return result();
}

TrainResult TrainingRun::finish_stopped(int stop_value) {
  save(last_path_, true);
  log_->write({{"event", "stopped"}, {"step", t_.step}, {"minutes", run_minutes()}});
  TrainResult r = result();
  r.stopped = stop_value;
  return r;
}

TrainResult TrainingRun::result() const {
  TrainResult r;
  r.steps = t_.step;
  r.minutes = minutes();
  if (run_.has_dev_score()) r.best_token_error_rate = run_.best_ter;
  r.best_checkpoint = best_path_;
  r.last_checkpoint = last_path_;
  r.early_stopped = early_stopped_;
  return r;
}

}  // namespace

Trainer::Trainer(Config config) : config_(std::move(config)) { config_.validate(); }

TrainResult Trainer::run(const RunOptions& options, std::ostream& progress_out) {
  // One run at a time in an output directory: without the lock, two runs started together
  // both pass check_run_request's look for an existing run and write over each other. A
  // directory made here for the lock is removed again when the run is refused before it
  // wrote anything there (a bad request, init_from, unreadable data), with the parents made
  // for it.
  const std::string& dir = config_.train.output_dir;
  std::vector<fs::path> made;  // the directories made here, deepest first
  if (!dir.empty()) {
    fs::path leaf = fs::absolute(dir).lexically_normal();
    if (leaf.filename().empty()) leaf = leaf.parent_path();  // "runs/x/"
    for (fs::path p = leaf; !p.empty() && !fs::exists(p); p = p.parent_path()) {
      if (p == p.parent_path()) break;
      made.push_back(p);
    }
    if (!made.empty()) {  // (a file at `dir` itself is refused below, by name)
      std::error_code error;
      fs::create_directories(dir, error);
      detail::check_data(!error, "train.output_dir ", dir, ": cannot create it: ", error.message());
    }
  }
  std::optional<io::DirectoryLock> lock;
  try {
    if (!dir.empty() && fs::is_directory(dir)) lock.emplace(dir, "another mona train is running there");
    check_run_request(config_, options);
    TrainingRun session(config_, options, progress_out);
    session.resume_if_asked();
    session.prepare_output_dir();
    return session.train();
  } catch (...) {
    lock.reset();
    std::error_code ignored;
    for (const fs::path& p : made) {
      if (!fs::is_empty(p, ignored) || !fs::remove(p, ignored)) break;
    }
    throw;
  }
}

}  // namespace mona::train
