/* --check: the preset as understood, every object built on the real shapes (modes.h). */
#include "modes.h"

#include "plan.h"
#include "preset.h"
#include "report_words.h"
#include "runs.h"

int mode_check(preset *p, int jobs)
{
    print_preset(p);
    check_preset_files(p);
    /* an arm that reads past the end of the training text sees it again,
     * reshuffled, where it may be read as fresh data */
    const int64_t pass = batches_per_pass(p);
    for (int a = 0; a < p->n_arms; a++) {
        const int64_t most = longest_read(p, &p->arms[a]);
        if (p->arms[a].selected && most > pass)
            printf("warning: arm %s reads %lld batches without a rewind, %.2f passes over the "
                   "training text (%lld batches of %d x %d): beyond the first pass its data "
                   "repeats\n", p->arms[a].name, (long long)most, (double)most / (double)pass,
                   (long long)pass, p->batch, p->seq_len);
    }
    if (!fits_here(p, &jobs)) {
        printf("the preset's keys are valid, but its study does not fit in this machine's "
               "memory: its objects were not built here (--check on a machine that holds "
               "it builds them)\n");
    } else {
        check_study(p);
        printf("every object the study builds was built on the real shapes and data: the "
               "preset is valid\n");
    }
    return 0;
}
