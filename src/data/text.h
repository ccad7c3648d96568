// Internal to mona::data: what counts as white space between tokens of a data file.
#pragma once

namespace mona::data {

/// Space, tab, newline, carriage return, vertical tab, form feed (the C locale's isspace,
/// without its locale dependence).
inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace mona::data
