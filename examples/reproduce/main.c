/* The reproduction's program: its options, and the mode they ask for.
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
 * installed. Each mode is a file of its own (modes.h). */
#include "study.h"

#include <getopt.h>

#include "files.h"
#include "jobs.h"
#include "modes.h"
#include "plan.h"
#include "preset.h"
#include "probe.h"
#include "rekey.h"

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

/* --NAME S: a number of seconds from lo to 86400 into *v; 0, or 2 when it is
 * not (said, with more: what lo means). */
static int parse_seconds(const char *name, const char *arg, double lo, const char *more,
                         double *v)
{
    char *end;
    errno = 0;
    *v = strtod(arg, &end);
    if (errno || end == arg || *end || !(*v >= lo && *v <= 86400)) {
        fprintf(stderr, PROG ": --%s: '%s' is not a number of seconds from 0 to 86400%s\n", name,
                arg, more);
        return 2;
    }
    return 0;
}

/* Parse argv into o: 0, or the exit status to finish with (usage, --help). */
static int parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof(*o));
    o->progress_every = NAN; /* not given: the process's default */
    o->checkpoint_every = 300;
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
        case 'g':
            if (parse_seconds("progress", optarg, 0, "", &o->progress_every))
                return 2;
            break;
        case 'P': o->probe_only = 1; break;
        case 'T': o->teacher_only = 1; break;
        case 'E': o->estimate_only = 1; break;
        case 'C': o->check_only = 1; break;
        case 'A': o->only_arms = optarg; break;
        case 'Q': o->profile = 1; break;
        case 'k':
            if (parse_seconds("checkpoint-every", optarg, -1, " (or -1: never)",
                              &o->checkpoint_every))
                return 2;
            break;
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


/* The options that cannot go together, said before anything is read. */
static void check_options(const options *o)
{
    static const char *const names[] = {"--check",  "--estimate", "--teacher-only",
                                        "--probe",  "--rekey",    "--report-only"};
    const int given[] = {o->check_only, o->estimate_only, o->teacher_only,
                         o->probe_only, o->rekey,         o->report_only};
    int first = -1;
    for (int k = 0; k < (int)(sizeof given / sizeof given[0]); k++) {
        if (given[k] && first >= 0)
            die("%s and %s are two modes: give one", names[first], names[k]);
        if (given[k])
            first = k;
    }
    if (o->save_students && first >= 0)
        die("--save-students saves the models of runs that run: not with --report-only, "
            "--estimate, --check, --teacher-only, --probe or --rekey");
    if (o->report_only && (o->retrain || o->fresh))
        die("--report-only trains nothing: it cannot be given with --retrain-teacher or "
            "--fresh");
    /* rank 0 got none of these (it let this rank through): the ranks' options differ */
    if (o->report_only && proc.n_ranks > 1)
        die("--report-only runs in one process, not over MPI ranks");
    if (proc.rank > 0 && first >= 0 && first <= 2)
        die("rank %d was given %s, but rank 0 was not: every rank must be given the same options",
            proc.rank, names[first]);
}

/* The output folder: made and locked (held to the end of the process: one
 * study per folder at a time) unless only estimating, which changes nothing
 * on disk. */
static void open_study_dir(const options *o, const preset *p, char *dir, size_t n)
{
    if ((size_t)snprintf(dir, n, "%s", o->out ? o->out : "") >= n)
        die("--out: the path is longer than %zu bytes", n - 1);
    if (!o->out)
        snprintf(dir, n, "results/%s", p->name); /* p->name follows the name rule */
    proc.study_dir = dir;
    if (proc.rank != 0 || o->estimate_only)
        return;
    char failed[1100];
    if (make_dirs(dir, failed, sizeof failed) != 0)
        die("cannot create %s: %s", failed, strerror(errno));
    lock_study_dir(dir);
}

/* The mode that works in the study's folder dir. */
static int run_mode(const options *o, preset *p, int jobs, const char *dir, uint64_t setup_sum,
                    uint64_t teacher_sum)
{
    if (o->estimate_only)
        return mode_estimate(o, p, jobs, dir);
    if (o->teacher_only)
        return mode_teacher(o, p, jobs, dir);
    if (o->report_only)
        return mode_report(o, p, dir);
    if (o->rekey) {
        if (proc.n_ranks > 1)
            die("--rekey runs in one process, not over MPI ranks");
        return rekey_study(p, dir) ? 1 : 0;
    }
    if (o->probe_only) {
        if (proc.n_ranks > 1)
            die("--probe runs in one process (--jobs), not over MPI ranks");
        run_probes(p, dir, jobs);
        return 0;
    }
    return mode_study(o, p, jobs, dir, setup_sum, teacher_sum);
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
    check_options(&o);
    /* what the messages and the runs read of the options (study.h's process) */
    if (!isnan(o.progress_every))
        proc.progress_every = o.progress_every;
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
            catch_interrupts();
            status = run_mode(&o, &p, jobs, dir, setup_sum, teacher_sum);
        }
    }
    json_object_put(p.json);
    return finish(status);
}
