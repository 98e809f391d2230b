#!/usr/bin/env python3
"""Build the API reference and hold it to the project's rules.

usage: check_docs.py DOXYGEN DOXYFILE XML_DIR

Runs Doxygen (whose configuration fails on any warning: an undocumented
function, type, field, enum value or parameter), then reads the XML it wrote
and holds every public entity (functions, macros, typedefs, enums and their
values, structs and their fields) to the @since rule, as zstd marks its API:
what 0.1 had carries no @since; what came later says since when. Checked
against what 0.1 had (doc/since-0.1.txt, taken from 0.1's ABI, read through
the 0.3 renames of doc/renames-0.3.txt, so a renamed name counts as its 0.1
one) and 0.1's macros:

- an entity without @since must be in 0.1, or be a field or value of a struct
  or enum that has a later @since (it came with its parent);
- an entity with @since must not be in 0.1, and none says 0.1;
- a field or value appended to a 0.1 struct or enum carries its own @since.
"""
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

MEMBER_KINDS = {"function", "define", "typedef", "enum", "variable"}
HERE = os.path.dirname(os.path.abspath(__file__))
SINCE_0_1 = os.path.join(HERE, "since-0.1.txt")
RENAMES = os.path.join(HERE, "renames-0.3.txt")
# The macros 0.1's public headers defined (488c4a9), include guards aside:
# macros are not in an ABI.
MACROS_0_1 = {"LATTICE_API", "LATTICE_BACKEND_OPS_VERSION", "LATTICE_ERRMSG_SIZE",
              "LATTICE_VERSION_MAJOR", "LATTICE_VERSION_MINOR", "LATTICE_VERSION_PATCH",
              "LATTICE_VERSION_NUMBER", "LATTICE_VERSION_STRING"}


def since(node):
    """The version a node's @since gives, or None."""
    for s in node.iter("simplesect"):
        if s.get("kind") == "since":
            return "".join(s.itertext()).strip()
    return None


class Release01:
    """What 0.1 had: functions, types, each struct's fields, enum values."""

    def __init__(self):
        self.names = set(MACROS_0_1)
        self.fields = {}
        with open(SINCE_0_1, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                struct, _, field = line.partition(".")
                if field:
                    self.fields.setdefault(struct, set()).add(field)
                else:
                    self.names.add(struct)
        self.old_name = {}
        with open(RENAMES, encoding="utf-8") as f:
            for line in f:
                words = line.split()
                if len(words) == 2 and not line.startswith("#"):
                    self.old_name[words[1]] = words[0]

    def has(self, name):
        return name in self.names or self.old_name.get(name) in self.names

    def has_field(self, struct, field):
        for s in (struct, self.old_name.get(struct)):
            if field in self.fields.get(s, ()):
                return True
        return False


def where(node):
    loc = node.find("location")
    if loc is None:
        return "?"
    return "%s:%s" % (loc.get("file"), loc.get("line") or loc.get("bodystart") or "?")


def since_problems(xml_dir, version):
    """Every entity that breaks the @since rule, as (where, kind, name, why)."""
    r01 = Release01()
    index = ET.parse(os.path.join(xml_dir, "index.xml")).getroot()
    seen = set()
    problems = []

    def judge(node, kind, name, tag, in_0_1, parent_tag):
        if tag is not None:
            try:
                later = tuple(int(x) for x in tag.split(".")) > (0, 1)
                newer = tuple(int(x) for x in tag.split(".")) > version
            except ValueError:
                problems.append((where(node), kind, name, "@since %r is not a version" % tag))
                return
            if not later:
                problems.append((where(node), kind, name, "says @since 0.1: what 0.1 had is untagged"))
            elif in_0_1:
                problems.append((where(node), kind, name, "says @since %s but 0.1 had it" % tag))
            elif newer:
                problems.append((where(node), kind, name, "says @since %s, after this release" % tag))
        elif not in_0_1 and parent_tag is None:
            problems.append((where(node), kind, name, "came after 0.1 and has no @since"))

    for compound in index.findall("compound"):
        if compound.get("kind") not in ("file", "group", "struct", "union"):
            continue
        root = ET.parse(os.path.join(xml_dir, compound.get("refid") + ".xml")).getroot()
        for cdef in root.findall("compounddef"):
            kind = cdef.get("kind")
            cname = cdef.findtext("compoundname")
            ctag = None
            if kind in ("struct", "union"):
                ctag = since(cdef.find("detaileddescription")) or since(cdef.find("briefdescription"))
                if cdef.get("id") not in seen:
                    seen.add(cdef.get("id"))
                    judge(cdef, kind, cname, ctag, r01.has(cname), None)
            for member in cdef.iter("memberdef"):
                if member.get("kind") not in MEMBER_KINDS or member.get("id") in seen:
                    continue
                seen.add(member.get("id"))
                name = member.findtext("name")
                # A member's own text only: enum values are judged one by one below.
                own = [member.find(t) for t in ("briefdescription", "detaileddescription",
                                                "inbodydescription")]
                tag = next((since(d) for d in own if d is not None and since(d)), None)
                if kind in ("struct", "union") and member.get("kind") == "variable":
                    in_0_1 = r01.has_field(cname, name)
                    judge(member, "field", cname + "." + name, tag, in_0_1,
                          ctag if not r01.has(cname) else None)
                else:
                    judge(member, member.get("kind"), name, tag, r01.has(name), None)
                for value in member.findall("enumvalue"):
                    if value.get("id") in seen:
                        continue
                    seen.add(value.get("id"))
                    vname = value.findtext("name")
                    judge(member, "enum value", vname, since(value), r01.has(vname),
                          tag if not r01.has(name) else None)
    return problems


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    doxygen, doxyfile, xml_dir = sys.argv[1:]
    doxyfile = os.path.abspath(doxyfile)
    # Stale XML of an entity since removed would be judged too.
    shutil.rmtree(xml_dir, ignore_errors=True)
    run = subprocess.run([doxygen, doxyfile], cwd=os.path.dirname(doxyfile),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if run.stdout:
        sys.stdout.write(run.stdout)
    if run.returncode != 0 or "warning:" in run.stdout or "error:" in run.stdout:
        print("docs: doxygen failed (status %d); every warning above is an error" % run.returncode)
        return 1
    version = None
    with open(doxyfile, encoding="utf-8") as f:
        for line in f:
            if line.split("=")[0].strip() == "PROJECT_NUMBER":
                version = tuple(int(x) for x in line.split("=", 1)[1].strip().split(".")[:2])
    if version is None:
        print("docs: no PROJECT_NUMBER in %s" % doxyfile)
        return 1
    problems = since_problems(xml_dir, version)
    for loc, kind, name, why in problems:
        print("%s: %s %s %s" % (loc, kind, name, why))
    if problems:
        print("docs: %d public entities break the @since rule (untagged: 0.1; later: @since X.Y)"
              % len(problems))
        return 1
    print("docs: %s" % os.path.join(os.path.dirname(doxyfile), "html", "index.html"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
