/* The study's curves drawn by gnuplot when it is installed (PNG and SVG). */
#include "plot.h"

#include "files.h"

/* A string for a gnuplot script, single-quoted: inside such a string only
 * the quote itself is special (written twice). Names follow the name rule,
 * but nothing relies on that here. */
static void gp_string(FILE *f, const char *text)
{
    fputc('\'', f);
    for (const char *c = text; *c; c++) {
        if (*c == '\'')
            fputc('\'', f);
        if ((unsigned char)*c >= 0x20)
            fputc(*c, f);
    }
    fputc('\'', f);
}

/* Whether gnuplot wrote a whole image: a PNG ends with its IEND chunk, an
 * SVG with its closing tag (a full disk leaves either cut short). */
static int image_whole(const char *path, int svg)
{
    char *buf;
    size_t n;
    if (read_regular(path, (uint64_t)1 << 28, &buf, &n) != 0)
        return 0;
    static const char iend[8] = {'I', 'E', 'N', 'D', (char)0xae, 0x42, 0x60, (char)0x82};
    int ok;
    if (svg) {
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\r'))
            n--;
        ok = n >= 6 && memcmp(buf + n - 6, "</svg>", 6) == 0;
    } else {
        ok = n >= 8 && memcmp(buf + n - 8, iend, 8) == 0;
    }
    free(buf);
    return ok;
}

static const char *const plot_names[4] = {"curves_steps.png", "curves_active_layer_tokens.png",
                                          "curves_steps.svg", "curves_active_layer_tokens.svg"};

/* Curves through gnuplot when it is installed (PNG and SVG): the mean over
 * seeds with a min-max band; colours by placement (pre blue, post red, peri
 * green), line styles by schedule, so arms that coincide in a phase (the first
 * phases of grow and freeze) stay distinguishable. gnuplot runs from an
 * argument vector in the output folder, on a script that names files by
 * their names there; it writes each plot to a temporary name (given on its
 * command line; the script alone names the plots themselves), and the plots
 * replace the old ones only when it succeeded. */
void plot(const char *dir, const study *s)
{
    if (!have_program("gnuplot")) {
        say("gnuplot not found: curves are in curves.csv only\n");
        return;
    }
    char gp[2048], tmp[4][64];
    snprintf(gp, sizeof gp, "%s/curves.gp", dir);
    for (int k = 0; k < 4; k++)
        snprintf(tmp[k], sizeof tmp[k], "%s.%ld.tmp", plot_names[k], (long)getpid());
    outfile o;
    out_open(&o, gp);
    FILE *f = o.f;
    static const char *const shades[3][4] = {{"#1f4e9c", "#4a86e8", "#7fb2ff", "#0b2a5b"},
                                             {"#b3261e", "#e06666", "#f4a09a", "#6d1410"},
                                             {"#2e7d32", "#66bb6a", "#a5d6a7", "#1b4d1e"}};
    /* The script names the plots by their own names: `gnuplot curves.gp` in the
     * folder draws them again. This program sets plot_0 .. plot_3 to the
     * temporary names on gnuplot's command line instead. */
    fprintf(f, "# gnuplot curves.gp, in this folder, draws");
    for (int k = 0; k < 4; k++)
        fprintf(f, " %s%s", plot_names[k], k < 3 ? "," : "\n");
    for (int k = 0; k < 4; k++) {
        fprintf(f, "if (!exists(\"plot_%d\")) plot_%d = ", k, k);
        gp_string(f, plot_names[k]);
        fputc('\n', f);
    }
    fprintf(f, "set datafile separator ','\nset key outside right noenhanced\nset grid\n"
               "set ylabel 'validation CE (nats/byte)'\n");
    for (int fmt = 0; fmt < 2; fmt++) {
        for (int x = 0; x < 2; x++) {
            fprintf(f, "set terminal %s size 1200,650\nset output plot_%d\n",
                    fmt ? "svg" : "pngcairo", fmt * 2 + x);
            fprintf(f, "set xlabel '%s'\nset title 'mean over %d seed%s, band = min..max'\n",
                    x ? "active-layer tokens" : "steps", s->p->seeds, s->p->seeds == 1 ? "" : "s");
            fprintf(f, "unset arrow\n");
            if (!x)
                for (int k = 1; k < s->p->blocks; k++)
                    fprintf(f, "set arrow from %d, graph 0 to %d, graph 1 nohead dt 2 lc 'gray'\n",
                            k * s->p->steps_per_phase, k * s->p->steps_per_phase);
            fprintf(f, "plot ");
            int used[3] = {0, 0, 0};
            for (int a = 0; a < s->p->n_arms; a++) {
                const arm *am = &s->p->arms[a];
                const char *c = shades[am->placement][used[am->placement]++ % 4];
                int dt = am->schedule < 0 ? 5 : am->schedule + 1;
                if (s->p->seeds > 1)
                    fprintf(f, "'bands.csv' index %d using %d:5:6 with filledcurves lc rgb '%s' "
                               "fs transparent solid 0.15 notitle, ",
                            a, x ? 3 : 2, c);
                fprintf(f, "'bands.csv' index %d using %d:4 with linespoints lw 2 dt %d pt %d "
                           "ps 0.6 lc rgb '%s' title ",
                        a, x ? 3 : 2, dt, a % 12 + 1, c);
                gp_string(f, am->name);
                fputs(a + 1 < s->p->n_arms ? ", " : "", f);
            }
            fprintf(f, "\n");
        }
    }
    fprintf(f, "unset output\n"); /* every plot closed before gnuplot exits */
    out_commit(&o);
    /* the temporary names: this program's own (a plot's name, the pid), never a user's */
    char names[512];
    snprintf(names, sizeof names, "plot_0='%s'; plot_1='%s'; plot_2='%s'; plot_3='%s'", tmp[0],
             tmp[1], tmp[2], tmp[3]);
    char *argv[] = {"gnuplot", "-e", names, "curves.gp", NULL};
    const int rc = run_program(dir, argv, 1);
    char from[2400], to[2400];
    for (int k = 0; k < 4; k++) {
        snprintf(from, sizeof from, "%s/%s", dir, tmp[k]);
        snprintf(to, sizeof to, "%s/%s", dir, plot_names[k]);
        const int made = rc == 0 && image_whole(from, k >= 2);
        if (made) /* gnuplot wrote it: on the disk before its name replaces the old one's */
            sync_path(from, 0);
        if (made && rename(from, to) != 0)
            die("cannot write %s: %s", to, strerror(errno));
        if (made)
            sync_folder_of(to);
        if (!made) {
            unlink(from);
            if (rc == 0)
                die("cannot write %s: gnuplot left it incomplete (is the disk full?); the plot "
                    "was left as it was", to);
        }
    }
    if (rc != 0)
        say("gnuplot failed (status %d); the plots were left as they were, the curves are in "
            "curves.csv\n", rc);
}

