/* A preset's factorial design: "design": {"factors": [...], "base": {...},
 * "arms": [...]} expanded into arms, comparisons and interactions with the
 * user's labels (presets/README.md, "Designs"). */
#ifndef REPRODUCE_DESIGN_H
#define REPRODUCE_DESIGN_H

#include "study.h"

/* Expand o's design block, if any, into o's arms, compare and interactions
 * lists (after the preset's own), and fill d; dies naming what is wrong. */
void design_expand(json_object *o, design *d);

/* A comparison's or interaction's label: the design's for the rows it made,
 * else NULL. */
const char *design_compare_label(const preset *p, int k);
const char *design_interact_label(const preset *p, int k);

#endif
