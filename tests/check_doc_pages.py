#!/usr/bin/env python3
"""The docs as a code host shows them, without Doxygen (issue 28 part 4).

- doc/mainpage.md, the guide, carries its code inline: each block that follows
  a `<!-- guide_example.c: NAME -->` line is, line for line, the section of
  doc/guide_example.c between its two `//! [NAME]` markers (less their common
  indentation), so the guide shows the program the suite compiles and runs;
  and it uses none of Doxygen's own directives (@snippet, @include, @ref, ::name),
  which a code host shows as holes.
- doc/README.md, the reading order, names every page in doc/ and links only
  to files that exist.

    check_doc_pages.py DOC_DIR            check
    check_doc_pages.py DOC_DIR --update   rewrite the guide's code blocks from the program
"""
import os
import re
import sys

MARK = re.compile(r"^\s*//! \[([a-z_]+)\]\s*$")
BLOCK = re.compile(r"^<!-- guide_example\.c: ([a-z_]+) -->\n```c\n(.*?)^```$", re.M | re.S)
DOXYGEN_ONLY = re.compile(r"(?<![\w`])(?:[@\\](?:snippet|include|dontinclude|ref)\b|::[A-Za-z_])")


def sections(source):
    """NAME -> the lines between its markers, dedented, as one string."""
    out, open_at = {}, {}
    lines = source.split("\n")
    for i, line in enumerate(lines):
        m = MARK.match(line)
        if not m:
            continue
        name = m.group(1)
        if name in open_at:
            body = lines[open_at.pop(name) + 1:i]
            indent = min((len(l) - len(l.lstrip(" ")) for l in body if l.strip()), default=0)
            out[name] = "\n".join(l[indent:] for l in body).strip("\n") + "\n"
        elif name in out:
            sys.exit("guide_example.c: section %r marked twice" % name)
        else:
            open_at[name] = i
    if open_at:
        sys.exit("guide_example.c: section(s) %s never closed" % ", ".join(sorted(open_at)))
    return out


def main():
    doc = sys.argv[1]
    update = sys.argv[2:] == ["--update"]
    with open(os.path.join(doc, "guide_example.c"), encoding="utf-8") as f:
        secs = sections(f.read())
    guide_path = os.path.join(doc, "mainpage.md")
    with open(guide_path, encoding="utf-8") as f:
        guide = f.read()
    failures = []
    used = set()

    def fill(m):
        name = m.group(1)
        used.add(name)
        if name not in secs:
            failures.append("mainpage.md: no section %r in guide_example.c" % name)
            return m.group(0)
        if m.group(2) != secs[name]:
            failures.append("mainpage.md: the code of section %r differs from guide_example.c's"
                            " (check_doc_pages.py doc --update rewrites it)" % name)
        return "<!-- guide_example.c: %s -->\n```c\n%s```" % (name, secs[name])

    new_guide = BLOCK.sub(fill, guide)
    for name in sorted(set(secs) - used):
        failures.append("mainpage.md: guide_example.c's section %r is not shown" % name)
    for n, line in enumerate(guide.split("\n"), 1):
        if DOXYGEN_ONLY.search(line):
            failures.append("mainpage.md:%d: a Doxygen-only directive: %s" % (n, line.strip()))
    if update:
        if new_guide != guide:
            with open(guide_path + ".tmp", "w", encoding="utf-8") as f:
                f.write(new_guide)
                f.flush()
                os.fsync(f.fileno())
            os.replace(guide_path + ".tmp", guide_path)
            print("mainpage.md: code blocks rewritten from guide_example.c")
        failures = [f for f in failures if "differs from" not in f]

    with open(os.path.join(doc, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    links = re.findall(r"\]\(([^)#]+)\)", readme)
    for target in links:
        if not os.path.exists(os.path.join(doc, target)):
            failures.append("README.md: links to %s, which does not exist" % target)
    pages = sorted(n for n in os.listdir(doc) if n.endswith(".md") and n != "README.md")
    for page in pages:
        if page not in links:
            failures.append("README.md: does not list %s" % page)

    for f in failures:
        print(f)
    if failures:
        return 1
    print("guide: %d code sections as guide_example.c has them; README lists %d pages"
          % (len(secs), len(pages)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
