/* The verdict table: the paper's findings as rules over the results. */
#ifndef REPRODUCE_VERDICTS_H
#define REPRODUCE_VERDICTS_H

#include "study.h"

/* The verdict table: each of the paper's findings, reproduced or not, with its evidence. */
void verdicts(FILE *f, const study *s);

#endif
