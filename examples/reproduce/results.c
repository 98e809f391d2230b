/* The study's numbers for other programs: curves.csv, bands.csv, results.json. */
#include "results.h"

#include "files.h"
#include "preset.h"
#include "stats.h"

/* One row per training step of every run: its training loss, and at the
 * steps that were evaluated, the validation CE and the boundary statistics
 * (empty elsewhere). */
void write_csv(const char *path, const study *s)
{
    outfile o;
    out_open(&o, path);
    FILE *f = o.f;
    fprintf(f, "arm,seed,step,phase,active_layers,active_layer_tokens,train_loss,val_ce,rms_std,"
               "rms_kurtosis,rms_boundary,rms_regular,attention_mass_pos0,sink_rate,"
               "top_over_median,value_norm_ratio_pos0\n");
    for (int a = 0; a < s->p->n_arms; a++)
        for (int i = 0; i < s->p->seeds; i++) {
            const run_result *r = s->res[a][i];
            int k = 0;
            for (int64_t t = 0; t < r->n_steps; t++) {
                fprintf(f, "%s,%d,%lld,%d,%d,%lld,%.6f", s->p->arms[a].name, i + 1, (long long)t + 1,
                        r->step_phase[t], r->step_active[t], (long long)r->step_alt[t], r->losses[t]);
                while (k < r->n_pts && r->pts[k].step < t + 1)
                    k++;
                if (k < r->n_pts && r->pts[k].step == t + 1) {
                    const sink_point *sp = &r->sinks[k];
                    fprintf(f, ",%.6f,%.6g,%.6g,%.6g,%.6g", r->pts[k].val_ce, r->pts[k].rms_std,
                            r->pts[k].rms_kurt, r->pts[k].rms_boundary, r->pts[k].rms_regular);
                    const double v[4] = {sp->mass0, sp->sink_rate, sp->top_ratio, sp->value_norm0};
                    for (int j = 0; j < 4; j++)
                        if (isfinite(v[j]))
                            fprintf(f, ",%.6g", v[j]);
                        else
                            fprintf(f, ",");
                    fprintf(f, "\n");
                } else {
                    fprintf(f, ",,,,,,,,,\n");
                }
            }
        }
    out_commit(&o);
}

static json_object *jd(double v) { return isfinite(v) ? json_object_new_double(v) : NULL; }

void write_json(const char *path, const study *s, double wall)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "preset", json_object_get(s->p->json));
    json_object_object_add(o, "lattice_version", json_object_new_string(lattice_version_string()));
    json_object_object_add(o, "wall_seconds", json_object_new_double(wall));
    json_object *tg = json_object_new_array();
    for (int k = 1; k < s->teacher.n; k++) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "boundary_rms", jd(s->teacher.boundary[k]));
        json_object_object_add(e, "regular_rms", jd(s->teacher.regular[k]));
        json_object_object_add(e, "kurtosis", jd(s->teacher.kurt[k]));
        json_object_object_add(e, "attention_mass_pos0", jd(s->teacher.mass0[k]));
        json_object_object_add(e, "sink_rate", jd(s->teacher.sink_rate[k]));
        json_object_object_add(e, "top_over_median", jd(s->teacher.top_ratio[k]));
        json_object_object_add(e, "top_token", json_object_new_int64(s->teacher.top_token[k]));
        json_object_object_add(e, "top_dim", json_object_new_int(s->teacher.top_dim[k]));
        json_object_object_add(e, "value_norm_ratio_pos0", jd(s->teacher.value_norm0[k]));
        json_object_array_add(tg, e);
    }
    json_object_object_add(o, "teacher_boundary_scale", tg);
    json_object *arms = json_object_new_object();
    for (int a = 0; a < s->p->n_arms; a++) {
        json_object *seeds = json_object_new_array();
        for (int i = 0; i < s->p->seeds; i++) {
            const run_result *r = s->res[a][i];
            json_object *ro = json_object_new_object();
            json_object_object_add(ro, "val_ce", jd(r->final_val));
            json_object_object_add(ro, "seconds", json_object_new_double(r->seconds));
            json_object_object_add(ro, "tokens_per_s", json_object_new_double(r->tokens_per_s));
            json_object *rm = json_object_new_array(), *rs = json_object_new_array(),
                        *bs = json_object_new_array(), *tj = json_object_new_array();
            for (int k = 0; k < r->n_blocks_measured; k++) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "dce", jd(r->removal[k].dce));
                json_object_object_add(e, "angle", jd(r->removal[k].angle));
                json_object_array_add(rm, e);
            }
            for (int k = 0; k < r->n_appends; k++) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "step", json_object_new_int64(r->append_steps[k]));
                json_object_object_add(e, "kind", json_object_new_string(r->is_append[k] ? "append" : "restart"));
                json_object_object_add(e, "jump", jd(r->resp[k].jump));
                json_object_object_add(e, "area_per_step_2pct", jd(r->area2[k]));
                json_object_object_add(e, "area_per_step_10pct", jd(r->area10[k]));
                json_object_object_add(e, "recovery", json_object_new_int64(r->resp[k].recovery));
                json_object_array_add(rs, e);
            }
            for (int k = 0; k < r->n_boundaries; k++) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "std_all", jd(r->rms[k][2].std));
                json_object_object_add(e, "kurtosis_all", jd(r->rms[k][2].kurtosis));
                json_object_object_add(e, "mean_boundary", jd(r->rms[k][1].mean));
                json_object_object_add(e, "mean_regular", jd(r->rms[k][0].mean));
                json_object_array_add(bs, e);
            }
            for (int k = 0; k < r->n_pts; k++) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "step", json_object_new_int64(r->pts[k].step));
                json_object_object_add(e, "active_layers", json_object_new_int(r->pts[k].active));
                json_object_object_add(e, "val_ce", jd(r->pts[k].val_ce));
                json_object_object_add(e, "rms_std", jd(r->pts[k].rms_std));
                json_object_object_add(e, "rms_kurtosis", jd(r->pts[k].rms_kurt));
                json_object_object_add(e, "rms_boundary", jd(r->pts[k].rms_boundary));
                json_object_object_add(e, "rms_regular", jd(r->pts[k].rms_regular));
                json_object_object_add(e, "attention_mass_pos0", jd(r->sinks[k].mass0));
                json_object_object_add(e, "max_sink_rate", jd(r->sinks[k].sink_rate));
                json_object_object_add(e, "max_top_over_median", jd(r->sinks[k].top_ratio));
                json_object_object_add(e, "min_value_norm_ratio_pos0", jd(r->sinks[k].value_norm0));
                json_object_array_add(tj, e);
            }
            json_object_object_add(ro, "block_removal", rm);
            json_object_object_add(ro, "loss_response", rs);
            json_object_object_add(ro, "boundary_scale", bs);
            json_object_object_add(ro, "trajectory", tj);
            json_object_array_add(seeds, ro);
        }
        json_object_object_add(arms, s->p->arms[a].name, seeds);
    }
    json_object_object_add(o, "arms", arms);
    outfile out;
    out_open(&out, path);
    fputs(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY), out.f);
    fputc('\n', out.f);
    out_commit(&out);
    json_object_put(o);
}

/* Mean over seeds with a min..max band, per arm and evaluation, for the plots. */
void write_bands(const char *path, const study *s)
{
    outfile o;
    out_open(&o, path);
    FILE *f = o.f;
    fprintf(f, "arm_index,step,active_layer_tokens,mean,min,max\n");
    for (int a = 0; a < s->p->n_arms; a++) {
        const run_result *r0 = s->res[a][0];
        for (int k = 0; k < r0->n_pts; k++) {
            double m = 0, lo = INFINITY, hi = -INFINITY;
            for (int i = 0; i < s->p->seeds; i++) {
                const run_result *r = s->res[a][i];
                double v = r->pts[k < r->n_pts ? k : r->n_pts - 1].val_ce;
                m += v / s->p->seeds;
                lo = fmin(lo, v);
                hi = fmax(hi, v);
            }
            fprintf(f, "%d,%lld,%lld,%.6f,%.6f,%.6f\n", a, (long long)r0->pts[k].step,
                    (long long)r0->pts[k].active_layer_tokens, m, lo, hi);
        }
        fprintf(f, "\n\n"); /* one gnuplot data block per arm */
    }
    out_commit(&o);
}

