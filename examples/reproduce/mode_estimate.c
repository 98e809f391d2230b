/* --estimate: the plan and its wall time, with nothing written (modes.h). */
#include "modes.h"

#include <fcntl.h>
#include <sys/file.h>

#include "session.h"

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

int mode_estimate(const options *o, preset *p, int jobs, const char *dir)
{
    if (proc.rank == 0)
        check_study_dir_free(dir);
    session x;
    session_open(&x, o, p, dir, 1, NULL, 0);
    session_plan(&x, jobs);
    session_estimate(&x);
    session_close(&x);
    return 0;
}
