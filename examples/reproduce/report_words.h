/* report.md's opening: the study's settings in words, and how far its arms
 * read into the training text. */
#ifndef REPRODUCE_REPORT_WORDS_H
#define REPRODUCE_REPORT_WORDS_H

#include "study.h"

/* Batches in one pass over the training text at the students' rows. */
int64_t batches_per_pass(const preset *p);

/* The most batches an arm reads from one place in the text without a rewind. */
int64_t longest_read(const preset *p, const arm *a);

/* The title and the study in words: the students, the teacher, the held-out
 * text, every training setting (and each arm's own), the arms that read
 * past the end of the training text, and what the row-start token is. */
void report_opening(FILE *f, const preset *p);

#endif
