#!/usr/bin/env python3
"""Prepare the Jane Austen corpus of the reproduction study.

Source: Debian's package ``r-cran-janeaustenr`` (the CRAN package
janeaustenr by Julia Silge, MIT licence; the novels themselves are public
domain). R is NOT needed: the package's lazy-load data base
(``usr/lib/R/site-library/janeaustenr/data/Rdata.rdb`` + ``.rdx``) is read by
a small reader of R's serialization format written for this script.

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

Only Python 3's standard library is used. Python 3.8 or later.

Exit status: 0 on success (also when the outputs were already up to date),
1 on any error (a one-line message on stderr, no traceback), 2 on bad usage.
"""

import argparse
import bz2
import gzip
import hashlib
import json
import lzma
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib

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
# R serialization (unserialize) - the subset needed for data objects.
# Format: "X\n" (XDR, big-endian), version 2 or 3; see R's
# src/main/serialize.c for the authoritative description. Written from the
# format description, not from any other implementation.
# ---------------------------------------------------------------------------

# SEXP types
NILSXP, SYMSXP, LISTSXP, CLOSXP, ENVSXP, PROMSXP, LANGSXP = 0, 1, 2, 3, 4, 5, 6
SPECIALSXP, BUILTINSXP, CHARSXP, LGLSXP = 7, 8, 9, 10
INTSXP, REALSXP, CPLXSXP, STRSXP, DOTSXP = 13, 14, 15, 16, 17
VECSXP, EXPRSXP, BCODESXP, EXTPTRSXP, WEAKREFSXP, RAWSXP, S4SXP = (
    19, 20, 21, 22, 23, 24, 25)
# pseudo types used only in the stream
REFSXP, NILVALUE_SXP, GLOBALENV_SXP, UNBOUNDVALUE_SXP = 255, 254, 253, 252
MISSINGARG_SXP, BASENAMESPACE_SXP, NAMESPACESXP, PACKAGESXP = 251, 250, 249, 248
PERSISTSXP, CLASSREFSXP, GENERICREFSXP, BCREPDEF = 247, 246, 245, 244
EMPTYENV_SXP, BASEENV_SXP, ATTRLANGSXP, ATTRLISTSXP = 242, 241, 240, 239
ALTREP_SXP = 238

IS_OBJECT_BIT = 1 << 8
HAS_ATTR_BIT = 1 << 9
HAS_TAG_BIT = 1 << 10
# CHARSXP encoding bits, in the "levels" part of the flags
BYTES_MASK = 1 << 1
LATIN1_MASK = 1 << 2
UTF8_MASK = 1 << 3
ASCII_MASK = 1 << 6

NA_INTEGER = -(2 ** 31)

TYPE_NAMES = {
    NILSXP: "NULL", SYMSXP: "symbol", LISTSXP: "pairlist", CLOSXP: "closure",
    ENVSXP: "environment", PROMSXP: "promise", LANGSXP: "language",
    SPECIALSXP: "special", BUILTINSXP: "builtin", CHARSXP: "char",
    LGLSXP: "logical", INTSXP: "integer", REALSXP: "double",
    CPLXSXP: "complex", STRSXP: "character", DOTSXP: "...", VECSXP: "list",
    EXPRSXP: "expression", BCODESXP: "bytecode", EXTPTRSXP: "externalptr",
    WEAKREFSXP: "weakref", RAWSXP: "raw", S4SXP: "S4",
}


class RObject:
    """An R value: ``rtype`` (an SEXP type number), ``data`` and ``attrs``.

    data by type: vectors -> list (logical/integer: int or None for NA;
    double: float; complex: complex; character: str or None for NA; list:
    RObject/None items; raw: bytes); pairlist/language -> list of
    (tag or None, value); symbol -> name (str); environment -> dict of the
    frame; other kinds -> a dict of their parts. NULL is Python None.
    """

    __slots__ = ("rtype", "data", "attrs")

    def __init__(self, rtype, data, attrs=None):
        self.rtype = rtype
        self.data = data
        self.attrs = attrs if attrs is not None else {}

    @property
    def type_name(self):
        return TYPE_NAMES.get(self.rtype, "type %d" % self.rtype)

    def attr(self, name):
        return self.attrs.get(name)

    def classes(self):
        cls = self.attrs.get("class")
        if isinstance(cls, RObject) and cls.rtype == STRSXP:
            return [c for c in cls.data if c is not None]
        return []

    def names(self):
        nm = self.attrs.get("names")
        if isinstance(nm, RObject) and nm.rtype == STRSXP:
            return nm.data
        return None

    def __repr__(self):
        n = len(self.data) if isinstance(self.data, (list, dict)) else ""
        return "<R %s %s>" % (self.type_name, n)


class RPersistent:
    """A reference the writer stored by name (PERSISTSXP), e.g. "env::1" in a
    lazy-load data base. Resolved by the lazy-load reader where it matters."""

    __slots__ = ("names",)

    def __init__(self, names):
        self.names = names

    def __repr__(self):
        return "<R persistent %r>" % (self.names,)


class RSpecial:
    """A singleton of the stream: global env, base env, missing arg, ..."""

    __slots__ = ("what",)

    def __init__(self, what):
        self.what = what

    def __repr__(self):
        return "<R %s>" % self.what


class Unserializer:
    """Reads one R object from a serialization stream (XDR format)."""

    def __init__(self, buf, what="stream"):
        self.buf = memoryview(buf)
        self.pos = 0
        self.what = what
        self.refs = []
        self.native_encoding = None

    # -- primitives ---------------------------------------------------------
    def fail(self, msg):
        raise PrepError("%s: malformed R serialization at byte %d: %s"
                        % (self.what, self.pos, msg))

    def take(self, n):
        if n < 0 or self.pos + n > len(self.buf):
            self.fail("truncated (wanted %d bytes, %d left)"
                      % (n, len(self.buf) - self.pos))
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def int(self):
        return struct.unpack(">i", self.take(4))[0]

    def ints(self, n):
        return struct.unpack(">%di" % n, self.take(4 * n))

    def doubles(self, n):
        return struct.unpack(">%dd" % n, self.take(8 * n))

    def length(self):
        n = self.int()
        if n == -1:  # long vector: two more ints, upper and lower 32 bits
            hi, lo = struct.unpack(">II", self.take(8))
            n = (hi << 32) | lo
        elif n < 0:
            self.fail("negative length %d" % n)
        # every element takes at least one byte: a cheap sanity check
        if n > len(self.buf) - self.pos and n > 0:
            self.fail("length %d exceeds the remaining data" % n)
        return n

    # -- entry point --------------------------------------------------------
    def read(self):
        fmt = bytes(self.take(2))
        if fmt != b"X\n":
            if fmt in (b"A\n", b"B\n"):
                self.fail("format %r (ascii/native binary) is not supported, "
                          "only XDR ('X')" % fmt)
            self.fail("not an R serialization stream (starts with %r)" % fmt)
        version = self.int()
        self.int()  # R version that wrote it
        self.int()  # minimal R version to read it
        if version == 3:
            nelen = self.int()
            if nelen < 0 or nelen > 255:
                self.fail("bad native encoding length %d" % nelen)
            self.native_encoding = bytes(self.take(nelen)).decode("ascii", "replace")
        elif version != 2:
            self.fail("serialization version %d (only 2 and 3 are known)" % version)
        obj = self.item()
        return obj

    # -- items --------------------------------------------------------------
    def item(self):
        flags = self.int()
        t = flags & 0xFF
        levels = flags >> 12
        has_attr = bool(flags & HAS_ATTR_BIT)
        has_tag = bool(flags & HAS_TAG_BIT)

        if t == NILVALUE_SXP:
            return None
        if t == REFSXP:
            idx = flags >> 8
            if idx == 0:
                idx = self.int()
            if idx < 1 or idx > len(self.refs):
                self.fail("reference %d out of range (%d known)" % (idx, len(self.refs)))
            return self.refs[idx - 1]
        if t == EMPTYENV_SXP:
            return RSpecial("emptyenv")
        if t == BASEENV_SXP:
            return RSpecial("baseenv")
        if t == GLOBALENV_SXP:
            return RSpecial("globalenv")
        if t == UNBOUNDVALUE_SXP:
            return RSpecial("unbound")
        if t == MISSINGARG_SXP:
            return RSpecial("missingarg")
        if t == BASENAMESPACE_SXP:
            return RSpecial("basenamespace")
        if t == PERSISTSXP:
            obj = RPersistent(self.string_vec())
            self.refs.append(obj)
            return obj
        if t == SYMSXP:
            name = self.item()  # a CHARSXP
            obj = RObject(SYMSXP, name if isinstance(name, str) else "")
            self.refs.append(obj)
            return obj
        if t in (PACKAGESXP, NAMESPACESXP):
            obj = RObject(ENVSXP, {}, {"(%s)" % ("package" if t == PACKAGESXP
                                                 else "namespace"):
                                       RObject(STRSXP, self.string_vec())})
            self.refs.append(obj)
            return obj
        if t == ENVSXP:
            locked = self.int()
            obj = RObject(ENVSXP, {})
            self.refs.append(obj)  # before the contents: they may refer to it
            enclos = self.item()
            frame = self.item()
            hashtab = self.item()
            attrib = self.item()
            del locked, enclos
            if isinstance(frame, RObject) and frame.rtype == LISTSXP:
                for tag, val in frame.data:
                    obj.data[tag] = val
            if isinstance(hashtab, RObject) and hashtab.rtype == VECSXP:
                for bucket in hashtab.data:
                    if isinstance(bucket, RObject) and bucket.rtype == LISTSXP:
                        for tag, val in bucket.data:
                            obj.data[tag] = val
            obj.attrs = self.attrs_from_pairlist(attrib)
            return obj
        if t in (LISTSXP, LANGSXP, CLOSXP, PROMSXP, DOTSXP,
                 ATTRLANGSXP, ATTRLISTSXP):
            return self.pairlist(t, flags)
        if t == CHARSXP:
            return self.charsxp(levels)
        if t in (LGLSXP, INTSXP):
            n = self.length()
            data = [None if v == NA_INTEGER else v for v in self.ints(n)]
            return self.finish(RObject(t, data), has_attr)
        if t == REALSXP:
            n = self.length()
            return self.finish(RObject(t, list(self.doubles(n))), has_attr)
        if t == CPLXSXP:
            n = self.length()
            d = self.doubles(2 * n)
            data = [complex(d[2 * i], d[2 * i + 1]) for i in range(n)]
            return self.finish(RObject(t, data), has_attr)
        if t == STRSXP:
            n = self.length()
            data = []
            for _ in range(n):
                s = self.item()
                if s is not None and not isinstance(s, str):
                    self.fail("character vector element is not a string")
                data.append(s)
            return self.finish(RObject(t, data), has_attr)
        if t in (VECSXP, EXPRSXP):
            n = self.length()
            data = [self.item() for _ in range(n)]
            return self.finish(RObject(t, data), has_attr)
        if t == RAWSXP:
            n = self.length()
            return self.finish(RObject(t, bytes(self.take(n))), has_attr)
        if t == S4SXP:
            return self.finish(RObject(t, None), has_attr)
        if t in (SPECIALSXP, BUILTINSXP):
            n = self.length()
            name = bytes(self.take(n)).decode("latin-1")
            return self.finish(RObject(t, name), has_attr)
        if t == EXTPTRSXP:
            obj = RObject(t, {})
            self.refs.append(obj)
            obj.data["prot"] = self.item()
            obj.data["tag"] = self.item()
            return self.finish(obj, has_attr)
        if t == WEAKREFSXP:
            obj = RObject(t, {})
            self.refs.append(obj)
            return self.finish(obj, has_attr)
        if t == ALTREP_SXP:
            return self.altrep()
        if t in (BCODESXP, BCREPDEF):
            self.fail("byte code objects are not supported")
        if t in (CLASSREFSXP, GENERICREFSXP):
            self.fail("this kind of reference (type %d) cannot be unserialized" % t)
        self.fail("unknown item type %d (flags 0x%x)" % (t, flags))
        return None  # not reached

    def finish(self, obj, has_attr):
        if has_attr:
            obj.attrs = self.attrs_from_pairlist(self.item())
        return obj

    def string_vec(self):
        """A string vector as stored for PERSISTSXP / PACKAGESXP."""
        if self.int() != 0:
            self.fail("bad string vector header")
        n = self.length()
        out = []
        for _ in range(n):
            s = self.item()
            out.append(s)
        return out

    def charsxp(self, levels):
        n = self.int()
        if n == -1:
            return None  # NA_character_
        if n < 0:
            self.fail("bad string length %d" % n)
        raw = bytes(self.take(n))
        if levels & UTF8_MASK:
            enc = "utf-8"
        elif levels & LATIN1_MASK:
            enc = "latin-1"
        elif levels & ASCII_MASK:
            enc = "ascii"
        elif levels & BYTES_MASK:
            enc = None
        else:  # native encoding of the writer
            enc = self.native_encoding or "utf-8"
        if enc is None:
            # "bytes" strings have no declared encoding: accept UTF-8 only.
            enc = "utf-8"
        try:
            return raw.decode(_python_encoding(enc))
        except (UnicodeDecodeError, LookupError) as exc:
            self.fail("string not valid in its encoding %s: %s" % (enc, exc))
        return None  # not reached

    def pairlist(self, t, flags):
        """LISTSXP-like cells: attributes, tag, CAR, then CDR (iteratively)."""
        kind = {ATTRLANGSXP: LANGSXP, ATTRLISTSXP: LISTSXP}.get(t, t)
        head = RObject(kind, [])
        cells = []
        while True:
            has_attr = bool(flags & HAS_ATTR_BIT)
            has_tag = bool(flags & HAS_TAG_BIT)
            attrs = self.attrs_from_pairlist(self.item()) if has_attr else {}
            tag = self.item() if has_tag else None
            if isinstance(tag, RObject) and tag.rtype == SYMSXP:
                tag = tag.data
            elif tag is not None and not isinstance(tag, str):
                tag = repr(tag)
            car = self.item()
            cells.append((tag, car))
            if not head.attrs and attrs:
                head.attrs = attrs
            # the CDR: another cell of the same kind continues the list
            flags = self.int()
            nt = flags & 0xFF
            if nt == NILVALUE_SXP:
                break
            if nt in (LISTSXP, ATTRLISTSXP) and kind in (LISTSXP, LANGSXP, DOTSXP):
                continue
            # anything else (closures: body; dotted pairs) - read it whole
            self.pos -= 4
            cells.append(("(cdr)", self.item()))
            break
        head.data = cells
        return head

    def attrs_from_pairlist(self, pl):
        if pl is None:
            return {}
        if not isinstance(pl, RObject) or pl.rtype != LISTSXP:
            self.fail("attributes are not a pairlist")
        return {tag if tag is not None else "": val for tag, val in pl.data}

    def altrep(self):
        info = self.item()
        state = self.item()
        attr = self.item()
        cls = None
        if isinstance(info, RObject) and info.rtype == LISTSXP and info.data:
            first = info.data[0][1]
            if isinstance(first, RObject) and first.rtype == SYMSXP:
                cls = first.data
        obj = expand_altrep(cls, state)
        if obj is None:
            self.fail("unsupported ALTREP class %r" % (cls,))
        obj.attrs = self.attrs_from_pairlist(attr)
        return obj


def _python_encoding(name):
    n = name.strip().lower().replace("_", "-")
    if n in ("", "unknown", "native"):
        return "utf-8"
    if n in ("latin1", "latin-1", "iso-8859-1", "iso8859-1"):
        return "latin-1"
    return n


def expand_altrep(cls, state):
    """Materialise the ALTREP classes base R writes into serializations."""
    if cls in ("compact_intseq", "compact_realseq"):
        if not (isinstance(state, RObject) and state.rtype == REALSXP
                and len(state.data) == 3):
            return None
        n, start, step = state.data
        vals = [start + i * step for i in range(int(n))]
        if cls == "compact_intseq":
            return RObject(INTSXP, [int(v) for v in vals])
        return RObject(REALSXP, vals)
    if cls and cls.startswith("wrap_"):
        # state: list(x, metadata)
        if isinstance(state, RObject) and state.rtype == VECSXP and state.data:
            x = state.data[0]
            if isinstance(x, RObject):
                return RObject(x.rtype, x.data)
        return None
    if cls == "deferred_string":
        # state: pairlist(arg, info); arg is the numeric vector to format
        if isinstance(state, RObject) and state.rtype == LISTSXP and state.data:
            arg = state.data[0][1]
            if isinstance(arg, RObject) and arg.rtype in (INTSXP, REALSXP):
                return RObject(STRSXP, [None if v is None else _r_num(v)
                                        for v in arg.data])
        return None
    return None


def _r_num(v):
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


def unserialize(buf, what="stream"):
    return Unserializer(buf, what).read()


def as_character(obj):
    """A character vector (list of str/None) from a character vector or a
    factor; None when obj is neither."""
    if isinstance(obj, RObject):
        if obj.rtype == STRSXP:
            return obj.data
        if obj.rtype == INTSXP and "factor" in obj.classes():
            levels = obj.attr("levels")
            if not (isinstance(levels, RObject) and levels.rtype == STRSXP):
                return None
            out = []
            for code in obj.data:
                if code is None:
                    out.append(None)
                elif 1 <= code <= len(levels.data):
                    out.append(levels.data[code - 1])
                else:
                    raise PrepError("factor code %d outside its %d levels"
                                    % (code, len(levels.data)))
            return out
    return None


# ---------------------------------------------------------------------------
# Lazy-load data bases (<name>.rdx index + <name>.rdb values)
# ---------------------------------------------------------------------------

def decompress_file_bytes(raw, what):
    """The .rdx index (and .rds files) are written by saveRDS(): gzip by
    default, possibly bzip2 or xz, or uncompressed."""
    try:
        if raw[:2] == b"\x1f\x8b":
            return gzip.decompress(raw)
        if raw[:3] == b"BZh":
            return bz2.decompress(raw)
        if raw[:6] == b"\xfd7zXZ\x00":
            return lzma.decompress(raw)
    except (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError) as exc:
        raise PrepError("%s: cannot decompress: %s" % (what, exc))
    return raw


# R's compress3 (xz) writes a raw LZMA2 stream with the settings of xz preset 6.
_R_LZMA_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 6}]


def decompress_value(blob, compressed, what):
    """Undo R's lazy-load compression of one value.

    compressed (from the index): 0 none; 1 (TRUE) zlib: 4-byte big-endian
    length then a zlib stream; 2 or 3: 4-byte length, a type byte, then the
    data: '0' stored, '1' zlib, '2' bzip2, 'Z' xz (raw LZMA2)."""
    if compressed == 0:
        return blob
    if len(blob) < 5:
        raise PrepError("%s: compressed value too short (%d bytes)" % (what, len(blob)))
    outlen = struct.unpack(">I", blob[:4])[0]
    try:
        if compressed == 1:
            out = zlib.decompress(blob[4:])
        elif compressed in (2, 3):
            kind = blob[4:5]
            body = blob[5:]
            if kind == b"0":
                out = body
            elif kind == b"1":
                out = zlib.decompress(body)
            elif kind == b"2":
                out = bz2.decompress(body)
            elif kind == b"Z":
                dec = lzma.LZMADecompressor(format=lzma.FORMAT_RAW,
                                            filters=_R_LZMA_FILTERS)
                out = dec.decompress(body, max_length=outlen)
            else:
                raise PrepError("%s: unknown compression type byte %r "
                                "(known: '0' stored, '1' zlib, '2' bzip2, 'Z' xz)"
                                % (what, kind))
        else:
            raise PrepError("%s: unknown compression scheme %r in the index "
                            "(known: 0, 1 zlib, 2 bzip2, 3 xz)" % (what, compressed))
    except (zlib.error, OSError, EOFError, lzma.LZMAError, ValueError) as exc:
        raise PrepError("%s: cannot decompress (scheme %s): %s"
                        % (what, compressed, exc))
    if len(out) != outlen:
        raise PrepError("%s: decompressed to %d bytes, the header says %d"
                        % (what, len(out), outlen))
    return out


class LazyLoadDB:
    """A lazy-load data base: ``base.rdx`` (index) and ``base.rdb`` (values)."""

    def __init__(self, base):
        self.base = base
        self.rdx = base + ".rdx"
        self.rdb = base + ".rdb"
        for p in (self.rdx, self.rdb):
            if not os.path.isfile(p):
                raise PrepError("lazy-load data base file missing: %s" % p)
        with open(self.rdx, "rb") as f:
            raw = f.read()
        index = unserialize(decompress_file_bytes(raw, self.rdx), self.rdx)
        if not (isinstance(index, RObject) and index.rtype == VECSXP
                and index.names()):
            raise PrepError("%s: the index is not a named list" % self.rdx)
        parts = dict(zip(index.names(), index.data))
        self.variables = self._keys(parts.get("variables"), "variables")
        self.references = self._keys(parts.get("references"), "references",
                                     allow_missing=True)
        comp = parts.get("compressed")
        if comp is None:
            self.compressed = 1
        elif (isinstance(comp, RObject) and comp.rtype in (LGLSXP, INTSXP, REALSXP)
              and len(comp.data) == 1 and comp.data[0] is not None):
            self.compressed = int(comp.data[0])
        else:
            raise PrepError("%s: bad 'compressed' entry in the index" % self.rdx)
        self.size = os.path.getsize(self.rdb)

    def _keys(self, obj, what, allow_missing=False):
        if obj is None and allow_missing:
            return {}
        if not (isinstance(obj, RObject) and obj.rtype == VECSXP):
            raise PrepError("%s: index entry '%s' is not a list" % (self.rdx, what))
        names = obj.names() or []
        if not obj.data:
            return {}
        if len(names) != len(obj.data):
            raise PrepError("%s: index entry '%s' has no names" % (self.rdx, what))
        out = {}
        for name, key in zip(names, obj.data):
            if not (isinstance(key, RObject) and key.rtype in (INTSXP, REALSXP)
                    and len(key.data) == 2 and None not in key.data):
                raise PrepError("%s: bad position of '%s' in the index" % (self.rdx, name))
            out[name] = (int(key.data[0]), int(key.data[1]))
        return out

    def fetch(self, name):
        if name not in self.variables:
            raise KeyError(name)
        offset, length = self.variables[name]
        what = "%s (object '%s')" % (self.rdb, name)
        if offset < 0 or length <= 0 or offset + length > self.size:
            raise PrepError("%s: position %d+%d lies outside the %d-byte file"
                            % (what, offset, length, self.size))
        with open(self.rdb, "rb") as f:
            f.seek(offset)
            blob = f.read(length)
        data = decompress_value(blob, self.compressed, what)
        return unserialize(data, what)


# ---------------------------------------------------------------------------
# Getting the package
# ---------------------------------------------------------------------------

def run_cmd(argv, cwd=None):
    try:
        return subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True)
    except FileNotFoundError:
        raise PrepError("command not found: %s" % argv[0])
    except OSError as exc:
        raise PrepError("cannot run %s: %s" % (argv[0], exc))


def last_lines(text, n=3):
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    # apt's harmless note about downloading as root without the _apt sandbox
    lines = [l for l in lines if "unsandboxed as root" not in l]
    return " | ".join(lines[-n:]) if lines else "(no output)"


INDEX_MISSING_HINTS = ("Unable to locate package", "has no installation candidate",
                       "Can't select", "No packages found")


def download_deb(tmpdir, quiet):
    """apt-get download the package into tmpdir; returns the .deb path."""
    if shutil.which("apt-get") is None:
        raise PrepError("apt-get not found: this needs Debian/Ubuntu, or pass "
                        "--deb FILE.deb / --pkgdir DIR")
    dl = os.path.join(tmpdir, "download")
    os.mkdir(dl)
    # let apt's unprivileged _apt user reach and write this directory (else,
    # as root, apt downloads unsandboxed and warns about it)
    os.chmod(tmpdir, 0o755)
    os.chmod(dl, 0o777)
    argv = ["apt-get", "download", PACKAGE]
    r = run_cmd(argv, cwd=dl)
    if r.returncode != 0 and any(h in r.stdout + r.stderr for h in INDEX_MISSING_HINTS):
        if not quiet:
            print("prepare_austen: %s not in the package index, running apt-get update"
                  % PACKAGE, file=sys.stderr)
        u = run_cmd(["apt-get", "update"])
        if u.returncode != 0:
            hint = "" if os.geteuid() == 0 else " (needs root: run with sudo)"
            raise PrepError("apt-get update failed%s: %s" % (hint, last_lines(u.stdout + u.stderr)))
        r = run_cmd(argv, cwd=dl)
    if r.returncode != 0:
        raise PrepError("cannot download %s with apt-get: %s"
                        % (PACKAGE, last_lines(r.stdout + r.stderr)))
    debs = sorted(f for f in os.listdir(dl) if f.endswith(".deb"))
    if len(debs) != 1:
        raise PrepError("apt-get download left %d .deb files in %s" % (len(debs), dl))
    return os.path.join(dl, debs[0])


def extract_deb(deb, dest):
    if not os.path.isfile(deb):
        raise PrepError("no such file: %s" % deb)
    os.makedirs(dest, exist_ok=True)
    if shutil.which("dpkg-deb"):
        r = run_cmd(["dpkg-deb", "-x", deb, dest])
        if r.returncode != 0:
            raise PrepError("dpkg-deb -x %s failed: %s" % (deb, last_lines(r.stderr)))
        return dest
    _extract_deb_python(deb, dest)
    return dest


def _extract_deb_python(deb, dest):
    """Fallback without dpkg-deb: a .deb is an ar archive holding data.tar.*"""
    with open(deb, "rb") as f:
        raw = f.read()
    if raw[:8] != b"!<arch>\n":
        raise PrepError("%s is not a .deb (ar) archive" % deb)
    pos = 8
    while pos + 60 <= len(raw):
        hdr = raw[pos:pos + 60]
        name = hdr[:16].decode("ascii", "replace").strip().rstrip("/")
        try:
            size = int(hdr[48:58].decode("ascii").strip())
        except ValueError:
            raise PrepError("%s: corrupt ar member header" % deb)
        body = raw[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)
        if not name.startswith("data.tar"):
            continue
        if name.endswith(".zst"):
            raise PrepError("%s: data.tar.zst needs dpkg-deb (not installed)" % deb)
        import io
        try:
            with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as tf:
                members = [m for m in tf.getmembers()
                           if (m.isfile() or m.isdir())
                           and not os.path.isabs(m.name)
                           and ".." not in m.name.split("/")]
                tf.extractall(dest, members=members)
        except (tarfile.TarError, OSError, EOFError, lzma.LZMAError) as exc:
            raise PrepError("%s: cannot unpack %s: %s" % (deb, name, exc))
        return
    raise PrepError("%s: no data.tar member found" % deb)


def find_package_root(pkgdir):
    """The installed R package directory (the one holding DESCRIPTION)."""
    if not os.path.isdir(pkgdir):
        raise PrepError("no such directory: %s" % pkgdir)
    candidates = [
        pkgdir,
        os.path.join(pkgdir, R_PACKAGE),
        os.path.join(pkgdir, "usr", "lib", "R", "site-library", R_PACKAGE),
        os.path.join(pkgdir, "usr", "local", "lib", "R", "site-library", R_PACKAGE),
        os.path.join(pkgdir, "usr", "lib", "R", "library", R_PACKAGE),
    ]
    for c in candidates:
        if _is_pkg_root(c):
            return c
    for root, dirs, _files in os.walk(pkgdir):
        dirs.sort()
        if os.path.basename(root) == R_PACKAGE and _is_pkg_root(root):
            return root
    raise PrepError("no installed R package '%s' (a %s directory with a DESCRIPTION) "
                    "under %s" % (R_PACKAGE, R_PACKAGE, pkgdir))


def _is_pkg_root(d):
    desc = os.path.join(d, "DESCRIPTION")
    if not os.path.isfile(desc):
        return False
    try:
        with open(desc, encoding="utf-8", errors="replace") as f:
            return any(l.strip() == "Package: " + R_PACKAGE for l in f)
    except OSError:
        return False


def package_version(root):
    try:
        with open(os.path.join(root, "DESCRIPTION"), encoding="utf-8",
                  errors="replace") as f:
            for line in f:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def load_novels(root, wanted):
    """{name: [line, ...]} for every name in wanted, from the package's
    lazy-load data bases: data/Rdata (LazyData) first, then the code data base
    R/<package> (which normally holds functions only)."""
    bases = [os.path.join(root, "data", "Rdata"),
             os.path.join(root, "R", R_PACKAGE)]
    dbs = [LazyLoadDB(b) for b in bases if os.path.isfile(b + ".rdx")]
    if not dbs:
        raise PrepError("no lazy-load data base (data/Rdata.rdx or R/%s.rdx) in %s"
                        % (R_PACKAGE, root))
    novels = {}
    missing = []
    for name in wanted:
        db = next((d for d in dbs if name in d.variables), None)
        if db is None:
            missing.append(name)
            continue
        obj = db.fetch(name)
        lines = as_character(obj)
        if lines is None:
            raise PrepError("%s: object '%s' is a %s, not a character vector"
                            % (db.rdb, name, getattr(obj, "type_name", type(obj).__name__)))
        novels[name] = ["" if l is None else l for l in lines]
    if missing:
        have = sorted(n for n in set().union(*(d.variables for d in dbs))
                      if not n.startswith("."))
        raise PrepError("novel(s) missing from the package: %s (objects found: %s)"
                        % (", ".join(missing), ", ".join(have) or "none"))
    return novels


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

    with tempfile.TemporaryDirectory(prefix="prepare_austen.") as tmp:
        if args.pkgdir:
            pkgdir = args.pkgdir
            source = "directory %s" % os.path.abspath(pkgdir)
        else:
            deb = args.deb or download_deb(tmp, args.quiet)
            source = os.path.basename(deb)
            pkgdir = extract_deb(deb, os.path.join(tmp, "pkg"))
        root = find_package_root(pkgdir)
        version = package_version(root)
        names = [n for n, _ in TRAIN_NOVELS + VAL_NOVELS]
        novels = load_novels(root, names)

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
                    "from Debian's r-cran-janeaustenr, without R.")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--deb", metavar="PATH", help="use this downloaded .deb")
    src.add_argument("--pkgdir", metavar="PATH",
                     help="use this extracted package tree (or the installed "
                          "R package directory itself)")
    ap.add_argument("--out", metavar="DIR",
                    help="output directory (default: examples/data/austen in the repository)")
    ap.add_argument("--force", action="store_true",
                    help="rebuild even if the outputs exist and match the manifest")
    ap.add_argument("--quiet", action="store_true", help="no progress notes on stderr")
    args = ap.parse_args(argv)
    try:
        print(prepare(args))
    except PrepError as exc:
        print("prepare_austen: error: %s" % exc, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("prepare_austen: interrupted", file=sys.stderr)
        return 1
    except OSError as exc:
        print("prepare_austen: error: %s" % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
