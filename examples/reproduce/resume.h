/* A run cut short (a stop, kill -9, a machine that goes away) resumes from
 * its last checkpoint instead of running again whole.
 *
 * While a run trains, every --checkpoint-every seconds it leaves two files
 * in DIR/runs/, each written whole (temporary file, fsync, rename): the
 * trainer's checkpoint, ARM.seedN.ckpt (the library's: the student, the
 * optimizer, the schedule's and the data's positions), then the run's record
 * so far, ARM.seedN.part (a kept run's format: the arm, the seed, the
 * settings the run depends on, the per-step losses and evaluations, a
 * checksum). A later study in the folder with the same settings loads both
 * and trains on from that step: the library's checkpoints resume bit for bit,
 * so the kept run equals an uninterrupted one's. A pair that does not match
 * (other settings, a damaged file, two different steps) is named and the
 * run starts from its first step. Both are removed once the run is kept. */
#ifndef REPRODUCE_RESUME_H
#define REPRODUCE_RESUME_H

#include "study.h"

/* Train tr until its schedule ends: from the run's checkpoint when the
 * study whose runs may leave and take up checkpoints (pr->resume) holds one
 * of this run and pr->take_up (r and the progress restored with it), saving
 * one every pr->checkpoint_every seconds. kind is one of p's arms. */
void train_resumable(const preset *p, const arm *kind, int seed, lattice_trainer *tr,
                     lattice_schedule *s, run_result *r, progress *pr);

/* A kept run's checkpoint and partial record, removed. */
void resume_forget(const char *dir, const char *arm, int seed);

#endif
