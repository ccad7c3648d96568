// mona/core/error.h: the exceptions mona throws, and the helpers that build their messages.
//
// Every public function of mona validates what it is given and throws a mona::Error when
// it is wrong. The message names the argument or file, what was expected and what was
// found, e.g.
//   "monotonic_alignment: p: expected values in [0, 1], got nan at [2, 0, 5]"
// Nothing is printed and nothing aborts; a caller that catches mona::Error can go on.
//
// The hierarchy, one root with two kinds that a caller can tell apart by type:
//   mona::Error                 catch this for any error of mona's (what() is the message)
//     mona::ArgumentError       a bad argument, option or configuration value: the
//                               caller's mistake (also a std::invalid_argument)
//     mona::DataError           a file or stream that cannot be read, written or parsed:
//                               missing, truncated, corrupt, of the wrong version, or
//                               holding bad data (also a std::runtime_error)
// Both are also std::exception (through their standard base; mona::Error is a mix-in with
// no std::exception of its own, so `catch (const std::exception&)` is never ambiguous). The
// Python binding maps them to ValueError and OSError / RuntimeError.
#pragma once

#include <charconv>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace mona {

/// The root of mona's exceptions (see the header comment).
class Error {
 public:
  virtual ~Error() = default;
  /// The message: what was wrong, naming the argument or file and the value found.
  virtual const char* what() const noexcept = 0;
};

/// A bad argument, option or configuration value (shape, length, range, name).
class ArgumentError : public std::invalid_argument, public Error {
 public:
  using std::invalid_argument::invalid_argument;
  const char* what() const noexcept override { return std::invalid_argument::what(); }
};

/// A file or stream that cannot be read, written or parsed (names the file).
class DataError : public std::runtime_error, public Error {
 public:
  using std::runtime_error::runtime_error;
  const char* what() const noexcept override { return std::runtime_error::what(); }
};

namespace detail {

/// Writes `value` with operator<<, except floating-point values, which are written in the
/// shortest form that reads back as the same value of their type (std::to_chars): a value
/// that fails a check prints as one that visibly fails it (the float 1 + 2^-23 prints as
/// 1.0000001, not as "1" as operator<<'s 6 digits would have it), and 0.1 stays 0.1.
template <class A>
void put(std::ostream& os, const A& value) {
  if constexpr (std::is_floating_point_v<A>) {
    char buf[64];
    const auto end = std::to_chars(buf, buf + sizeof buf, value).ptr;
    os.write(buf, end - buf);
  } else {
    os << value;
  }
}

/// The arguments concatenated (see put).
template <class... Args>
std::string message(const Args&... args) {
  std::ostringstream os;
  (put(os, args), ...);
  return os.str();
}

/// Throws ArgumentError with the arguments concatenated (see put).
template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw ArgumentError(message(args...));
}

/// Throws ArgumentError unless `cond`; the message is built only on failure (but the
/// arguments are evaluated: see MONA_CHECK for messages that cost something to compute).
template <class... Args>
void check(bool cond, const Args&... args) {
  if (!cond) fail(args...);
}

/// Throws DataError (a file or stream that cannot be read or written) with the arguments
/// concatenated.
template <class... Args>
[[noreturn]] void fail_data(const Args&... args) {
  throw DataError(message(args...));
}

/// Throws DataError unless `cond`.
template <class... Args>
void check_data(bool cond, const Args&... args) {
  if (!cond) fail_data(args...);
}

}  // namespace detail
}  // namespace mona

/// Throws mona::ArgumentError unless `cond`, with the remaining arguments concatenated into
/// the message (mona::detail::put); they are evaluated only when `cond` fails.
#define MONA_CHECK(cond, ...)                                 \
  do {                                                        \
    if (!(cond)) ::mona::detail::fail(__VA_ARGS__);           \
  } while (false)
