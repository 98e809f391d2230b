/* The study's numbers for other programs: curves.csv, bands.csv, results.json. */
#ifndef REPRODUCE_RESULTS_H
#define REPRODUCE_RESULTS_H

#include "study.h"

/* curves.csv: one row per training step of every run. */
void write_csv(const char *path, const study *s);

/* results.json: every number of every run, with the preset. */
void write_json(const char *path, const study *s, double wall);

/* bands.csv: mean over seeds with a min..max band, per arm and evaluation. */
void write_bands(const char *path, const study *s);

#endif
