// Alignment heatmaps with cairo (mona/io/plot.h).
#include "mona/io/plot.h"

#include <algorithm>
#include <cmath>

#include "mona/core/error.h"
#include "mona/io/files.h"
#include "plot_draw.h"

namespace mona::io {
namespace {

using detail::check;
using detail::check_data;
using detail::fail;
using namespace plot_detail;

constexpr double kFont = 11;        // label font size, pixels
constexpr double kTitleFont = 14;   // title font size
constexpr double kMargin = 12;
constexpr std::size_t kMaxLabel = 12;  // characters (UTF-8 code points)
constexpr int64_t kMaxCells = 16000;

// Viridis as matplotlib gives it at v = 0, 0.1, ..., 1 (rows int(256 v), clipped to 255,
// of its 256-entry _viridis_data: 0, 25, 51, 76, 102, 128, 153, 179, 204, 230, 255),
// linearly interpolated in between. The last stop is viridis(1) = #fde725.
void viridis(double v, double* r, double* g, double* b) {
  constexpr int kN = 11;
  static const double kStops[kN][3] = {
      {0.267004, 0.004874, 0.329415}, {0.282623, 0.140926, 0.457517},
      {0.253935, 0.265254, 0.529983}, {0.206756, 0.371758, 0.553117},
      {0.163625, 0.471133, 0.558148}, {0.127568, 0.566949, 0.550556},
      {0.134692, 0.658636, 0.517649}, {0.266941, 0.748751, 0.440573},
      {0.477504, 0.821444, 0.318195}, {0.741388, 0.873449, 0.149561},
      {0.993248, 0.906157, 0.143936}};
  v = std::min(1.0, std::max(0.0, v));
  const double x = v * (kN - 1);
  const int i = std::min(kN - 2, static_cast<int>(std::floor(x)));
  const double f = x - i;
  const double* a = kStops[i];
  const double* c = kStops[i + 1];
  *r = a[0] + f * (c[0] - a[0]);
  *g = a[1] + f * (c[1] - a[1]);
  *b = a[2] + f * (c[2] - a[2]);
}

// Shortens `s` to kMaxLabel code points, keeping UTF-8 sequences whole.
std::string shorten(const std::string& s) {
  std::size_t cps = 0, i = 0, cut = std::string::npos;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (cps == kMaxLabel - 1) cut = i;
      ++cps;
    }
  }
  if (cps <= kMaxLabel) return s;
  return s.substr(0, cut) + "..";
}

std::string ordinal_every(int64_t k) {
  if (k == 2) return "every 2nd label";
  if (k == 3) return "every 3rd label";
  return "every " + std::to_string(k) + "th label";
}

}  // namespace

std::string render_alignment_png(const std::vector<float>& weights, int64_t U, int64_t T,
                                 const std::vector<std::string>& input_labels,
                                 const std::vector<std::string>& output_labels,
                                 const std::string& title, const std::string& name) {
  check(U >= 1 && U <= kMaxCells, "plot ", name, ": U (output length): expected in [1, ",
        kMaxCells, "], got ", U);
  check(T >= 1 && T <= kMaxCells, "plot ", name, ": T (input length): expected in [1, ",
        kMaxCells, "], got ", T);
  check(static_cast<int64_t>(weights.size()) == U * T, "plot ", name,
        ": weights: expected U * T = ", U, " * ", T, " = ", U * T, " values ([U][T] row-major), got ",
        weights.size());
  check(static_cast<int64_t>(input_labels.size()) == T, "plot ", name,
        ": input_labels: expected T = ", T, " labels, got ", input_labels.size());
  check(static_cast<int64_t>(output_labels.size()) == U, "plot ", name,
        ": output_labels: expected U = ", U, " labels, got ", output_labels.size());
  for (int64_t u = 0; u < U; ++u) {
    for (int64_t t = 0; t < T; ++t) {
      check(!std::isnan(weights[u * T + t]), "plot ", name, ": weights: NaN at [", u, ", ", t,
            "]");
    }
  }

  // Cell sizes (see header).
  int64_t cw = std::clamp<int64_t>(1400 / T, 2, 28);
  int64_t ch = std::clamp<int64_t>(1000 / U, 2, 28);
  cw = std::min(cw, 3 * ch);
  ch = std::min(ch, 3 * cw);
  const int64_t kx = std::max<int64_t>(1, static_cast<int64_t>(std::ceil((kFont + 2) / cw)));
  const int64_t ky = std::max<int64_t>(1, static_cast<int64_t>(std::ceil((kFont + 2) / ch)));

  std::vector<std::string> in_text(T), out_text(U);
  for (int64_t t = 0; t < T; ++t) in_text[t] = shorten(input_labels[t]);
  for (int64_t u = 0; u < U; ++u) out_text[u] = shorten(output_labels[u]);
  const std::string x_title =
      "input (T = " + std::to_string(T) + (kx > 1 ? ", " + ordinal_every(kx) : "") + ")";
  const std::string y_title =
      "output (U = " + std::to_string(U) + (ky > 1 ? ", " + ordinal_every(ky) : "") + ")";

  // Measure text on a scratch surface.
  double max_in = 0, max_out = 0, title_w = 0, x_title_w = 0, y_title_w = 0, tick_w = 0;
  {
    const Canvas scratch = scratch_canvas(name);
    cairo_t* cr = scratch.cr();
    set_font(cr, kFont);
    for (int64_t t = 0; t < T; t += kx) max_in = std::max(max_in, text_width(cr, in_text[t]));
    for (int64_t u = 0; u < U; u += ky)
      max_out = std::max(max_out, text_width(cr, out_text[u]));
    x_title_w = text_width(cr, x_title);
    y_title_w = text_width(cr, y_title);
    tick_w = text_width(cr, "0.75");
    set_font(cr, kTitleFont, true);
    title_w = text_width(cr, title);
    check_data(cairo_status(cr) == CAIRO_STATUS_SUCCESS, "plot ", name, ": cairo: ",
          cairo_status_to_string(cairo_status(cr)));
  }
  const bool in_horizontal = max_in <= kx * cw - 2;
  const double in_band = in_horizontal ? kFont + 2 : max_in;  // height of the x label band

  const double plot_w = static_cast<double>(T * cw), plot_h = static_cast<double>(U * ch);
  const double bar_h = std::max(plot_h, 120.0), bar_w = 14;
  const double x0 = std::ceil(kMargin + kFont + 8 + max_out + 8);  // y title, labels
  const double y0 = std::ceil(kMargin + (title.empty() ? 0 : kTitleFont + 12));
  const double bar_x = x0 + plot_w + 18;
  double width = bar_x + bar_w + 6 + tick_w + kMargin;
  width = std::max({width, title_w + 2 * kMargin, x0 + x_title_w + kMargin});
  double height = y0 + std::max(bar_h, plot_h + 6 + in_band + 8 + kFont + 4) + kMargin;
  height = std::max(height, y0 + y_title_w + kMargin);
  const int iw = static_cast<int>(std::ceil(width)), ih = static_cast<int>(std::ceil(height));
  check(iw <= 32767 && ih <= 32767, "plot ", name, ": image of ", iw, "x", ih,
        " pixels exceeds cairo's limit of 32767");

  const Canvas canvas = white_canvas(iw, ih, name);
  cairo_t* cr = canvas.cr();

  // Title.
  if (!title.empty()) {
    set_font(cr, kTitleFont, true);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, std::max(kMargin, (width - title_w) / 2), kMargin + kTitleFont);
    cairo_show_text(cr, title.c_str());
  }

  // Heatmap cells (no antialiasing, so cells meet exactly).
  cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
  for (int64_t u = 0; u < U; ++u) {
    for (int64_t t = 0; t < T; ++t) {
      double r, g, b;
      viridis(static_cast<double>(weights[u * T + t]), &r, &g, &b);
      cairo_set_source_rgb(cr, r, g, b);
      cairo_rectangle(cr, x0 + t * cw, y0 + u * ch, cw, ch);
      cairo_fill(cr);
    }
  }
  // Frame.
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, x0 - 0.5, y0 - 0.5, plot_w + 1, plot_h + 1);
  cairo_stroke(cr);
  // Ticks for thinned labels.
  if (kx > 1) {
    for (int64_t t = 0; t < T; t += kx) {
      const double x = std::floor(x0 + (t + 0.5) * cw) + 0.5;
      cairo_move_to(cr, x, y0 + plot_h);
      cairo_line_to(cr, x, y0 + plot_h + 4);
    }
  }
  if (ky > 1) {
    for (int64_t u = 0; u < U; u += ky) {
      const double y = std::floor(y0 + (u + 0.5) * ch) + 0.5;
      cairo_move_to(cr, x0 - 4, y);
      cairo_line_to(cr, x0, y);
    }
  }
  cairo_stroke(cr);
  cairo_set_antialias(cr, CAIRO_ANTIALIAS_DEFAULT);

  // Labels.
  set_font(cr, kFont);
  cairo_font_extents_t fe;
  cairo_font_extents(cr, &fe);
  const double label_top = y0 + plot_h + 6;
  for (int64_t t = 0; t < T; t += kx) {
    const double cx = x0 + (t + 0.5) * cw;
    const double w = text_width(cr, in_text[t]);
    if (in_horizontal) {
      cairo_move_to(cr, cx - w / 2, label_top + fe.ascent);
      cairo_show_text(cr, in_text[t].c_str());
    } else {
      // Vertical, reading bottom to top, starting at the axis.
      cairo_save(cr);
      cairo_move_to(cr, cx + (fe.ascent - fe.descent) / 2, label_top + w);
      cairo_rotate(cr, -M_PI / 2);
      cairo_show_text(cr, in_text[t].c_str());
      cairo_restore(cr);
    }
  }
  for (int64_t u = 0; u < U; u += ky) {
    const double cy = y0 + (u + 0.5) * ch;
    const double w = text_width(cr, out_text[u]);
    cairo_move_to(cr, x0 - 8 - w, cy + (fe.ascent - fe.descent) / 2);
    cairo_show_text(cr, out_text[u].c_str());
  }
  // Axis titles.
  cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
  cairo_move_to(cr, x0, label_top + in_band + 8 + fe.ascent);
  cairo_show_text(cr, x_title.c_str());
  cairo_save(cr);
  cairo_move_to(cr, kMargin + fe.ascent, y0 + y_title_w);
  cairo_rotate(cr, -M_PI / 2);
  cairo_show_text(cr, y_title.c_str());
  cairo_restore(cr);

  // Colour bar: 1 at the top, 0 at the bottom.
  cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
  const int bar_steps = static_cast<int>(bar_h);
  for (int i = 0; i < bar_steps; ++i) {
    double r, g, b;
    viridis(1.0 - (i + 0.5) / bar_steps, &r, &g, &b);
    cairo_set_source_rgb(cr, r, g, b);
    cairo_rectangle(cr, bar_x, y0 + i, bar_w, 1);
    cairo_fill(cr);
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_rectangle(cr, bar_x - 0.5, y0 - 0.5, bar_w + 1, bar_steps + 1);
  cairo_stroke(cr);
  cairo_set_antialias(cr, CAIRO_ANTIALIAS_DEFAULT);
  for (int k = 0; k <= 4; ++k) {
    const double v = k / 4.0;
    const double y = y0 + (1.0 - v) * bar_steps;
    const std::string label = k == 0 ? "0" : k == 4 ? "1" : k == 2 ? "0.5" : k == 1 ? "0.25" : "0.75";
    cairo_move_to(cr, bar_x + bar_w, std::floor(y) + 0.5);
    cairo_line_to(cr, bar_x + bar_w + 3, std::floor(y) + 0.5);
    cairo_stroke(cr);
    const double ty = std::clamp(y + (fe.ascent - fe.descent) / 2, y0 + fe.ascent,
                                 y0 + bar_steps);
    cairo_move_to(cr, bar_x + bar_w + 6, ty);
    cairo_show_text(cr, label.c_str());
  }

  return encode_png(canvas, name);
}

void write_alignment_png(const std::string& path, const std::vector<float>& weights, int64_t U,
                         int64_t T, const std::vector<std::string>& input_labels,
                         const std::vector<std::string>& output_labels,
                         const std::string& title) {
  write_file_atomic(path,
                    render_alignment_png(weights, U, T, input_labels, output_labels, title, path));
}

}  // namespace mona::io
