// mona/io/plot.h: alignment heatmaps as PNG (cairo), for watching attention during
// training (002 Appendix G) and for `mona plot`.
//
// The picture, top to bottom: the title; the heatmap with one column per input position
// t (0 .. T-1, left to right, input symbols written under the columns) and one row per
// output step u (0 .. U-1, top to bottom, output symbols written left of the rows); the
// axis titles. A colour bar on the right maps weights 0 .. 1 through the viridis colour
// map (perceptually uniform, dark purple = 0, yellow = 1).
//
// Layout adapts to the sizes: the cell width is floor(1400 / T) and the cell height
// floor(1000 / U), each clamped to [2, 28] pixels and to at most 3 times the other (so
// T = 20 gives 28-pixel cells, T = 300 gives 4-pixel columns). Labels are drawn in an
// 11-pixel sans-serif font; when cells are narrower than the font, only every k-th label
// is drawn (with a tick) and the axis title says so. Input labels are written horizontally
// when they fit their columns and vertically otherwise. Labels longer than 12 characters
// are shortened with "..".
//
// Weights are [U][T] row-major (weights[u * T + t]); values outside [0, 1] are clamped
// (attention rows need not sum to 1, 002 sec. 2.3). The file is written atomically.
//
// Errors (mona::Error "plot <path>: ..."): U or T < 1, or too large for a PNG (more than
// 16000 columns or rows); weights.size() != U * T; label counts != T / U; a NaN weight
// (named by [u, t]); cairo failures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mona::io {

/// Renders the heatmap (see the file comment) and returns the PNG bytes. `name_for_errors`
/// prefixes error messages ("plot <name>: ...").
std::string render_alignment_png(const std::vector<float>& weights, int64_t U, int64_t T,
                                 const std::vector<std::string>& input_labels,
                                 const std::vector<std::string>& output_labels,
                                 const std::string& title, const std::string& name_for_errors);

/// render_alignment_png, written atomically to `path`. Errors name `path`.
void write_alignment_png(const std::string& path, const std::vector<float>& weights, int64_t U,
                         int64_t T, const std::vector<std::string>& input_labels,
                         const std::vector<std::string>& output_labels,
                         const std::string& title);

}  // namespace mona::io
