"""The tiny study both reproduce tests run: a generated corpus and a preset
small enough for a test (imported from the tests' own directory, which Python
puts first on sys.path when it runs a script)."""
import json
import os
import random


def corpus(path, n_docs, seed):
    """English-like text from a small grammar: documents separated by form feeds."""
    rng = random.Random(seed)
    words = ("the lady said that mr darcy was not at home but her sister walked "
             "to the house in the morning and wrote a letter to elizabeth").split()
    docs = []
    for _ in range(n_docs):
        sents = []
        for _ in range(rng.randint(3, 8)):
            s = " ".join(rng.choice(words) for _ in range(rng.randint(4, 12)))
            sents.append(s.capitalize() + ".")
        docs.append(" ".join(sents))
    with open(path, "w") as f:
        f.write("\f".join(docs))


def tiny_study(d, name, train_docs, train, arms):
    """Writes train.txt (train_docs documents), val.txt and tiny.json into d:
    a 3-layer teacher and a 2-block student on 4 x 16 rows, 2 seeds, 1 thread,
    with the given "train" settings and arms. Returns the preset's path."""
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
            "arms": arms}, f)
    return path


TIMING_KEYS = ("wall_seconds", "seconds", "tokens_per_s")  # differ between any two runs


def without_timings(o):
    """results.json without the figures that differ between any two runs."""
    if isinstance(o, dict):
        return {k: without_timings(v) for k, v in o.items() if k not in TIMING_KEYS}
    if isinstance(o, list):
        return [without_timings(x) for x in o]
    return o
