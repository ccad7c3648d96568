// Uses the installed mona::nn and mona::stream: a tiny untrained MoChA model decodes one
// input offline (Recognizer::recognize) and streamed in pieces of 2 and of 1; the tokens,
// positions and score must be the same (mona/stream/stream.h claims bit for bit). Exits 1
// on a mismatch.
#include <mona/nn/search.h>
#include <mona/nn/seq2seq.h>
#include <mona/stream/stream.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

std::string show(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return "[" + s + "]";
}

}  // namespace

int main() {
  torch::manual_seed(11);
  mona::nn::ModelOptions o;
  o.input_vocab = 10;
  o.output_vocab = 10;
  o.embedding_dim = 8;
  o.encoder_layers = 1;
  o.encoder_hidden = 16;
  o.decoder_embedding_dim = 8;
  o.decoder_hidden = 16;
  o.attention = "mocha";
  o.attention_options.attention_dim = 8;
  o.attention_options.chunk_size = 2;
  // Untrained. With this seed the attention moves on (tokens at memory entries 0, 1, 5, then
  // past the end), so streamed tokens come out at different times; any model would do,
  // streaming must equal recognize() whatever it emits.
  o.attention_options.init_r = 0.0;
  auto model = std::make_shared<mona::nn::Seq2Seq>(o);
  mona::stream::Recognizer rec(model, mona::nn::SearchOptions{});

  const torch::Tensor x = torch::tensor({4, 7, 5, 9, 6, 8, 4}, torch::kLong);
  const int64_t T = x.size(0);
  const mona::stream::StreamResult offline = rec.recognize(x);
  std::printf("offline:   tokens %s positions %s score %.17g\n", show(offline.tokens).c_str(),
              show(offline.memory_positions).c_str(), offline.score);
  int bad = offline.tokens.empty() || !offline.final;

  for (int64_t piece : {2, 1}) {
    auto s = rec.create_stream();
    for (int64_t t = 0; t < T; t += piece) {
      rec.accept(*s, x.narrow(0, t, std::min(piece, T - t)));
      while (rec.is_ready(*s)) rec.decode(*s);
    }
    rec.input_finished(*s);
    while (rec.is_ready(*s)) rec.decode(*s);
    const mona::stream::StreamResult r = rec.result(*s);
    std::printf("pieces of %lld: tokens %s positions %s score %.17g\n",
                static_cast<long long>(piece), show(r.tokens).c_str(),
                show(r.memory_positions).c_str(), r.score);
    bad += !r.final || r.tokens != offline.tokens ||
           r.memory_positions != offline.memory_positions || r.score != offline.score;
  }
  if (bad != 0) {
    std::printf("FAILED: streaming differs from recognize(), or nothing was recognised\n");
    return 1;
  }
  std::printf("stream consumer: OK\n");
  return 0;
}
