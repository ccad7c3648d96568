// Line charts with cairo (mona/io/plot.h).
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

// The plot area's distance from the panel's edges (see the header).
constexpr double kLeft = 80, kRight = 20, kTop = 40, kBottom = 55;
constexpr int kMaxImage = 32767;  // cairo's limit on either side
constexpr double kLineWidth = 2, kMarkerRadius = 3.5;
constexpr double kDash[] = {7, 5};
constexpr double kLegendStep = 19, kLegendSample = 28;

// " \"name\"", or nothing for an empty name.
std::string quoted(const std::string& name) { return name.empty() ? "" : " \"" + name + "\""; }

// "panels[1] \"title\".series[0] \"soft\"": where a bad value sits, for error messages.
std::string where(std::size_t p, const LineChart& chart) {
  return "panels[" + std::to_string(p) + "]" + quoted(chart.title);
}
std::string where(std::size_t p, const LineChart& chart, std::size_t s) {
  return where(p, chart) + ".series[" + std::to_string(s) + "]" + quoted(chart.series[s].name);
}

void check_axis(const Axis& a, const std::string& name, const std::string& what) {
  const bool is_log = a.scale == Scale::kLog;
  for (const auto& [end, v] : {std::pair<const char*, double>{"min", a.min}, {"max", a.max}}) {
    if (std::isnan(v)) continue;
    check(std::isfinite(v), "plot ", name, ": ", what, ".", end,
          ": expected a finite value or NaN (from the data), got ", v);
    check(!is_log || v > 0, "plot ", name, ": ", what, ".", end,
          ": the axis is logarithmic, expected a value > 0, got ", v);
  }
  check(std::isnan(a.min) || std::isnan(a.max) || a.min < a.max, "plot ", name, ": ", what,
        ": expected min < max, got min ", a.min, " and max ", a.max);
}

void check_values(const std::vector<double>& v, bool is_log, const std::string& name,
                  const std::string& what) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    check(std::isfinite(v[i]), "plot ", name, ": ", what, "[", i,
          "]: expected a finite value, got ", v[i]);
    check(!is_log || v[i] > 0, "plot ", name, ": ", what, "[", i,
          "]: the axis is logarithmic, expected a value > 0, got ", v[i]);
  }
}

void check_figure(const std::vector<LineChart>& panels, const LineFigure& f,
                  const std::string& name) {
  check(!panels.empty(), "plot ", name, ": panels: expected at least one chart, got none");
  check(f.panel_width >= 200 && f.panel_width <= 8000, "plot ", name,
        ": panel_width: expected in [200, 8000] pixels, got ", f.panel_width);
  check(f.panel_height >= 150 && f.panel_height <= 8000, "plot ", name,
        ": panel_height: expected in [150, 8000] pixels, got ", f.panel_height);
  for (std::size_t p = 0; p < panels.size(); ++p) {
    const LineChart& c = panels[p];
    check_axis(c.x, name, where(p, c) + ".x");
    check_axis(c.y, name, where(p, c) + ".y");
    check(!c.series.empty(), "plot ", name, ": ", where(p, c),
          ".series: expected at least one series, got none");
    for (std::size_t s = 0; s < c.series.size(); ++s) {
      const Series& se = c.series[s];
      const std::string w = where(p, c, s);
      check(!se.y.empty(), "plot ", name, ": ", w, ": expected at least one point, got none");
      check(se.x.size() == se.y.size(), "plot ", name, ": ", w, ".x: expected ", se.y.size(),
            " values (as many as y), got ", se.x.size());
      check(se.color >= -1, "plot ", name, ": ", w,
            ".color: expected -1 (by position) or an index >= 0, got ", se.color);
      check_values(se.x, c.x.scale == Scale::kLog, name, w + ".x");
      check_values(se.y, c.y.scale == Scale::kLog, name, w + ".y");
    }
  }
}

// An axis resolved to its range and ticks. Ranges are in axis units: the value on a linear
// axis, log10 of it on a log axis.
struct Ticks {
  Scale scale = Scale::kLinear;
  double lo = 0, hi = 1;
  std::vector<double> at;            // tick values (not transformed)
  std::vector<std::string> labels;   // their labels
  double unit(double v) const { return scale == Scale::kLog ? std::log10(v) : v; }
  double frac(double v) const { return (unit(v) - lo) / (hi - lo); }
  bool inside(double v) const {
    const double u = unit(v), eps = 1e-9 * (hi - lo);
    return u >= lo - eps && u <= hi + eps;
  }
};

std::string log_label(double m, int e) {
  if (e >= -3 && e <= 4) return format_number(m * std::pow(10.0, e), 6);
  return format_number(m, 1) + "e" + std::to_string(e);
}

Ticks resolve(const Axis& a, double dmin, double dmax) {
  Ticks t;
  t.scale = a.scale;
  const bool is_log = a.scale == Scale::kLog;
  constexpr double spread = 1;  // in axis units: 1 on a linear axis, a decade on a log one
  const bool auto_lo = std::isnan(a.min), auto_hi = std::isnan(a.max);
  double lo = auto_lo ? t.unit(dmin) : t.unit(a.min);
  double hi = auto_hi ? t.unit(dmax) : t.unit(a.max);
  if (auto_lo && auto_hi && lo == hi) {
    lo -= spread;
    hi += spread;
  } else if (auto_lo && !(lo < hi)) {
    lo = hi - spread;
  } else if (auto_hi && !(lo < hi)) {
    hi = lo + spread;
  }
  if (is_log) {
    if (auto_lo) lo = std::floor(lo);
    if (auto_hi) hi = std::ceil(hi);
    t.lo = lo;
    t.hi = hi;
    const double decades = hi - lo;
    const int every = std::max(1, static_cast<int>(std::ceil(decades / 10 - 1e-9)));
    const int first = static_cast<int>(std::ceil(lo - 1e-9));
    for (int e = static_cast<int>(std::floor(lo)); e <= static_cast<int>(std::floor(hi)); ++e) {
      for (double m : {1.0, 2.0, 5.0}) {
        if (m != 1 && decades > 2) continue;
        if (m == 1 && (e - first) % every != 0) continue;
        const double v = m * std::pow(10.0, e);
        if (!t.inside(v)) continue;
        t.at.push_back(v);
        t.labels.push_back(log_label(m, e));
      }
    }
    return t;
  }
  // Linear: the smallest step of 1, 2 or 5 times a power of ten with at most 8 intervals.
  const double range = hi - lo;
  const double p = std::pow(10.0, std::floor(std::log10(range / 8)));
  double step = 10 * p;
  for (double m : {1.0, 2.0, 5.0}) {
    if (range / (m * p) <= 8 + 1e-9) {
      step = m * p;
      break;
    }
  }
  if (auto_lo) lo = std::floor(lo / step + 1e-9) * step;
  if (auto_hi) hi = std::ceil(hi / step - 1e-9) * step;
  t.lo = lo;
  t.hi = hi;
  for (auto k = static_cast<int64_t>(std::ceil(lo / step - 1e-9));
       k <= static_cast<int64_t>(std::floor(hi / step + 1e-9)); ++k) {
    const double v = static_cast<double>(k) * step;
    t.at.push_back(v);
    // Multiples of the step that should be 0 print as 0, not as 1e-17.
    t.labels.push_back(format_number(std::abs(v) < step * 1e-9 ? 0.0 : v, 6));
  }
  return t;
}

const std::array<double, 3>& colour_of(const Series& s, std::size_t index) {
  const std::size_t c = s.color < 0 ? index : static_cast<std::size_t>(s.color);
  return kPalette[c % kPalette.size()];
}

void set_colour(cairo_t* cr, const std::array<double, 3>& c) {
  cairo_set_source_rgb(cr, c[0], c[1], c[2]);
}

// A legend entry: a line sample from x to x + kLegendSample at height y, then the name.
void legend_entry(cairo_t* cr, double x, double y, const std::string& name,
                  const std::array<double, 3>& colour, bool dashed) {
  set_colour(cr, colour);
  cairo_set_line_width(cr, kLineWidth + 0.5);
  if (dashed) cairo_set_dash(cr, kDash, 2, 0);
  cairo_move_to(cr, x, y);
  cairo_line_to(cr, x + kLegendSample, y);
  cairo_stroke(cr);
  cairo_set_dash(cr, nullptr, 0, 0);
  cairo_set_source_rgb(cr, 0, 0, 0);
  draw_text(cr, x + kLegendSample + 6, y, name, 13, 0, 0.4);
}

struct LegendItem {
  std::string name;
  std::array<double, 3> colour;
  bool dashed;
};

void draw_panel(cairo_t* cr, const LineChart& c, double x0, double width, double height,
                bool inside_legend) {
  const double L = x0 + kLeft, R = x0 + width - kRight, T = kTop, B = height - kBottom;
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (const Series& s : c.series) {
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      xmin = std::min(xmin, s.x[i]);
      xmax = std::max(xmax, s.x[i]);
      ymin = std::min(ymin, s.y[i]);
      ymax = std::max(ymax, s.y[i]);
    }
  }
  const Ticks tx = resolve(c.x, xmin, xmax), ty = resolve(c.y, ymin, ymax);
  auto px = [&](double v) { return L + tx.frac(v) * (R - L); };
  auto py = [&](double v) { return B - ty.frac(v) * (B - T); };
  auto crisp = [](double v) { return std::floor(v) + 0.5; };  // the centre of a pixel

  cairo_set_source_rgb(cr, 0, 0, 0);
  draw_text(cr, (L + R) / 2, 22, c.title, 17, 0.5, 0, true);
  // Grid lines and tick labels.
  cairo_set_line_width(cr, 1);
  for (std::size_t k = 0; k < ty.at.size(); ++k) {
    const double y = crisp(py(ty.at[k]));
    cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
    cairo_move_to(cr, L, y);
    cairo_line_to(cr, R, y);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    draw_text(cr, L - 6, py(ty.at[k]), ty.labels[k], 13, 1, 0.4);
  }
  for (std::size_t k = 0; k < tx.at.size(); ++k) {
    const double x = crisp(px(tx.at[k]));
    cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
    cairo_move_to(cr, x, T);
    cairo_line_to(cr, x, B);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    draw_text(cr, px(tx.at[k]), B + 18, tx.labels[k], 13, 0.5, 0);
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_rectangle(cr, crisp(L), crisp(T), std::floor(R) - std::floor(L),
                  std::floor(B) - std::floor(T));
  cairo_stroke(cr);
  draw_text(cr, (L + R) / 2, B + 42, c.x.label, 14, 0.5, 0);
  cairo_save(cr);
  cairo_translate(cr, x0 + 18, (T + B) / 2);
  cairo_rotate(cr, -M_PI / 2);
  draw_text(cr, 0, 0, c.y.label, 14, 0.5, 0);
  cairo_restore(cr);

  // Series: lines clipped to the plot area, then the markers of the points inside it.
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  for (std::size_t si = 0; si < c.series.size(); ++si) {
    const Series& s = c.series[si];
    const auto& colour = colour_of(s, si);
    set_colour(cr, colour);
    cairo_save(cr);
    cairo_rectangle(cr, L, T, R - L, B - T);
    cairo_clip(cr);
    cairo_set_line_width(cr, kLineWidth);
    if (s.dashed) cairo_set_dash(cr, kDash, 2, 0);
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (i == 0) cairo_move_to(cr, px(s.x[i]), py(s.y[i]));
      else cairo_line_to(cr, px(s.x[i]), py(s.y[i]));
    }
    cairo_stroke(cr);
    cairo_restore(cr);
    if (!c.markers && s.x.size() > 1) continue;  // a single point always shows its dot
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!tx.inside(s.x[i]) || !ty.inside(s.y[i])) continue;
      cairo_new_sub_path(cr);
      cairo_arc(cr, px(s.x[i]), py(s.y[i]), kMarkerRadius, 0, 2 * M_PI);
    }
    cairo_fill(cr);
  }
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_MITER);

  if (!inside_legend) return;
  double ly = T + 18;
  for (std::size_t si = 0; si < c.series.size(); ++si) {
    const Series& s = c.series[si];
    if (s.name.empty()) continue;
    legend_entry(cr, L + 12, ly, s.name, colour_of(s, si), s.dashed);
    ly += kLegendStep;
  }
}

}  // namespace

std::string render_line_chart_png(const std::vector<LineChart>& panels, const LineFigure& f,
                                  const std::string& name) {
  check_figure(panels, f, name);

  // The figure's legend (Legend::kRight): each distinct entry once.
  std::vector<LegendItem> legend;
  if (f.legend == Legend::kRight) {
    for (const LineChart& c : panels) {
      for (std::size_t si = 0; si < c.series.size(); ++si) {
        const Series& s = c.series[si];
        if (s.name.empty()) continue;
        const LegendItem item{s.name, colour_of(s, si), s.dashed};
        const bool seen = std::any_of(legend.begin(), legend.end(), [&](const LegendItem& o) {
          return o.name == item.name && o.colour == item.colour && o.dashed == item.dashed;
        });
        if (!seen) legend.push_back(item);
      }
    }
  }
  double legend_w = 0, caption_w = 0;
  {
    const Canvas scratch = scratch_canvas(name);
    set_font(scratch.cr(), 13);
    double widest = 0;
    for (const LegendItem& item : legend)
      widest = std::max(widest, text_width(scratch.cr(), item.name));
    if (f.legend == Legend::kRight) legend_w = std::ceil(50 + widest);
    if (!f.caption.empty()) caption_w = std::ceil(text_width(scratch.cr(), f.caption) + 24);
  }
  const double panels_w = static_cast<double>(panels.size()) * f.panel_width;
  const double width = std::max(panels_w + legend_w, caption_w);
  const double height = f.panel_height + (f.caption.empty() ? 0 : 30);
  check(width <= kMaxImage, "plot ", name, ": panels: ", panels.size(), " panels of ",
        f.panel_width, " pixels make an image ", width, " pixels wide, beyond cairo's limit of ",
        kMaxImage);

  const Canvas canvas = white_canvas(static_cast<int>(width), static_cast<int>(height), name);
  cairo_t* cr = canvas.cr();
  for (std::size_t p = 0; p < panels.size(); ++p) {
    draw_panel(cr, panels[p], static_cast<double>(p) * f.panel_width, f.panel_width,
               f.panel_height, f.legend == Legend::kInside);
  }
  for (std::size_t k = 0; k < legend.size(); ++k) {
    legend_entry(cr, panels_w + 4, 60 + kLegendStep * static_cast<double>(k), legend[k].name,
                 legend[k].colour, legend[k].dashed);
  }
  if (!f.caption.empty()) {
    cairo_set_source_rgb(cr, 0, 0, 0);
    draw_text(cr, width / 2, f.panel_height + 15, f.caption, 13, 0.5, 0.4);
  }
  return encode_png(canvas, name);
}

void write_line_chart_png(const std::string& path, const std::vector<LineChart>& panels,
                          const LineFigure& figure) {
  write_file_atomic(path, render_line_chart_png(panels, figure, path));
}

}  // namespace mona::io
