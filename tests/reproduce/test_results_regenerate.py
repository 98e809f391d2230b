"""Every committed study's report.md is what the report code writes from its
kept runs: each doc/results/NAME folder made with presets/NAME.json is copied,
its report regenerated with --report-only (nothing is trained), and the two
compared line by line (but for the line that names this machine's backend).

usage: test_results_regenerate.py REPRODUCE_BINARY SOURCE_ROOT
"""
import os
import shutil
import subprocess
import sys
import tempfile

MACHINE_LINES = ("Nothing ran now", "Wall time ")  # name the backend and kernels of a host


def comparable(text):
    return [line for line in text.splitlines() if not line.startswith(MACHINE_LINES)]


def main(binary, root):
    results = os.path.join(root, "doc", "results")
    presets = os.path.join(root, "examples", "reproduce", "presets")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        # the corpus the runs were made on, where the presets find it (its checksum is in
        # every run; prepare_austen leaves a corpus that matches its manifest as it is)
        subprocess.run([sys.executable, os.path.join(root, "examples", "data", "prepare_austen.py"),
                        "--quiet"], check=True)
        env = {k: v for k, v in os.environ.items() if k != "LATTICE_REPRODUCE_DATA"}
        for name in sorted(os.listdir(results)):
            preset = os.path.join(presets, name + ".json")
            if not os.path.isfile(preset):
                continue
            out = os.path.join(tmp, name)
            shutil.copytree(os.path.join(results, name), out,
                            ignore=shutil.ignore_patterns("*.svg", "*.png", ".lock"))
            r = subprocess.run([binary, "--preset", preset, "--out", out, "--report-only"],
                               capture_output=True, text=True, env=env, timeout=600,
                               cwd=root)  # the report names the corpus relative to the tree
            if r.returncode != 0:
                print("%s: --report-only failed:\n%s" % (name, r.stderr))
                failed += 1
                continue
            if " to run" in r.stderr and " 0 to run" not in r.stderr:
                print("%s: --report-only would have run something:\n%s" % (name, r.stderr))
                failed += 1
            with open(os.path.join(results, name, "report.md")) as f:
                want = comparable(f.read())
            with open(os.path.join(out, "report.md")) as f:
                got = comparable(f.read())
            if want != got:
                at = next((k for k, (a, b) in enumerate(zip(want, got)) if a != b),
                          min(len(want), len(got)))
                print("%s: the committed report.md differs from the regenerated one at line %d:\n"
                      "  committed:   %s\n  regenerated: %s\n(regenerate it: reproduce --preset "
                      "%s --out doc/results/%s --report-only)"
                      % (name, at + 1, want[at] if at < len(want) else "(none)",
                         got[at] if at < len(got) else "(none)", preset, name))
                failed += 1
            else:
                print("%s: report.md regenerates from its %s" % (name, "kept runs"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])))
