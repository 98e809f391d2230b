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


/* The continued fraction of the incomplete beta function (modified Lentz). */
static double beta_cf(double a, double b, double x)
{
    const double tiny = 1e-300;
    double c = 1, d = 1 - (a + b) * x / (a + 1);
    d = 1 / (fabs(d) < tiny ? tiny : d);
    double h = d;
    for (int m = 1; m <= 300; m++) {
        const double m2 = 2.0 * m;
        double aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
        d = 1 + aa * d;
        d = 1 / (fabs(d) < tiny ? tiny : d);
        c = 1 + aa / c;
        c = fabs(c) < tiny ? tiny : c;
        h *= d * c;
        aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
        d = 1 + aa * d;
        d = 1 / (fabs(d) < tiny ? tiny : d);
        c = 1 + aa / c;
        c = fabs(c) < tiny ? tiny : c;
        const double del = d * c;
        h *= del;
        if (fabs(del - 1) < 1e-15)
            break;
    }
    return h;
}

/* The regularized incomplete beta function I_x(a, b). */
static double beta_reg(double a, double b, double x)
{
    if (x <= 0)
        return 0;
    if (x >= 1)
        return 1;
    const double front =
        exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log(1 - x));
    return x < (a + 1) / (a + b + 2) ? front * beta_cf(a, b, x) / a
                                     : 1 - front * beta_cf(b, a, 1 - x) / b;
}

double t_cdf(double t, int df)
{
    if (df < 1 || isnan(t))
        return NAN;
    const double tail = 0.5 * beta_reg(0.5 * df, 0.5, df / (df + t * t)); /* P(T > |t|) */
    return t > 0 ? 1 - tail : tail;
}

double p_against(const summary *d, double x)
{
    if (d->n < 2 || !isfinite(d->mean) || !isfinite(d->sd))
        return NAN;
    if (d->sd == 0)
        return d->mean == x ? 1 : 0;
    const double t = (d->mean - x) / (d->sd / sqrt((double)d->n));
    return fmin(1, 2 * t_cdf(-fabs(t), d->n - 1));
}

double p_tost(const summary *d, double margin)
{
    if (d->n < 2 || !isfinite(d->mean) || !isfinite(d->sd))
        return NAN;
    if (d->sd == 0)
        return fabs(d->mean) < margin ? 0 : 1;
    const double se = d->sd / sqrt((double)d->n);
    const double lower = 1 - t_cdf((d->mean + margin) / se, d->n - 1), /* H0: mean <= -margin */
        upper = t_cdf((d->mean - margin) / se, d->n - 1);              /* H0: mean >= margin */
    return fmax(lower, upper);
}

int holm(const double *p, int n, double *adj)
{
    int order[n > 0 ? n : 1], m = 0;
    for (int i = 0; i < n; i++) {
        adj[i] = NAN;
        if (!isnan(p[i]))
            order[m++] = i;
    }
    for (int i = 1; i < m; i++) /* by p, ties in their order */
        for (int j = i; j > 0 && p[order[j]] < p[order[j - 1]]; j--) {
            const int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    double run = 0;
    for (int k = 0; k < m; k++) {
        run = fmax(run, fmin(1, (m - k) * p[order[k]]));
        adj[order[k]] = run;
    }
    return m;
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

int paired_interaction(const study *s, const char *a, const char *b, const char *c,
                       const char *d, double *x)
{
    double ab[MAX_SEEDS];
    const int n = paired(s, a, b, ab) && paired(s, c, d, x) ? s->p->seeds : 0;
    for (int i = 0; i < n; i++)
        x[i] -= ab[i];
    return n;
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

