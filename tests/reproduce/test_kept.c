/* Every corrupted kept run is refused: a run's file with random bytes
 * overwritten (1 to 500 of them), cut short, grown, or with one bit flipped,
 * many times over with a fixed seed, in either format (JSON, and the raw
 * record 0.5 to 1.0 kept); and the file whole is reused.
 *
 * usage: test_kept [TRIES] (default 3000) */
#include "kept_sample.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* Corrupted copies of good (n bytes) tried: how many were refused, of *tried. */
static int corrupted(const char *good, size_t n, int tries, int *tried)
{
    char *bad = malloc(n + 64);
    int refused = 0;
    *tried = 0;
    for (int t = 0; t < tries; t++) {
        size_t m = n;
        memcpy(bad, good, n);
        switch (t % 4) {
        case 0: { /* 1 to 500 random bytes overwritten */
            const int k = 1 + (int)(next() % 500);
            for (int j = 0; j < k; j++)
                bad[next() % n] = (char)next();
            break;
        }
        case 1: /* cut short */
            m = next() % n;
            break;
        case 2: /* grown */
            m = n + 1 + next() % 63;
            for (size_t j = n; j < m; j++)
                bad[j] = (char)next();
            break;
        default: /* one bit */
            bad[next() % n] ^= (char)(1u << (next() % 8));
        }
        if (m == n && memcmp(bad, good, n) == 0)
            continue; /* the overwrites wrote what was there */
        ++*tried;
        refused += !sample_reused(bad, m);
    }
    free(bad);
    return refused;
}

int main(int argc, char **argv)
{
    const int tries = argc > 1 ? atoi(argv[1]) : 3000;
    size_t n, n_raw;
    char *good = sample_kept(&n), *raw = sample_kept_as(1, &n_raw);
    if (!sample_reused(good, n) || !sample_reused(raw, n_raw)) {
        fprintf(stderr, "the whole file is not reused\n");
        return 1;
    }
    int tried, tried_raw;
    const int refused = corrupted(good, n, tries, &tried);
    const int refused_raw = corrupted(raw, n_raw, tries, &tried_raw);
    /* another arm's or seed's name, or other settings, is not this run */
    run_result *r = NULL;
    char why[2048];
    int others = kept_parse(good, n, "pre-grow", SAMPLE_SEED, SAMPLE_SETTINGS, &r, why,
                            sizeof why) == KEPT_BAD;
    others += kept_parse(good, n, SAMPLE_ARM, 1, SAMPLE_SETTINGS, &r, why, sizeof why) == KEPT_BAD;
    others += kept_parse(good, n, SAMPLE_ARM, SAMPLE_SEED, "{\"preset\":{\"train\":{\"tau\":2}}}",
                         &r, why, sizeof why) == KEPT_STALE;
    printf("%d of %d corrupted records refused (%d of %d of format 2); %d of 3 records of another "
           "arm, seed or settings refused (the last: %s)\n",
           refused, tried, refused_raw, tried_raw, others, why);
    free(good);
    free(raw);
    return refused == tried && tried > tries / 2 && refused_raw == tried_raw &&
                   tried_raw > tries / 2 && others == 3
               ? 0
               : 1;
}
