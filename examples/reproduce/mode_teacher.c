/* --teacher-only: the teacher trained or loaded, and its go/no-go (modes.h). */
#include "modes.h"

#include "session.h"

int mode_teacher(const options *o, preset *p, int jobs, const char *dir)
{
    session x;
    session_open(&x, o, p, dir, 1, NULL, 0);
    session_plan(&x, jobs);
    session_teacher(&x, 0);
    session_close(&x);
    return 0;
}
