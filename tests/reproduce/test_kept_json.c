/* Kept runs as JSON (format 3) against the raw records of format 2.
 *
 * Committed runs of format 2 (the first few of them in each
 * doc/results/NAME/runs/; runs kept in format 3 are read whole by the test
 * results-regenerate) are read, written as JSON and read back: the run_result's
 * bytes, its per-step arrays, its results.json entry and its curves.csv rows
 * are the raw record's. Then a JSON run made wrong in each way a file can be
 * (cut short, its checksum off, and, with a checksum that holds, JSON that
 * does not parse, members missing, unknown or of another type, lists of
 * unequal length or too long, integers out of range) is refused with a
 * reason, never reused.
 *
 * usage: test_kept_json RESULTS_DIR (doc/results) */
#include <dirent.h>
#include <stddef.h>

#include "../../examples/reproduce/files.h"
#include "../../examples/reproduce/record.h"
#include "kept_sample.h"

static int failed;

#define EXPECT(cond, ...)                                                                        \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            fprintf(stderr, __VA_ARGS__);                                                        \
            fputc('\n', stderr);                                                                 \
            failed++;                                                                            \
        }                                                                                        \
    } while (0)

/* run_result's bytes with its pointers cleared. */
static void fixed_part(const run_result *r, run_result *out)
{
    memcpy(out, r, sizeof *out);
    out->losses = NULL;
    out->step_phase = out->step_active = NULL;
    out->step_alt = NULL;
}

static char *results_text(const run_result *r)
{
    json_object *o = record_results(r, 1);
    char *t = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
    json_object_put(o);
    return t;
}

static char *csv_text(const run_result *r)
{
    char *t = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&t, &n);
    record_csv_rows(f, "arm", 1, r);
    fclose(f);
    return t;
}

/* Two runs hold the same: 1. */
static int same_run(const run_result *a, const run_result *b)
{
    static run_result fa, fb;
    fixed_part(a, &fa);
    fixed_part(b, &fb);
    const size_t n = (size_t)a->n_steps;
    for (size_t k = 0; k < sizeof fa; k++)
        if (((char *)&fa)[k] != ((char *)&fb)[k]) {
            fprintf(stderr, "run_result's byte %zu differs (of %zu)\n", k, sizeof fa);
            break;
        }
    if (memcmp(&fa, &fb, sizeof fa) != 0 || memcmp(a->losses, b->losses, n * sizeof(double)) ||
        memcmp(a->step_phase, b->step_phase, n * sizeof(int)) ||
        memcmp(a->step_active, b->step_active, n * sizeof(int)) ||
        memcmp(a->step_alt, b->step_alt, n * sizeof(int64_t)))
        return 0;
    char *ra = results_text(a), *rb = results_text(b), *ca = csv_text(a), *cb = csv_text(b);
    const int same = strcmp(ra, rb) == 0 && strcmp(ca, cb) == 0;
    free(ra), free(rb), free(ca), free(cb);
    return same;
}

/* One committed run of format 2: read as the study reads it, as JSON and back.
 * Returns 0 for a run kept as JSON already (format 3), 1 otherwise. */
static int round_trip(const char *path)
{
    char *buf = NULL;
    size_t n = 0;
    const int got = read_regular(path, (uint64_t)1 << 30, &buf, &n) == 0;
    if (got && n > 0 && buf[0] == '{') {
        free(buf);
        return 0;
    }
    if (!got || n < 8 + 80 + 8 || memcmp(buf, "LATRUN\0\2", 8) != 0) {
        EXPECT(0, "%s: not a kept run of format 2 or 3", path);
        free(buf);
        return 1;
    }
    /* its head (kept_head, store.c): the arm, the seed, the settings' length */
    char arm[48];
    uint32_t seed;
    uint64_t slen;
    memcpy(arm, buf + 8, sizeof arm);
    memcpy(&seed, buf + 8 + 48, sizeof seed);
    memcpy(&slen, buf + 8 + 56, sizeof slen);
    char *settings = strndup(buf + 8 + 80, slen);
    run_result *raw = NULL, *back = NULL;
    char why[2048];
    int rc = kept_parse(buf, n, arm, (int)seed, settings, &raw, why, sizeof why);
    EXPECT(rc == KEPT_OK, "%s: format 2 not read: %s", path, why);
    if (rc == KEPT_OK) {
        size_t jn;
        char *json = kept_pack(arm, (int)seed, settings, 0, raw, &jn);
        rc = kept_parse(json, jn, arm, (int)seed, settings, &back, why, sizeof why);
        EXPECT(rc == KEPT_OK, "%s: its JSON is not read back: %s", path, why);
        EXPECT(rc != KEPT_OK || same_run(raw, back), "%s: its JSON reads back otherwise", path);
        free(json);
    }
    free_run(raw);
    free_run(back);
    free(settings);
    free(buf);
    return 1;
}

#define RUNS_PER_STUDY 4

static int committed_runs(const char *results)
{
    int count = 0;
    DIR *d = opendir(results);
    EXPECT(d, "cannot list %s", results);
    for (struct dirent *e; d && (e = readdir(d));) {
        char runs[4096];
        snprintf(runs, sizeof runs, "%s/%s/runs", results, e->d_name);
        DIR *r = e->d_name[0] == '.' ? NULL : opendir(runs);
        int in_study = 0; /* a few of each study's: every layout a study kept, in a short test */
        for (struct dirent *f; r && in_study < RUNS_PER_STUDY && (f = readdir(r));) {
            const size_t len = strlen(f->d_name);
            if (len < 5 || strcmp(f->d_name + len - 4, ".run") != 0)
                continue;
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", runs, f->d_name);
            if (!round_trip(path))
                continue; /* kept in format 3: a study's later seeds may be */
            count++, in_study++;
        }
        if (r)
            closedir(r);
    }
    if (d)
        closedir(d);
    return count;
}

/* The sample's JSON with from replaced by to and its checksum made to hold
 * again, so that what reads it past the checksum is what refuses it. */
static char *edited(const char *good, const char *from, const char *to, size_t *n)
{
    const char *at = strstr(good, from);
    if (!at) {
        EXPECT(0, "the sample holds no %s", from);
        return NULL;
    }
    const char *sum = strstr(good, ",\"xxh64\":\"");
    const size_t body = (size_t)(sum - good) - strlen(from) + strlen(to);
    char *t = malloc(body + 64);
    snprintf(t, body + 1, "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
    char hex[17];
    hex64(hex, xxh_bytes(t, body));
    *n = body + (size_t)sprintf(t + body, ",\"xxh64\":\"%s\"}\n", hex);
    return t;
}

static void refused(const char *text, size_t n, const char *what, const char *reason)
{
    run_result *r = NULL;
    char why[2048] = "";
    const int rc = kept_parse(text, n, SAMPLE_ARM, SAMPLE_SEED, SAMPLE_SETTINGS, &r, why,
                              sizeof why);
    EXPECT(rc == KEPT_BAD && !r, "%s: not refused (%d)", what, rc);
    EXPECT(strstr(why, reason), "%s: refused as '%s', not '%s'", what, why, reason);
    free_run(r);
}

static void malformed(void)
{
    size_t n, m;
    char *good = sample_kept(&n);
    EXPECT(good[0] == '{' && sample_reused(good, n), "the sample's JSON is not reused");
    for (size_t cut = 1; cut < n; cut += 1 + cut / 3)
        refused(good, cut, "cut short", "damaged: ");
    char *bad = strdup(good);
    bad[strstr(bad, "\"final_val\":") - bad + 13] ^= 1;
    refused(bad, n, "a digit changed", "do not match their checksum");
    free(bad);
    static const char *const edits[][3] = {
        {"\"final_val\":", "\"final_val\":,", "not strict JSON"},
        {"\"final_val\":", "\"final_val\":\"x\",\"w\":", "record's final_val is not a number"},
        {"\"dce\":[", "\"dce\":[1,1,1,1,1,1,1,1,1", "dce is not a list of at most its number"},
        {"\"seconds\":", "\"x\":", "lacks seconds"},
        {"\"seconds\":", "\"more\":1,\"seconds\":", "members this build does not know"},
        {"\"phase\":[0,", "\"phase\":[", "not a list of as many entries"},
        {"\"phase\":[0,", "\"phase\":[4294967296,", "phase[0] is not an integer in range"},
        {"\"phase\":[0,", "\"phase\":[0.5,", "phase[0] is not an integer in range"},
        {"\"jump\":[", "\"jump\":[1,2,3,4,5,6,7,8,", "not a list of"},
        {"\"record\":{", "\"record\":[0],\"r\":{", "the record is not an object"},
        {"\"blocks\":{\"dce\":[],\"angle\":[],\"ce_full\":[],\"ce_removed\":[]}",
         "\"blocks\":[]", "blocks is not an object"},
        {"\"loss\":[", "\"loss\":[\"NaN:0000000000000001\",", "not a list of as many"},
        {"\"loss\":[5.0", "\"loss\":[\"NaN:0000000000000001\"", "loss[0] is not a number"},
        {"\"kept_run\":3", "\"kept_run\":2", "not a kept run of format 3"},
        {"\"seed\":2", "\"seed\":1", "it holds arm 'post-grow' seed 1, not post-grow seed 2"},
        {"\"tau\":1", "\"tau\":2", "made with other settings: preset.train.tau 2 -> 1"},
    };
    for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
        char *t = edited(good, edits[k][0], edits[k][1], &m);
        if (!t)
            continue;
        run_result *r = NULL;
        char why[2048] = "";
        const int rc = kept_parse(t, m, SAMPLE_ARM, SAMPLE_SEED, SAMPLE_SETTINGS, &r, why,
                                  sizeof why);
        EXPECT(rc != KEPT_OK && !r && strstr(why, edits[k][2]),
               "%s -> %s: %d, '%s', not '%s'", edits[k][0], edits[k][1], rc, why, edits[k][2]);
        free_run(r);
        free(t);
    }
    /* what is not finite keeps its bits */
    char *t = edited(good, "\"loss\":[5.0", "\"loss\":[\"-NaN\"", &m);
    run_result *r = NULL;
    char why[2048];
    EXPECT(t && kept_parse(t, m, SAMPLE_ARM, SAMPLE_SEED, SAMPLE_SETTINGS, &r, why,
                           sizeof why) == KEPT_OK && isnan(r->losses[0]) && signbit(r->losses[0]),
           "-NaN is not read as a negative NaN");
    if (r) {
        size_t k;
        char *again = kept_pack(SAMPLE_ARM, SAMPLE_SEED, SAMPLE_SETTINGS, 7, r, &k);
        EXPECT(k == m && memcmp(again, t, m) == 0, "a run with a -NaN is not written back as it");
        free(again);
    }
    free_run(r);
    free(t);
    free(good);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_kept_json RESULTS_DIR\n");
        return 2;
    }
    const int n = committed_runs(argv[1]);
    EXPECT(n > 0, "no committed runs under %s", argv[1]);
    malformed();
    printf("%d committed runs of format 2 read back the same from JSON; %d failures\n", n,
           failed);
    return failed ? 1 : 0;
}
