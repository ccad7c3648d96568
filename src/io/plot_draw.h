// The cairo plumbing shared by the pictures of mona/io/plot.h (internal to mona_io): owning
// handles, a white image surface, text measured and placed by its ink box, PNG encoding.
#pragma once

#include <cairo.h>

#include <memory>
#include <string>

namespace mona::io::plot_detail {

struct SurfaceDeleter {
  void operator()(cairo_surface_t* s) const { cairo_surface_destroy(s); }
};
struct ContextDeleter {
  void operator()(cairo_t* c) const { cairo_destroy(c); }
};
using Surface = std::unique_ptr<cairo_surface_t, SurfaceDeleter>;
using Context = std::unique_ptr<cairo_t, ContextDeleter>;

/// An RGB image of width x height pixels painted white, and a context drawing on it.
/// Throws DataError "plot <name>: cairo: ..." when cairo cannot create it.
struct Canvas {
  Surface surface;
  Context context;
  cairo_t* cr() const { return context.get(); }
};
Canvas white_canvas(int width, int height, const std::string& name);

/// A 1 x 1 canvas for measuring text before the picture's size is known.
Canvas scratch_canvas(const std::string& name);

/// Selects the sans-serif font at `size` pixels.
void set_font(cairo_t* cr, double size, bool bold = false);

/// The advance width of `s` in the current font.
double text_width(cairo_t* cr, const std::string& s);

/// Draws `s` at `size` pixels in the current colour, placed by its ink box: the point at
/// the fraction `ax` of the box's width (0 left edge, 0.5 centre, 1 right edge) is at x, and
/// the baseline is at y + ay * (box height) (ay = 0: baseline at y; 0.4: about centred).
void draw_text(cairo_t* cr, double x, double y, const std::string& s, double size,
               double ax = 0, double ay = 0, bool bold = false);

/// Flushes the canvas and returns its PNG bytes. Throws DataError "plot <name>: cairo: ..."
/// when cairo reports an error in drawing or encoding.
std::string encode_png(const Canvas& canvas, const std::string& name);

/// `v` with `digits` significant digits ("%.*g"); "n/a" when not finite.
std::string format_number(double v, int digits);

}  // namespace mona::io::plot_detail
