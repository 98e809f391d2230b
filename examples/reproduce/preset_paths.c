/* Where a preset and its data are found: a preset's paths relative to its
 * own folder, the presets folder and a preset named by --preset, and the
 * corpus a preset names or the default one (preset.h). */
#include "preset.h"

#include "files.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A path in a preset is relative to the preset's own folder. */
static void resolve_path(char *dst, size_t n, const char *preset_path, const char *rel)
{
    int len;
    if (rel[0] == '/') {
        len = snprintf(dst, n, "%s", rel);
    } else {
        const char *slash = strrchr(preset_path, '/');
        int dirlen = slash ? (int)(slash - preset_path) : 1;
        len = snprintf(dst, n, "%.*s/%s", dirlen, slash ? preset_path : ".", rel);
    }
    if (len < 0 || (size_t)len >= n)
        die("preset: the path %s (from %s) is longer than %zu bytes", rel, preset_path, n - 1);
}

/* The presets folder of --preset NAME: an installed lattice-reproduce's is
 * REPRODUCE_PRESETS_FROM_BIN, relative to the folder the program lives in
 * (so a relocated or DESTDIR-staged install finds its own), or absolute
 * where meson's datadir lies outside the prefix; a build's own program has
 * none there and takes the source tree's. */
#ifndef REPRODUCE_PRESETS_FROM_BIN
#define REPRODUCE_PRESETS_FROM_BIN "../share/lattice/presets"
#endif
#ifndef REPRODUCE_SOURCE_PRESETS
#define REPRODUCE_SOURCE_PRESETS "examples/reproduce/presets"
#endif

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* 1 and the folder in dst, or 0 with the folders looked in, in tried. */
static int presets_dir(char *dst, size_t n, char *tried, size_t tried_n)
{
    const char *rel = REPRODUCE_PRESETS_FROM_BIN;
    char exe[4096];
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    tried[0] = 0;
    if (rel[0] == '/') {
        snprintf(tried, tried_n, "%s", rel);
    } else if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(tried, tried_n, "%s/%s", exe, rel);
        }
    }
    char real[PATH_MAX];
    if (tried[0] && is_dir(tried) && realpath(tried, real) && strlen(real) < n) {
        snprintf(dst, n, "%s", real); /* bin/../share/...: named as it is */
        return 1;
    }
    const size_t at = strlen(tried);
    snprintf(tried + at, tried_n - at, "%s%s", at ? " nor " : "", REPRODUCE_SOURCE_PRESETS);
    if (strlen(REPRODUCE_SOURCE_PRESETS) < n && is_dir(REPRODUCE_SOURCE_PRESETS)) {
        snprintf(dst, n, "%s", REPRODUCE_SOURCE_PRESETS);
        return 1;
    }
    return 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of the presets in dir (its *.json files), sorted, comma-separated. */
static void preset_names(const char *dir, char *dst, size_t n)
{
    char *names[256];
    int count = 0;
    dst[0] = 0;
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d)) && count < 256;) {
        const size_t len = strlen(e->d_name);
        if (len > 5 && e->d_name[0] != '.' && strcmp(e->d_name + len - 5, ".json") == 0 &&
            (names[count] = strndup(e->d_name, len - 5)))
            count++;
    }
    closedir(d);
    qsort(names, (size_t)count, sizeof names[0], compare_names);
    for (int i = 0; i < count; i++) {
        const size_t at = strlen(dst);
        snprintf(dst + at, n - at, "%s%s", i ? ", " : "", names[i]);
        free(names[i]);
    }
}

void preset_file(char *dst, size_t n, const char *arg)
{
    const size_t len = strlen(arg);
    if (strchr(arg, '/') || (len >= 5 && strcmp(arg + len - 5, ".json") == 0)) {
        if ((size_t)snprintf(dst, n, "%s", arg) >= n)
            die("--preset: the path %s is longer than %zu bytes", arg, n - 1);
        return;
    }
    /* a name never leaves the presets folder */
    if (!name_ok(arg) || strstr(arg, ".."))
        die("--preset %s: a preset name is " NAME_RULE ", without \"..\" (a file is named by a "
            "path: one with a '/', or ending in .json)", arg);
    char dir[4096], tried[8192];
    if (!presets_dir(dir, sizeof dir, tried, sizeof tried))
        die("--preset %s: no presets folder (neither %s exists): name the preset's file instead",
            arg, tried);
    if ((size_t)snprintf(dst, n, "%s/%s.json", dir, arg) >= n)
        die("--preset %s: the presets folder's path %s is too long", arg, dir);
    struct stat st;
    if (stat(dst, &st) != 0 || !S_ISREG(st.st_mode)) {
        char names[4096];
        preset_names(dir, names, sizeof names);
        die("--preset %s: no preset named '%s' in %s (there: %s)", arg, arg, dir,
            names[0] ? names : "none");
    }
}

/* The corpus when a preset names none: the one examples/data/prepare_austen.py
 * writes into the project, wherever the preset lives (LATTICE_REPRODUCE_DATA,
 * a folder holding train.txt and val.txt, overrides it). */
#ifndef REPRODUCE_DEFAULT_DATA
#define REPRODUCE_DEFAULT_DATA "examples/data/austen"
#endif

void preset_data_path(json_reader *rd, char *dst, size_t n, json_object *o, const char *key,
                      const char *preset_path, const char *file)
{
    if (member(o, key)) {
        char rel[1024];
        get_s(rd, o, key, rel, sizeof rel, "");
        resolve_path(dst, n, preset_path, rel);
    } else {
        const char *env = getenv("LATTICE_REPRODUCE_DATA");
        const char *base = env && *env ? env : REPRODUCE_DEFAULT_DATA;
        if ((size_t)snprintf(dst, n, "%s/%s", base, file) >= n)
            die("the default corpus's path (%s) is too long", base);
    }
}
