#include "mona/io/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "mona/core/error.h"
#include "util/temp_dir.h"
#include "util/test_util.h"

using mona::io::edit_distance;
using mona::io::ErrorCounts;
using mona::io::score;
using Tokens = std::vector<std::string>;

namespace {

Tokens chars(const std::string& s) {
  Tokens t;
  for (char c : s) t.emplace_back(1, c);
  return t;
}

// The obvious exponential recursion, for small inputs.
int64_t brute_distance(const Tokens& a, std::size_t i, const Tokens& b, std::size_t j) {
  if (i == a.size()) return static_cast<int64_t>(b.size() - j);
  if (j == b.size()) return static_cast<int64_t>(a.size() - i);
  const int64_t sub = brute_distance(a, i + 1, b, j + 1) + (a[i] == b[j] ? 0 : 1);
  const int64_t del = brute_distance(a, i + 1, b, j) + 1;
  const int64_t ins = brute_distance(a, i, b, j + 1) + 1;
  return std::min({sub, del, ins});
}

Tokens random_tokens(std::mt19937& rng, int max_len, int alphabet) {
  const int len = std::uniform_int_distribution<int>(0, max_len)(rng);
  Tokens t;
  for (int k = 0; k < len; ++k) {
    t.push_back(std::string(1, static_cast<char>('a' + std::uniform_int_distribution<int>(
                                                            0, alphabet - 1)(rng))));
  }
  return t;
}

}  // namespace

TEST(EditDistance, HandCountedExamples) {
  EXPECT_EQ(edit_distance(chars("kitten"), chars("sitting")), 3);  // k->s, e->i, +g
  EXPECT_EQ(edit_distance(chars("flaw"), chars("lawn")), 2);       // -f, +n
  EXPECT_EQ(edit_distance(chars("abc"), chars("abc")), 0);
  EXPECT_EQ(edit_distance(chars(""), chars("abc")), 3);
  EXPECT_EQ(edit_distance(chars("abc"), chars("")), 3);
  EXPECT_EQ(edit_distance(chars(""), chars("")), 0);
  EXPECT_EQ(edit_distance(chars("abc"), chars("xyz")), 3);
  EXPECT_EQ(edit_distance(chars("ab"), chars("ba")), 2);  // no transpositions
  EXPECT_EQ(edit_distance({"AH0", "B"}, {"AH1", "B"}), 1);  // tokens compare whole
}

TEST(EditDistance, MatchesBruteForceAndIsAMetric) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const Tokens a = random_tokens(rng, 7, 3), b = random_tokens(rng, 7, 3),
                 c = random_tokens(rng, 7, 3);
    const int64_t ab = edit_distance(a, b);
    ASSERT_EQ(ab, brute_distance(a, 0, b, 0)) << "trial " << trial;
    EXPECT_EQ(ab, edit_distance(b, a));
    EXPECT_EQ(ab == 0, a == b);
    EXPECT_LE(ab, static_cast<int64_t>(std::max(a.size(), b.size())));
    EXPECT_GE(ab, std::abs(static_cast<int64_t>(a.size()) - static_cast<int64_t>(b.size())));
    EXPECT_LE(edit_distance(a, c), ab + edit_distance(b, c));
  }
}

TEST(Score, SingleReference) {
  const ErrorCounts c = score(chars("kiten"), {chars("kitten")});
  EXPECT_EQ(c.token_errors, 1);
  EXPECT_EQ(c.ref_tokens, 6);
  EXPECT_EQ(c.sequence_errors, 1);
  EXPECT_EQ(c.sequences, 1);
  const ErrorCounts ok = score(chars("cat"), {chars("cat")});
  EXPECT_EQ(ok.token_errors, 0);
  EXPECT_EQ(ok.sequence_errors, 0);
  EXPECT_EQ(ok.ref_tokens, 3);
}

TEST(Score, BestOfSeveralReferencesCounts) {
  // "read": R IY1 D or R EH1 D. The hypothesis matches the second exactly.
  const std::vector<Tokens> refs = {{"R", "IY1", "D"}, {"R", "EH1", "D"}};
  const ErrorCounts exact = score({"R", "EH1", "D"}, refs);
  EXPECT_EQ(exact.token_errors, 0);
  EXPECT_EQ(exact.sequence_errors, 0);
  EXPECT_EQ(exact.ref_tokens, 3);
  // Closest reference wins even when it is not first.
  const ErrorCounts near = score(chars("abcd"), {chars("wxyz"), chars("abed"), chars("ab")});
  EXPECT_EQ(near.token_errors, 1);
  EXPECT_EQ(near.ref_tokens, 4);
  EXPECT_EQ(near.sequence_errors, 1);
}

TEST(Score, TiesGoToTheLongerReference) {
  // "ab" is 1 edit from "a" (1 token) and from "abc" (3 tokens): the longer one counts.
  const ErrorCounts c = score(chars("ab"), {chars("a"), chars("abc")});
  EXPECT_EQ(c.token_errors, 1);
  EXPECT_EQ(c.ref_tokens, 3);
  const ErrorCounts d = score(chars("ab"), {chars("abc"), chars("a")});
  EXPECT_EQ(d.ref_tokens, 3);
}

TEST(Score, EmptyReferencesAreRefused) {
  EXPECT_ERROR_CONTAINS(score(chars("a"), {}), "references", "at least one");
}

TEST(ErrorCounts, CorpusRatesAreRatiosOfSums) {
  ErrorCounts total;
  EXPECT_EQ(total.token_error_rate(), 0.0);
  EXPECT_EQ(total.sequence_error_rate(), 0.0);
  total.add(score(chars("kiten"), {chars("kitten")}));       // 1 / 6, wrong
  total.add(score(chars("cat"), {chars("cat")}));            // 0 / 3, right
  total.add(score(chars("dgo"), {chars("dog"), chars("x")}));  // 2 / 3, wrong
  EXPECT_EQ(total.token_errors, 3);
  EXPECT_EQ(total.ref_tokens, 12);
  EXPECT_EQ(total.sequence_errors, 2);
  EXPECT_EQ(total.sequences, 3);
  EXPECT_DOUBLE_EQ(total.token_error_rate(), 0.25);
  EXPECT_DOUBLE_EQ(total.sequence_error_rate(), 2.0 / 3.0);
  // An empty reference: zero tokens; errors against it give an infinite rate, not NaN.
  const ErrorCounts e = score(chars("a"), {Tokens{}});
  EXPECT_EQ(e.ref_tokens, 0);
  EXPECT_TRUE(std::isinf(e.token_error_rate()));
}

// Latency: hand-counted examples (see mona/io/metrics.h for the definitions).
TEST(Latency, HandCountedOnlineSequence) {
  // n = 4, |y| = 4 (r = 1), g = 2 3 4 4: AP = 13 / 16; AL sums i = 1..3 (g(3) = 4 = n):
  // (2 - 0) + (3 - 1) + (4 - 2) = 6, over 3 = 2; tokens 1 and 2 came before the end.
  const auto c = mona::io::latency({2, 3, 4, 4}, 4);
  EXPECT_DOUBLE_EQ(c.average_proportion(), 13.0 / 16.0);
  EXPECT_DOUBLE_EQ(c.average_lagging(), 2.0);
  EXPECT_EQ(c.tokens, 4);
  EXPECT_EQ(c.early_tokens, 2);
  EXPECT_DOUBLE_EQ(c.early_token_share(), 0.5);
}

TEST(Latency, OfflineDecodingLagsByTheWholeInput) {
  // Every token after the whole input (soft attention): AP = 1, AL = g(1) = n, no early token.
  const auto c = mona::io::latency({5, 5, 5}, 5);
  EXPECT_DOUBLE_EQ(c.average_proportion(), 1.0);
  EXPECT_DOUBLE_EQ(c.average_lagging(), 5.0);
  EXPECT_EQ(c.early_tokens, 0);
}

TEST(Latency, ShorterOutputUsesTheRateAndCorpusAveragesSequences) {
  // n = 6, |y| = 3 (r = 1/2), g = 1 3 5, never the whole input so tau = 3:
  // AP = 9 / 18; AL = ((1 - 0) + (3 - 2) + (5 - 4)) / 3 = 1.
  const auto a = mona::io::latency({1, 3, 5}, 6);
  EXPECT_DOUBLE_EQ(a.average_proportion(), 0.5);
  EXPECT_DOUBLE_EQ(a.average_lagging(), 1.0);
  EXPECT_EQ(a.early_tokens, 3);
  // Corpus with the first example: AP and AL are means over the two sequences, the early
  // share is 5 tokens of 7; a sequence without tokens adds nothing.
  auto c = mona::io::latency({2, 3, 4, 4}, 4);
  c.add(a);
  c.add(mona::io::latency({}, 3));
  EXPECT_EQ(c.sequences, 2);
  EXPECT_DOUBLE_EQ(c.average_proportion(), (13.0 / 16.0 + 0.5) / 2);
  EXPECT_DOUBLE_EQ(c.average_lagging(), 1.5);
  EXPECT_DOUBLE_EQ(c.early_token_share(), 5.0 / 7.0);
  EXPECT_EQ(mona::io::LatencyCounts{}.average_lagging(), 0.0);
}

TEST(Latency, BadArgumentsAreNamed) {
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const mona::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { mona::io::latency({1}, 0); }).find("input_length: expected >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(message([] { mona::io::latency({1, 5}, 4); }).find("read[1]: expected in [1, 4]"),
            std::string::npos);
  EXPECT_NE(message([] { mona::io::latency({0}, 4); }).find("read[0]"), std::string::npos);
  EXPECT_NE(message([] { mona::io::latency({3, 2}, 4); }).find("read[1]: expected >= read[0] = 3"),
            std::string::npos);
}

TEST(MatchedTokens, HandCountedExample) {
  using Pairs = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(mona::io::matched_tokens({"go", "left", "seven"}, {"go", "right", "seven"}), (Pairs{{0, 0}, {2, 2}}));
  EXPECT_EQ(mona::io::matched_tokens({"go", "seven"}, {"go", "right", "seven"}), (Pairs{{0, 0}, {1, 2}}));
  EXPECT_EQ(mona::io::matched_tokens({}, {"go"}), Pairs{});
}

// The matched pairs are those of a minimum-edit-distance alignment: increasing in both
// sequences, equal tokens, and the cheapest alignment that keeps exactly those matches
// (every stretch between consecutive matches costs the longer of its two sides)
// costs the edit distance, computed here independently by the exponential recursion.
TEST(MatchedTokens, AreTheMatchesOfAnOptimalAlignment) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    const Tokens h = random_tokens(rng, 7, 3), r = random_tokens(rng, 7, 3);
    const auto pairs = mona::io::matched_tokens(h, r);
    int64_t cost = 0;
    size_t next_h = 0, next_r = 0;
    for (const auto& [i, j] : pairs) {
      ASSERT_TRUE(i >= next_h && j >= next_r) << "trial " << trial;
      ASSERT_EQ(h[i], r[j]) << "trial " << trial;
      cost += static_cast<int64_t>(std::max(i - next_h, j - next_r));
      next_h = i + 1;
      next_r = j + 1;
    }
    cost += static_cast<int64_t>(std::max(h.size() - next_h, r.size() - next_r));
    ASSERT_EQ(cost, brute_distance(h, 0, r, 0)) << "trial " << trial;
  }
}

TEST(EmissionDelays, HandCountedUtteranceAndCorpus) {
  // "left" was recognised as nothing that matches; "go" and "seven" count.
  const auto d = mona::io::emission_delays({"go", "left", "seven"}, {500, 900, 1500}, {"go", "right", "seven"},
                                           {450, 1000, 1400});
  EXPECT_EQ(d.ms, (std::vector<double>{50, 100}));
  mona::io::EmissionDelays corpus;
  corpus.add(d);
  corpus.add(mona::io::emission_delays({"no"}, {300}, {"no"}, {340}));  // emitted before the word's end
  EXPECT_EQ(corpus.ms, (std::vector<double>{50, 100, -40}));
  EXPECT_DOUBLE_EQ(corpus.mean(), 110.0 / 3);
  // Sorted -40, 50, 100: position q * 2.
  EXPECT_DOUBLE_EQ(corpus.quantile(0), -40);
  EXPECT_DOUBLE_EQ(corpus.quantile(0.5), 50);
  EXPECT_DOUBLE_EQ(corpus.quantile(0.9), 50 + 0.8 * 50);
  EXPECT_DOUBLE_EQ(corpus.quantile(1), 100);
  EXPECT_EQ(mona::io::EmissionDelays{}.quantile(0.9), 0.0);
  EXPECT_EQ(mona::io::EmissionDelays{}.mean(), 0.0);
}

TEST(EmissionDelays, BadArgumentsAreNamed) {
  using mona::test::expect_error;
  expect_error([] { mona::io::emission_delays({"a", "b"}, {1}, {"a"}, {1}); },
               "emitted_ms: expected one time per hypothesis word (2), got 1");
  expect_error([] { mona::io::emission_delays({"a"}, {1}, {"a"}, {}); },
               "reference_end_ms: expected one time per reference word (1), got 0");
  expect_error([] { mona::io::EmissionDelays{}.quantile(1.5); }, "q must lie in [0, 1], got 1.5");
}
