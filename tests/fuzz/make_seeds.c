/* Writes the seed corpora of the fuzz targets (run by hand; the seeds are committed). */
#include "fuzz_common.h"

#include <string.h>
#include <sys/stat.h>

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "corpus";
    char path[512];
    rig r;
    fuzz_run(&r);
    lattice_model *m = r.model;
    snprintf(path, sizeof path, "%s/safetensors", dir);
    mkdir(dir, 0755);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/safetensors/tiny.safetensors", dir);
    if (lattice_model_save(m, path) != LATTICE_OK)
        return 1;
    snprintf(path, sizeof path, "%s/data", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/data/text", dir);
    FILE *f = fopen(path, "wb");
    fputs("\x02" "Chapter 1\nIt was a truth.\fChapter 2\nAnother.", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/data/uint16", dir);
    f = fopen(path, "wb");
    const unsigned char u16[] = {0, 43, 1, 5, 0, 6, 0, 43, 1, 7, 0};
    fwrite(u16, 1, sizeof u16, f);
    fclose(f);
    /* a checkpoint of a small run */
    lattice_data *d = r.data;
    lattice_trainer *t = r.trainer;
    if (lattice_trainer_step(t, NULL) != LATTICE_OK)
        return 1;
    /* recorded teacher logits, dense and top-k */
    lattice_teacher *teacher;
    lattice_data_position start;
    if (lattice_teacher_create_model(m, &teacher) != LATTICE_OK)
        return 1;
    lattice_data_get_position(d, &start);
    snprintf(path, sizeof path, "%s/teacher", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/teacher/dense.safetensors", dir);
    if (lattice_teacher_record(teacher, d, 2, 0, path) != LATTICE_OK)
        return 1;
    lattice_data_set_position(d, &start);
    snprintf(path, sizeof path, "%s/teacher/top3.safetensors", dir);
    if (lattice_teacher_record(teacher, d, 2, 3, path) != LATTICE_OK)
        return 1;
    lattice_data_set_position(d, &start);
    lattice_teacher_destroy(teacher);
    snprintf(path, sizeof path, "%s/checkpoint", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/checkpoint/step1.safetensors", dir);
    if (lattice_trainer_save_checkpoint(t, path) != LATTICE_OK)
        return 1;
    rig_close(&r);
    return 0;
}
