/* replay_plot.c: a dependency-free SVG writer for stacked line charts (the
 * replay's hit rate and latency, the tuner's throughput curve). */
#include <math.h>

#include "tools/replay.h"

enum { WIDTH = 900, PANEL_H = 300, LEFT = 70, RIGHT = 150, TOP = 40, BOTTOM = 45 };
static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd"};

static void range(const fl_plot_panel *p, int y, double *lo, double *hi) {
  *lo = INFINITY, *hi = -INFINITY;
  for (size_t s = 0; s < p->n_series; s++)
    for (size_t i = 0; i < p->series[s].n; i++) {
      double v = y ? p->series[s].y[i] : p->series[s].x[i];
      if (v < *lo) *lo = v;
      if (v > *hi) *hi = v;
    }
  if (!(*lo <= *hi)) *lo = 0, *hi = 1; /* no points */
  if (y && *lo > 0) *lo = 0;            /* values start from 0 */
  if (*hi - *lo < 1e-12) *hi = *lo + 1;
}

static void panel(FILE *f, const fl_plot_panel *p, int top) {
  double x0, x1, y0, y1;
  range(p, 0, &x0, &x1);
  range(p, 1, &y0, &y1);
  const double w = WIDTH - LEFT - RIGHT, h = PANEL_H - TOP - BOTTOM;
  const double ox = LEFT, oy = top + TOP;
  fprintf(f, "<text x='%d' y='%.0f' font-weight='bold'>%s</text>\n", LEFT, oy - 12, p->title);
  fprintf(f, "<rect x='%.0f' y='%.0f' width='%.0f' height='%.0f' fill='none' stroke='#888'/>\n", ox,
          oy, w, h);
  for (int k = 0; k <= 4; k++) { /* grid and tick labels */
    double gy = oy + h - h * k / 4, gx = ox + w * k / 4;
    fprintf(f, "<line x1='%.0f' y1='%.1f' x2='%.0f' y2='%.1f' stroke='#eee'/>\n", ox, gy, ox + w, gy);
    fprintf(f, "<text x='%.0f' y='%.1f' text-anchor='end' font-size='11'>%.3g</text>\n", ox - 5,
            gy + 4, y0 + (y1 - y0) * k / 4);
    fprintf(f, "<text x='%.1f' y='%.0f' text-anchor='middle' font-size='11'>%.3g</text>\n", gx,
            oy + h + 15, x0 + (x1 - x0) * k / 4);
  }
  fprintf(f, "<text x='%.0f' y='%.0f' text-anchor='middle' font-size='12'>%s</text>\n", ox + w / 2,
          oy + h + 35, p->x_label);
  fprintf(f, "<text transform='translate(15,%.0f) rotate(-90)' text-anchor='middle' "
          "font-size='12'>%s</text>\n", oy + h / 2, p->y_label);
  for (size_t s = 0; s < p->n_series; s++) {
    const fl_plot_series *se = &p->series[s];
    const char *c = colors[s % (sizeof colors / sizeof *colors)];
    fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='1.5' points='", c);
    for (size_t i = 0; i < se->n; i++)
      fprintf(f, "%.1f,%.1f ", ox + w * (se->x[i] - x0) / (x1 - x0),
              oy + h - h * (se->y[i] - y0) / (y1 - y0));
    fprintf(f, "'/>\n<text x='%.0f' y='%.0f' fill='%s' font-size='12'>%s</text>\n", ox + w + 10,
            oy + 15 + 16 * (double)s, c, se->label);
  }
}

fl_status fl_plot_svg(const char *path, const char *title, const fl_plot_panel *panels,
                      size_t n_panels) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "error: %s: cannot create\n", path);
    return FL_ERR_IO;
  }
  fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%zu' "
          "font-family='sans-serif'>\n<rect width='100%%' height='100%%' fill='white'/>\n"
          "<text x='%d' y='20' font-size='15'>%s</text>\n",
          WIDTH, 10 + PANEL_H * n_panels, LEFT, title);
  for (size_t i = 0; i < n_panels; i++) panel(f, &panels[i], 10 + (int)(PANEL_H * i));
  fprintf(f, "</svg>\n");
  if (fclose(f) != 0) {
    fprintf(stderr, "error: %s: write failed\n", path);
    return FL_ERR_IO;
  }
  return FL_OK;
}
