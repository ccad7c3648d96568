// CLI11 validators shared by mona's programs (tools/mona, tools/cb-toy,
// tools/make-spoken-commands): numeric options whose errors read "--T: expected an integer
// in [1, 14], got abc" (CLI11 adds the option name), the style of every mona error.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace mona::tools {

/// An integer in [lo, hi] (the whole argument, no trailing characters).
inline CLI::Validator integer_in(int64_t lo, int64_t hi = std::numeric_limits<int64_t>::max()) {
  const bool unbounded = hi == std::numeric_limits<int64_t>::max();
  const std::string range = unbounded ? ">= " + std::to_string(lo)
                                      : "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        int64_t v = 0;
        const char* end = value.data() + value.size();
        const auto r = std::from_chars(value.data(), end, v);
        if (r.ec == std::errc() && r.ptr == end && v >= lo && v <= hi) return "";
        return "expected an integer " + range + ", got " + value;
      },
      "INT " + range);
}

/// A finite number greater than `lo` (or at least `lo` when `inclusive`).
inline CLI::Validator number_above(double lo, bool inclusive) {
  const std::string range = (inclusive ? ">= " : "> ") + CLI::detail::to_string(lo);
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        try {
          size_t used = 0;
          const double v = std::stod(value, &used);
          if (used == value.size() && std::isfinite(v) && (inclusive ? v >= lo : v > lo)) return "";
        } catch (const std::exception&) {
        }
        return "expected a finite number " + range + ", got " + value;
      },
      "NUMBER " + range);
}

/// A finite number in (lo, hi].
inline CLI::Validator number_in(double lo, double hi) {
  const std::string range = "in (" + CLI::detail::to_string(lo) + ", " + CLI::detail::to_string(hi) + "]";
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        try {
          size_t used = 0;
          const double v = std::stod(value, &used);
          if (used == value.size() && std::isfinite(v) && v > lo && v <= hi) return "";
        } catch (const std::exception&) {
        }
        return "expected a finite number " + range + ", got " + value;
      },
      "NUMBER " + range);
}

}  // namespace mona::tools
