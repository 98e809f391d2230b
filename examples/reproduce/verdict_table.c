/* The verdict table's rows as they are built (verdict_table.h). */
#include "verdict_table.h"

#include <stdarg.h>

#include "contrasts.h"
#include "results.h"
#include "stats.h"

void fmt_summary(char *buf, size_t n, const summary *sm)
{
    if (sm->n == 0)
        snprintf(buf, n, "n/a");
    else if (sm->n == 1 || isnan(sm->half))
        snprintf(buf, n, "%+.4f", sm->mean);
    else
        snprintf(buf, n, "%+.4f ± %.4f", sm->mean, sm->half);
}

void vrow(vtable *t, double p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->n >= (int)(sizeof t->row / sizeof t->row[0]) || len < 0)
        die("verdict table: too many rows");
    char *buf = malloc((size_t)len + 1);
    if (!buf)
        die("verdict table: out of memory");
    va_start(ap, fmt);
    vsnprintf(buf, (size_t)len + 1, fmt, ap);
    va_end(ap);
    t->row[t->n] = buf;
    t->p[t->n++] = p;
}

void vflush(FILE *f, vtable *t)
{
    double adj[64];
    holm(t->p, t->n, adj);
    for (int k = 0; k < t->n; k++) {
        char a[32], b[32];
        fmt_p(a, sizeof a, t->p[k]);
        fmt_p(b, sizeof b, adj[k]);
        if (isnan(t->p[k]))
            fprintf(f, "%s n/a |\n", t->row[k]);
        else
            fprintf(f, "%s p %s, Holm %s |\n", t->row[k], a, b);
        free(t->row[k]);
    }
    t->n = 0;
}

double sided_p(verdict v, double p_yes, double p_no)
{
    if (v == V_REPRODUCED)
        return p_yes;
    if (v == V_NOT_REPRODUCED)
        return p_no;
    if (v == V_INCONCLUSIVE)
        return fmin(p_yes, p_no);
    return NAN;
}

void fmt_pm(char *buf, size_t n, const summary *sm, const char *f, double scale)
{
    char m[64], h[64];
    if (sm->n == 0 || !isfinite(sm->mean)) {
        snprintf(buf, n, "n/a");
        return;
    }
    snprintf(m, sizeof m, f, sm->mean * scale);
    if (sm->n < 2 || !isfinite(sm->half)) {
        snprintf(buf, n, "%s", m);
        return;
    }
    snprintf(h, sizeof h, f, sm->half * scale);
    snprintf(buf, n, "%s ± %s", m, h[0] == '+' ? h + 1 : h); /* a half-width has no sign */
}

const char *vtext(char *buf, size_t size, verdict v, int seeds)
{
    snprintf(buf, size, "%s%s", verdict_text(v),
             seeds == 1 && v != V_NOT_RUN && v != V_NOT_APPLICABLE ? " (1 seed)" : "");
    return buf;
}

const char *dnl_cell(char *buf, size_t size, const study *s, const char *const *names, int n,
                     const char *cell, double *p)
{
    char dnl[512];
    if (!not_learned(s, names, n, dnl, sizeof dnl))
        return cell;
    snprintf(buf, size, NOT_LEARNED_VERDICT ": %s", dnl);
    *p = NAN;
    return buf;
}

const char *verdict_cell(char *buf, size_t size, const study *s, const char *const *names,
                         int n, verdict v, double *p)
{
    char text[64];
    if (dnl_cell(buf, size, s, names, n, vtext(text, sizeof text, v, s->p->seeds), p) == text)
        snprintf(buf, size, "%s", text);
    return buf;
}
