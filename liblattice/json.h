/* Strict JSON through json-c: a parser that admits RFC 8259 only, checked
 * adds, and a writer whose text is never silently truncated. Used for the
 * safetensors headers and for the JSON inside them (a model's config, a
 * checkpoint's state). */
#ifndef LATTICE_JSON_H
#define LATTICE_JSON_H

#include "internal.h"

#include <json-c/json.h>

/* Parse text[0, len) as a JSON object, strictly: RFC 8259 grammar only (no
 * comments, single quotes, trailing commas, NaN or Infinity), strings of valid
 * UTF-8 without NUL (json-c would cut a key at "\u0000", where other readers
 * see the whole name) and no key twice in one object (json-c keeps the last,
 * other readers the first or neither). Around the object: JSON whitespace, or
 * for a safetensors header (header != 0) nothing before it and spaces after,
 * as the format allows, and the header's bounds (ST_MAX_TENSORS tensors,
 * ST_MAX_VALUES values: safetensors.h) checked on the text before json-c
 * builds a tree. what names the text in the message, e.g. "x.json".
 * Returns LATTICE_ERR_FORMAT with the reason and its byte offset in err, or
 * LATTICE_ERR_OUT_OF_MEMORY. */
lattice_status lattice__json_parse(const char *text, size_t len, int header, const char *what,
                                   json_object **out, char *err);

/* json-c's constructors and adds return NULL or -1 when memory runs out; these
 * check them. add and push take ownership of val (NULL allowed: a constructor
 * that failed) and release it when they fail; key must outlive obj. Both
 * return 1 on success, 0 on failure. */
int lattice__json_add(json_object *obj, const char *key, json_object *val);
int lattice__json_push(json_object *arr, json_object *val);
/* o's compact JSON text in a new string (the caller frees), or NULL when memory
 * runs out. Not json-c's serializer, which ignores some failed appends: a
 * truncated text is never returned. */
char *lattice__json_dump(json_object *o);
/* The same for a file people read (a config.json): one member or element a
 * line, two spaces a level, ": " after keys, and every double as the shortest
 * decimal that reads back as it, so that the text is Python's
 * json.dump(o, indent=2) of the same values (where strings are printable
 * ASCII). */
char *lattice__json_dump_pretty(json_object *o);

#endif
