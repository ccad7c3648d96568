// label: core
// mona's exception hierarchy (mona/core/error.h): one root, mona::Error, with argument
// errors and file/data errors told apart by type, each also a standard exception that a
// `catch (const std::exception&)` reaches unambiguously.
#include "mona/core/error.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "mona/core/monotonic.h"

namespace {

// What a handler for each type sees of `f`'s exception: the message, or "" if not caught.
template <class E, class F>
std::string caught_as(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (...) {
  }
  return "";
}

}  // namespace

TEST(Errors, ArgumentErrorsAreInvalidArgumentsAndNotDataErrors) {
  const std::vector<double> p{0.5, 2.0}, prev{1.0, 0.0};
  std::vector<double> alpha(2);
  auto bad_call = [&] {
    mona::core::monotonic_alignment_step(p.data(), prev.data(), alpha.data(), 1, 2, nullptr);
  };
  const std::string msg = caught_as<mona::ArgumentError>(bad_call);
  EXPECT_NE(msg.find("monotonic_alignment_step: p: expected values in [0, 1], got 2 at [0, 1]"),
            std::string::npos) << msg;
  EXPECT_EQ(caught_as<mona::Error>(bad_call), msg);
  EXPECT_EQ(caught_as<std::invalid_argument>(bad_call), msg);
  EXPECT_EQ(caught_as<std::exception>(bad_call), msg);
  EXPECT_EQ(caught_as<mona::DataError>(bad_call), "");
  EXPECT_EQ(caught_as<std::runtime_error>(bad_call), "");
}

TEST(Errors, DataErrorsAreRuntimeErrorsAndNotArgumentErrors) {
  auto bad_file = [] { mona::detail::fail_data("data.tsv:3: expected 1 TAB, found 2"); };
  EXPECT_EQ(caught_as<mona::DataError>(bad_file), "data.tsv:3: expected 1 TAB, found 2");
  EXPECT_EQ(caught_as<mona::Error>(bad_file), "data.tsv:3: expected 1 TAB, found 2");
  EXPECT_EQ(caught_as<std::runtime_error>(bad_file), "data.tsv:3: expected 1 TAB, found 2");
  EXPECT_EQ(caught_as<std::exception>(bad_file), "data.tsv:3: expected 1 TAB, found 2");
  EXPECT_EQ(caught_as<mona::ArgumentError>(bad_file), "");
  EXPECT_EQ(caught_as<std::invalid_argument>(bad_file), "");
}

TEST(Errors, MessagesPrintNumbersExactlyAndBuildLazily) {
  // Floating-point values in their shortest exact form, of their own type.
  EXPECT_EQ(mona::detail::message("got ", 1.0f + 1.0f / (1 << 23)), "got 1.0000001");
  EXPECT_EQ(mona::detail::message("got ", 0.1, " and ", 1e-300), "got 0.1 and 1e-300");
  EXPECT_EQ(mona::detail::message("k=", int64_t{-3}, " ", std::string("x")), "k=-3 x");
  // MONA_CHECK evaluates its message only when the condition fails.
  int evaluated = 0;
  auto costly = [&] { return std::to_string(++evaluated); };
  MONA_CHECK(true, "never ", costly());
  EXPECT_EQ(evaluated, 0);
  EXPECT_THROW(MONA_CHECK(false, "always ", costly()), mona::ArgumentError);
  EXPECT_EQ(evaluated, 1);
}
