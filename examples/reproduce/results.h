/* The study's numbers for other programs: curves.csv, bands.csv, results.json. */
#ifndef REPRODUCE_RESULTS_H
#define REPRODUCE_RESULTS_H

#include "study.h"

/* curves.csv: one row per training step of every run. */
void write_csv(const char *path, const study *s);

/* results.json: every number of every run, with the preset. */
void write_json(const char *path, const study *s, double wall);

/* The unigram baseline: the cross-entropy, in nats per byte, of the held-out
 * text's targets under the token frequencies of one pass over the training
 * text (the targets the students train on, at their rows), add-one smoothed
 * over the 257 tokens. Counted as the final evaluation counts: the same
 * validation batches (final_eval_batches, else all), padding masked out,
 * token-weighted. What a model that learned nothing but byte frequencies
 * scores. The study's report reads it as study.unigram (session_write
 * computes it once). */
double unigram_ce(const preset *p);

/* An arm did not learn when its mean final val CE is above the unigram CE
 * minus this (nats/byte): within 0.1 nats/byte of a model of byte frequencies
 * alone, or worse. Every arm of the committed studies ends 1.3 nats/byte or
 * more below it; the 9-layer post-norm arm that prompted the rule (issue 39)
 * ended 0.04 above it. */
#define LEARN_MARGIN 0.1

/* The arm's mean final val CE is within LEARN_MARGIN of unigram (or above). */
int did_not_learn(double mean_ce, double unigram);

/* Which of the arms names[0..n) did not learn (did_not_learn over their
 * seeds, against the preset's unigram CE): their names, comma-separated,
 * into buf (n bytes; "" for none). Returns how many. A comparison or
 * interaction that rests on one is not applicable: its verdict reads
 * NOT_LEARNED_VERDICT, never "not reproduced". */
int not_learned(const study *s, const char *const *names, int n, char *buf, size_t len);
#define NOT_LEARNED_VERDICT "not applicable (did not learn)"

/* The single runs that did not learn by did_not_learn's rule in arms whose
 * mean did: "`arm` seed N (val CE)", comma-separated, into buf (len bytes;
 * "" for none). Returns how many. Nothing is decided by them: the report
 * names them, so that a row resting on such an arm is read knowing it. */
int runs_not_learned(const study *s, char *buf, size_t len);

/* What seed i of arm a reads at arm seed 1's evaluation k: its point k, or
 * its last where it has fewer (a run that ended early keeps its last value);
 * NULL where it has none (a kept run with no evaluations). */
const point *seed_point(const study *s, int a, int i, int k);
/* How many of arm a's seeds have points: the averages over seeds divide by it. */
int seeds_with_points(const study *s, int a);

/* bands.csv: mean over seeds with a min..max band, per arm and evaluation. */
void write_bands(const char *path, const study *s);

#endif
