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

/* The design whose arms messages name as the user wrote them (design_namer's
 * context, load_preset's): the design, its base, the index of its first arm
 * (after the preset's own), and its factors of one key's values
 * (design_label_levels'). */
typedef struct design_naming {
    const design *d;
    json_object *base;
    int from;
    int valued[MAX_FACTORS];
} design_naming;

/* A path of the preset as read, as the user wrote it (a json_reader's
 * namer; ctx is a design_naming): a design's arm's key (arms[N].K, N a cell
 * of the design) is named where the design sets it:
 * design.factors[F].levels[L].set.K, design.factors[F].levels[L] (its key
 * K) for a factor of one key's values, or design.base.K; a path the design
 * did not write (a default's message) by the arm's name. */
void design_namer(const void *ctx, char *buf, size_t n, const char *path);

/* A factor of one key's numeric values ("key": "train.lr", "levels": [0.001,
 * 0.003]) rewritten in o as levels labelled by the values as written: each
 * level becomes {"label": "0.001", "set": {"train": {"lr": 0.001}}}, before
 * design_expand. valued[f] marks them, for design_namer. */
void design_label_levels(json_object *o, int valued[MAX_FACTORS]);

#endif
