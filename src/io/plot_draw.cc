// Cairo plumbing shared by the pictures of mona/io/plot.h (plot_draw.h).
#include "plot_draw.h"

#include <cmath>
#include <cstdio>

#include "mona/core/error.h"

namespace mona::io::plot_detail {

using detail::check_data;

namespace {

cairo_status_t append_png(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace

Canvas white_canvas(int width, int height, const std::string& name) {
  Canvas c;
  c.surface.reset(cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height));
  check_data(cairo_surface_status(c.surface.get()) == CAIRO_STATUS_SUCCESS, "plot ", name,
             ": cairo: cannot create a ", width, "x", height, " image: ",
             cairo_status_to_string(cairo_surface_status(c.surface.get())));
  c.context.reset(cairo_create(c.surface.get()));
  check_data(cairo_status(c.cr()) == CAIRO_STATUS_SUCCESS, "plot ", name, ": cairo: ",
             cairo_status_to_string(cairo_status(c.cr())));
  cairo_set_source_rgb(c.cr(), 1, 1, 1);
  cairo_paint(c.cr());
  return c;
}

Canvas scratch_canvas(const std::string& name) { return white_canvas(1, 1, name); }

void set_font(cairo_t* cr, double size, bool bold) {
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

double text_width(cairo_t* cr, const std::string& s) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  return e.x_advance;
}

void draw_text(cairo_t* cr, double x, double y, const std::string& s, double size, double ax,
               double ay, bool bold) {
  set_font(cr, size, bold);
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  cairo_move_to(cr, x - ax * e.width - e.x_bearing, y + ay * e.height);
  cairo_show_text(cr, s.c_str());
}

std::string encode_png(const Canvas& canvas, const std::string& name) {
  cairo_surface_flush(canvas.surface.get());
  check_data(cairo_status(canvas.cr()) == CAIRO_STATUS_SUCCESS, "plot ", name, ": cairo: ",
             cairo_status_to_string(cairo_status(canvas.cr())));
  std::string png;
  const cairo_status_t st =
      cairo_surface_write_to_png_stream(canvas.surface.get(), append_png, &png);
  check_data(st == CAIRO_STATUS_SUCCESS, "plot ", name, ": cairo: cannot encode PNG: ",
             cairo_status_to_string(st));
  return png;
}

std::string format_number(double v, int digits) {
  if (!std::isfinite(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

}  // namespace mona::io::plot_detail
