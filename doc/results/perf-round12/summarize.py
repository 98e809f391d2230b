#!/usr/bin/env python3
# usage: python3 doc/results/perf-round12/summarize.py doc/results/dose-37x-go/run-1.log doc/results/in-progress/regime-8x-seeds/run-1.log doc/results/perf-round12/estimate_ab.txt > doc/results/perf-round12/summary.txt
# Summarise --estimate against wall time (perf-round12): each "estimated wall time" line of a study log
# before its seed's "Wall time" line, and the alternated estimates of estimate_ab.txt.
import re, sys
def secs(t):
    p = [int(x) for x in t.split(':')]
    return p[-1] + 60 * p[-2] + (3600 * p[-3] if len(p) > 2 else 0)
out = []
for log in sys.argv[1:3]:
    est = None
    for l in open(log):
        m = re.search(r'estimated wall time (\S+) for (\d+) runs.*full-depth step (\d+) ms', l)
        if m: est = (m.group(1), secs(m.group(1)), m.group(3))
        m = re.match(r'== \S+ .*--seeds (\d+)', l)
        if m: seed = m.group(1)
        m = re.match(r'Wall time (\d+) s \(teacher (\d+) s\)', l)
        if m and est and int(m.group(1)) > 10:
            w = int(m.group(1))
            out.append('%s seed %s: estimate %s (%d s, a full-depth step %s ms), wall %d s, estimate / wall %.3f'
                       % (log.split('/')[-2], seed, est[0], est[1], est[2], w, est[1] / w))
            est = None
ab = {}
for l in open(sys.argv[3]):
    m = re.match(r'round (\d+) (\S+) (old|new): .*estimated wall time (\S+) .*full-depth step (\d+) ms', l)
    if m: ab.setdefault((m.group(2), m.group(3)), []).append((secs(m.group(4)), int(m.group(5))))
for (s, b), v in sorted(ab.items()):
    out.append('idle, after the seed: %s %s estimator: %s s (full-depth step %s ms)'
               % (s, b, ', '.join(str(x[0]) for x in v), ', '.join(str(x[1]) for x in v)))
print('\n'.join(out))
