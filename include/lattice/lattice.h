/**
 * @file lattice.h
 * @brief The umbrella header: include this one.
 */
#ifndef LATTICE_H
#define LATTICE_H

#include <lattice/version.h>
#include <lattice/common.h>
#include <lattice/backend.h>
#include <lattice/norm.h>
#include <lattice/model_option.h>
#include <lattice/model.h>
#include <lattice/optim.h>
#include <lattice/distill.h>
#include <lattice/data.h>
#include <lattice/schedule.h>
#include <lattice/teacher.h>
#include <lattice/trainer.h>
#include <lattice/diag.h>

#endif
