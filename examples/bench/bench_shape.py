"""The benchmark student's shape, as both sides of the comparison see it.

torch_step.py and compare.py share this module so that the presets, the shape
options and the "# model:" header line are defined once. Standard library only:
compare.py must run where torch is not installed.
"""

import re

# Option name -> key of the shape dict. The names are bench_step's.
SHAPE_OPTIONS = (
    ("--layers", "layers"),
    ("--d-model", "d_model"),
    ("--heads", "heads"),
    ("--kv-heads", "kv_heads"),
    ("--head-dim", "head_dim"),
    ("--d-ff", "d_ff"),
    ("--vocab", "vocab"),
    ("--batch", "batch"),
    ("--seq", "seq"),
    ("--qk-norm", "qk_norm"),
)

PRESETS = {
    # The reproduction study's student (doc/REPRODUCTION.md).
    "study": dict(layers=9, d_model=64, heads=4, kv_heads=2, head_dim=16, d_ff=192, vocab=257,
                  batch=16, seq=128, qk_norm=1),
    # bench_step's built-in student (its enum of constants and mp.qk_norm = 1).
    "d256": dict(layers=9, d_model=256, heads=4, kv_heads=4, head_dim=64, d_ff=768, vocab=256,
                 batch=16, seq=256, qk_norm=1),
}

DEFAULT_PRESET = "d256"
PLACEMENTS = ("pre", "post", "peri")


def _positive_int(text):
    try:
        value = int(text, 10)
    except ValueError:
        raise ValueError("'%s' is not an integer" % text) from None
    if value < 1:
        raise ValueError("%d must be positive" % value)
    return value


def add_shape_arguments(parser):
    """The shape options and --preset; each option overrides the preset."""
    parser.add_argument("--preset", choices=sorted(PRESETS), default=DEFAULT_PRESET,
                        help="base shape (default %(default)s, bench_step's own)")
    for option, key in SHAPE_OPTIONS:
        if key == "qk_norm":
            parser.add_argument(option, dest=key, type=int, choices=(0, 1),
                                help="per-head q/k RMSNorm (preset's value)")
        else:
            parser.add_argument(option, dest=key, type=int, metavar="N",
                                help="(preset's value)")


def resolve_shape(args):
    """The preset with the options given on the command line laid over it,
    checked the way lattice_model_params_check would refuse it."""
    shape = dict(PRESETS[args.preset])
    for _, key in SHAPE_OPTIONS:
        value = getattr(args, key)
        if value is not None:
            shape[key] = value
    for key, value in shape.items():
        if key != "qk_norm" and value < 1:
            raise ValueError("%s must be positive, not %d" % (key, value))
    if shape["heads"] % shape["kv_heads"]:
        raise ValueError("heads %d is not divisible by kv-heads %d"
                         % (shape["heads"], shape["kv_heads"]))
    if shape["head_dim"] % 2:
        raise ValueError("head-dim %d must be even (RoPE rotates pairs)" % shape["head_dim"])
    return shape


def shape_argv(shape, only=None):
    """Command-line options that give this shape; only: option names to emit."""
    argv = []
    for option, key in SHAPE_OPTIONS:
        if only is None or option in only:
            argv += [option, str(shape[key])]
    return argv


def model_line(shape, n_params):
    """bench_step's "# model:" header line for this shape."""
    return ("# model: %d layers, d_model %d, %d heads (%d kv) of %d, d_ff %d, vocab %d, "
            "qk-norm %s, %.2fM parameters; batch %d x %d tokens"
            % (shape["layers"], shape["d_model"], shape["heads"], shape["kv_heads"],
               shape["head_dim"], shape["d_ff"], shape["vocab"],
               "on" if shape["qk_norm"] else "off", n_params / 1e6,
               shape["batch"], shape["seq"]))


_MODEL_RE = re.compile(
    r"#\s*model:\s*(?P<layers>\d+) layers, d_model (?P<d_model>\d+), (?P<heads>\d+) heads "
    r"\((?P<kv_heads>\d+) kv\) of (?P<head_dim>\d+), d_ff (?P<d_ff>\d+), vocab (?P<vocab>\d+), "
    r"(?:qk-norm (?P<qk_norm>on|off), )?"
    r"(?P<mparams>[0-9.]+)M parameters; batch (?P<batch>\d+) x (?P<seq>\d+)")


def parse_model_line(line):
    """(shape, parameters in millions as printed) or None; qk_norm is in the
    shape when the line states it."""
    found = _MODEL_RE.search(line)
    if not found:
        return None
    shape = {k: int(v) for k, v in found.groupdict().items()
             if k not in ("mparams", "qk_norm") and v is not None}
    if found.group("qk_norm"):
        shape["qk_norm"] = 1 if found.group("qk_norm") == "on" else 0
    return shape, float(found.group("mparams"))
