/* --rekey: what 0.4 kept, verified and converted to the format of 0.5.
 *
 * Runs and teachers kept by 0.4 and before, verified against the preset they
 * were made with. */
#ifndef REPRODUCE_REKEY_H
#define REPRODUCE_REKEY_H

#include "study.h"

/* Every run of the preset's arms and seeds kept in DIR/runs/ in format 1,
 * and DIR/teacher.json of 0.4, verified against the checksums 0.4 computed
 * (the preset's text, the corpus, the teacher file) and rewritten in format
 * 2; a run that does not verify is named and left as it was. Returns the
 * number that did not verify (0: every old run was converted). */
int rekey_study(const preset *p, const char *dir);

#endif
