/* Teacher recipes side by side (--probe).
 *
 * Each of the preset's probes trains a teacher, and every probe_every steps
 * its validation CE and go/no-go figures are taken; one table compares them. */
#ifndef REPRODUCE_PROBE_H
#define REPRODUCE_PROBE_H

#include "study.h"

/* Train every probe, jobs at a time (threads each), and print the table;
 * writes DIR/probe.md and DIR/probe.csv. */
void run_probes(const preset *p, const char *dir, int jobs);

#endif
