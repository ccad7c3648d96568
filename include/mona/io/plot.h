// mona/io/plot.h: every picture mona draws, as PNG (cairo): alignment heatmaps for watching
// attention during training (002 Appendix G) and for `mona plot`; line charts and heatmaps
// of numbers for the benchmark report (bench/report.cc, docs/benchmarks.md) and the toy
// experiment of 004 (tools/cb-toy).
//
// Each picture has a render_*_png function that returns the PNG bytes and a write_*_png
// function that writes them atomically (mona/io/files.h: temporary file, fsync, rename), so
// an interrupted run never leaves half a picture. Text is drawn with cairo's sans-serif
// font, so where text lands depends on the installed font (and so does the layout of the
// alignment heatmap, whose margins fit its labels); the plot areas of line charts and the
// cells of heatmaps of numbers sit at the pixel coordinates given below whatever the font.
//
// Errors: a bad argument throws mona::ArgumentError whose message starts with
// "plot <name>: " (the path for write_*, `name_for_errors` for render_*) and names the
// argument and the value found, e.g.
//   "plot out.png: panels[0].series[1] \"soft\".y[3]: expected a finite value, got nan".
// A picture that cairo cannot create or encode, or a file that cannot be written, throws
// mona::DataError naming the path (see write_file_atomic); nothing is written then.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace mona::io {

// ---------------------------------------------------------------------------------------
// Alignment heatmaps
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
// (attention rows need not sum to 1, 002 sec. 2.3).
//
// Errors (ArgumentError "plot <path>: ..."): U or T < 1, or too large for a PNG (more than
// 16000 columns or rows); weights.size() != U * T; label counts != T / U; a NaN weight
// (named by [u, t]). DataError: cairo failures, a file that cannot be written.

/// Renders the alignment heatmap (see above) and returns the PNG bytes. `name_for_errors`
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

// ---------------------------------------------------------------------------------------
// Line charts
//
// A figure of one or more panels side by side, each a line chart: the title (17-pixel bold)
// centred above the plot area, the plot area framed in black with light grey grid lines at
// the ticks, tick labels (13 pixels) left of and under it, the x axis label under the tick
// labels and the y axis label written bottom to top left of the tick labels (14 pixels).
//
// Sizes in pixels: panel p (0-based) occupies columns [p * panel_width, (p + 1) *
// panel_width) and rows [0, panel_height). Its plot area spans columns
// [p * panel_width + 80, (p + 1) * panel_width - 20] and rows [40, panel_height - 55]
// (left, right, top and bottom edges; data at an axis end is drawn on the edge). The
// image is panels * panel_width wide, plus the width of the legend column when the legend
// is Legend::kRight (50 pixels + the widest name), and at least as wide as the caption
// (plus 24 pixels); it is panel_height high, plus 30 pixels when there is a caption, which
// is centred in those 30 pixels.
//
// Series: a polyline through the points in the given order, 2 pixels wide, solid or dashed
// (7 on, 5 off), clipped to the plot area, with a dot of radius 3.5 at every point inside
// the axes' ranges when the chart has markers (and always for a series of one point);
// drawn in the order given, so later series cover earlier ones. Colours come from
// kPalette.
//
// Axes: on a linear axis an end that is not given (NaN) is the data's extreme (over all
// series of the panel), moved outwards to the next tick; ticks are the multiples of the
// smallest step of 1, 2 or 5 times a power of ten that gives at most 8 intervals between
// the extremes. On a log axis (base 10) an end that is not given is the data's extreme
// moved outwards to a power of ten; ticks are at the powers of ten (every k-th when there
// are more than 10 decades), and also at 2 and 5 times them when the axis spans at most 2
// decades. When the data of an axis is a single value and neither end is given, the axis
// spans value - 1 .. value + 1 (linear) or value / 10 .. value * 10 (log) before moving
// outwards; an end that is not given and would not lie beyond the given one is put 1
// (linear) or a factor 10 (log) beyond it. Given ends are kept as they are; lines beyond
// them are clipped. Tick labels are written with up to 6 significant digits ("%g"), on a
// log axis outside 1e-3 .. 1e4 as "1e-5", "2e-5".
//
// Legend (Legend::kInside): in each panel, the top-left corner of the plot area holds one
// entry per named series (a 28-pixel line sample, dashed if the series is, then the name),
// 19 pixels apart. Legend::kRight: one legend for the figure in a column right of the
// panels, starting 60 pixels from the top, one entry per distinct (name, colour, dash) in
// the order of first appearance (panels that show the same series list them once).
// Series with an empty name are left out of either legend.

/// The series colours, matplotlib's "tab10" (blue, orange, green, red, purple, brown, pink,
/// grey, olive, cyan) then black, as RGB in [0, 1]. Series::color indexes it modulo its size.
inline constexpr std::array<std::array<double, 3>, 11> kPalette = {{
    {0.122, 0.467, 0.706},
    {1.000, 0.498, 0.055},
    {0.173, 0.627, 0.173},
    {0.839, 0.153, 0.157},
    {0.580, 0.404, 0.741},
    {0.549, 0.337, 0.294},
    {0.890, 0.467, 0.761},
    {0.498, 0.498, 0.498},
    {0.737, 0.741, 0.133},
    {0.090, 0.745, 0.812},
    {0.000, 0.000, 0.000},
}};

/// How an axis maps values to pixels.
enum class Scale {
  kLinear,
  kLog,  ///< base 10; every value on the axis must be > 0
};

/// One axis of a line chart. `min` / `max` fix the ends (NaN: from the data, see above).
struct Axis {
  std::string label;
  Scale scale = Scale::kLinear;
  double min = std::numeric_limits<double>::quiet_NaN();
  double max = std::numeric_limits<double>::quiet_NaN();
};

/// One line of a chart: the points (x[i], y[i]), i = 0 .. size - 1, joined in that order.
struct Series {
  std::string name;       ///< the legend entry (none when empty)
  std::vector<double> x;  ///< as many values as y, at least one, all finite
  std::vector<double> y;
  bool dashed = false;
  int color = -1;  ///< index into kPalette (modulo 11); -1: the series' index in its chart
};

/// One panel of a line figure.
struct LineChart {
  std::string title;
  Axis x, y;
  std::vector<Series> series;  ///< at least one
  bool markers = true;         ///< a dot at every point
};

/// Where the legend of a line figure goes (see above).
enum class Legend { kInside, kRight, kNone };

/// The frame of a line figure.
struct LineFigure {
  int panel_width = 700;   ///< pixels, in [200, 8000]
  int panel_height = 560;  ///< pixels, in [150, 8000]
  Legend legend = Legend::kInside;
  std::string caption;  ///< one line of 13-pixel text centred under the panels (none if empty)
};

/// Renders the charts as panels of one figure, left to right (see above), and returns the
/// PNG bytes. Throws ArgumentError "plot <name_for_errors>: ..." naming the argument for: no
/// panel; a panel without series; a series without points or with x.size() != y.size(); a
/// non-finite x or y; a value <= 0 on a log axis; an axis end that is infinite, <= 0 on a
/// log axis, or not below the other end; a colour < -1; a panel size out of range.
/// DataError when cairo fails.
std::string render_line_chart_png(const std::vector<LineChart>& panels,
                                  const LineFigure& figure, const std::string& name_for_errors);

/// render_line_chart_png, written atomically to `path`. Errors name `path`.
void write_line_chart_png(const std::string& path, const std::vector<LineChart>& panels,
                          const LineFigure& figure = {});

// ---------------------------------------------------------------------------------------
// Heatmaps of numbers
//
// A grid of `columns` x `rows` square cells, each filled with the colour of its value and
// showing the value (14-pixel text, `digits` significant digits, white on dark cells and
// black on light ones). Row 0 is the bottom row (y grows upwards, as on a chart's axis);
// column 0 is the leftmost. Colours run from cream (0.98, 0.96, 0.90) for the smallest
// value to blue (0.23, 0.41, 0.65) for the largest, linearly in the value or in its
// logarithm (color_scale), so a larger value is always darker (when every value is the
// same, every cell has the middle colour). A missing value (NaN) is a grey (0.8) cell
// showing "n/a". Column labels are written under the columns, row labels left of the rows
// (13 pixels), the axis labels under and left of those (14 pixels), the title above
// (17-pixel bold). Right of the grid a colour bar runs from the smallest value (bottom) to
// the largest (top), one colour per pixel row, labelled with both (followed by `unit`) and
// topped by `color_bar_label`.
//
// Sizes in pixels: cell (column c, row r) fills columns [90 + c * cell, 90 + (c + 1) * cell
// - 1) and rows [60 + (rows - 1 - r) * cell, 60 + (rows - r) * cell - 1) (a 1-pixel white
// gap separates the cells). The colour bar is 24 pixels wide, 30 pixels right of the grid
// and as high as it. The image is 90 + columns * cell + 150 pixels wide (wider if the title
// needs it) and 60 + rows * cell + 70 pixels high; row labels wider than 70 pixels reach
// past the left edge.

/// A heatmap of numbers (see above). The grid has row_labels.size() rows and
/// column_labels.size() columns.
struct ValueHeatmap {
  std::string title;
  std::string x_label;                     ///< under the column labels
  std::string y_label;                     ///< left of the row labels, bottom to top
  std::vector<std::string> column_labels;  ///< left to right, at least one
  std::vector<std::string> row_labels;     ///< bottom to top, at least one
  std::vector<double> values;  ///< [rows][columns] row-major: values[r * columns + c]
  Scale color_scale = Scale::kLinear;
  int digits = 3;              ///< significant digits written in the cells, in [1, 17]
  std::string unit;            ///< appended to the colour bar's numbers ("x" for "6.74x")
  std::string color_bar_label;  ///< above the colour bar
  int cell = 62;               ///< cell size in pixels, in [8, 400]
};

/// Renders the heatmap (see above) and returns the PNG bytes. Throws ArgumentError
/// "plot <name_for_errors>: ..." for: no rows or no columns; values.size() != rows *
/// columns; an infinite value; no value that is not NaN; a value <= 0 with a log colour
/// scale; digits or cell out of range. DataError when cairo fails.
std::string render_value_heatmap_png(const ValueHeatmap& heatmap,
                                     const std::string& name_for_errors);

/// render_value_heatmap_png, written atomically to `path`. Errors name `path`.
void write_value_heatmap_png(const std::string& path, const ValueHeatmap& heatmap);

}  // namespace mona::io
