// label: train
#include "mona/io/plot.h"

#include <cairo.h>
#include <gtest/gtest.h>

#include <cmath>

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
