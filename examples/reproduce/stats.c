/* Statistics over seeds: summaries with t intervals, finals and paired differences. */
#include "stats.h"

#include "paper.h"

/* ---- statistics ------------------------------------------------------------------ */

/* Two-sided 95% Student t quantiles, df 1..30. */
static double t95(int df)
{
    static const double q[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                               2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                               2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
    return df < 1 ? NAN : df <= 30 ? q[df - 1] : 1.96;
}


summary summarise(const double *x, int n)
{
    summary s = {0, 0, NAN, n};
    for (int i = 0; i < n; i++)
        s.mean += x[i] / n;
    for (int i = 0; i < n && n > 1; i++)
        s.sd += (x[i] - s.mean) * (x[i] - s.mean) / (n - 1);
    s.sd = sqrt(s.sd);
    if (n > 1)
        s.half = t95(n - 1) * s.sd / sqrt((double)n);
    return s;
}


int arm_index(const study *s, const char *name)
{
    for (int a = 0; a < s->p->n_arms; a++)
        if (strcmp(s->p->arms[a].name, name) == 0)
            return a;
    return -1;
}

/* Final val CE of an arm over seeds into x; returns the count (0 if the arm did not run). */
int finals(const study *s, const char *name, double *x)
{
    int a = arm_index(s, name);
    if (a < 0)
        return 0;
    for (int i = 0; i < s->p->seeds; i++)
        x[i] = s->res[a][i]->final_val;
    return s->p->seeds;
}

/* Paired differences of two arms' finals (b - a); the count, 0 if either is missing. */
int paired(const study *s, const char *arm_a, const char *arm_b, double *d)
{
    double x[MAX_SEEDS], y[MAX_SEEDS];
    if (!finals(s, arm_a, x) || !finals(s, arm_b, y))
        return 0;
    for (int i = 0; i < s->p->seeds; i++)
        d[i] = y[i] - x[i];
    return s->p->seeds;
}

static const struct {
    const char *arm;
    double value;
} paper_numbers[] = {
    {"pre-joint", PAPER_CE_PRE_JOINT},
    {"post-joint", PAPER_CE_POST_JOINT},
    {"pre-grow", PAPER_CE_PRE_GROW},
    {"post-grow", PAPER_CE_POST_GROW},
    {"pre-single", PAPER_CE_PRE_SINGLE},
    {"post-single", PAPER_CE_POST_SINGLE},
    {"pre-freeze", PAPER_CE_PRE_FREEZE},
    {"post-freeze", PAPER_CE_POST_FREEZE},
    {"post-joint-active", PAPER_CE_POST_JOINT_ACTIVE},
    {"post-joint-total", PAPER_CE_POST_JOINT_TOTAL},
};

double paper_value(const char *arm)
{
    for (size_t i = 0; i < sizeof paper_numbers / sizeof paper_numbers[0]; i++)
        if (strcmp(paper_numbers[i].arm, arm) == 0)
            return paper_numbers[i].value;
    return NAN;
}

