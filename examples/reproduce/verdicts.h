/* The verdict table: the paper's findings as rules over the results. */
#ifndef REPRODUCE_VERDICTS_H
#define REPRODUCE_VERDICTS_H

#include "study.h"

/* The verdict table: each of the paper's findings, reproduced or not, with its evidence. */
void verdicts(FILE *f, const study *s);

/* What verdicts() prints, into *text (malloc'd: the caller frees it). */
void verdicts_text(const study *s, char **text);

/* The verdict table's rows for results.json: an array of {finding, paper,
 * ours, verdict}, each cell as report.md prints it. */
json_object *verdict_rows(const study *s);

#endif
