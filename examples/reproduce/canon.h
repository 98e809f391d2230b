/* Settings as canonical JSON, and the keys two settings differ in.
 *
 * The same values give the same text however a preset writes them (key order,
 * spacing, 1.0 or 1, 2e-3 or 0.002), and two settings that differ are told
 * apart key by key. */
#ifndef REPRODUCE_CANON_H
#define REPRODUCE_CANON_H

#include "study.h"

/* o as canonical JSON, malloc'd: objects with their keys sorted (byte
 * order), no spaces, every number as the shortest "%.17g" form of its double
 * (integers beyond 2^53 as integers), strings escaped as JSON requires.
 * Dies when out of memory. */
char *canon_json(json_object *o);

/* The keys (dotted paths, lists by index) whose values differ between two
 * canonical texts, with both values ("train.tau 1 -> 0.5"), at most max of
 * them, into out; the number that differ (0 when the texts hold the same
 * values; -1 when one does not parse). */
int canon_diff(const char *was, const char *now, char *out, size_t n, int max);

#endif
