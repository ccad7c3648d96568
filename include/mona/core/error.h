// mona/core/error.h: the exception mona throws, and the helpers that build its messages.
//
// Every public function of mona validates its arguments and throws mona::Error when they
// are wrong. The message names the argument, what was expected and what was found, e.g.
//   "p: expected values in [0, 1], got nan at [2, 0, 5]"
// Nothing is printed and nothing aborts; a caller that catches mona::Error can go on.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mona {

/// Thrown for invalid arguments (shapes, lengths, values) and, by the layers above the
/// core, for unreadable or corrupt files. `what()` names the offending argument or file.
class Error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace detail {

/// Concatenates the arguments with operator<< and throws mona::Error with the result.
template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw Error(os.str());
}

/// Throws unless `cond`; the remaining arguments form the message (only built on failure).
template <class... Args>
void check(bool cond, const Args&... args) {
  if (!cond) fail(args...);
}

}  // namespace detail
}  // namespace mona
