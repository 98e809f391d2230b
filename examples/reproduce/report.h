/* report.md: the study in words and tables beside the paper's numbers, and its files.
 *
 * Its opening (the settings in words) is report_words.h's, its contrast
 * tables contrasts.h's, its verdict table verdicts.h's. */
#ifndef REPRODUCE_REPORT_H
#define REPRODUCE_REPORT_H

#include "study.h"

#include "contrasts.h"
#include "report_words.h"

/* report.md's body: the verdicts, then every table beside the paper's numbers. */
void report(FILE *f, const study *s);

/* report.md's list of the files beside it: each plot linked and shown, with
 * what it shows, and the data files. */
void report_files(FILE *f, const char *dir);

/* The end of a study on the terminal (stdout): the verdict table and the
 * arms that did not learn, where report.md and the plots are (dir), and how
 * this result relates to the committed studies (doc/REPRODUCTION.md). */
void report_summary(FILE *f, const study *s, const char *dir);

#endif
