"""The tiny study both reproduce tests run: a generated corpus and a preset
small enough for a test (imported from the tests' own directory, which Python
puts first on sys.path when it runs a script)."""
import ctypes
import ctypes.util
import json
import os
import random
import struct
import tempfile


def corpus(path, n_docs, seed, paragraphs=False):
    """English-like text from a small grammar: documents separated by form feeds;
    with paragraphs, each document's sentences in paragraphs of two or three,
    separated by blank lines (for presets whose documents are paragraphs)."""
    rng = random.Random(seed)
    words = ("the lady said that mr darcy was not at home but her sister walked "
             "to the house in the morning and wrote a letter to elizabeth").split()
    docs = []
    for _ in range(n_docs):
        sents = []
        for _ in range(rng.randint(3, 8)):
            s = " ".join(rng.choice(words) for _ in range(rng.randint(4, 12)))
            sents.append(s.capitalize() + ".")
        if paragraphs:
            docs.append("\n\n".join(" ".join(sents[i:i + 3]) for i in range(0, len(sents), 3)))
        else:
            docs.append(" ".join(sents))
    with open(path, "w") as f:
        f.write("\f".join(docs))


_STAND_IN = None  # the folder, made once per process


def stand_in_env():
    """An environment whose default corpus is a stand-in: the shipped presets
    name no corpus, and the Austen one may not be prepared yet. --check builds
    every object on the data, so the stand-in holds enough text for every
    preset's validation batches."""
    global _STAND_IN
    if _STAND_IN is None:
        _STAND_IN = tempfile.TemporaryDirectory()
        for f, seed in (("train.txt", 1), ("val.txt", 2)):
            corpus(os.path.join(_STAND_IN.name, f), 2500, seed, paragraphs=True)
    return dict(os.environ, LATTICE_REPRODUCE_DATA=_STAND_IN.name)


def tiny_study(d, name, train_docs, train, arms, backend=None):
    """Writes train.txt (train_docs documents), val.txt and tiny.json into d:
    a 3-layer teacher and a 2-block student on 4 x 16 rows, 2 seeds, 1 thread,
    with the given "train" settings and arms, on the build's default backend or
    the one named. Returns the preset's path."""
    corpus(os.path.join(d, "train.txt"), train_docs, 1)
    corpus(os.path.join(d, "val.txt"), 8, 2)
    path = os.path.join(d, "tiny.json")
    with open(path, "w") as f:
        json.dump({
            "name": name,
            "data": {"train": "train.txt", "val": "val.txt", "seq_len": 16, "batch_size": 4},
            "teacher": {"layers": 3, "steps": 12, "lr": 3e-3, "warmup": 2},
            "student": {"d_model": 16, "n_heads": 2, "n_kv_heads": 1, "head_dim": 8,
                        "d_ff": 32, "blocks": 2, "block_size": 1},
            "train": train,
            "seeds": 2, "threads": 1,
            "arms": arms, **({"backend": backend} if backend else {})}, f)
    return path


TIMING_KEYS = ("wall_seconds", "seconds", "tokens_per_s")  # differ between any two runs


def without_timings(o):
    """results.json without the figures that differ between any two runs."""
    if isinstance(o, dict):
        return {k: without_timings(v) for k, v in o.items() if k not in TIMING_KEYS}
    if isinstance(o, list):
        return [without_timings(x) for x in o]
    return o


def write(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)


KEPT_HEAD = struct.Struct("<48sII3Q")  # examples/reproduce/store.c, kept_head


def xxh64(data):
    """XXH64 with seed 0, from Debian's libxxhash (the checksum kept runs carry)."""
    lib = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
    lib.XXH64.restype = ctypes.c_uint64
    lib.XXH64.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
    return lib.XXH64(data, len(data), 0)


def kept_parts(data):
    """A kept run's file (format 2): its header as a dict, its settings text,
    its record, its checksum."""
    assert data[:8] == b"LATRUN\0\2", data[:8]
    arm, seed, _, slen, rbytes, rheader = KEPT_HEAD.unpack_from(data, 8)
    at = 8 + KEPT_HEAD.size
    head = {"arm": arm.rstrip(b"\0").decode(), "seed": seed, "record_header": rheader}
    settings = data[at:at + slen]
    record = data[at + slen:at + slen + rbytes]
    assert len(data) == at + slen + rbytes + 8
    return head, settings, record, struct.unpack("<Q", data[-8:])[0]


def kept_file(arm, seed, settings, record, record_header):
    """A kept run's file (format 2) from its parts, with its checksum."""
    body = (b"LATRUN\0\2" + KEPT_HEAD.pack(arm.encode(), seed, 0, len(settings), len(record),
                                            record_header) + settings + record)
    return body + struct.pack("<Q", xxh64(body))


# run_result's layout on x86-64 (examples/reproduce/study.h): where each array
# starts and its entry's size, then the record's size
_NONFINITE = {"NaN": 0x7FF8 << 48, "-NaN": 0xFFF8 << 48, "Infinity": 0x7FF0 << 48,
              "-Infinity": 0xFFF0 << 48}
_GROUPS = {  # group: (offset, entry size, [(column, offset in the entry, struct code)])
    "points": [(8, 64, [("step", 0, "q"), ("active_layer_tokens", 8, "q"), ("phase", 16, "i"),
                        ("active_layers", 20, "i"), ("val_ce", 24, "d"), ("rms_std", 32, "d"),
                        ("rms_kurtosis", 40, "d"), ("rms_boundary", 48, "d"),
                        ("rms_regular", 56, "d")]),
               (263936, 32, [("attention_mass_pos0", 0, "d"), ("sink_rate", 8, "d"),
                             ("top_over_median", 16, "d"), ("value_norm_ratio_pos0", 24, "d")])],
    "phase_changes": [(262200, 8, [("step", 0, "q")]), (262268, 4, [("is_append", 0, "i")]),
                      (262304, 32, [("baseline", 0, "d"), ("jump", 8, "d"), ("area", 16, "d"),
                                    ("recovery", 24, "q")]),
                      (262560, 8, [("area2", 0, "d")]), (262624, 8, [("area10", 0, "d")])],
    "blocks": [(262688, 32, [("ce_full", 0, "d"), ("ce_removed", 8, "d"), ("dce", 16, "d"),
                             ("angle", 24, "d")])],
    "boundaries": [(262952 + 40 * j, 120, [(which + "_count", 0, "q"), (which + "_mean", 8, "d"),
                                           (which + "_std", 16, "d"),
                                           (which + "_kurtosis", 24, "d"),
                                           (which + "_max", 32, "d")])
                   for j, which in enumerate(("regular", "boundary", "all"))],
}
_COUNTS = {"points": 262152, "phase_changes": 262264, "blocks": 262944, "boundaries": 263912}
RECORD_HEADER = 4 + 395008  # the job, run_result


def _pack(code, v):
    if code == "d" and isinstance(v, str):
        return struct.pack("<Q", _NONFINITE[v] if v in _NONFINITE else int(v[4:], 16))
    return struct.pack("<" + code, v)


def kept_raw(data):
    """A kept run's file of format 3 (JSON) as format 2 (raw bytes, as 0.5 to
    1.0 kept them): a second description of run_result's layout, in Python."""
    kept = json.loads(data)
    rec = kept["record"]
    buf = bytearray(RECORD_HEADER - 4)
    for key, at in (("final_val", 0), ("seconds", 263920), ("tokens_per_s", 263928)):
        buf[at:at + 8] = _pack("d", rec[key])
    for group, parts in _GROUPS.items():
        n = len(next(iter(rec[group].values())))
        buf[_COUNTS[group]:_COUNTS[group] + 4] = struct.pack("<i", n)
        for base, size, cols in parts:
            for col, off, code in cols:
                for k, v in enumerate(rec[group][col]):
                    at = base + k * size + off
                    buf[at:at + struct.calcsize(code)] = _pack(code, v)
    steps = rec["steps"]
    n = len(steps["loss"])
    buf[262192:262200] = struct.pack("<q", n)
    record = struct.pack("<i", kept["job"]) + bytes(buf) + b"".join(
        b"".join(_pack(code, v) for v in steps[col])
        for col, code in (("loss", "d"), ("phase", "i"), ("active_layers", "i"),
                          ("active_layer_tokens", "q")))
    start = data.index(b',"settings":') + len(b',"settings":')
    settings = data[start:data.index(b',"record":{', start)]
    return kept_file(kept["arm"], kept["seed"], settings, record, RECORD_HEADER)


def tiny_arms_study(d, arms, compare=None):
    preset = tiny_study(
        d, "tiny-traps", 40,
        {"steps_per_phase": 4, "warmup": 1, "eval_every": 4, "eval_batches": 1,
         "final_eval_batches": 1},
        arms)
    if compare is not None:
        with open(preset) as f:
            p = json.load(f)
        p["compare"] = compare
        write(preset, p)
    return preset


def results(out):
    with open(os.path.join(out, "results.json")) as f:
        return json.load(f)
