/* Kept for tests/test_optim.c, which includes it for lattice__sum_squares:
 * what this header used to hold, now each object's own (optim_impl.h,
 * schedule_impl.h, trainer_impl.h, and the private sides of the distill,
 * data and teacher objects and of setup.c). The library includes those
 * headers itself; this one goes once no test includes it. */
#ifndef LATTICE_STUDY_IMPL_H
#define LATTICE_STUDY_IMPL_H

#include "data_impl.h"
#include "distill_impl.h"
#include "model_impl.h"
#include "optim_impl.h"
#include "schedule_impl.h"
#include "setup.h"
#include "teacher_impl.h"
#include "trainer_impl.h"

#endif
