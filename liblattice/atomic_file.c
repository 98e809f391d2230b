/* Files as the library opens and saves them (atomic_file.h): regular files
 * only for reading, and saves that replace a file whole or not at all. */
#include "atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

lattice_status lattice__open_regular(const char *path, FILE **f, int64_t *size, char *err)
{
    *f = NULL;
    *size = 0;
    /* O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting
     * for a writer; the type check below then refuses it */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        const int why = errno;
        return lattice__set_error(err, why == ENOMEM ? LATTICE_ERR_OUT_OF_MEMORY : LATTICE_ERR_IO,
                                  "cannot open %s: %s", path, strerror(why));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        const int why = errno;
        close(fd);
        return lattice__set_error(err, LATTICE_ERR_IO, "cannot stat %s: %s", path, strerror(why));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return lattice__set_error(err, LATTICE_ERR_IO, "%s is %s, not a regular file", path,
                                  S_ISDIR(st.st_mode)    ? "a directory"
                                  : S_ISFIFO(st.st_mode) ? "a FIFO"
                                  : S_ISSOCK(st.st_mode) ? "a socket"
                                                         : "a device");
    }
    /* reads of a regular file never block anyway; cleared so that the stream
     * behaves exactly as one from fopen */
    const int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        const int why = errno;
        close(fd);
        return lattice__set_error(err, LATTICE_ERR_IO, "cannot use %s: %s", path, strerror(why));
    }
    *f = fdopen(fd, "rb");
    if (!*f) {
        const int why = errno;
        close(fd);
        return lattice__set_error(err, why == ENOMEM ? LATTICE_ERR_OUT_OF_MEMORY : LATTICE_ERR_IO,
                                  "cannot open %s: %s", path, strerror(why));
    }
    *size = (int64_t)st.st_size;
    return LATTICE_OK;
}

/* The file a save to path replaces: path itself, or where its chain of
 * symbolic links ends, so that saving through a link replaces the link's
 * target and leaves the link (a dangling link's target is created). NULL with
 * errno set on failure. */
static char *save_target(const char *path)
{
    char *cur = strdup(path);
    for (int hop = 0; cur; hop++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
            return cur; /* a file, a new name, or an error that open will report */
        char link[PATH_MAX];
        const ssize_t n = hop < 40 ? readlink(cur, link, sizeof link) : -1;
        const int why = hop >= 40 ? ELOOP : n < 0 ? errno : ENAMETOOLONG;
        if (n < 0 || n == (ssize_t)sizeof link) {
            free(cur);
            errno = why;
            return NULL;
        }
        /* a relative target is relative to the link's directory */
        const char *slash = link[0] == '/' ? NULL : strrchr(cur, '/');
        const size_t dl = slash ? (size_t)(slash - cur) + 1 : 0;
        char *next = malloc(dl + (size_t)n + 1);
        if (next) {
            memcpy(next, cur, dl);
            memcpy(next + dl, link, (size_t)n);
            next[dl + (size_t)n] = 0;
        }
        free(cur);
        cur = next;
    }
    errno = ENOMEM;
    return NULL;
}

/* digits then stop: the end of the digits, or NULL if there are none or they
 * are not followed by stop */
static const char *digits_then(const char *s, char stop)
{
    const char *p = s;
    while (*p >= '0' && *p <= '9')
        p++;
    return p > s && p - s < 12 && *p == stop ? p : NULL;
}

/* Remove what killed saves to target left behind: files named
 * "<target>.tmp.<pid>.<n>" (the names lattice__atomic_begin gives) whose
 * process is gone and on which no lock is held (a writer holds one on its
 * temporary file from creation to rename; the pid check covers the moment
 * between the two). Best effort: what cannot be checked is left alone. */
static void remove_stale_temps(const char *target)
{
    const char *slash = strrchr(target, '/');
    char *dir = slash ? strndup(target, slash == target ? 1 : (size_t)(slash - target)) : strdup(".");
    const char *base = slash ? slash + 1 : target;
    const size_t bl = strlen(base);
    DIR *d = dir ? opendir(dir) : NULL;
    free(dir);
    if (!d)
        return;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *nm = e->d_name, *pid_end, *n_end;
        if (strncmp(nm, base, bl) != 0 || strncmp(nm + bl, ".tmp.", 5) != 0 ||
            !(pid_end = digits_then(nm + bl + 5, '.')) || !(n_end = digits_then(pid_end + 1, 0)))
            continue;
        const long pid = strtol(nm + bl + 5, NULL, 10);
        if (pid <= 0 || pid > INT_MAX || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive, or not ours to tell (EPERM: alive) */
        const int fd = openat(dirfd(d), nm, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0)
            unlinkat(dirfd(d), nm, 0);
        close(fd);
    }
    closedir(d);
}

/* After a rename, the directory entry is durable only once the directory
 * itself is synced: a power loss could otherwise bring back the old file.
 * Best effort: a file system that cannot sync a directory still renamed. */
static void sync_parent_dir(const char *target)
{
    const char *slash = strrchr(target, '/');
    char *dir = slash ? strndup(target, slash == target ? 1 : (size_t)(slash - target)) : strdup(".");
    if (!dir)
        return;
    const int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

lattice_status lattice__atomic_begin(lattice__atomic_file *af, const char *path, char *err)
{
    memset(af, 0, sizeof(*af));
    char *target = save_target(path);
    if (!target) {
        const int why = errno;
        return lattice__set_error(err, why == ENOMEM ? LATTICE_ERR_OUT_OF_MEMORY : LATTICE_ERR_IO,
                                  "cannot resolve %s: %s", path, strerror(why));
    }
    size_t plen = strlen(target);
    char *tmp = malloc(plen + 32);
    if (!tmp) {
        free(target);
        return lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY,
                                  "no memory for the temporary file's name");
    }
    remove_stale_temps(target);
    /* the new file keeps the old one's permission bits (never wider: the
     * umask only takes bits away until fchmod puts them back); a new name
     * gets 0666 less the umask, as with fopen */
    struct stat old;
    const int keep_mode = stat(target, &old) == 0 && S_ISREG(old.st_mode);
    const mode_t mode = keep_mode ? (old.st_mode & 0777) : 0666;
    /* open(O_EXCL) rather than mkstemp: the file gets the caller's umask, not 0600 */
    static unsigned counter;
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, plen + 32, "%s.tmp.%d.%u", target, (int)getpid(),
                 __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    /* the lock tells remove_stale_temps that this file is being written; where
     * locks are not supported, the pid in the name still does */
    if (fd >= 0)
        (void)flock(fd, LOCK_EX | LOCK_NB);
    if (fd >= 0 && keep_mode && fchmod(fd, mode) != 0) {
        const int why = errno;
        close(fd);
        unlink(tmp);
        fd = -1;
        errno = why;
    }
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        const int why = errno;
        lattice_status st =
            lattice__set_error(err, why == ENOMEM ? LATTICE_ERR_OUT_OF_MEMORY : LATTICE_ERR_IO,
                               "cannot create %s: %s", tmp, strerror(why));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        free(target);
        return st;
    }
    af->f = f;
    af->target = target;
    af->tmp = tmp;
    return LATTICE_OK;
}

lattice_status lattice__atomic_commit(lattice__atomic_file *af, int ok, const char *path,
                                      char *err)
{
    lattice_status st = LATTICE_OK;
    FILE *f = af->f;
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(af->tmp, af->target) != 0) {
        const int why = errno;
        st = lattice__set_error(err, why == ENOMEM ? LATTICE_ERR_OUT_OF_MEMORY : LATTICE_ERR_IO,
                                "cannot write %s: %s", path, strerror(why));
        unlink(af->tmp);
    } else {
        sync_parent_dir(af->target);
    }
    free(af->tmp);
    free(af->target);
    memset(af, 0, sizeof(*af));
    return st;
}
