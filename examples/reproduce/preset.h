/* The preset: its keys, named arms, schedules, probes, paths, --arms and --check. */
#ifndef REPRODUCE_PRESET_H
#define REPRODUCE_PRESET_H

#include "preset_json.h"
#include "study.h"

/* The file --preset ARG names, into dst: ARG itself when it holds a '/' or
 * ends in .json (a path), else the preset of that name in the presets folder
 * (PRESETS/ARG.json; see presets_dir in preset_paths.c). Dies when a name breaks
 * NAME_RULE or holds "..", or no such preset is there (naming those that are). */
void preset_file(char *dst, size_t n, const char *arg);

/* The file of a preset's data key (o's key: a path relative to the preset's
 * folder), or, without the key, file in the default corpus's folder
 * (LATTICE_REPRODUCE_DATA or examples/data/austen), into dst. */
void preset_data_path(json_reader *rd, char *dst, size_t n, json_object *o, const char *key,
                      const char *preset_path, const char *file);

/* Read, check and resolve a preset file; dies with the key path on any error. */
void load_preset(preset *p, const char *path);

/* The preset's parts, for load_preset (preset.c) and the arms' parser
 * (preset_arms.c). An arm's optimizer recipe: the preset's train section, with
 * the keys of the arm's own "train" object (t, may be NULL; named where)
 * replacing its keys. */
void arm_recipe(json_reader *rd, const preset *p, arm *a, json_object *t, const char *where);

/* The preset's arm at arms[index] (v: a named arm or an object), appended to
 * p's arms; dies with the key path on any error. */
void parse_arm(json_reader *rd, preset *p, json_object *v, int index);

/* An arm's phases, resolved once: its schedule preset's (the library's
 * lattice_schedule_get_preset_phases, at the preset's sizes) or its explicit
 * ones, with the arm's block init, data rule and boundary freeze. Returns
 * their count (at most MAX_PHASES). */
int arm_phases(const preset *p, const arm *a, lattice_schedule_phase ph[MAX_PHASES]);

/* A schedule of arm a's n phases (arm_phases), for a run to train on. */
lattice_schedule *phases_schedule(const arm *a, const lattice_schedule_phase *ph, int n);

/* The steps of n phases; -1 when one of them has a token budget. */
int64_t phases_steps(const lattice_schedule_phase *ph, int n);

/* Select only the named arms (a comma-separated list) to run; the others stay
 * in the study (their kept runs are reported). */
void select_arms(preset *p, const char *list);

/* The preset as understood (--check): data, init, and every arm's phases. */
void print_preset(const preset *p);

/* The preset with probe q's teacher recipe. */
void preset_for_probe(const preset *p, const probe *q, preset *out);

/* Dies naming the file and how to fix it when the corpus cannot be read. */
void check_preset_files(const preset *p);

#endif
