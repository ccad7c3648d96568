#include "mona/io/plot.h"

#include <cairo.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "mona/core/error.h"
#include "util/temp_dir.h"

using mona::test::TempDir;

// fontconfig (loaded by cairo's toy text API) keeps process-lifetime caches that
// LeakSanitizer reports under MONA_SANITIZE; they are not mona's leaks.
extern "C" const char* __lsan_default_suppressions() { return "leak:libfontconfig.so\n"; }

namespace {

struct Png {
  int width = 0, height = 0;
  cairo_status_t status = CAIRO_STATUS_NULL_POINTER;
};

Png read_png(const std::string& path) {
  cairo_surface_t* s = cairo_image_surface_create_from_png(path.c_str());
  Png png;
  png.status = cairo_surface_status(s);
  if (png.status == CAIRO_STATUS_SUCCESS) {
    png.width = cairo_image_surface_get_width(s);
    png.height = cairo_image_surface_get_height(s);
  }
  cairo_surface_destroy(s);
  return png;
}

// A PNG decoded by cairo from bytes in memory, with its pixels as 8-bit RGB.
struct Image {
  int width = 0, height = 0;
  std::vector<std::array<int, 3>> pixels;  // row-major
  std::array<int, 3> at(int x, int y) const {
    return pixels.at(static_cast<size_t>(y) * width + x);
  }
};

Image decode(const std::string& png) {
  struct Reader {
    const std::string* bytes;
    size_t pos;
  } reader{&png, 0};
  auto read = [](void* closure, unsigned char* data, unsigned int length) {
    auto* r = static_cast<Reader*>(closure);
    if (r->pos + length > r->bytes->size()) return CAIRO_STATUS_READ_ERROR;
    std::memcpy(data, r->bytes->data() + r->pos, length);
    r->pos += length;
    return CAIRO_STATUS_SUCCESS;
  };
  cairo_surface_t* s = cairo_image_surface_create_from_png_stream(read, &reader);
  Image img;
  if (cairo_surface_status(s) == CAIRO_STATUS_SUCCESS) {
    cairo_surface_flush(s);
    img.width = cairo_image_surface_get_width(s);
    img.height = cairo_image_surface_get_height(s);
    const int stride = cairo_image_surface_get_stride(s);
    const unsigned char* data = cairo_image_surface_get_data(s);
    for (int y = 0; y < img.height; ++y) {
      for (int x = 0; x < img.width; ++x) {
        uint32_t v;  // native-endian 0x??RRGGBB (opaque: no premultiplication to undo)
        std::memcpy(&v, data + static_cast<size_t>(y) * stride + 4 * x, 4);
        img.pixels.push_back({int((v >> 16) & 255), int((v >> 8) & 255), int(v & 255)});
      }
    }
  }
  cairo_surface_destroy(s);
  return img;
}

// 8-bit RGB of a colour given in [0, 1].
std::array<int, 3> rgb255(double r, double g, double b) {
  return {int(std::lround(r * 255)), int(std::lround(g * 255)), int(std::lround(b * 255))};
}

int distance(const std::array<int, 3>& a, const std::array<int, 3>& b) {
  return std::max({std::abs(a[0] - b[0]), std::abs(a[1] - b[1]), std::abs(a[2] - b[2])});
}

// Rows of column x whose pixel is within `tolerance` of `colour` (antialiased line edges
// blend with the background, so only the line's core matches).
std::vector<int> rows_of(const Image& img, int x, const std::array<int, 3>& colour,
                         int tolerance = 40) {
  std::vector<int> rows;
  for (int y = 0; y < img.height; ++y)
    if (distance(img.at(x, y), colour) <= tolerance) rows.push_back(y);
  return rows;
}

// Luminance (Rec. 601) of an 8-bit colour: smaller is darker.
double luminance(const std::array<int, 3>& c) { return 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2]; }

// A soft, roughly diagonal alignment [U][T].
std::vector<float> diagonal(int64_t U, int64_t T) {
  std::vector<float> w(U * T);
  for (int64_t u = 0; u < U; ++u) {
    const double centre = (u + 0.5) * T / U;
    double sum = 0;
    for (int64_t t = 0; t < T; ++t) sum += std::exp(-0.5 * std::pow((t - centre) / 1.2, 2));
    for (int64_t t = 0; t < T; ++t) {
      w[u * T + t] = static_cast<float>(std::exp(-0.5 * std::pow((t - centre) / 1.2, 2)) / sum);
    }
  }
  return w;
}

std::vector<std::string> labels(int64_t n, const std::string& prefix) {
  std::vector<std::string> l;
  for (int64_t i = 0; i < n; ++i) l.push_back(prefix + std::to_string(i));
  return l;
}

}  // namespace

TEST(Plot, WritesAValidPngOfTheExpectedSize) {
  TempDir dir;
  const std::string path = dir.file("align.png");
  const std::vector<std::string> in = {"a", "b", "o", "a", "r", "d"};
  const std::vector<std::string> out = {"AH0", "B", "AO1", "R", "D"};
  mona::io::write_alignment_png(path, diagonal(5, 6), 5, 6, in, out, "aboard, step 1000");
  const Png png = read_png(path);
  ASSERT_EQ(png.status, CAIRO_STATUS_SUCCESS) << cairo_status_to_string(png.status);
  // 28-pixel cells: the heatmap alone is 6*28 x 5*28; margins, labels and the bar add more.
  EXPECT_GT(png.width, 6 * 28);
  EXPECT_GT(png.height, 5 * 28);
  EXPECT_LT(png.width, 600);
  EXPECT_LT(png.height, 400);
  EXPECT_EQ(mona::test::read_raw(path).substr(0, 8), "\x89PNG\r\n\x1a\n");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"align.png"}));
}

TEST(Plot, SizeAdaptsToLongInputs) {
  TempDir dir;
  const int64_t U = 40, T = 300;
  const std::string path = dir.file("long.png");
  mona::io::write_alignment_png(path, diagonal(U, T), U, T, labels(T, "x"), labels(U, "y"),
                                   "long input");
  const Png png = read_png(path);
  ASSERT_EQ(png.status, CAIRO_STATUS_SUCCESS);
  // Cells of floor(1400 / 300) = 4 pixels: about 1200 pixels of heatmap, not 300 * 28.
  EXPECT_GT(png.width, T * 4);
  EXPECT_LT(png.width, T * 4 + 400);
  EXPECT_GT(png.height, U * 4);
  EXPECT_LT(png.height, 1200);
}

TEST(Plot, RenderIsDeterministicAndDependsOnWeights) {
  const auto a = mona::io::render_alignment_png(diagonal(3, 4), 3, 4, labels(4, "i"),
                                                   labels(3, "o"), "t", "mem");
  const auto b = mona::io::render_alignment_png(diagonal(3, 4), 3, 4, labels(4, "i"),
                                                   labels(3, "o"), "t", "mem");
  std::vector<float> flat(12, 0.25f);
  const auto c = mona::io::render_alignment_png(flat, 3, 4, labels(4, "i"), labels(3, "o"),
                                                   "t", "mem");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Plot, CellsAreViridisOfTheirWeight) {
  // A flat alignment: every cell has the weight v, so the commonest non-white colour of the
  // picture is the cells' (12 cells of 28 x 28 pixels; text, frame and the colour bar's
  // gradient are far fewer of any one colour). Expected: matplotlib's viridis(v) at the
  // tenths (#440154 at 0, #21918c at 0.5, #fde725 at 1), halfway between two tenths at
  // 0.85. The map used to place its stops at eighths though they were viridis' tenths, and
  // its last segment ran from viridis(0.7) to viridis(1) (0.5 came out as viridis(0.4)).
  const std::vector<std::pair<double, std::array<int, 3>>> cases = {
      {0.0, rgb255(0.267004, 0.004874, 0.329415)},
      {0.5, rgb255(0.127568, 0.566949, 0.550556)},
      {0.8, rgb255(0.477504, 0.821444, 0.318195)},
      {0.85, rgb255((0.477504 + 0.741388) / 2, (0.821444 + 0.873449) / 2,
                    (0.318195 + 0.149561) / 2)},
      {0.9, rgb255(0.741388, 0.873449, 0.149561)},
      {1.0, rgb255(0.993248, 0.906157, 0.143936)}};
  EXPECT_EQ(cases[1].second, (std::array<int, 3>{0x21, 0x91, 0x8c}));
  EXPECT_EQ(cases[5].second, (std::array<int, 3>{0xfd, 0xe7, 0x25}));
  for (const auto& [v, expected] : cases) {
    const std::vector<float> flat(12, static_cast<float>(v));
    const Image img = decode(mona::io::render_alignment_png(flat, 3, 4, labels(4, "i"),
                                                            labels(3, "o"), "", "flat"));
    ASSERT_GT(img.width, 0);
    std::vector<std::pair<std::array<int, 3>, int>> counts;
    for (const auto& p : img.pixels) {
      if (p == std::array<int, 3>{255, 255, 255}) continue;
      auto it = std::find_if(counts.begin(), counts.end(),
                             [&](const auto& c) { return c.first == p; });
      if (it == counts.end()) {
        counts.push_back({p, 1});
      } else {
        ++it->second;
      }
    }
    ASSERT_FALSE(counts.empty());
    const auto commonest =
        std::max_element(counts.begin(), counts.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    EXPECT_GE(commonest->second, 12 * 28 * 28) << "v = " << v;
    EXPECT_LE(distance(commonest->first, expected), 1)
        << "v = " << v << ": got (" << commonest->first[0] << ", " << commonest->first[1]
        << ", " << commonest->first[2] << "), expected (" << expected[0] << ", " << expected[1]
        << ", " << expected[2] << ")";
  }
}

TEST(Plot, BadArgumentsNameThePathAndLeaveNoFile) {
  TempDir dir;
  const std::string path = dir.file("p.png");
  const auto w = diagonal(2, 3);
  const auto in = labels(3, "i"), out = labels(2, "o");
  EXPECT_ERROR_CONTAINS(mona::io::write_alignment_png(path, {1, 2}, 2, 3, in, out, ""),
                        "plot " + path, "weights", "6 values", "got 2");
  EXPECT_ERROR_CONTAINS(mona::io::write_alignment_png(path, w, 2, 3, labels(2, "i"), out, ""),
                        "plot " + path, "input_labels", "T = 3");
  EXPECT_ERROR_CONTAINS(mona::io::write_alignment_png(path, w, 2, 3, in, labels(3, "o"), ""),
                        "output_labels", "U = 2");
  EXPECT_ERROR_CONTAINS(mona::io::write_alignment_png(path, {}, 0, 3, in, {}, ""), "U",
                        "got 0");
  auto nan = w;
  nan[4] = std::nanf("");
  EXPECT_ERROR_CONTAINS(mona::io::write_alignment_png(path, nan, 2, 3, in, out, ""),
                        "NaN at [1, 1]");
  EXPECT_ERROR_CONTAINS(
      mona::io::write_alignment_png(dir.file("no/dir/p.png"), w, 2, 3, in, out, ""),
      dir.file("no/dir/p.png"));
  EXPECT_TRUE(dir.entries().empty());
}

// ---------------------------------------------------------------------------------------
// Line charts. The expected pixel positions follow from the layout the header documents:
// panel p's plot area spans columns [p * width + 80, (p + 1) * width - 20] and rows
// [40, height - 55].

namespace {

using mona::io::Axis;
using mona::io::Legend;
using mona::io::LineChart;
using mona::io::LineFigure;
using mona::io::Scale;
using mona::io::Series;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const std::array<int, 3> kWhite = {255, 255, 255};

std::array<int, 3> palette(int i) {
  const auto& c = mona::io::kPalette[static_cast<size_t>(i)];
  return rgb255(c[0], c[1], c[2]);
}

// The row of value v on an axis from lo to hi (in axis units) of a 300-pixel-high panel.
double row_of(double v, double lo, double hi, int panel_height = 300) {
  const double top = 40, bottom = panel_height - 55;
  return bottom - (v - lo) / (hi - lo) * (bottom - top);
}

Series constant(const std::string& name, double y, double x0, double x1, int color = -1) {
  return Series{name, {x0, (x0 + x1) / 2, x1}, {y, y, y}, false, color};
}

// Every row of column x in the colour lies within 2 pixels of `expected`, and some does.
void expect_band(const Image& img, int x, const std::array<int, 3>& colour, double expected) {
  const auto rows = rows_of(img, x, colour);
  ASSERT_FALSE(rows.empty()) << "no pixel of the series' colour in column " << x
                             << ", expected one near row " << expected;
  for (int y : rows) EXPECT_NEAR(y, expected, 2.0) << "column " << x;
}

const LineFigure kSmall{400, 300, Legend::kNone, ""};

}  // namespace

TEST(PlotLineChart, ConstantSeriesDrawOneRowBandEachWhereTheAxisPutsThem) {
  LineChart c;
  c.x.label = "x";
  c.y = Axis{"y", Scale::kLinear, 0, 10};
  c.series = {constant("a", 2.5, 0, 10), constant("b", 7.5, 0, 10, 3)};
  c.markers = false;
  const Image img = decode(mona::io::render_line_chart_png({c}, kSmall, "mem"));
  ASSERT_EQ(img.width, 400);
  ASSERT_EQ(img.height, 300);
  // x spans the data exactly (0 and 10 are ticks): the lines run from column 80 to 380.
  for (int x : {85, 150, 230, 300, 375}) {
    expect_band(img, x, palette(0), row_of(2.5, 0, 10));  // 193.75
    expect_band(img, x, palette(3), row_of(7.5, 0, 10));  // 91.25
  }
  EXPECT_TRUE(rows_of(img, 70, palette(0)).empty()) << "the line leaves the plot area";
  EXPECT_TRUE(rows_of(img, 390, palette(3)).empty()) << "the line leaves the plot area";
}

TEST(PlotLineChart, LogAxesPutEveryDecadeTheSameDistanceApart) {
  LineChart c;
  c.x = Axis{"x", Scale::kLog, 1, 1e4};
  c.y = Axis{"y", Scale::kLog, 1, 1e4};
  // From x = 10 to 1000: a quarter to three quarters of the 300-pixel-wide plot area.
  c.series = {Series{"a", {10, 1000}, {100, 100}, false, -1},
              Series{"b", {10, 1000}, {10, 10}, false, -1}};
  c.markers = false;
  const Image img = decode(mona::io::render_line_chart_png({c}, kSmall, "mem"));
  for (int x : {160, 230, 300}) {
    expect_band(img, x, palette(0), row_of(2, 0, 4));  // log10(100) on 0 .. 4: 142.5
    expect_band(img, x, palette(1), row_of(1, 0, 4));  // 193.75
  }
  for (int x : {150, 310}) EXPECT_TRUE(rows_of(img, x, palette(0)).empty()) << "column " << x;
}

TEST(PlotLineChart, AutomaticRangesEndAtTheNextTickOrDecade) {
  // Linear data 3 .. 97: steps of 20 (94 / 10 > 8 intervals), so the axis is 0 .. 100.
  // Log data 3 .. 97: 1 .. 100. The second panel starts at column 400.
  LineChart lin, logarithmic;
  lin.series = {constant("lo", 3, 0, 1), constant("hi", 97, 0, 1)};
  logarithmic.series = lin.series;
  logarithmic.y.scale = Scale::kLog;
  lin.markers = logarithmic.markers = false;
  const Image img =
      decode(mona::io::render_line_chart_png({lin, logarithmic}, kSmall, "mem"));
  ASSERT_EQ(img.width, 800);
  for (int x : {100, 300}) {
    expect_band(img, x, palette(0), row_of(3, 0, 100));    // 238.85
    expect_band(img, x, palette(1), row_of(97, 0, 100));   // 46.15
    expect_band(img, 400 + x, palette(0), row_of(std::log10(3.0), 0, 2));   // 196.1
    expect_band(img, 400 + x, palette(1), row_of(std::log10(97.0), 0, 2));  // 41.4
  }
}

TEST(PlotLineChart, DashedLinesHaveGapsAndASinglePointIsADot) {
  LineChart c;
  c.x = Axis{"x", Scale::kLinear, 0, 10};
  c.y = Axis{"y", Scale::kLinear, 0, 10};
  Series dashed = constant("dashed", 2.5, 0, 10, 1);
  dashed.dashed = true;
  c.series = {dashed, Series{"point", {5}, {5}, false, 2}};
  c.markers = false;
  const Image img = decode(mona::io::render_line_chart_png({c}, kSmall, "mem"));
  // Along the dashed line's row: runs of its colour separated by gaps (7 on, 5 off).
  const int row = static_cast<int>(row_of(2.5, 0, 10));
  int runs = 0, gaps = 0;
  bool on = false;
  for (int x = 85; x <= 375; ++x) {
    const bool now = distance(img.at(x, row), palette(1)) <= 40;
    if (now && !on) ++runs;
    if (!now && on) ++gaps;
    on = now;
  }
  EXPECT_GE(runs, 20);  // 290 pixels / 12 per period
  EXPECT_GE(gaps, 20);
  // The single point (5, 5) is a dot of radius 3.5 at column 230, row 142.5.
  EXPECT_LE(distance(img.at(230, 142), palette(2)), 10);
  EXPECT_EQ(img.at(230, 148), kWhite);
  EXPECT_EQ(img.at(236, 142), kWhite);
}

TEST(PlotLineChart, SizeFollowsPanelsLegendAndCaption) {
  LineChart a, b;
  a.series = {constant("first", 1, 0, 1), constant("second", 2, 0, 1)};
  b.series = a.series;  // the same series in both panels: listed once in a figure legend
  const LineFigure plain{300, 200, Legend::kNone, ""};
  const Image bare = decode(mona::io::render_line_chart_png({a, b}, plain, "mem"));
  EXPECT_EQ(bare.width, 600);
  EXPECT_EQ(bare.height, 200);
  const Image captioned =
      decode(mona::io::render_line_chart_png({a, b}, {300, 200, Legend::kNone, "caption"}, "mem"));
  EXPECT_EQ(captioned.width, 600);
  EXPECT_EQ(captioned.height, 230);

  const Image right =
      decode(mona::io::render_line_chart_png({a, b}, {300, 200, Legend::kRight, ""}, "mem"));
  EXPECT_GT(right.width, 650);  // 50 pixels and the names
  EXPECT_LT(right.width, 800);
  EXPECT_EQ(right.height, 200);
  // Entries from row 60, 19 apart; line samples from column 604 to 632.
  EXPECT_LE(distance(right.at(618, 60), palette(0)), 10);
  EXPECT_LE(distance(right.at(618, 79), palette(1)), 10);
  EXPECT_EQ(right.at(618, 98), kWhite) << "a series shown in both panels is listed twice";

  // Legend::kInside: in each panel, at the top left of the plot area (row 40 + 18).
  const Image inside =
      decode(mona::io::render_line_chart_png({a, b}, {300, 200, Legend::kInside, ""}, "mem"));
  EXPECT_EQ(inside.width, 600);
  for (int x0 : {0, 300}) {
    EXPECT_LE(distance(inside.at(x0 + 80 + 26, 58), palette(0)), 10);
    EXPECT_LE(distance(inside.at(x0 + 80 + 26, 77), palette(1)), 10);
  }
}

TEST(PlotLineChart, BadArgumentsNameTheArgumentAndTheValue) {
  LineChart ok;
  ok.title = "t";
  ok.series = {constant("a", 1, 0, 1), constant("b", 2, 0, 1)};
  auto render = [](const std::vector<LineChart>& panels, const LineFigure& f = LineFigure{}) {
    return mona::io::render_line_chart_png(panels, f, "fig.png");
  };
  EXPECT_NO_THROW(render({ok}));
  EXPECT_THROW(render({}), mona::ArgumentError);
  EXPECT_ERROR_CONTAINS(render({}), "plot fig.png", "panels", "at least one chart");

  LineChart none = ok;
  none.series.clear();
  EXPECT_ERROR_CONTAINS(render({ok, none}), "panels[1] \"t\".series", "at least one series");

  LineChart empty = ok;
  empty.series[1].x.clear();
  empty.series[1].y.clear();
  EXPECT_THROW(render({empty}), mona::ArgumentError);
  EXPECT_ERROR_CONTAINS(render({empty}), "panels[0] \"t\".series[1] \"b\"", "at least one point");

  LineChart mismatch = ok;
  mismatch.series[1].x.pop_back();
  EXPECT_ERROR_CONTAINS(render({mismatch}), "series[1] \"b\".x", "expected 3 values", "got 2");

  LineChart nan = ok;
  nan.series[0].y[1] = kNaN;
  EXPECT_THROW(render({nan}), mona::ArgumentError);
  EXPECT_ERROR_CONTAINS(render({nan}), "series[0] \"a\".y[1]", "finite", "got nan");
  LineChart inf = ok;
  inf.series[1].x[2] = INFINITY;
  EXPECT_ERROR_CONTAINS(render({inf}), "series[1] \"b\".x[2]", "finite", "got inf");

  LineChart log_y = ok;
  log_y.y.scale = Scale::kLog;
  log_y.series[0].y[0] = 0;
  EXPECT_THROW(render({log_y}), mona::ArgumentError);
  EXPECT_ERROR_CONTAINS(render({log_y}), "series[0] \"a\".y[0]", "logarithmic", "> 0", "got 0");
  LineChart log_x = ok;
  log_x.x.scale = Scale::kLog;  // the series' x starts at 0
  EXPECT_ERROR_CONTAINS(render({log_x}), "series[0] \"a\".x[0]", "logarithmic", "got 0");
  LineChart log_end = ok;
  log_end.y = Axis{"y", Scale::kLog, -1, kNaN};
  EXPECT_ERROR_CONTAINS(render({log_end}), "panels[0] \"t\".y.min", "logarithmic", "got -1");
  LineChart reversed = ok;
  reversed.x = Axis{"x", Scale::kLinear, 2, 1};
  EXPECT_ERROR_CONTAINS(render({reversed}), "panels[0] \"t\".x", "min < max", "min 2",
                        "max 1");
  LineChart infinite_end = ok;
  infinite_end.y.max = INFINITY;
  EXPECT_ERROR_CONTAINS(render({infinite_end}), "y.max", "got inf");

  LineChart colour = ok;
  colour.series[0].color = -2;
  EXPECT_ERROR_CONTAINS(render({colour}), "series[0] \"a\".color", "got -2");
  EXPECT_ERROR_CONTAINS(render({ok}, LineFigure{100, 300, Legend::kNone, ""}), "panel_width",
                        "got 100");
  EXPECT_ERROR_CONTAINS(render({ok}, LineFigure{300, 9000, Legend::kNone, ""}), "panel_height",
                        "got 9000");
}

TEST(PlotLineChart, WritesAtomicallyAndAnUnwritablePathIsADataError) {
  TempDir dir;
  LineChart c;
  c.series = {constant("a", 1, 0, 1)};
  const std::string path = dir.file("chart.png");
  mona::io::write_line_chart_png(path, {c}, kSmall);
  const Image img = decode(mona::test::read_raw(path));
  EXPECT_EQ(img.width, 400);
  EXPECT_EQ(img.height, 300);
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"chart.png"}));
  const std::string bad = dir.file("no/dir/chart.png");
  EXPECT_THROW(mona::io::write_line_chart_png(bad, {c}, kSmall), mona::DataError);
  EXPECT_ERROR_CONTAINS(mona::io::write_line_chart_png(bad, {c}, kSmall), bad);
  // A bad argument names the path too, and nothing is written.
  c.series[0].y[0] = kNaN;
  EXPECT_ERROR_CONTAINS(mona::io::write_line_chart_png(dir.file("nan.png"), {c}, kSmall),
                        "plot " + dir.file("nan.png"), "y[0]");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"chart.png"}));
}

// ---------------------------------------------------------------------------------------
// Heatmaps of numbers. Cell (c, r) fills columns [90 + c * cell, 90 + (c + 1) * cell - 1)
// and rows [60 + (rows - 1 - r) * cell, ...); colours run linearly (in the value or its
// logarithm) from cream (0.98, 0.96, 0.90) to blue (0.23, 0.41, 0.65); NaN is grey 0.8.

namespace {

using mona::io::ValueHeatmap;

std::array<int, 3> cream_to_blue(double t) {
  return rgb255(0.98 - 0.75 * t, 0.96 - 0.55 * t, 0.90 - 0.25 * t);
}

// The fill colour of cell (c, r), read 3 pixels inside its top-left corner (clear of text).
std::array<int, 3> cell_fill(const Image& img, int c, int r, int rows, int cell) {
  return img.at(90 + c * cell + 3, 60 + (rows - 1 - r) * cell + 3);
}

ValueHeatmap grid_3x2() {
  ValueHeatmap h;
  h.x_label = "T";
  h.y_label = "U";
  h.column_labels = {"10", "20", "30"};
  h.row_labels = {"1", "2"};
  h.values = {1, 2, kNaN,  // row 0 (bottom)
              3, 4, 5};    // row 1 (top)
  h.cell = 40;
  return h;
}

}  // namespace

TEST(PlotValueHeatmap, CellsSitWhereDocumentedAndDarkenWithTheValue) {
  const ValueHeatmap h = grid_3x2();
  const Image img = decode(mona::io::render_value_heatmap_png(h, "mem"));
  ASSERT_EQ(img.width, 90 + 3 * 40 + 150);
  ASSERT_EQ(img.height, 60 + 2 * 40 + 70);
  // Linear in the value from 1 (cream) to 5 (blue): t = (v - 1) / 4.
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) {
      const double v = h.values[static_cast<size_t>(r * 3 + c)];
      const auto expected = std::isnan(v) ? rgb255(0.8, 0.8, 0.8) : cream_to_blue((v - 1) / 4);
      EXPECT_LE(distance(cell_fill(img, c, r, 2, 40), expected), 1)
          << "cell (" << c << ", " << r << ") of value " << v;
    }
  }
  // Larger values are darker: 1 < 2 < 3 < 4 < 5.
  const double lum[] = {
      luminance(cell_fill(img, 0, 0, 2, 40)), luminance(cell_fill(img, 1, 0, 2, 40)),
      luminance(cell_fill(img, 0, 1, 2, 40)), luminance(cell_fill(img, 1, 1, 2, 40)),
      luminance(cell_fill(img, 2, 1, 2, 40))};
  for (int i = 0; i + 1 < 5; ++i) EXPECT_GT(lum[i], lum[i + 1]) << "value " << i + 1;
  // A white gap of one pixel after each cell.
  EXPECT_EQ(img.at(90 + 39, 63), kWhite);
  EXPECT_EQ(img.at(93, 60 + 39), kWhite);
  // The number is written in its cell: dark text on the light cell of 1, light on the dark
  // cell of 5 (somewhere in the middle of the cell, away from the fill colour).
  auto ink_near = [&](int c, int r, const std::array<int, 3>& ink) {
    for (int y = 60 + (1 - r) * 40 + 10; y < 60 + (1 - r) * 40 + 30; ++y)
      for (int x = 90 + c * 40 + 5; x < 90 + c * 40 + 35; ++x)
        if (distance(img.at(x, y), ink) <= 60) return true;
    return false;
  };
  EXPECT_TRUE(ink_near(0, 0, {0, 0, 0}));
  EXPECT_TRUE(ink_near(2, 1, kWhite));
  // The colour bar (24 pixels wide, 30 right of the grid, as high as it): blue in its top
  // row, cream in its bottom row, the middle colour half way.
  const int bar_x = 90 + 3 * 40 + 30 + 12;
  EXPECT_LE(distance(img.at(bar_x, 60), cream_to_blue(1)), 2);
  EXPECT_LE(distance(img.at(bar_x, 60 + 80 - 1), cream_to_blue(0)), 2);
  EXPECT_LE(distance(img.at(bar_x, 60 + 40), cream_to_blue(0.5)), 2);
  EXPECT_EQ(img.at(bar_x, 60 + 80), kWhite);
}

TEST(PlotValueHeatmap, ALogScaleColoursByTheLogarithmAndATitleWidensOnlyTheRight) {
  ValueHeatmap h;
  h.column_labels = {"a", "b", "c"};
  h.row_labels = {"r"};
  h.values = {1, 10, 100};
  h.cell = 30;
  h.color_scale = Scale::kLog;
  const Image logarithmic = decode(mona::io::render_value_heatmap_png(h, "mem"));
  EXPECT_LE(distance(cell_fill(logarithmic, 1, 0, 1, 30), cream_to_blue(0.5)), 1);
  h.color_scale = Scale::kLinear;
  const Image lin = decode(mona::io::render_value_heatmap_png(h, "mem"));
  EXPECT_LE(distance(cell_fill(lin, 1, 0, 1, 30), cream_to_blue(9.0 / 99)), 1);
  EXPECT_EQ(lin.width, 90 + 3 * 30 + 150);

  h.title = std::string(120, 'W');  // far wider than the 330-pixel image
  const Image wide = decode(mona::io::render_value_heatmap_png(h, "mem"));
  EXPECT_GT(wide.width, 90 + 3 * 30 + 150);
  EXPECT_EQ(wide.height, lin.height);
  for (int c = 0; c < 3; ++c)
    EXPECT_EQ(cell_fill(wide, c, 0, 1, 30), cell_fill(lin, c, 0, 1, 30));

  // Equal values: every cell the middle colour.
  h.values = {7, 7, 7};
  const Image flat = decode(mona::io::render_value_heatmap_png(h, "mem"));
  for (int c = 0; c < 3; ++c)
    EXPECT_LE(distance(cell_fill(flat, c, 0, 1, 30), cream_to_blue(0.5)), 1);
}

TEST(PlotValueHeatmap, BadArgumentsNameTheArgumentAndTheValue) {
  auto render = [](const ValueHeatmap& h) {
    return mona::io::render_value_heatmap_png(h, "grid.png");
  };
  EXPECT_NO_THROW(render(grid_3x2()));
  ValueHeatmap h = grid_3x2();
  h.values.pop_back();
  EXPECT_THROW(render(h), mona::ArgumentError);
  EXPECT_ERROR_CONTAINS(render(h), "plot grid.png", "values", "2 * 3 = 6 values", "got 5");
  h = grid_3x2();
  h.values[4] = -INFINITY;
  EXPECT_ERROR_CONTAINS(render(h), "values[4] (row 1, column 1)", "got -inf");
  h = grid_3x2();
  h.values[3] = 0;
  h.color_scale = Scale::kLog;
  EXPECT_ERROR_CONTAINS(render(h), "values[3] (row 1, column 0)", "logarithmic", "got 0");
  h = grid_3x2();
  h.values.assign(6, kNaN);
  EXPECT_ERROR_CONTAINS(render(h), "values", "every value is NaN");
  h = grid_3x2();
  h.row_labels.clear();
  EXPECT_ERROR_CONTAINS(render(h), "row_labels", "at least one row");
  h = grid_3x2();
  h.column_labels.clear();
  EXPECT_ERROR_CONTAINS(render(h), "column_labels", "at least one column");
  h = grid_3x2();
  h.cell = 4;
  EXPECT_ERROR_CONTAINS(render(h), "cell", "got 4");
  h = grid_3x2();
  h.digits = 0;
  EXPECT_ERROR_CONTAINS(render(h), "digits", "got 0");

  TempDir dir;
  const std::string bad = dir.file("no/dir/grid.png");
  EXPECT_THROW(mona::io::write_value_heatmap_png(bad, grid_3x2()), mona::DataError);
  EXPECT_ERROR_CONTAINS(mona::io::write_value_heatmap_png(bad, grid_3x2()), bad);
  mona::io::write_value_heatmap_png(dir.file("grid.png"), grid_3x2());
  EXPECT_EQ(decode(mona::test::read_raw(dir.file("grid.png"))).width, 360);
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"grid.png"}));
}
