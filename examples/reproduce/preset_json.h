/* The preset's JSON: read by the library's strict parser, errors by line, typed getters. */
#ifndef REPRODUCE_PRESET_JSON_H
#define REPRODUCE_PRESET_JSON_H

#include "study.h"

/* The preset file as a JSON object, parsed by the library's strict RFC 8259
 * parser (liblattice/json.c: no comments, trailing commas, single quotes,
 * NaN, or a key twice in one object). Dies naming the line and column of
 * the first error, what is there, and, for a repeated key, the key. */
json_object *read_preset_json(const char *path);

/* The state of one preset's reading, which its reader passes to every call
 * below: where the keys being read sit, how a path is named in messages, and
 * the messages' buffers. Start it zeroed. */
typedef struct json_reader {
    char where[128]; /* "arms[2].phases[1]"; "" at the top (json_at) */
    /* Messages name a path of the preset as read (a design's arms are read as
     * arms[N], the cells it adds after the preset's own) through namer, which
     * writes the path as the user wrote it (design.factors[2].levels[1].set.
     * train.alpha) into buf, given namer_ctx; NULL: as read. */
    void (*namer)(const void *ctx, char *buf, size_t n, const char *path);
    const void *namer_ctx;
    char said[4][320]; /* json_said's, four at a time: one message may name two paths */
    int next;
} json_reader;

/* Where the keys being read sit ("" at the top): the getters' messages name
 * key paths under it. */
void json_at(json_reader *rd, const char *where);

/* A path as the user wrote it (namer), for a message: where.key (either may
 * be "" or NULL), or path. In rd's buffers, four at a time. */
const char *json_said_at(json_reader *rd, const char *where, const char *key);
const char *json_said(json_reader *rd, const char *path);

/* key under json_at's place, as the user wrote it. */
const char *json_path(json_reader *rd, const char *key);

/* The member at a dotted path ("train.lr"), or NULL. */
json_object *member(json_object *o, const char *path);

/* The member at path as an int in lo..hi (a boolean is 0 or 1), or fallback when absent. */
int get_i(json_reader *rd, json_object *o, const char *path, int fallback, int lo, int hi);

/* ... as a finite number >= 0, or fallback. */
double get_d(json_reader *rd, json_object *o, const char *path, double fallback);

/* ... as a learning rate: a number > 0, or fallback. */
double get_lr(json_reader *rd, json_object *o, const char *path, double fallback);

/* ... as a string copied to dst (n bytes), or fallback. */
void get_s(json_reader *rd, json_object *o, const char *path, char *dst, size_t n, const char *fallback);

/* ... as one of names[0..n): its index, or fallback when absent; messages
 * name the key as where.key. */
int get_enum(json_reader *rd, json_object *o, const char *key, const char *where, const char *const *names, int n,
             int fallback);

/* Every key of o, at every depth, is one of known[0..n) by its pattern (the
 * path with "*" for a list's elements, e.g. "arms.*.phases.*.steps"); dies
 * naming the first one that is not. */
void check_keys(json_reader *rd, json_object *o, const char *const *known, size_t n);

/* No null anywhere in o: one would read as the key's absence (its default),
 * which is not what a preset that writes it says. Dies naming its path. */
void no_nulls(json_reader *rd, json_object *o);

#endif
