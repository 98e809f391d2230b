#!/usr/bin/env python3
"""Prepare the Jane Austen corpus of the reproduction study.

Source: the R package janeaustenr (Julia Silge, MIT licence; the novels
themselves are public domain), as Debian packages it: ``r-cran-janeaustenr``,
which depends on ``r-base-core``. R reads its own data: ``Rscript`` writes
each novel's lines as UTF-8, and this script splits them into chapters.

Output (``--out``, default ``examples/data/austen`` under the repository root):

* ``train.txt`` - the chapters of Sense and Sensibility, Pride and Prejudice,
  Mansfield Park, Emma and Northanger Abbey (in that order, the order of
  publication), one document per chapter;
* ``val.txt``   - the chapters of Persuasion;
* ``manifest.json`` - chapter and byte counts per novel, sha256 of each file.

Documents are separated by a form feed (``\\f``), liblattice's default document
separator; the text is UTF-8. A chapter is its heading line plus every line up
to the next heading, lines joined with ``\\n`` (empty lines, R's paragraph
breaks, stay as empty lines). Front matter before the first chapter heading
(title, author, volume headings) is dropped, and so are the "VOLUME ..."
heading lines between chapters; see README.md.

Needs Python 3.8 or later (standard library only) and Rscript with
janeaustenr (``apt-get install r-cran-janeaustenr``; ``.ci/deps`` installs it).

Exit status: 0 on success (also when the outputs were already up to date),
1 on any error (a one-line message on stderr, no traceback), 2 on bad usage.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

PACKAGE = "r-cran-janeaustenr"
R_PACKAGE = "janeaustenr"

# (object name in the package, title); training novels in publication order.
TRAIN_NOVELS = [
    ("sensesensibility", "Sense and Sensibility"),
    ("prideprejudice", "Pride and Prejudice"),
    ("mansfieldpark", "Mansfield Park"),
    ("emma", "Emma"),
    ("northangerabbey", "Northanger Abbey"),
]
VAL_NOVELS = [
    ("persuasion", "Persuasion"),
]

SEPARATOR = "\f"
# Bumped whenever the produced text would change for the same input package;
# part of the manifest, so a changed script regenerates stale outputs.
FORMAT_VERSION = 1


class PrepError(Exception):
    """An error reported to the user as one line, without a traceback."""


# ---------------------------------------------------------------------------
# The novels, through R
# ---------------------------------------------------------------------------

# Writes <out>/VERSION and <out>/<name>.txt for each name: the character
# vector's elements as UTF-8, each followed by "\n" (NA as an empty line).
# An element holding a newline would change the line count: refused.
R_DUMP = r"""
args <- commandArgs(trailingOnly = TRUE)
out <- args[1]
if (!requireNamespace("janeaustenr", quietly = TRUE))
    stop("R package janeaustenr is not installed (apt-get install r-cran-janeaustenr)")
writeLines(as.character(utils::packageVersion("janeaustenr")), file.path(out, "VERSION"))
for (name in args[-1]) {
    x <- tryCatch(getExportedValue("janeaustenr", name),
                  error = function(e) stop("novel '", name, "' missing from janeaustenr"))
    if (!is.character(x)) stop("'", name, "' is not a character vector")
    x[is.na(x)] <- ""
    x <- enc2utf8(x)
    if (any(grepl("\n", x, fixed = TRUE))) stop("'", name, "' has a line with a newline")
    con <- file(file.path(out, paste0(name, ".txt")), open = "wb")
    writeLines(x, con, sep = "\n", useBytes = TRUE)
    close(con)
}
"""


def last_lines(text, n=3):
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    return " | ".join(lines[-n:]) if lines else "(no output)"


def load_novels(rscript, names):
    """({name: [line, ...]}, janeaustenr's version) for every name, written by Rscript."""
    exe = shutil.which(rscript)
    if exe is None:
        raise PrepError("%s not found: install R and the novels with "
                        "'apt-get install r-cran-janeaustenr' (or run .ci/deps)" % rscript)
    with tempfile.TemporaryDirectory(prefix="prepare_austen.") as tmp:
        try:
            r = subprocess.run([exe, "--vanilla", "-e", R_DUMP, tmp] + list(names),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
        except OSError as exc:
            raise PrepError("cannot run %s: %s" % (exe, exc))
        if r.returncode != 0:
            raise PrepError("Rscript failed: %s" % last_lines(r.stderr + r.stdout))
        novels = {}
        for name in names:
            with open(os.path.join(tmp, name + ".txt"), "rb") as f:
                text = f.read().decode("utf-8")
            novels[name] = text.split("\n")[:-1]  # every line ends with "\n"
        with open(os.path.join(tmp, "VERSION"), encoding="utf-8") as f:
            version = f.read().strip()
    return novels, version


# ---------------------------------------------------------------------------
# Chapters
# ---------------------------------------------------------------------------

# Headings are whole lines: "CHAPTER I", "Chapter 1", "CHAPTER 12", ...
CHAPTER_RE = re.compile(r"^\s*chapter\s+([0-9]+|[ivxlc]+)\.?\s*$", re.IGNORECASE)
# Emma's "VOLUME I" .. "VOLUME III" lines (its chapter numbers restart per volume)
VOLUME_RE = re.compile(r"^\s*volume\s+([0-9]+|[ivxlc]+)\.?\s*$", re.IGNORECASE)
# An editor's note at the end of Northanger Abbey (not Austen's text)
BACK_MATTER_RE = re.compile(r"^\s*a note on the text\s*$", re.IGNORECASE)
# "THE END" / "FINIS" closing some novels
END_MARKER_RE = re.compile(r"^\s*(the\s+end|finis)\.?\s*$", re.IGNORECASE)


def body_lines(lines):
    """The novel without what follows its text: a trailing editor's note
    (BACK_MATTER_RE to the end) and a final end marker (END_MARKER_RE, when
    only empty lines follow it)."""
    end = len(lines)
    for i, line in enumerate(lines):
        if BACK_MATTER_RE.match(line):
            end = i
            break
    while end > 0 and not lines[end - 1].strip():
        end -= 1
    if end > 0 and END_MARKER_RE.match(lines[end - 1]):
        end -= 1
    return lines[:end]


def split_chapters(lines):
    """Chapters of a novel: each starts at a line matching CHAPTER_RE and runs
    to the line before the next one. Dropped: lines before the first heading
    (title page, Northanger Abbey's "Advertisement by the Authoress"), volume
    heading lines, the back matter of body_lines(), and empty lines at the end
    of a chapter. Lines are kept as they are (indentation included) except the
    heading, which is stripped, and trailing blanks, which are removed."""
    chapters = []
    cur = None
    for line in body_lines(lines):
        if CHAPTER_RE.match(line):
            if cur is not None:
                chapters.append(cur)
            cur = [line.strip()]
        elif cur is not None and not VOLUME_RE.match(line):
            cur.append(line.rstrip())
    if cur is not None:
        chapters.append(cur)
    out = []
    for ch in chapters:
        while ch and ch[-1] == "":
            ch.pop()
        out.append("\n".join(ch))
    return out


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def repo_root():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.dirname(os.path.dirname(here))  # examples/data -> repo


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def outputs_current(out_dir):
    """The manifest if train.txt, val.txt and manifest.json exist and the
    files match the manifest's hashes and this script's format; else None."""
    mpath = os.path.join(out_dir, "manifest.json")
    try:
        with open(mpath, encoding="utf-8") as f:
            man = json.load(f)
        if man.get("format_version") != FORMAT_VERSION:
            return None
        for fname, info in man["files"].items():
            p = os.path.join(out_dir, fname)
            if os.path.getsize(p) != info["bytes"] or sha256_file(p) != info["sha256"]:
                return None
        if set(man["files"]) != {"train.txt", "val.txt"}:
            return None
        return man
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    give_to_sudo_user(path)


def give_to_sudo_user(path):
    """Under sudo, hand what we create to the invoking user, not root."""
    if os.geteuid() != 0:
        return
    try:
        uid, gid = int(os.environ["SUDO_UID"]), int(os.environ["SUDO_GID"])
    except (KeyError, ValueError):
        return
    try:
        os.chown(path, uid, gid)
    except OSError:
        pass


def make_out_dir(out_dir):
    missing = []
    d = out_dir
    while not os.path.isdir(d):
        missing.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    os.makedirs(out_dir, exist_ok=True)
    for d in reversed(missing):
        give_to_sudo_user(d)


def summary(man, out_dir, took, note):
    f = man["files"]
    return ("prepare_austen: %s %d novels, %d train / %d val chapters, "
            "train.txt %d bytes, val.txt %d bytes -> %s (%.1fs)"
            % (note, len(man["novels"]), f["train.txt"]["documents"],
               f["val.txt"]["documents"], f["train.txt"]["bytes"],
               f["val.txt"]["bytes"], out_dir, took))


def write_outputs(out_dir, splits, per_novel, version, source):
    make_out_dir(out_dir)
    files = {}
    for fname, docs in splits.items():
        data = SEPARATOR.join(docs).encode("utf-8")
        write_atomic(os.path.join(out_dir, fname), data)
        files[fname] = {
            "documents": len(docs),
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
    man = {
        "format_version": FORMAT_VERSION,
        "source": {"debian_package": PACKAGE, "r_package": R_PACKAGE,
                   "version": version, "from": source},
        "separator": "\\f (form feed, U+000C) between chapters",
        "encoding": "utf-8",
        "novels": per_novel,
        "files": files,
    }
    write_atomic(os.path.join(out_dir, "manifest.json"),
                 (json.dumps(man, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    return man


def prepare(args):
    t0 = time.monotonic()
    out_dir = os.path.abspath(args.out or os.path.join(repo_root(), "examples", "data", "austen"))
    if not args.force:
        man = outputs_current(out_dir)
        if man is not None:
            return summary(man, out_dir, time.monotonic() - t0, "up to date:")

    names = [n for n, _ in TRAIN_NOVELS + VAL_NOVELS]
    novels, version = load_novels(args.rscript, names)
    source = "Rscript, R package %s %s" % (R_PACKAGE, version)

    per_novel = {}
    splits = {"train.txt": [], "val.txt": []}
    for split, group in (("train.txt", TRAIN_NOVELS), ("val.txt", VAL_NOVELS)):
        for name, title in group:
            chapters = split_chapters(novels[name])
            if not chapters:
                raise PrepError("no chapter headings found in '%s'" % name)
            for ch in chapters:
                if SEPARATOR in ch:
                    raise PrepError("'%s' contains a form feed, the document separator"
                                    % name)
            splits[split].extend(chapters)
            per_novel[name] = {
                "title": title,
                "split": split[:-4],
                "lines": len(novels[name]),
                "chapters": len(chapters),
                "bytes": sum(len(c.encode("utf-8")) for c in chapters),
            }

    try:
        man = write_outputs(out_dir, splits, per_novel, version, source)
    except OSError as exc:
        raise PrepError("cannot write the outputs to %s: %s" % (out_dir, exc))
    return summary(man, out_dir, time.monotonic() - t0, "wrote")


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Build train.txt/val.txt (chapters separated by form feeds) "
                    "from the R package janeaustenr, through Rscript.")
    ap.add_argument("--rscript", metavar="PATH", default="Rscript",
                    help="the Rscript to run (default: Rscript on PATH)")
    ap.add_argument("--out", metavar="DIR",
                    help="output directory (default: examples/data/austen in the repository)")
    ap.add_argument("--force", action="store_true",
                    help="rebuild even if the outputs exist and match the manifest")
    ap.add_argument("--quiet", action="store_true", help="print nothing on success")
    args = ap.parse_args(argv)
    try:
        line = prepare(args)
        if not args.quiet:
            print(line)
    except PrepError as exc:
        print("prepare_austen: error: %s" % exc, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("prepare_austen: interrupted", file=sys.stderr)
        return 1
    except (OSError, UnicodeDecodeError) as exc:
        print("prepare_austen: error: %s" % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
