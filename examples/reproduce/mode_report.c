/* --report-only: the outputs written again from the runs kept (modes.h). */
#include "modes.h"

#include "files.h"
#include "preset_json.h"
#include "session.h"

/* The teacher the kept runs were made with must be in the folder, made with
 * these settings: else the study ends, saying why (why: runs_to_do's). */
static void teacher_holds(const study *s, const char *why)
{
    if (strcmp(s->teacher_hex, "none") != 0)
        return;
    if (strncmp(why, "none", 4) == 0)
        die("--report-only: %s holds no teacher to report with (nothing was trained or "
            "written)", s->dir);
    if (!strstr(why, "other settings"))
        die("--report-only: %s holds no teacher to report with: %s (nothing was trained or "
            "written)", s->dir, why);
    die("--report-only: the teacher in %s cannot report with these settings: %s. Nothing was "
        "trained or written (a run without --report-only trains the teacher again, and its "
        "runs)", s->dir, why);
}

/* How one arm that DIR/results.json reports (had seeds) would be lost, into
 * lost; nothing when the report holds it with as many seeds. */
static void arm_lost(const study *s, const preset *rp, const char *name, int had, char *lost,
                     size_t n)
{
    const preset *p = s->p;
    int now = -1, in_preset = -1;
    for (int a = 0; a < rp->n_arms; a++)
        if (strcmp(rp->arms[a].name, name) == 0)
            now = rp->seeds;
    for (int a = 0; a < p->n_arms; a++)
        if (strcmp(p->arms[a].name, name) == 0)
            in_preset = a;
    if (now >= had && now > 0)
        return;
    const size_t at = strlen(lost);
    const char *sep = at ? ", " : "", *es = had == 1 ? "" : "s";
    if (in_preset < 0) {
        snprintf(lost + at, n - at, "%s%s (%d seed%s reported; it is not in the preset now)",
                 sep, name, had, es);
    } else if (now > 0) {
        snprintf(lost + at, n - at, "%s%s (%d seeds reported, %d now)", sep, name, had, now);
    } else {
        int kept = 0;
        for (int i = 0; i < p->seeds; i++)
            kept += s->res[in_preset][i] != NULL;
        snprintf(lost + at, n - at, "%s%s (%d seed%s reported; %d of %d kept with these "
                 "settings)", sep, name, had, es, kept, p->seeds);
    }
}

/* --report-only never replaces an output with less: every arm DIR/results.json
 * reports, with its seed count, must be reported again (rp, from the runs
 * kept with these settings), and a report of no arm at all replaces none of
 * the study's files. Else the study ends, naming the arms and why, with the
 * files as they were. */
static void report_holds(const study *s, const preset *rp, const char *left_out)
{
    char path[1200], lost[4096];
    lost[0] = 0;
    snprintf(path, sizeof path, "%s/results.json", s->dir);
    char *text = NULL;
    size_t len;
    json_object *prev = NULL;
    if (read_regular(path, (uint64_t)1 << 30, &text, &len) == 0) {
        prev = json_tokener_parse(text);
        free(text);
    } else if (errno != ENOENT) {
        die("--report-only: cannot read %s: %s (nothing was written)", path, strerror(errno));
    }
    json_object *arms = member(prev, "arms");
    if (arms && json_object_is_type(arms, json_type_object)) {
        json_object_object_foreach(arms, name, runs)
        {
            const int had = json_object_is_type(runs, json_type_array)
                                ? (int)json_object_array_length(runs)
                                : 0;
            arm_lost(s, rp, name, had, lost, sizeof lost);
        }
    }
    json_object_put(prev);
    if (lost[0])
        die("--report-only: the report would hold less than %s does: %s.%s%s%s The runs kept in "
            "%s/runs/ were made with other settings, or are missing or damaged (each is named "
            "above), or do not agree with each other; report.md, results.json and curves.csv "
            "are left as they were. A run without --report-only runs them again",
            path, lost, left_out[0] ? " Left out: " : "", left_out, left_out[0] ? "." : "",
            s->dir);
    if (rp->n_arms == 0)
        die("--report-only: no arm has every seed kept in %s/runs/ with these settings (each "
            "run is named above): nothing to report, and nothing was written",
            s->dir);
}

int mode_report(const options *o, preset *p, const char *dir)
{
    /* it runs nothing: a kept run it cannot use is "not used" */
    for (int a = 0; a < p->n_arms; a++)
        p->arms[a].selected = 0;
    session x;
    char why[1300];
    session_open(&x, o, p, dir, 0, why, sizeof why);
    teacher_holds(&x.s, why);
    {
        preset rp;
        study rs;
        char missing[2048];
        report_view(&x.s, &rp, &rs, missing, sizeof missing);
        report_holds(&x.s, &rp, missing);
    }
    session_plan(&x, 1);
    const double t0 = ex_now();
    session_teacher(&x, 1);
    /* against the teacher as it now is (the same, named above) */
    runs_to_do(&x, 0, 0, 1, NULL, 0);
    check_outputs(&x.s);
    x.w.teacher_s = ex_now() - t0;
    session_count_kept(&x);
    x.w.wall = ex_now() - t0;
    session_write(&x);
    session_close(&x);
    return 0;
}
