// mona/core/error.h: the exception mona throws, and the helpers that build its messages.
//
// Every public function of mona validates its arguments and throws mona::Error when they
// are wrong. The message names the argument, what was expected and what was found, e.g.
//   "p: expected values in [0, 1], got nan at [2, 0, 5]"
// Nothing is printed and nothing aborts; a caller that catches mona::Error can go on.
#pragma once

#include <charconv>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace mona {

/// Thrown for invalid arguments (shapes, lengths, values) and, by the layers above the
/// core, for unreadable or corrupt files. `what()` names the offending argument or file.
class Error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
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

/// Concatenates the arguments (see put) and throws mona::Error with the result.
template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream os;
  (put(os, args), ...);
  throw Error(os.str());
}

/// Throws unless `cond`; the remaining arguments form the message (only built on failure).
template <class... Args>
void check(bool cond, const Args&... args) {
  if (!cond) fail(args...);
}

}  // namespace detail
}  // namespace mona
