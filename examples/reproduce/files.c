/* Files the study reads and writes, safely (see files.h). */
#include "files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <xxhash.h>

/* ---- names --------------------------------------------------------------------- */

int name_ok(const char *name)
{
    const size_t n = strlen(name);
    if (n == 0 || n > NAME_MAX_LEN || name[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        const char c = name[i];
        const int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_' || c == '.' || c == '+';
        if (!ok)
            return 0;
    }
    return 1;
}

/* ---- folders ------------------------------------------------------------------- */

int make_dirs(const char *path, char *failed, size_t failed_size)
{
    char buf[4096];
    const size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        errno = n ? ENAMETOOLONG : ENOENT;
        if (failed)
            snprintf(failed, failed_size, "%s", path);
        return -1;
    }
    memcpy(buf, path, n + 1);
    /* each prefix that ends a component, then the whole path */
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0)
            continue;
        if (buf[i - 1] == '/')
            continue; /* "//" or a trailing slash */
        const char keep = buf[i];
        buf[i] = 0;
        struct stat st;
        if (mkdir(buf, 0777) != 0) {
            const int e = errno;
            if (e != EEXIST || stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
                if (failed)
                    snprintf(failed, failed_size, "%s", buf);
                errno = e == EEXIST ? ENOTDIR : e;
                return -1;
            }
        }
        buf[i] = keep;
    }
    return 0;
}

/* ---- reading --------------------------------------------------------------------- */

int open_regular(const char *path, uint64_t *size)
{
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer */
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        const int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        return -1;
    }
    /* reads block as usual from here on */
    const int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (size)
        *size = (uint64_t)st.st_size;
    return fd;
}

/* Read exactly n bytes; 0, or -1 with errno set (EIO when the file ended early). */
static int read_all(int fd, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        const ssize_t k = read(fd, buf + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO;
            return -1;
        }
        got += (size_t)k;
    }
    return 0;
}

int read_regular(const char *path, uint64_t max, char **buf, size_t *len)
{
    uint64_t size;
    const int fd = open_regular(path, &size);
    if (fd < 0)
        return -1;
    if (size > max) {
        close(fd);
        errno = EFBIG;
        return -1;
    }
    char *b = malloc((size_t)size + 1);
    if (!b) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    if (read_all(fd, b, (size_t)size) != 0) {
        const int e = errno;
        free(b);
        close(fd);
        errno = e;
        return -1;
    }
    /* the file must end where its size said: a file growing under us is not read in part */
    char extra;
    if (read(fd, &extra, 1) != 0) {
        free(b);
        close(fd);
        errno = EIO;
        return -1;
    }
    close(fd);
    b[size] = 0;
    *buf = b;
    *len = (size_t)size;
    return 0;
}

/* ---- writing, whole or not at all --------------------------------------------------- */

void out_open(outfile *o, const char *path)
{
    if ((size_t)snprintf(o->path, sizeof o->path, "%s", path) >= sizeof o->path)
        die("the path %s is too long", path);
    snprintf(o->tmp, sizeof o->tmp, "%s.%ld.tmp", path, (long)getpid());
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        die("cannot write %s: it is not a regular file (a folder, link, FIFO or device is in "
            "the way)", path);
    const int fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0)
        die("cannot write %s: %s", path, strerror(errno));
    o->f = fdopen(fd, "w");
    if (!o->f) {
        const int e = errno;
        close(fd);
        unlink(o->tmp);
        die("cannot write %s: %s", path, strerror(e));
    }
}

/* A file's or folder's data on the disk, by its path. Best effort: a file
 * system that cannot sync a folder still renamed. */
void sync_path(const char *path, int folder)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC | (folder ? O_DIRECTORY : O_NOFOLLOW));
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* The folder of a file just renamed into it, synced: until then a power loss
 * could bring back the old entry. */
void sync_folder_of(const char *path)
{
    char dir[sizeof ((outfile *)0)->path];
    const char *slash = strrchr(path, '/');
    const size_t n = slash ? (slash == path ? 1 : (size_t)(slash - path)) : 1;
    if (n >= sizeof dir)
        return;
    memcpy(dir, slash ? path : ".", n);
    dir[n] = 0;
    sync_path(dir, 1);
}

void out_commit(outfile *o)
{
    int e = 0;
    if (ferror(o->f))
        e = errno ? errno : EIO;
    if (!e && fflush(o->f) != 0)
        e = errno;
    if (!e && fsync(fileno(o->f)) != 0)
        e = errno;
    if (fclose(o->f) != 0 && !e)
        e = errno;
    o->f = NULL;
    if (!e && rename(o->tmp, o->path) != 0)
        e = errno;
    if (e) {
        unlink(o->tmp);
        die("cannot write %s: %s (the file was left as it was)", o->path, strerror(e));
    }
    sync_folder_of(o->path);
}

void write_file_whole(const char *path, const void *bytes, size_t n)
{
    outfile o;
    out_open(&o, path);
    if (n > 0)
        fwrite(bytes, 1, n, o.f); /* a short write leaves ferror set: out_commit says it */
    out_commit(&o);
}

void out_abort(outfile *o)
{
    if (o->f)
        fclose(o->f);
    o->f = NULL;
    unlink(o->tmp);
}

int check_writable(const char *dir, const char *name)
{
    char path[2400];
    struct stat st;
    if (name) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
            errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
            return -1;
        }
        if (lstat(path, &st) != 0 && errno != ENOENT)
            return -1;
    }
    snprintf(path, sizeof path, "%s/.write-check.%ld.tmp", dir, (long)getpid());
    const int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return -1;
    close(fd);
    unlink(path);
    return 0;
}

/* ---- programs ----------------------------------------------------------------------- */

int run_program(const char *cwd, char *const argv[], int quiet)
{
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (cwd && chdir(cwd) != 0)
            _exit(127);
        if (quiet) {
            const int fd = open("/dev/null", O_WRONLY);
            if (fd >= 0) {
                dup2(fd, 2);
                close(fd);
            }
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int have_program(const char *name)
{
    const char *path = getenv("PATH");
    if (!path || strchr(name, '/'))
        return 0;
    for (const char *at = path; *at;) {
        const char *end = strchr(at, ':');
        const size_t n = end ? (size_t)(end - at) : strlen(at);
        char buf[4096];
        if (n > 0 && n + strlen(name) + 2 < sizeof buf) {
            memcpy(buf, at, n);
            snprintf(buf + n, sizeof buf - n, "/%s", name);
            struct stat st;
            if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0)
                return 1;
        }
        at = end ? end + 1 : at + n;
    }
    return 0;
}

/* ---- the output folder's lock ------------------------------------------------------- */

void lock_study_dir(const char *dir)
{
    char path[2100];
    snprintf(path, sizeof path, "%s/.lock", dir);
    /* kept open to the end of the process: the lock ends with it, however it ends */
    const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0)
        die("cannot lock the output folder (%s): %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        char holder[32] = "";
        const ssize_t k = pread(fd, holder, sizeof holder - 1, 0);
        holder[k > 0 ? k : 0] = 0;
        holder[strcspn(holder, "\n")] = 0;
        if (e == EWOULDBLOCK)
            die("another study (pid %s) is using %s: wait for it to end, or give this one "
                "another --out",
                holder[0] ? holder : "unknown", dir);
        die("cannot lock the output folder (%s): %s", path, strerror(e));
    }
    char pid[32];
    const int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n)
        die("cannot write the lock %s: %s", path, strerror(errno));
}

/* ---- checksums ---------------------------------------------------------------------- */

int xxh_file(const char *path, uint64_t *h)
{
    const int fd = open_regular(path, NULL);
    if (fd < 0)
        return -1;
    XXH64_state_t *st = XXH64_createState();
    if (!st) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    XXH64_reset(st, 0);
    static _Thread_local char buf[1 << 16];
    for (;;) {
        const ssize_t k = read(fd, buf, sizeof buf);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            const int e = errno;
            XXH64_freeState(st);
            close(fd);
            errno = e;
            return -1;
        }
        if (k == 0)
            break;
        XXH64_update(st, buf, (size_t)k);
    }
    *h = XXH64_digest(st);
    XXH64_freeState(st);
    close(fd);
    return 0;
}

uint64_t xxh_bytes(const void *data, size_t n) { return XXH64(data, n, 0); }

void hex64(char *buf, uint64_t h) { snprintf(buf, 17, "%016llx", (unsigned long long)h); }
