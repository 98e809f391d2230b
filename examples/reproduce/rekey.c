/* --rekey: what 0.4 kept, verified with 0.4's own checksums and converted (see rekey.h). */
#include "rekey.h"

#include <sys/stat.h>

#include "canon.h"
#include "files.h"
#include "preset.h"
#include "runs.h"
#include "store.h"
#include "teacher.h"

/* ---- 0.4's checksums, exactly as 0.4 computed them ---------------------------------- */

static uint64_t fnv_int(uint64_t h, int64_t v) { return fnv(h, &v, sizeof v); }
static uint64_t fnv_dbl(uint64_t h, double v) { return fnv(h, &v, sizeof v); }

/* 0.4's run_settings: the preset's text as json-c writes it (key order as in
 * the file), the threads, the arm field by field, the corpus's bytes and the
 * teacher file's FNV-1a. */
static uint64_t settings_0_4(const preset *p, const arm *a, uint64_t teacher_sum)
{
    json_object *rest = json_object_new_object();
    json_object_object_foreach(p->json, key, val)
    {
        if (strcmp(key, "name") && strcmp(key, "about") && strcmp(key, "seeds") &&
            strcmp(key, "arms") && strcmp(key, "compare") && strcmp(key, "probes") &&
            strcmp(key, "probe_every") && strcmp(key, "require_go") &&
            strcmp(key, "interactions"))
            json_object_object_add(rest, key, json_object_get(val));
    }
    const char *js = json_object_to_json_string_ext(rest, JSON_C_TO_STRING_PLAIN);
    uint64_t h = fnv(FNV_START, js, strlen(js));
    json_object_put(rest);
    h = fnv_int(h, p->threads);
    h = fnv(h, a->name, strlen(a->name) + 1);
    h = fnv_int(h, a->placement);
    h = fnv_dbl(h, a->residual_scale);
    h = fnv_int(h, a->schedule);
    h = fnv_int(h, a->n_phases);
    for (int k = 0; k < a->n_phases; k++) {
        const lattice_schedule_phase *ph = &a->phases[k];
        h = fnv_int(h, ph->steps);
        h = fnv_int(h, ph->tokens);
        h = fnv_int(h, ph->active_layers);
        h = fnv_int(h, ph->train_from);
        h = fnv_int(h, ph->reset_optimizer);
        h = fnv_int(h, ph->block_init);
        h = fnv_int(h, ph->rewind_data);
        h = fnv_int(h, ph->train_boundary);
    }
    h = fnv_int(h, a->block_init);
    h = fnv_int(h, a->train_boundary);
    h = fnv_int(h, a->rewind_data);
    h = fnv_dbl(h, a->init_gain);
    if (a->train_json[0])
        h = fnv(h, a->train_json, strlen(a->train_json));
    if (fnv_file(p->train, &h) != 0)
        die("cannot read the training text %s: %s", p->train, strerror(errno));
    if (fnv_file(p->val, &h) != 0)
        die("cannot read the validation text %s: %s", p->val, strerror(errno));
    return fnv_int(h, (int64_t)teacher_sum);
}

/* 0.4's teacher.json: the want object's text, as json-c writes it. */
static int teacher_meta_0_4(const preset *p, const char *dir)
{
    char meta[2048];
    snprintf(meta, sizeof meta, "%s/teacher.json", dir);
    char *text;
    size_t n;
    if (read_regular(meta, 1 << 20, &text, &n) != 0)
        return -1;
    json_object *want = teacher_want(p), *have = json_tokener_parse(text);
    const int same = have && strcmp(json_object_to_json_string_ext(have, JSON_C_TO_STRING_PLAIN),
                                    json_object_to_json_string_ext(want, JSON_C_TO_STRING_PLAIN)) == 0;
    json_object_put(have);
    json_object_put(want);
    free(text);
    return same;
}

/* ---- the conversion ----------------------------------------------------------------- */

/* Runs kept before 0.4 carry a checksum of their settings alone, and stand
 * for their seed by their job number: seed index x the number of arms the
 * preset then had + the arm's index then. Arms are only ever appended to a
 * preset's list, so an arm's index then is its index now; the arm count then
 * is found from the records themselves, and every one of them must agree on
 * it: a record copied to another seed's name does not. */
static int job_says(int job, int a, int i, int arms_then)
{
    return i == 0 ? job == a : arms_then > a && job == i * arms_then + a;
}

/* 1 converted, 0 no format-1 file there, -1 did not verify (why). With
 * arms_then < 0, nothing is written: *job_then gets the job number of a run
 * kept before 0.4 (else -1). */
static int rekey_run(const preset *p, const char *dir, int a, int i, uint64_t teacher_fnv,
                     const char *settings, int arms_then, int *job_then, char *why,
                     size_t why_size)
{
    *job_then = -1;
    char path[2048];
    run_path(path, sizeof path, dir, p->arms[a].name, i + 1);
    char *buf;
    size_t n;
    if (read_regular(path, (uint64_t)1 << 31, &buf, &n) != 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(why, why_size, "cannot be read: %s", strerror(errno));
        return -1;
    }
    uint64_t head[3];
    int rc = -1;
    if (n < 8 + sizeof head || memcmp(buf, KEPT_MAGIC_1, 8) != 0) {
        free(buf);
        return 0; /* not of 0.4: the normal load judges it */
    }
    memcpy(head, buf + 8, sizeof head);
    const uint64_t legacy = settings_0_4(p, &p->arms[a], teacher_fnv);
    int32_t job;
    char how[300];
    run_result *r = NULL;
    const int pre_0_4 = head[0] == legacy;
    if (head[0] != fnv_int(legacy, (int64_t)i + 1) && !pre_0_4) {
        snprintf(why, why_size, "it does not match the preset's settings, corpus and teacher as "
                                "0.4 checksummed them: not converted");
    } else if (head[1] != n - 8 - sizeof head) {
        snprintf(why, why_size, "its record is not the %llu bytes its header says",
                 (unsigned long long)head[1]);
    } else if (!(r = run_unpack_sized(buf + 8 + sizeof head, head[1], head[2], &job, how,
                                      sizeof how))) {
        snprintf(why, why_size, "its record is damaged: %s", how);
    } else if (pre_0_4 && arms_then < 0) {
        *job_then = job; /* the first pass */
        rc = 0;
    } else if (pre_0_4 && !job_says(job, a, i, arms_then)) {
        snprintf(why, why_size,
                 "kept before 0.4 as job %d, which is not arm %d seed %d of a preset of %d arms, "
                 "as the other runs of before 0.4 here are: a copy of another run? not converted",
                 (int)job, a + 1, i + 1, arms_then);
    } else if (arms_then >= 0) {
        size_t bytes;
        char *out = kept_pack(p->arms[a].name, i + 1, settings, job, r, &bytes);
        write_file_whole(path, out, bytes);
        free(out);
        rc = 1;
    }
    free_run(r);
    free(buf);
    return rc;
}

int rekey_study(const preset *p, const char *dir)
{
    char tpath[2048];
    snprintf(tpath, sizeof tpath, "%s/teacher.safetensors", dir);
    uint64_t tfnv = FNV_START, txxh;
    if (fnv_file(tpath, &tfnv) != 0 || xxh_file(tpath, &txxh) != 0)
        die("--rekey: cannot read the teacher %s: %s", tpath, strerror(errno));
    char thex[17], chex[17];
    hex64(thex, txxh);
    corpus_checksum(p, chex);
    const int meta = teacher_meta_0_4(p, dir);
    int converted = 0, failed = 0, current = 0, arms_then = 0, disagree = 0;
    /* the first pass: the arm count the runs kept before 0.4 agree on */
    for (int a = 0; a < p->n_arms; a++)
        for (int i = 1; i < p->seeds; i++) {
            char why[512];
            int job;
            rekey_run(p, dir, a, i, tfnv, "", -1, &job, why, sizeof why);
            if (job < 0)
                continue;
            const int n = job > a && (job - a) % i == 0 ? (job - a) / i : -1;
            if (arms_then == 0)
                arms_then = n;
            else if (n != arms_then)
                disagree = 1;
        }
    if (disagree) {
        say("--rekey: the runs kept before 0.4 do not agree on the preset's arm count then: "
            "only seed 1's are converted (a seed 1 run's job number is its arm's index, "
            "whatever the count)\n");
        arms_then = 0;
    } else if (arms_then > 0) {
        say("--rekey: the runs kept before 0.4 agree on a preset of %d arms then (their job "
            "numbers)\n", arms_then);
    }
    for (int a = 0; a < p->n_arms; a++) {
        char *settings = run_settings(p, &p->arms[a], chex, thex);
        for (int i = 0; i < p->seeds; i++) {
            char why[512];
            int job;
            const int rc = rekey_run(p, dir, a, i, tfnv, settings, arms_then, &job, why,
                                     sizeof why);
            if (rc > 0)
                converted++;
            if (rc < 0) {
                failed++;
                say("--rekey: runs/%s.seed%d.run: %s\n", p->arms[a].name, i + 1, why);
            }
            if (rc == 0) {
                char path[2048];
                run_path(path, sizeof path, dir, p->arms[a].name, i + 1);
                current += access(path, F_OK) == 0;
            }
        }
        free(settings);
    }
    /* the teacher's record: converted only when the runs vouch for the file
     * (0.4's run checksums cover its bytes) and 0.4's record for its settings */
    if (meta == 1 && converted > 0 && failed == 0) {
        write_teacher_meta(p, dir, thex);
        say("--rekey: teacher.json: verified (0.4's settings and the runs kept with the teacher), "
            "its checksum recorded\n");
    } else if (meta == 1) {
        say("--rekey: teacher.json of 0.4 left as it was: %s\n",
            converted == 0 ? "no run kept with it verified, so nothing vouches for the file"
                           : "some runs did not verify");
        failed += converted == 0;
    }
    say("--rekey: %d run%s verified and converted, %d not, %d already of this version\n", converted,
        converted == 1 ? "" : "s", failed, current);
    return failed;
}
