/* A run's record described once: the field table of run_result.
 *
 * Every number a run keeps is one row of a table (record.c): its name in a
 * kept run's JSON, where it sits in run_result, its type, and, where it goes
 * on, its name and form in results.json and in curves.csv. The kept record,
 * results.json's runs and curves.csv's columns are walked from that table,
 * so a number added to run_result and to the table reaches all three. */
#ifndef REPRODUCE_RECORD_H
#define REPRODUCE_RECORD_H

#include "study.h"

/* r as a kept run's record: a JSON object whose members are run_result's
 * numbers, each array of entries (points, phase changes, blocks, boundaries,
 * steps) as an object of columns of equal length. A double that is not
 * finite is a string ("NaN", "-NaN", "Infinity", "-Infinity", or "NaN:" and
 * its 16 hex digits for another NaN), so that the record reads back to the
 * same bits. A new reference; NULL when memory ran out. */
json_object *record_to_json(const run_result *r);

/* The record back into a new run_result (its per-step arrays allocated):
 * NULL, with the reason in why, when o is not such a record (a member
 * missing, unknown or of another type, columns of unequal length, more
 * entries than run_result holds, an integer out of its type's range). */
run_result *record_from_json(json_object *o, char *why, size_t why_size);

/* Whether every count of r (read from raw bytes) is within its array: 1,
 * and then every entry past a count is set to 0, as a run leaves them, so
 * that a record that held something there (0.3's sink figures, NaN
 * throughout) holds what its JSON reads back as; else 0. */
int record_settle(run_result *r);

/* The run's entry in results.json's arms: its seed (from 1), then its
 * numbers as results.json names them. A new reference. */
json_object *record_results(const run_result *r, int seed);

/* curves.csv's header line, and its rows for one run: one per training step,
 * with the evaluation's columns at the steps that were evaluated (empty
 * elsewhere). */
void record_csv_header(FILE *f);
void record_csv_rows(FILE *f, const char *arm, int seed, const run_result *r);

#endif
