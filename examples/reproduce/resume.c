/* A run cut short resumes from its last checkpoint (resume.h). */
#include "resume.h"

#include <dirent.h>
#include <unistd.h>

#include "files.h"
#include "runs.h"
#include "store.h"

/* DIR/runs/ARM.seedN.part, and the checkpoint of step k: ARM.seedN.stepK.ckpt */
static void part_path(const char *dir, const char *arm, int seed, char *part, size_t n)
{
    if ((size_t)snprintf(part, n, "%s/runs/%s.seed%d.part", dir, arm, seed) >= n)
        die("the path of a run's checkpoint is too long (output folder %s)", dir);
}

static void ckpt_path(const char *dir, const char *arm, int seed, int64_t step, char *ckpt,
                      size_t n)
{
    if ((size_t)snprintf(ckpt, n, "%s/runs/%s.seed%d.step%lld.ckpt", dir, arm, seed,
                         (long long)step) >= n)
        die("the path of a run's checkpoint is too long (output folder %s)", dir);
}

/* Every checkpoint of this run in DIR/runs/ but the one of step keep (-1: all),
 * and what a write cut short left of its checkpoints and record (their
 * temporary files). */
static void remove_checkpoints(const char *dir, const char *arm, int seed, int64_t keep)
{
    char folder[2048], prefix[128], part[128], kept[2048] = "";
    snprintf(folder, sizeof folder, "%s/runs", dir);
    snprintf(prefix, sizeof prefix, "%s.seed%d.step", arm, seed);
    snprintf(part, sizeof part, "%s.seed%d.part.", arm, seed);
    char run[128];
    snprintf(run, sizeof run, "%s.seed%d.run.", arm, seed);
    if (keep >= 0)
        ckpt_path(dir, arm, seed, keep, kept, sizeof kept);
    DIR *d = opendir(folder);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        const char *name = e->d_name;
        const size_t len = strlen(name), pl = strlen(prefix), digits = strspn(name + pl, "0123456789");
        const int ckpt = strncmp(name, prefix, pl) == 0 && digits > 0 &&
                         strncmp(name + pl + digits, ".ckpt", 5) == 0;
        const int part_tmp = strncmp(name, part, strlen(part)) == 0 && len > 4 &&
                             strcmp(name + len - 4, ".tmp") == 0;
        /* a kept record's write cut short, once the run is kept */
        const int run_tmp = keep < 0 && strncmp(name, run, strlen(run)) == 0 && len > 4 &&
                            strcmp(name + len - 4, ".tmp") == 0;
        if (!ckpt && !part_tmp && !run_tmp)
            continue;
        char path[2400];
        snprintf(path, sizeof path, "%s/%s", folder, e->d_name);
        if (kept[0] && strcmp(path, kept) == 0)
            continue;
        if (unlink(path) != 0 && errno != ENOENT)
            say("cannot remove %s: %s\n", path, strerror(errno));
    }
    closedir(d);
}

void resume_forget(const char *dir, const char *arm, int seed)
{
    char part[2048];
    part_path(dir, arm, seed, part, sizeof part);
    /* the record first: a checkpoint alone is never taken up */
    if (unlink(part) != 0 && errno != ENOENT)
        say("cannot remove %s: %s\n", part, strerror(errno));
    remove_checkpoints(dir, arm, seed, -1);
}

/* The run's state so far: the checkpoint of this step, then the record that
 * names the step, then the earlier checkpoints gone. A cut between any two
 * leaves a record whose checkpoint exists. */
static void save_state(lattice_trainer *tr, const char *dir, const char *arm, int seed,
                       const char *settings, const run_result *r, double trained)
{
    char ckpt[2048], part[2048];
    ckpt_path(dir, arm, seed, r->n_steps, ckpt, sizeof ckpt);
    part_path(dir, arm, seed, part, sizeof part);
    check(lattice_trainer_save_checkpoint(tr, ckpt), "the run's checkpoint",
          lattice_trainer_errmsg(tr));
    run_result now = *r;
    now.seconds = trained;
    size_t bytes;
    char *buf = kept_pack(arm, seed, settings, -1, &now, &bytes);
    write_file_whole(part, buf, bytes);
    free(buf);
    remove_checkpoints(dir, arm, seed, r->n_steps);
}

/* The run's record so far and its checkpoint into r and tr: 1; 0 (with what
 * was wrong said, nothing changed) when there is none of this run's; -1 when
 * the checkpoint loaded is at another step than the record (the trainer is
 * then not as new). */
static int take_up_state(lattice_trainer *tr, lattice_schedule *s, const char *dir,
                         const char *arm, int seed, const char *settings, int64_t run_steps,
                         run_result *r)
{
    char part[2048], ckpt[2048];
    part_path(dir, arm, seed, part, sizeof part);
    char *buf;
    size_t n;
    if (read_regular(part, (uint64_t)1 << 31, &buf, &n) != 0) {
        if (errno != ENOENT)
            say("%s seed %d: its partial record %s cannot be read (%s): the run starts from its "
                "first step\n", arm, seed, part, strerror(errno));
        return 0;
    }
    run_result *was = NULL;
    char why[1600];
    const int rc = kept_parse(buf, n, arm, seed, settings, &was, why, sizeof why);
    free(buf);
    if (rc != KEPT_OK) {
        say("%s seed %d: its partial record %s is not this run's (%s): the run starts from its "
            "first step\n", arm, seed, part, why);
        return 0;
    }
    if (was->n_steps < 1 || was->n_steps > run_steps) {
        say("%s seed %d: its partial record %s is at step %lld, not within the run's %lld: the "
            "run starts from its first step\n", arm, seed, part, (long long)was->n_steps,
            (long long)run_steps);
        free_run(was);
        return 0;
    }
    ckpt_path(dir, arm, seed, was->n_steps, ckpt, sizeof ckpt);
    const lattice_status st = lattice_trainer_load_checkpoint(tr, ckpt);
    if (st != LATTICE_OK) {
        say("%s seed %d: its checkpoint %s cannot be taken up (%s): the run starts from its "
            "first step\n", arm, seed, ckpt, lattice_trainer_errmsg(tr));
        free_run(was);
        return 0;
    }
    lattice_schedule_counters c;
    lattice_schedule_get_counters(s, &c);
    if (c.steps != was->n_steps) {
        /* cut between the two writes: the checkpoint is a step the record is not */
        say("%s seed %d: its checkpoint is at step %lld and its record at %lld: the run starts "
            "from its first step\n", arm, seed, (long long)c.steps, (long long)was->n_steps);
        free_run(was);
        return -1;
    }
    const int64_t k = was->n_steps;
    double *losses = r->losses;
    int *phase = r->step_phase, *active = r->step_active;
    int64_t *alt = r->step_alt;
    memcpy(losses, was->losses, sizeof(double) * (size_t)k);
    memcpy(phase, was->step_phase, sizeof(int) * (size_t)k);
    memcpy(active, was->step_active, sizeof(int) * (size_t)k);
    memcpy(alt, was->step_alt, sizeof(int64_t) * (size_t)k);
    const run_result keep = *was;
    free_run(was);
    *r = keep;
    r->losses = losses;
    r->step_phase = phase;
    r->step_active = active;
    r->step_alt = alt;
    return 1;
}

void train_resumable(const preset *p, const arm *kind, int seed, lattice_trainer *tr,
                     lattice_schedule *s, run_result *r, progress *pr)
{
    const study *st = pr->resume;
    const int a = (int)(kind - p->arms);
    const int keep = st && st->p == p && a >= 0 && a < p->n_arms && st->settings[a] &&
                     pr->checkpoint_every >= 0;
    double before = 0; /* seconds trained in the processes before this one */
    if (keep) {
        const int got = pr->take_up ? take_up_state(tr, s, st->dir, kind->name, seed,
                                                st->settings[a], pr->run_steps, r)
                                : 0;
        if (got < 0) {
            /* the trainer holds the checkpoint's state: start again from objects as new */
            resume_forget(st->dir, kind->name, seed);
            die("%s seed %d: its checkpoint and record disagree; they are removed: run the "
                "study again to run it from its first step", kind->name, seed);
        }
        if (got > 0) {
            before = r->seconds;
            say("%s seed %d: resumed at step %lld of %lld from its checkpoint\n", kind->name,
                seed, (long long)r->n_steps, (long long)pr->run_steps);
        }
    }
    const double t0 = ex_now();
    double saved = t0;
    while (!lattice_schedule_is_finished(s)) {
        check(lattice_trainer_step(tr, NULL), "training", lattice_trainer_errmsg(tr));
        if (keep && ex_now() - saved >= pr->checkpoint_every &&
            !lattice_schedule_is_finished(s)) {
            save_state(tr, st->dir, kind->name, seed, st->settings[a], r,
                       before + ex_now() - t0);
            saved = ex_now();
        }
    }
    r->seconds = before + ex_now() - t0;
}
