/* What a study writes: report.md, curves.csv, bands.csv, results.json, plots. */
#ifndef REPRODUCE_REPORT_H
#define REPRODUCE_REPORT_H

#include "study.h"

/* v with format f, or "n/a" when it is not finite. */
void fmt_num(char *buf, size_t n, double v, const char *f);

/* report.md's body: the verdicts, then every table beside the paper's numbers. */
void report(FILE *f, const study *s);

/* curves.csv: one row per training step of every run. */
void write_csv(const char *path, const study *s);

/* results.json: every number of every run, with the preset. */
void write_json(const char *path, const study *s, double wall);

/* bands.csv: mean over seeds with a min..max band, per arm and evaluation. */
void write_bands(const char *path, const study *s);

/* The curves through gnuplot when it is installed (PNG and SVG). */
void plot(const char *dir, const study *s);

/* report.md's list of the files beside it: each plot linked and shown, with
 * what it shows, and the data files. */
void report_files(FILE *f, const char *dir);

#endif
