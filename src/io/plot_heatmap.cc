// Heatmaps of numbers with cairo (mona/io/plot.h).
#include <algorithm>
#include <cmath>

#include "mona/core/error.h"
#include "mona/io/files.h"
#include "mona/io/plot.h"
#include "plot_draw.h"

namespace mona::io {
namespace {

using detail::check;
using namespace plot_detail;

// The grid's distance from the image's left and top edges, and the room right of and under
// it (see the header).
constexpr double kLeft = 90, kTop = 60, kRightRoom = 150, kBottomRoom = 70;
constexpr int kMaxImage = 32767;

struct Rgb {
  double r, g, b;
};

// Cream at t = 0 to blue at t = 1.
Rgb colour_at(double t) { return {0.98 - 0.75 * t, 0.96 - 0.55 * t, 0.90 - 0.25 * t}; }

}  // namespace

std::string render_value_heatmap_png(const ValueHeatmap& h, const std::string& name) {
  const auto rows = static_cast<int64_t>(h.row_labels.size());
  const auto cols = static_cast<int64_t>(h.column_labels.size());
  const bool is_log = h.color_scale == Scale::kLog;
  check(rows >= 1, "plot ", name, ": row_labels: expected at least one row, got none");
  check(cols >= 1, "plot ", name, ": column_labels: expected at least one column, got none");
  check(h.cell >= 8 && h.cell <= 400, "plot ", name, ": cell: expected in [8, 400] pixels, got ",
        h.cell);
  check(h.digits >= 1 && h.digits <= 17, "plot ", name, ": digits: expected in [1, 17], got ",
        h.digits);
  check(static_cast<int64_t>(h.values.size()) == rows * cols, "plot ", name,
        ": values: expected rows * columns = ", rows, " * ", cols, " = ", rows * cols,
        " values ([rows][columns] row-major), got ", h.values.size());
  double lo = INFINITY, hi = -INFINITY;
  for (std::size_t i = 0; i < h.values.size(); ++i) {
    const double v = h.values[i];
    if (std::isnan(v)) continue;
    check(std::isfinite(v), "plot ", name, ": values[", i, "] (row ", i / cols, ", column ",
          i % cols, "): expected a finite value or NaN (missing), got ", v);
    check(!is_log || v > 0, "plot ", name, ": values[", i, "] (row ", i / cols, ", column ",
          i % cols, "): the colour scale is logarithmic, expected a value > 0, got ", v);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  check(lo <= hi, "plot ", name, ": values: every value is NaN (missing), nothing to show");

  const double cell = h.cell;
  const double grid_w = static_cast<double>(cols) * cell, grid_h = static_cast<double>(rows) * cell;
  double title_w = 0;
  {
    const Canvas scratch = scratch_canvas(name);
    set_font(scratch.cr(), 17, true);
    title_w = text_width(scratch.cr(), h.title);
  }
  const double width = std::max(kLeft + grid_w + kRightRoom, std::ceil(title_w + 24));
  const double height = kTop + grid_h + kBottomRoom;
  check(width <= kMaxImage && height <= kMaxImage, "plot ", name, ": a grid of ", cols, " x ",
        rows, " cells of ", h.cell, " pixels makes an image of ", width, "x", height,
        " pixels, beyond cairo's limit of ", kMaxImage);

  // The colour of a value: its position between lo and hi, linearly or in the logarithm.
  const double f_lo = is_log ? std::log(lo) : lo, f_hi = is_log ? std::log(hi) : hi;
  auto position = [&](double v) {
    if (f_hi == f_lo) return 0.5;
    return std::clamp(((is_log ? std::log(v) : v) - f_lo) / (f_hi - f_lo), 0.0, 1.0);
  };

  const Canvas canvas = white_canvas(static_cast<int>(width), static_cast<int>(height), name);
  cairo_t* cr = canvas.cr();
  cairo_set_source_rgb(cr, 0, 0, 0);
  draw_text(cr, width / 2, 30, h.title, 17, 0.5, 0, true);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const double v = h.values[r * cols + c];
      const double x = kLeft + static_cast<double>(c) * cell;
      const double y = kTop + static_cast<double>(rows - 1 - r) * cell;
      const bool missing = std::isnan(v);
      const Rgb fill = missing ? Rgb{0.8, 0.8, 0.8} : colour_at(position(v));
      cairo_set_source_rgb(cr, fill.r, fill.g, fill.b);
      cairo_rectangle(cr, x, y, cell - 1, cell - 1);
      cairo_fill(cr);
      const double ink = fill.g < 0.6 ? 1 : 0;  // white on dark cells
      cairo_set_source_rgb(cr, ink, ink, ink);
      draw_text(cr, x + cell / 2, y + cell / 2, format_number(v, h.digits), 14, 0.5, 0.4);
    }
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  for (int64_t c = 0; c < cols; ++c) {
    draw_text(cr, kLeft + (static_cast<double>(c) + 0.5) * cell, kTop + grid_h + 20,
              h.column_labels[c], 13, 0.5, 0);
  }
  for (int64_t r = 0; r < rows; ++r) {
    draw_text(cr, kLeft - 8, kTop + (static_cast<double>(rows - 1 - r) + 0.5) * cell,
              h.row_labels[r], 13, 1, 0.4);
  }
  draw_text(cr, kLeft + grid_w / 2, kTop + grid_h + 48, h.x_label, 14, 0.5, 0);
  cairo_save(cr);
  cairo_translate(cr, 25, kTop + grid_h / 2);
  cairo_rotate(cr, -M_PI / 2);
  draw_text(cr, 0, 0, h.y_label, 14, 0.5, 0);
  cairo_restore(cr);

  // Colour bar: the smallest value at the bottom, the largest at the top.
  const double bx = kLeft + grid_w + 30, by = kTop, bh = grid_h;
  const int steps = static_cast<int>(bh);  // one per pixel row, from the bottom
  for (int i = 0; i < steps; ++i) {
    const double t = f_hi == f_lo ? 0.5 : (i + 0.5) / steps;
    const Rgb c = colour_at(t);
    cairo_set_source_rgb(cr, c.r, c.g, c.b);
    cairo_rectangle(cr, bx, by + bh - (i + 1), 24, 1);
    cairo_fill(cr);
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  draw_text(cr, bx + 30, by + bh, format_number(lo, h.digits) + h.unit, 13, 0, 0);
  draw_text(cr, bx + 30, by + 10, format_number(hi, h.digits) + h.unit, 13, 0, 0);
  draw_text(cr, bx, by - 12, h.color_bar_label, 13, 0, 0);
  return encode_png(canvas, name);
}

void write_value_heatmap_png(const std::string& path, const ValueHeatmap& heatmap) {
  write_file_atomic(path, render_value_heatmap_png(heatmap, path));
}

}  // namespace mona::io
