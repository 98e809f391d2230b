/* The reproduction's program: its options, and the study from teacher to report.
 *
 * Reproduce "Rethinking Normalization Placement for LLMs: Post-Norm under
 * Curriculum Depth Growing" (arXiv 2608.13156) end to end: train a teacher,
 * distil it into 9-layer students under every arm of the paper with paired
 * seeds, and write the tables, curves and diagnostics.
 *
 *   reproduce --preset examples/reproduce/presets/quick.json [--out DIR]
 *   reproduce --preset quick            (a shipped preset by name)
 *
 * A preset is a JSON file (copy one and edit it). Everything the run measures
 * lands in DIR: results.json, curves.csv, report.md, and plots when gnuplot is
 * installed. */
#include "study.h"

#include <fcntl.h>
#include <getopt.h>
#include <sys/file.h>
#include <sys/stat.h>
#ifdef LATTICE_HAVE_MPI
#include <mpi.h>
#endif

#include "preset.h"
#include "probe.h"
#include "runs.h"
#include "store.h"
#include "teacher.h"
#include "logits_cache.h"
#include "resume.h"
#include "plot.h"
#include "report.h"
#include "results.h"
#include "plan.h"
#include "jobs.h"
#include "files.h"
#include "rekey.h"

/* ---- main --------------------------------------------------------------------------------- */

/* What to run: load the kept runs that match (against the cached teacher's
 * checksum; none when the teacher will be trained again), and list the
 * selected arms' other jobs, seeds outermost. With fresh, the selected arms'
 * kept runs are not loaded: they run again, and replace them as they end.
 * Why there is no cached teacher to use goes to why (when not NULL). */
static void runs_to_do(study *s, const char *backend, int retrain, int fresh, int quiet,
                       char *why_teacher, size_t why_size)
{
    const preset *p = s->p;
    for (int a = 0; a < p->n_arms; a++)
        for (int i = 0; i < p->seeds; i++) {
            free_run(s->res[a][i]);
            s->res[a][i] = NULL;
        }
    char why[1300];
    why[0] = 0;
    const int have_teacher = !retrain && cached_teacher(p, s->dir, s->corpus_hex, backend,
                                                        s->teacher_hex, why, sizeof why);
    if (!have_teacher)
        snprintf(s->teacher_hex, sizeof s->teacher_hex, "none");
    if (why_teacher)
        snprintf(why_teacher, why_size, "%s", why);
    for (int a = 0; a < p->n_arms; a++) {
        free(s->settings[a]);
        s->settings[a] = run_settings(p, &p->arms[a], s->corpus_hex, s->teacher_hex);
    }
    if (have_teacher)
        load_kept_runs(s, quiet, fresh);
    s->n_todo = 0;
    for (int i = 0; i < p->seeds; i++)
        for (int a = 0; a < p->n_arms; a++)
            if (p->arms[a].selected && !s->res[a][i])
                s->todo[s->n_todo++] = i * p->n_arms + a;
}

/* Before any training: every file the study will write can be written (a
 * folder, FIFO or link in the way, or a folder that cannot be written, is
 * found now, not after hours of training). */
static void check_outputs(const study *s)
{
    static const char *const outs[] = {"report.md",    "results.json",   "curves.csv",
                                       "bands.csv",    "curves.gp",      "teacher.safetensors",
                                       "teacher.json", "curves_steps.png", "curves_steps.svg",
                                       "curves_active_layer_tokens.png",
                                       "curves_active_layer_tokens.svg"};
    for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++)
        if (check_writable(s->dir, outs[k]) != 0)
            die("cannot write %s/%s: %s (nothing was run)", s->dir, outs[k],
                errno == EINVAL ? "it is not a regular file" : strerror(errno));
    char runs[2100];
    snprintf(runs, sizeof runs, "%s/runs", s->dir);
    if (s->n_todo == 0)
        return;
    if (make_dirs(runs, NULL, 0) != 0)
        die("cannot create %s: %s (nothing was run)", runs, strerror(errno));
    for (int k = 0; k < s->n_todo; k++) {
        const int job = s->todo[k];
        char name[128];
        snprintf(name, sizeof name, "%s.seed%d.run", s->p->arms[job % s->p->n_arms].name,
                 job / s->p->n_arms + 1);
        if (check_writable(runs, name) != 0)
            die("cannot write %s/%s: %s (nothing was run)", runs, name,
                errno == EINVAL ? "it is not a regular file" : strerror(errno));
        /* --save-students: the model each run saves once it has trained */
        snprintf(name, sizeof name, "%s.seed%d.safetensors",
                 s->p->arms[job % s->p->n_arms].name, job / s->p->n_arms + 1);
        if (s->p->students[0] && check_writable(s->p->students, name) != 0)
            die("--save-students: cannot write %s/%s: %s (nothing was run)", s->p->students,
                name, errno == EINVAL ? "it is not a regular file" : strerror(errno));
    }
}

/* What the study holds: every run's result and every arm's settings. */
static void study_free(study *s)
{
    for (int a = 0; a < MAX_ARMS; a++) {
        for (int i = 0; i < MAX_SEEDS; i++) {
            free_run(s->res[a][i]);
            s->res[a][i] = NULL;
        }
        free(s->settings[a]);
        s->settings[a] = NULL;
    }
}

/* The study as reported: the arms whose every seed has a result (in the
 * preset's order); the others named in missing ("" when none). */
static void report_view(const study *s, preset *rp, study *rs, char *missing, size_t n)
{
    const preset *p = s->p;
    *rp = *p;
    memset(rs, 0, sizeof(*rs));
    rs->p = rp;
    rs->teacher = s->teacher;
    rp->n_arms = 0;
    missing[0] = 0;
    for (int a = 0; a < p->n_arms; a++) {
        int have = 0;
        for (int i = 0; i < p->seeds; i++)
            have += s->res[a][i] != NULL;
        if (have == p->seeds) {
            for (int i = 0; i < p->seeds; i++)
                rs->res[rp->n_arms][i] = s->res[a][i];
            rp->arms[rp->n_arms++] = p->arms[a];
        } else if (have > 0) {
            const size_t at = strlen(missing);
            snprintf(missing + at, n - at, "%s%s (%d of %d seeds)", at ? ", " : "",
                     p->arms[a].name, have, p->seeds);
        }
    }
}

/* --report-only never replaces an output with less: every arm DIR/results.json
 * reports, with its seed count, must be reported again (rp, from the runs
 * kept with these settings), and a report of no arm at all replaces none of
 * the study's files. Else the study ends, naming the arms and why, with the
 * files as they were. */
static void report_only_holds(const study *s, const preset *rp)
{
    const preset *p = s->p;
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
            int now = -1, in_preset = -1;
            for (int a = 0; a < rp->n_arms; a++)
                if (strcmp(rp->arms[a].name, name) == 0)
                    now = rp->seeds;
            for (int a = 0; a < p->n_arms; a++)
                if (strcmp(p->arms[a].name, name) == 0)
                    in_preset = a;
            if (now >= had && now > 0)
                continue;
            const size_t at = strlen(lost);
            if (in_preset < 0) {
                snprintf(lost + at, sizeof lost - at, "%s%s (%d seed%s reported; it is not in "
                         "the preset now)", at ? ", " : "", name, had, had == 1 ? "" : "s");
            } else if (now > 0) {
                snprintf(lost + at, sizeof lost - at, "%s%s (%d seeds reported, %d now)",
                         at ? ", " : "", name, had, now);
            } else {
                int kept = 0;
                for (int i = 0; i < p->seeds; i++)
                    kept += s->res[in_preset][i] != NULL;
                snprintf(lost + at, sizeof lost - at, "%s%s (%d seed%s reported; %d of %d "
                         "kept with these settings)", at ? ", " : "", name, had,
                         had == 1 ? "" : "s", kept, p->seeds);
            }
        }
    }
    json_object_put(prev);
    if (lost[0])
        die("--report-only: the report would hold less than %s does: %s. The runs kept in %s/"
            "runs/ were made with other settings, or are missing or damaged (each is named "
            "above); report.md, results.json and curves.csv are left as they were. A run "
            "without --report-only runs them again",
            path, lost, s->dir);
    if (rp->n_arms == 0)
        die("--report-only: no arm has every seed kept in %s/runs/ with these settings (each "
            "run is named above): nothing to report, and nothing was written",
            s->dir);
}

/* --estimate takes no lock (it writes nothing), but says when another study
 * holds the folder: its lock is looked at, never created or written. */
static void check_study_dir_free(const char *dir)
{
    char path[2100];
    snprintf(path, sizeof path, "%s/.lock", dir);
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return; /* no lock file (or no folder): no study holds it */
    if (flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        char holder[32] = "";
        const ssize_t k = pread(fd, holder, sizeof holder - 1, 0);
        holder[k > 0 ? k : 0] = 0;
        holder[strcspn(holder, "\n")] = 0;
        die("another study (pid %s) is using %s: wait for it to end, or give this one another "
            "--out", holder[0] ? holder : "unknown", dir);
    }
    close(fd);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " --preset FILE|NAME [options]\n"
            "Reproduce the joint-vs-curriculum study of arXiv 2608.13156 with a preset\n"
            "(examples/reproduce/presets/*.json; see presets/README.md for every key, and\n"
            "its \"Designs\" for factors of your own). Studies are read together by\n"
            "examples/reproduce/cross.py --out DIR STUDY_DIR...\n\n"
            "  --preset FILE       the study: data, teacher, student, training, arms (required)\n"
            "  --preset NAME       a shipped preset by name (quick, small, regime, paper, ...):\n"
            "                      NAME.json in the presets folder (installed: share/lattice/\n"
            "                      presets beside bin/; a build's own program: the source\n"
            "                      tree's). A FILE has a '/' or ends in .json\n"
            "  --out DIR           where results go (default results/<preset name>): report.md,\n"
            "                      results.json, curves.csv (every step's training loss, and\n"
            "                      validation CE and boundary statistics at evaluations),\n"
            "                      bands.csv, plots\n"
            "  --fresh             run the selected arms' runs again although DIR/runs/ keeps\n"
            "                      them (each replaces its kept file when it ends; other arms'\n"
            "                      are kept). By default a run whose settings match is reused:\n"
            "                      a rerun with --arms or more --seeds adds to the earlier ones\n"
            "  --save-students     save the final model of every run that runs now as\n"
            "                      DIR/students/ARM.seedN.safetensors (the weights and their\n"
            "                      lattice.config: lattice_model_create_from_file, Python\n"
            "                      lattice.Model.from_file); kept runs were not saved: add\n"
            "                      --fresh to run them again\n"
            "  --report-only       write the report and its files from the runs kept in\n"
            "                      DIR/runs/ and the cached teacher, and train nothing (the\n"
            "                      arms missing a seed are named, not run)\n"
            "  --rekey             verify the runs and teacher kept by 0.4 or before against\n"
            "                      the preset (with 0.4's checksums) and convert them to this\n"
            "                      version's format, then stop; nothing is trained\n"
            "  --retrain-teacher   train the teacher again even when DIR holds one trained\n"
            "                      with the same teacher, student and data settings\n"
            "  --teacher-only      train (or load) the teacher, print its go/no-go boundary\n"
            "                      figures, and stop\n"
            "  --estimate          print the estimated wall time and stop\n"
            "  --probe             train the preset's probes (teacher recipes) side by side and\n"
            "                      print their go/no-go every probe_every steps (DIR/probe.md)\n"
            "  --check             validate the preset: print its arms and schedules, build\n"
            "                      every object the study builds (teacher, every arm's model,\n"
            "                      optimizer, loss, schedule, trainer) on the real shapes and\n"
            "                      data without training, check the memory, and stop\n"
            "  --progress S        off a terminal (a pipe, a log), or with runs side by side:\n"
            "                      a line per run every S seconds (step, loss, the last\n"
            "                      validation CE, the run's ETA); default 60, 0 for none. On a\n"
            "                      terminal one run at a time shows a live status line\n"
            "  --threads N         threads per run (default: the preset's, else 2)\n"
            "  --jobs N            runs side by side, in one process (default: the cores this\n"
            "                      process may use / threads per run, at least 1); the\n"
            "                      results are those of one run after another\n"
            "  --seeds N           paired seeds (default: the preset's, else 3)\n"
            "  --arms A,B,...      run only these of the preset's arms, in the preset's order\n"
            "  --checkpoint-every S  a running run leaves its checkpoint in DIR/runs/ every S\n"
            "                      seconds (default 300; -1 never), and a study run again in\n"
            "                      the folder resumes a run cut short from it, with the same\n"
            "                      result as if it had never stopped\n"
            "  --profile           after each run, and for all of them at the end, the shares\n"
            "                      of the wall time: the student's steps, the teacher's\n"
            "                      logits, evaluations, diagnostics, the final measures\n"
            "  --teacher-logits M  where the runs' teacher logits come from: file (default)\n"
            "                      computes every training row's once, into\n"
            "                      DIR/teacher_logits.bin (kept for the teacher, corpus,\n"
            "                      backend and threads), and every run reads them; step runs\n"
            "                      the teacher in every step (where the disk cannot hold the\n"
            "                      file, file does that too); verify reads the file and runs\n"
            "                      the teacher, and stops at the first logit that differs\n"
            "  -h, --help          this help\n");
}

/* The command line. */
typedef struct options {
    const char *preset_path, *out, *only_arms;
    int retrain, threads, seeds, jobs, fresh, save_students;
    /* the mode: at most one of these stops before the runs */
    int teacher_only, estimate_only, check_only, probe_only, rekey, report_only;
    logits_mode logits; /* --teacher-logits */
} options;

/* Parse argv into o: 0, or the exit status to finish with (usage, --help). */
static int parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof(*o));
    static const struct option opts[] = {{"preset", required_argument, 0, 'p'},
                                         {"out", required_argument, 0, 'o'},
                                         {"retrain-teacher", no_argument, 0, 'r'},
                                         {"fresh", no_argument, 0, 'F'},
                                         {"save-students", no_argument, 0, 'S'},
                                         {"rekey", no_argument, 0, 'K'},
                                         {"progress", required_argument, 0, 'g'},
                                         {"report-only", no_argument, 0, 'R'},
                                         {"probe", no_argument, 0, 'P'},
                                         {"teacher-only", no_argument, 0, 'T'},
                                         {"estimate", no_argument, 0, 'E'},
                                         {"check", no_argument, 0, 'C'},
                                         {"arms", required_argument, 0, 'A'},
                                         {"threads", required_argument, 0, 't'},
                                         {"jobs", required_argument, 0, 'j'},
                                         {"seeds", required_argument, 0, 's'},
                                         {"teacher-logits", required_argument, 0, 'L'},
                                         {"profile", no_argument, 0, 'Q'},
                                         {"checkpoint-every", required_argument, 0, 'k'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "p:o:rt:j:s:h", opts, NULL)) != -1;) {
        switch (c) {
        case 'p': o->preset_path = optarg; break;
        case 'o': o->out = optarg; break;
        case 'r': o->retrain = 1; break;
        case 'F': o->fresh = 1; break;
        case 'S': o->save_students = 1; break;
        case 'K': o->rekey = 1; break;
        case 'R': o->report_only = 1; break;
        case 'g': {
            char *end;
            errno = 0;
            const double v = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(v >= 0 && v <= 86400)) {
                fprintf(stderr, PROG ": --progress: '%s' is not a number of seconds from 0 to "
                                "86400\n", optarg);
                return 2;
            }
            proc.progress_every = v;
            break;
        }
        case 'P': o->probe_only = 1; break;
        case 'T': o->teacher_only = 1; break;
        case 'E': o->estimate_only = 1; break;
        case 'C': o->check_only = 1; break;
        case 'A': o->only_arms = optarg; break;
        case 'Q': proc.profile = 1; break;
        case 'k': {
            char *end;
            errno = 0;
            const double v = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(v >= -1 && v <= 86400)) {
                fprintf(stderr, PROG ": --checkpoint-every: '%s' is not a number of seconds from "
                                "0 to 86400 (or -1: never)\n", optarg);
                return 2;
            }
            proc.checkpoint_every = v;
            break;
        }
        case 'L':
            if (strcmp(optarg, "file") == 0)
                o->logits = LOGITS_CACHE;
            else if (strcmp(optarg, "step") == 0)
                o->logits = LOGITS_STEP;
            else if (strcmp(optarg, "verify") == 0)
                o->logits = LOGITS_VERIFY;
            else {
                fprintf(stderr, PROG ": --teacher-logits: '%s' is not file, step or verify\n",
                        optarg);
                return 2;
            }
            break;
        case 't':
            if (ex_parse_int("threads", optarg, 1, 256, &o->threads))
                return 2;
            break;
        case 'j':
            if (ex_parse_int("jobs", optarg, 1, MAX_JOBS, &o->jobs))
                return 2;
            break;
        case 's':
            if (ex_parse_int("seeds", optarg, 1, MAX_SEEDS, &o->seeds))
                return 2;
            break;
        case 'h': usage(stdout); return -1;
        default: usage(stderr); return 2;
        }
    }
    if (!o->preset_path || optind != argc) {
        usage(stderr);
        return 2;
    }
    return 0;
}

/* --check: the preset as understood, every object built on the real shapes. */
static int mode_check(preset *p, int jobs)
{
    print_preset(p);
    check_preset_files(p);
    /* an arm that reads past the end of the training text sees it again,
     * reshuffled, where it may be read as fresh data */
    const int64_t pass = batches_per_pass(p);
    for (int a = 0; a < p->n_arms; a++) {
        const int64_t most = longest_read(p, &p->arms[a]);
        if (p->arms[a].selected && most > pass)
            printf("warning: arm %s reads %lld batches without a rewind, %.2f passes over the "
                   "training text (%lld batches of %d x %d): beyond the first pass its data "
                   "repeats\n", p->arms[a].name, (long long)most, (double)most / (double)pass,
                   (long long)pass, p->batch, p->seq_len);
    }
    if (!fits_here(p, &jobs)) {
        printf("the preset's keys are valid, but its study does not fit in this machine's "
               "memory: its objects were not built here (--check on a machine that holds "
               "it builds them)\n");
    } else {
        check_study(p);
        printf("every object the study builds was built on the real shapes and data: the "
               "preset is valid\n");
    }
    return 0;
}

/* The output folder: made (and locked) unless only estimating. */
static void open_study_dir(const options *o, const preset *p, char *dir, size_t n)
{
    if ((size_t)snprintf(dir, n, "%s", o->out ? o->out : "") >= n)
        die("--out: the path is longer than %zu bytes", n - 1);
    if (!o->out)
        snprintf(dir, n, "results/%s", p->name); /* p->name follows the name rule */
    char failed[1100];
    /* --estimate changes nothing on disk: no folder made, no lock taken */
    if (proc.rank == 0 && !o->estimate_only && make_dirs(dir, failed, sizeof failed) != 0)
        die("cannot create %s: %s", failed, strerror(errno));
    /* one study per folder at a time: held to the end of the process */
    if (proc.rank == 0 && !o->estimate_only)
        lock_study_dir(dir);
    if (proc.rank == 0 && o->estimate_only)
        check_study_dir_free(dir);
    proc.study_dir = dir;
}

/* --save-students: the folder the runs save their models in. */
static void open_students_dir(const options *o, preset *p, const char *dir)
{
    if (!o->save_students)
        return;
    if (o->report_only || o->estimate_only || o->check_only || o->teacher_only ||
        o->probe_only || o->rekey)
        die("--save-students saves the models of runs that run: not with --report-only, "
            "--estimate, --check, --teacher-only, --probe or --rekey");
    char failed[1100];
    snprintf(p->students, sizeof p->students, "%s/students", dir);
    if (proc.rank == 0 && make_dirs(p->students, failed, sizeof failed) != 0)
        die("cannot create %s: %s", failed, strerror(errno));
}

/* Rank 0's first look at the folder (the runs kept, the teacher), before the
 * plan; --report-only stops here when it cannot report. */
static void first_look(const options *o, study *s, const char *dir, lattice_backend *be)
{
    preset *p = (preset *)s->p;
    /* --report-only runs nothing: a kept run it cannot use is "not used" */
    if (o->report_only)
        for (int a = 0; a < p->n_arms; a++)
            p->arms[a].selected = 0;
    if (proc.rank != 0)
        return;
    s->dir = dir;
    corpus_checksum(p, s->corpus_hex);
    if (o->report_only && (o->retrain || o->fresh))
        die("--report-only trains nothing: it cannot be given with --retrain-teacher or "
            "--fresh");
    char why[1300];
    runs_to_do(s, lattice_backend_get_name(be), o->retrain, o->fresh, !o->report_only, why,
               sizeof why);
    if (!o->report_only)
        return;
    if (strcmp(s->teacher_hex, "none") == 0) {
        if (strncmp(why, "none", 4) == 0)
            die("--report-only: %s holds no teacher to report with (nothing was trained "
                "or written)", dir);
        if (!strstr(why, "other settings"))
            die("--report-only: %s holds no teacher to report with: %s (nothing was "
                "trained or written)", dir, why);
        die("--report-only: the teacher in %s cannot report with these settings: %s. "
            "Nothing was trained or written (a run without --report-only trains the "
            "teacher again, and its runs)", dir, why);
    }
    s->n_todo = 0;
    preset rp;
    study rs;
    char missing[2048];
    report_view(s, &rp, &rs, missing, sizeof missing);
    report_only_holds(s, &rp);
}

/* "OpenBLAS 0.3.21, Haswell kernels": what the backend runs. */
static void kernels_words(lattice_backend *be, char *out, size_t n, char *reason, size_t rn)
{
    lattice_backend_info bi;
    bi.size = sizeof bi;
    check(lattice_backend_get_info(be, &bi), "backend info", NULL);
    snprintf(out, n, "%s, %s kernels%s", bi.library, bi.kernels,
             bi.optimised ? "" : " (NOT optimised for this CPU)");
    snprintf(reason, rn, "%s", bi.reason);
}

/* The steps of every run to do. */
static int64_t todo_steps(const study *s)
{
    int64_t steps = 0;
    for (int k = 0; k < s->n_todo; k++) {
        lattice_schedule_phase ph[MAX_PHASES];
        steps += phases_steps(ph, arm_phases(s->p, &s->p->arms[s->todo[k] % s->p->n_arms], ph));
    }
    return steps;
}

/* The teacher, on rank 0 trained or loaded, its go/no-go, and the runs to do
 * against it; on other ranks, rank 0's. */
static lattice_model *obtain_teacher(const options *o, study *s, lattice_backend *be,
                                     const char *dir, const char *tpath, uint64_t setup_sum,
                                     uint64_t teacher_sum)
{
    const preset *p = s->p;
    if (proc.rank != 0) {
        if (setup_checksum(p) != setup_sum)
            die("this rank's preset, options or corpus differ from rank 0's (%s, %s, %s): every "
                "rank must run the same study",
                o->preset_path, p->train, p->val);
        lattice_model *t = load_teacher(p, be, dir, teacher_sum);
        if (o->logits != LOGITS_STEP) { /* rank 0 made it before it let this rank through */
            char thex[17], chex[17];
            uint64_t h;
            if (xxh_file(tpath, &h) != 0)
                die("cannot read the teacher %s: %s", tpath, strerror(errno));
            hex64(thex, h);
            corpus_checksum(p, chex);
            study_logits = logits_cache_get(p, t, be, dir, thex, chex, 0, 0);
        }
        return t;
    }
    /* on the runs' thread count, whatever the plan: the same teacher, so the same
     * numbers, however many runs go side by side */
    if (!o->teacher_only)
        check_outputs(s);
    lattice_model *teacher = get_teacher(p, be, dir, o->retrain, s->corpus_hex, s->teacher_hex);
    teacher_gonogo(p, teacher, &s->teacher);
    if (p->require_go && !o->teacher_only && !(s->teacher.max_ratio >= 3))
        die("the teacher is NO-GO (largest boundary/regular RMS ratio %.2f, below 3): the "
            "students would test a mechanism that is not there; stopping before any runs "
            "(require_go; probe teacher recipes with --probe)",
            s->teacher.max_ratio);
    /* against the teacher as it now is (--report-only: the same, named above) */
    runs_to_do(s, lattice_backend_get_name(be), 0, o->fresh, o->report_only, NULL, 0);
    if (o->report_only)
        s->n_todo = 0;
    if (!o->teacher_only)
        check_outputs(s);
    /* the teacher's logits for every training row, once for all the runs (on the
     * runs' backend and threads: the kernels a run's own forward would use) */
    study_logits_mode = o->logits;
    if (s->n_todo > 0 && !o->teacher_only && o->logits != LOGITS_STEP) {
        study_logits = logits_cache_get(p, teacher, be, dir, s->teacher_hex, s->corpus_hex,
                                        1, o->logits == LOGITS_VERIFY ? INT64_MAX : todo_steps(s));
    }
#ifdef LATTICE_HAVE_MPI
    if (proc.n_ranks > 1 && !o->teacher_only) {
        uint64_t sum = FNV_START;
        if (fnv_file(tpath, &sum) != 0)
            die("cannot read back %s: %s", tpath, strerror(errno));
        open_gate(GATE_GO, setup_checksum(p), sum);
    }
#endif
    return teacher;
}

/* What a run's outputs say of how it ran. */
typedef struct run_words {
    double wall, teacher_s;
    int n_runs, n_kept, jobs;
    int64_t logits_file, logits_computed; /* this process's runs' teacher batches */
    char kernels[512], plan[128];
} run_words;

/* curves.csv, bands.csv, results.json, the plots and report.md (written
 * whole), then the report on stdout. */
static void write_outputs(const study *s, const char *dir, lattice_backend *be,
                          const run_words *w)
{
    const preset *p = s->p;
    /* the report: every arm with all its seeds, run now or kept */
    preset rp;
    study rs;
    char missing[2048];
    report_view(s, &rp, &rs, missing, sizeof missing);
    char path[1200];
    /* the data and plots first: report.md links them */
    snprintf(path, sizeof path, "%s/curves.csv", dir);
    write_csv(path, &rs);
    snprintf(path, sizeof path, "%s/bands.csv", dir);
    write_bands(path, &rs);
    snprintf(path, sizeof path, "%s/results.json", dir);
    write_json(path, &rs, w->wall);
    plot(dir, &rs);
    snprintf(path, sizeof path, "%s/report.md", dir);
    outfile rep;
    out_open(&rep, path);
    FILE *f = rep.f;
    report(f, &rs);
    if (w->n_runs > 0)
        fprintf(f, "\nWall time %.0f s (teacher %.0f s), lattice %s, backend %s (%s) with %d thread%s%s.\n",
                w->wall, w->teacher_s, lattice_version_string(), lattice_backend_get_name(be),
                w->kernels, p->threads, p->threads == 1 ? "" : "s",
                proc.n_ranks > 1 ? " on each rank" : w->jobs > 1 ? " per run" : "");
    else
        fprintf(f, "\nNothing ran now: every run reported was kept from an earlier run in this "
                   "folder (each run's own seconds and tokens/s are in results.json). Report "
                   "written by lattice %s, backend %s (%s).\n",
                lattice_version_string(), lattice_backend_get_name(be), w->kernels);
    if (w->jobs > 1)
        fprintf(f, "The runs went %d side by side (%s).\n", w->jobs, w->plan);
    if (w->logits_file > 0)
        fprintf(f, "The teacher's logits came from teacher_logits.bin, computed once for every "
                   "run (%lld batches read, %lld computed by the teacher).\n",
                (long long)w->logits_file, (long long)w->logits_computed);
    if (proc.n_ranks > 1)
        fprintf(f, "The runs were spread over %d MPI ranks.\n", proc.n_ranks);
    if (w->n_kept > 0)
        fprintf(f, "%d of the runs were kept from earlier runs in this folder (runs/; same "
                   "settings, corpus and teacher); %d ran now.\n",
                w->n_kept, w->n_runs);
    if (missing[0])
        fprintf(f, "Not reported (not every seed has run): %s.\n", missing);
    report_files(f, dir);
    out_commit(&rep);
    report_summary(stdout, &rs, dir);
    if (missing[0])
        printf("\nNot reported (not every seed has run): %s.\n", missing);
    printf("\nWall time %.0f s (teacher %.0f s). Results in %s/.\n", w->wall, w->teacher_s, dir);
}

/* Every run to do: over the ranks, side by side in jobs, or one after another. */
static void run_all(study *s, lattice_backend *be, lattice_model *teacher, const char *tpath,
                    int jobs, run_words *w)
{
    const preset *p = s->p;
    w->n_runs = s->n_todo;
    for (int a = 0; a < p->n_arms; a++)
        for (int i = 0; i < p->seeds; i++)
            w->n_kept += s->res[a][i] != NULL;
    const int64_t all_steps = todo_steps(s);
    if (proc.rank == 0 && w->n_kept > 0)
        say("%d run%s kept in %s/runs/ reused; %d to run\n", w->n_kept,
            w->n_kept == 1 ? "" : "s", s->dir, w->n_runs);
    progress pr = {0};
    pr.tty = proc.n_ranks == 1 && isatty(2); /* several ranks' progress lines would overwrite each other */
    pr.start = ex_now();
    pr.steps_total_all = all_steps;
    pr.n_runs = w->n_runs;
#ifdef LATTICE_HAVE_MPI
    if (proc.rank > 0) {
        work_for_rank0(p, be, teacher, &pr);
        proc.owes_rank0 = 0;
        return;
    }
    if (proc.n_ranks > 1)
        run_study_ranks(s, be, teacher, &pr);
#endif
    if (proc.n_ranks == 1 && jobs > 1)
        run_study_jobs(s, tpath, jobs, &pr);
    /* seeds outermost: an interrupted run still has complete pairs */
    for (int k = 0; k < s->n_todo && proc.n_ranks == 1 && jobs == 1; k++)
        keep_run(s, s->todo[k], run_job(p, be, teacher, s->todo[k], k + 1, &pr));
    if (pr.tty)
        fputs("\r\033[K", stderr);
    if (proc.profile)
        say_profile_sum();
    logits_counts(&w->logits_file, &w->logits_computed);
    if (study_logits && proc.rank == 0)
        say("the teacher's logits: %lld batches read from the file, %lld computed by the "
            "teacher\n", (long long)w->logits_file, (long long)w->logits_computed);
}

/* The study (and --estimate, --teacher-only, --report-only, which stop on the
 * way): the first look at the folder, the plan, the teacher, the runs, the
 * outputs. The exit status. */
static int mode_study(const options *o, preset *p, int jobs, const char *dir,
                      uint64_t setup_sum, uint64_t teacher_sum)
{
    char tpath[1200];
    snprintf(tpath, sizeof tpath, "%s/teacher.safetensors", dir);
    study s;
    memset(&s, 0, sizeof s);
    s.p = p;
    /* the teacher's settings name the backend: made before the first look */
    lattice_backend *be = study_backend(p, p->threads);
    first_look(o, &s, dir, be);
    if (jobs > s.n_todo)
        jobs = s.n_todo > 0 ? s.n_todo : 1;
    run_words w;
    memset(&w, 0, sizeof w);
    w.jobs = jobs;
    char reason[sizeof ((lattice_backend_info *)0)->reason];
    kernels_words(be, w.kernels, sizeof w.kernels, reason, sizeof reason);
    snprintf(w.plan, sizeof w.plan, "%d job%s x %d thread%s", jobs, jobs > 1 ? "s" : "",
             p->threads, p->threads > 1 ? "s" : "");
    if (proc.rank == 0)
        say("lattice %s, backend %s (%s), %d thread%s%s, plan %s%s%s\n", lattice_version_string(),
            lattice_backend_get_name(be), w.kernels, p->threads, p->threads == 1 ? "" : "s",
            proc.n_ranks > 1 ? " per rank" : " per run", w.plan, reason[0] ? "; " : "", reason);
    if (proc.rank == 0 && !o->teacher_only) {
        const int cached = strcmp(s.teacher_hex, "none") != 0;
        const int64_t steps = todo_steps(&s);
        const logits_plan lp =
            o->logits == LOGITS_STEP ? LOGITS_IN_STEPS
            : cached && logits_file_ready(p, be, dir, s.teacher_hex, s.corpus_hex)
                ? LOGITS_FILE_MADE
            : o->logits == LOGITS_VERIFY || logits_file_worth(p, steps) ? LOGITS_FILE_TO_MAKE
                                                                        : LOGITS_IN_STEPS;
        estimate_wall(p, be, cached, lp, jobs, s.todo, s.n_todo);
    }
    lattice_model *teacher = NULL;
    int status = 0;
    if (!o->estimate_only) {
        const double t0 = ex_now();
        teacher = obtain_teacher(o, &s, be, dir, tpath, setup_sum, teacher_sum);
        w.teacher_s = ex_now() - t0;
        if (!o->teacher_only) {
            resume_study(&s, o->fresh);
            run_all(&s, be, teacher, tpath, jobs, &w);
            resume_study(NULL, 0);
            w.wall = ex_now() - t0;
#ifdef LATTICE_HAVE_MPI
            /* rank 0's word that the files are written: waiting for it here, and not
             * in MPI_Finalize, costs no CPU while rank 0 finishes its runs */
            if (proc.rank > 0)
                status = await_gate(&setup_sum, &teacher_sum);
#endif
            if (proc.rank == 0)
                write_outputs(&s, dir, be, &w);
        }
    }
    study_free(&s);
    logits_cache_close(study_logits);
    study_logits = NULL;
    lattice_model_destroy(teacher);
    lattice_backend_destroy(be);
    return status;
}

int main(int argc, char **argv)
{
    ex_prefer_passive_openmp(argv);
    ranks_init(&argc, &argv);
    /* The other ranks wait while rank 0 checks the options and the preset and
     * trains the teacher: a flag that stops there (--check, --estimate,
     * --teacher-only, a usage error) stops them too, quietly. */
    uint64_t setup_sum = 0, teacher_sum = 0;
#ifdef LATTICE_HAVE_MPI
    if (proc.rank > 0) {
        const int gate = await_gate(&setup_sum, &teacher_sum);
        if (gate != GATE_GO)
            return finish(gate);
        proc.owes_rank0 = 1;
    }
#endif
    options o;
    const int bad = parse_options(argc, argv, &o);
    if (bad)
        return finish(bad < 0 ? 0 : bad);
    /* rank 0 got none of these (it let this rank through): the ranks' options differ */
    if (o.report_only && proc.n_ranks > 1)
        die("--report-only runs in one process, not over MPI ranks");
    if (proc.rank > 0 && (o.check_only || o.estimate_only || o.teacher_only))
        die("rank %d was given %s, but rank 0 was not: every rank must be given the same options",
            proc.rank, o.check_only ? "--check" : o.estimate_only ? "--estimate" : "--teacher-only");
    char preset_buf[4096];
    preset_file(preset_buf, sizeof preset_buf, o.preset_path);
    o.preset_path = preset_buf;
    preset p;
    load_preset(&p, o.preset_path);
    if (o.threads > 0)
        p.threads = o.threads;
    if (o.seeds > 0)
        p.seeds = o.seeds > MAX_SEEDS ? MAX_SEEDS : o.seeds;
    if (o.only_arms)
        select_arms(&p, o.only_arms);
    int jobs = o.jobs;
    if (jobs > 1 && proc.n_ranks > 1)
        die("--jobs %d with %d MPI ranks: spread the runs over more ranks instead (each rank "
            "runs one at a time)", jobs, proc.n_ranks);
    if (jobs == 0)
        jobs = proc.n_ranks > 1 ? 1 : default_jobs(p.threads);
    int status = 0;
    if (o.check_only) {
        status = mode_check(&p, jobs);
    } else {
        check_preset_files(&p);
        if (proc.rank == 0 && !fits_here(&p, &jobs)) {
            say("preset '%s' does not fit on this machine; nothing was run\n", p.name);
            status = 1;
        } else {
            char dir[1024];
            open_study_dir(&o, &p, dir, sizeof dir);
            open_students_dir(&o, &p, dir);
            catch_interrupts();
            if (o.rekey) {
                if (proc.n_ranks > 1)
                    die("--rekey runs in one process, not over MPI ranks");
                status = rekey_study(&p, dir) ? 1 : 0;
            } else if (o.probe_only) {
                if (proc.n_ranks > 1)
                    die("--probe runs in one process (--jobs), not over MPI ranks");
                run_probes(&p, dir, jobs);
            } else {
                status = mode_study(&o, &p, jobs, dir, setup_sum, teacher_sum);
            }
        }
    }
    json_object_put(p.json);
    return finish(status);
}
