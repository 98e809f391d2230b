/* The study's curves drawn by gnuplot when it is installed (PNG and SVG). */
#ifndef REPRODUCE_PLOT_H
#define REPRODUCE_PLOT_H

#include "study.h"

/* The curves of bands.csv into DIR's curves_*.png and .svg (nothing but a
 * message without gnuplot; the old plots kept when it fails). */
void plot(const char *dir, const study *s);

#endif
