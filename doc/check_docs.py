#!/usr/bin/env python3
"""Build the API reference and hold it to the project's rules.

usage: check_docs.py DOXYGEN DOXYFILE XML_DIR

Runs Doxygen (whose configuration fails on any warning: an undocumented
function, type, field, enum value or parameter), then reads the XML it wrote
and fails unless every public entity says since which version it exists
(@since): functions, macros, typedefs, enums and their values, structs and
their fields. A field or value added to an existing struct or enum later must
carry its own, later @since, so none may lean on its parent's.
"""
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

MEMBER_KINDS = {"function", "define", "typedef", "enum", "variable"}


def has_since(node):
    return any(s.get("kind") == "since" for s in node.iter("simplesect"))


def where(node):
    loc = node.find("location")
    if loc is None:
        return "?"
    return "%s:%s" % (loc.get("file"), loc.get("line") or loc.get("bodystart") or "?")


def missing_since(xml_dir):
    index = ET.parse(os.path.join(xml_dir, "index.xml")).getroot()
    seen = set()
    missing = []
    for compound in index.findall("compound"):
        if compound.get("kind") not in ("file", "group", "struct", "union"):
            continue
        root = ET.parse(os.path.join(xml_dir, compound.get("refid") + ".xml")).getroot()
        for cdef in root.findall("compounddef"):
            kind = cdef.get("kind")
            if kind in ("struct", "union") and cdef.get("id") not in seen:
                seen.add(cdef.get("id"))
                if not has_since(cdef):
                    missing.append((where(cdef), kind, cdef.findtext("compoundname")))
            for member in cdef.iter("memberdef"):
                if member.get("kind") not in MEMBER_KINDS or member.get("id") in seen:
                    continue
                seen.add(member.get("id"))
                name = member.findtext("name")
                # A member's own text only: enum values are checked one by one below.
                own = [member.find(t) for t in ("briefdescription", "detaileddescription",
                                                "inbodydescription")]
                if not any(d is not None and has_since(d) for d in own):
                    missing.append((where(member), member.get("kind"), name))
                for value in member.findall("enumvalue"):
                    if value.get("id") in seen:
                        continue
                    seen.add(value.get("id"))
                    if not has_since(value):
                        missing.append((where(member), "enum value", value.findtext("name")))
    return missing


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
    missing = missing_since(xml_dir)
    for loc, kind, name in missing:
        print("%s: %s %s has no @since" % (loc, kind, name))
    if missing:
        print("docs: %d public entities without @since" % len(missing))
        return 1
    print("docs: %s" % os.path.join(os.path.dirname(doxyfile), "html", "index.html"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
