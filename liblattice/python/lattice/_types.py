"""ctypes mirrors of the public C types: structs, callbacks, opaque handles; the
enums, from _enums, are here too.

Every struct here has the C struct's fields in the C order and types; the
``size`` field that params structs start with is filled by the library's
``_init`` function (see :meth:`Params.defaults`).
"""

from __future__ import annotations

import ctypes
import inspect
import operator
import os
from typing import Any, Callable, Dict, List, Optional, Type, TypeVar, Union
from ctypes import (CFUNCTYPE, POINTER, c_char_p, c_double, c_float, c_int, c_int64,
                    c_size_t, c_uint, c_uint64, c_void_p)

from ._enums import (BlockInit, Enum, Group, KLDirection, LRShape, NormKind, NormPlacement,
                     Preset, Split, to_enum)

__all__ = [
    "NormPlacement", "NormKind", "Group", "KLDirection", "Split", "BlockInit", "Preset",
    "LRShape", "ModelOption", "ModelParams", "TensorInfo", "OptimParams", "DistillParams", "DataParams", "Phase",
    "TrainerParams", "BackendOps", "BackendInfo",
]


FilePath = Union[str, bytes, os.PathLike]  # a path, as open() takes it

S = TypeVar("S", bound="Struct")
P = TypeVar("P", bound="Params")


# ---- integers: checked against their C type before they reach C -----------------------
# ctypes converts a Python int to a C integer by truncation: 2**32 + 1 becomes int 1,
# -1 becomes SIZE_MAX. Every integer argument of a library function (_lib._Library)
# and every integer field set on a struct (Struct.__setattr__) goes through
# check_int first, so that a value the C type cannot hold is an OverflowError.

def _int_range(ctype):
    bits = 8 * ctypes.sizeof(ctype)
    if ctype(-1).value < 0:
        return f"int{bits}", -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return f"uint{bits}", 0, (1 << bits) - 1


# ctypes type -> (name, min, max); c_int32 is c_int, c_uint64 c_size_t, and so on.
INT_RANGES = {t: _int_range(t) for t in (ctypes.c_int8, ctypes.c_uint8, ctypes.c_int16,
                                         ctypes.c_uint16, c_int, c_uint, ctypes.c_long,
                                         ctypes.c_ulong, ctypes.c_longlong,
                                         ctypes.c_ulonglong, c_int64, c_uint64, c_size_t)}


def check_int(value, ctype, what):
    """value as a plain int when ctype can hold it; OverflowError when it cannot.

    Anything that is not an integer (no __index__: a float, a ctypes object,
    None) is returned unchanged for ctypes to convert or refuse.
    """
    if isinstance(value, int):
        value = int(value)       # bool, IntEnum, int subclasses: the number itself
    else:
        try:
            value = operator.index(value)   # NumPy integers
        except TypeError:
            return value
    name, lo, hi = INT_RANGES[ctype]
    if not lo <= value <= hi:
        raise OverflowError(f"{what}: {value} does not fit the C type {name} [{lo}, {hi}]")
    return value


# ---- opaque handles -----------------------------------------------------------------

def _opaque(name):
    return POINTER(type(name, (ctypes.Structure,), {}))


backend_p = _opaque("lattice_backend")
norm_p = _opaque("lattice_norm")
model_p = _opaque("lattice_model")
optim_p = _opaque("lattice_optim")
distill_p = _opaque("lattice_distill")
data_p = _opaque("lattice_data")
schedule_p = _opaque("lattice_schedule")
teacher_p = _opaque("lattice_teacher")
trainer_p = _opaque("lattice_trainer")
diag_p = _opaque("lattice_diag")

float_p = POINTER(c_float)
int32_p = POINTER(ctypes.c_int32)
uint8_p = POINTER(ctypes.c_uint8)


# ---- structs ------------------------------------------------------------------------

def f32(value):
    """A float32 as the shortest decimal that reads back as it (1e-4, not 9.9999997e-05)."""
    return float(f"{value:.9g}") if value != value else float(
        next(f"{value:.{digits}g}" for digits in range(6, 10)
             if ctypes.c_float(float(f"{value:.{digits}g}")).value == value))


class Struct(ctypes.Structure):
    """A C struct with a readable repr and a dict view; float32 fields read as they were set."""

    _enums = {}
    _since = {}  # field -> the lattice_version_number() that added it (after 1.0)
    _options = {}  # an option set by key, by name -> its key; its C slot is reserved

    @classmethod
    def field_names(cls) -> List[str]:
        """The fields' names in C order, a reserved slot by its option's name."""
        return [n[len(RESERVED):] if n[len(RESERVED):] in cls._options else n
                for n, *_ in cls._fields_]

    def __setattr__(self, name, value):
        how = self.__dict__.get("_read_only")
        if how is not None:
            raise AttributeError(f"{type(self).__name__}.{name} cannot be set: this is a "
                                 f"read-only copy of the settings in use, and setting it "
                                 f"would change nothing; {how}")
        ctype = type(self)._int_fields().get(name)
        if ctype is not None:
            value = check_int(value, ctype, f"{type(self).__name__}.{name}")
        if dict((n, t) for n, t, *_ in self._fields_).get(name) is c_char_p:
            check_no_nul(value, f"{type(self).__name__}.{name}")
        if name == "size" and isinstance(value, int) and value > ctypes.sizeof(self):
            # the library reads or writes that many bytes from this object's address
            raise ValueError(f"{type(self).__name__}.size {value} is above this object's "
                             f"{ctypes.sizeof(self)} bytes: the library would read or write "
                             f"past it")
        try:
            super().__setattr__(name, value)
        except TypeError:
            # ctypes' own words name no field ("'float' object cannot be interpreted as
            # an integer", "must be real number, not str")
            want = wanted(dict((n, t) for n, t, *_ in self._fields_).get(name))
            if want is None:
                raise
            raise TypeError(f"{type(self).__name__}.{name} must be {want}, got "
                            f"{type(value).__name__} {value!r}") from None

    def __getattribute__(self, name):
        value = super().__getattribute__(name)
        if type(value) is float and name in type(self)._float32_fields():
            return f32(value)
        return value

    @classmethod
    def _float32_fields(cls):
        fields = cls.__dict__.get("_f32_names")
        if fields is None:
            fields = frozenset(n for n, t, *_ in getattr(cls, "_fields_", ()) if t is c_float)
            cls._f32_names = fields
        return fields

    @classmethod
    def _int_fields(cls):
        fields = cls.__dict__.get("_int_types")
        if fields is None:
            fields = {n: t for n, t, *_ in getattr(cls, "_fields_", ()) if t in INT_RANGES}
            cls._int_types = fields
        return fields

    def read_only(self: S, how: str) -> S:
        """This struct, frozen: setting a field raises AttributeError saying how (the way
        to change what it describes). For getters whose result is a copy."""
        object.__setattr__(self, "_read_only", how)
        return self

    def to_dict(self) -> Dict[str, Any]:
        """The fields by name, in C order: enum fields as members, nested structs as dicts."""
        out = {}
        for name in self.field_names():
            value = getattr(self, name)
            if isinstance(value, Struct):
                value = value.to_dict()
            elif name in self._enums:
                value = to_enum(self._enums[name], value)
            out[name] = value
        return out

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.to_dict() == other.to_dict()

    __hash__ = None


def wanted(ctype):
    """What a field of ctype takes, in words (None: a field this cannot say)."""
    if ctype in INT_RANGES:
        return "an integer"
    if ctype in (c_float, c_double):
        return "a number (int or float)"
    if ctype is c_char_p:
        return "a string or None"
    return None


def as_integer(value: Any, what: str) -> int:
    """value as an int (NumPy integers too), or TypeError naming what: ``int(2.7)``
    would truncate silently."""
    if isinstance(value, int):
        return int(value)
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {type(value).__name__} "
                        f"{value!r}") from None


def as_size(value: Any, what: str) -> int:
    """value as an int of at least 1 (a batch, a seq), or TypeError / ValueError naming
    what: a C getter would give 0 for it, with no error."""
    n = as_integer(value, what)
    if n < 1:
        raise ValueError(f"{what} {n} must be at least 1")
    return n


def check_no_nul(value: Any, what: str) -> None:
    """ValueError for bytes with a NUL in them (a path, a name), as Python's own open()
    gives: C would read them cut there, and a save would write another file."""
    if isinstance(value, bytes) and b"\0" in value:
        raise ValueError(f"{what}: embedded null byte in {value!r}")


def as_number(value: Any, what: str) -> float:
    """value as a float (an int, a float, a NumPy number), or TypeError naming what:
    ``float("1e-3")`` would parse a string."""
    if isinstance(value, (str, bytes)) or not hasattr(type(value), "__float__"):
        raise TypeError(f"{what} must be a number (int or float), got {type(value).__name__} "
                        f"{value!r}")
    return float(value)


class Params(Struct):
    """A settings struct that starts with ``size`` and has a C ``_init`` function."""

    _init = None  # name of the C function that fills the defaults

    @classmethod
    def defaults(cls: Type[P]) -> P:
        """The library's defaults (its ``_init`` function), size field set.

        ctypes finds a function's newest version, and a later 1.x library's
        ``_init`` fills its own, larger struct: it writes into room for twice
        this struct (no 1.x struct grows past twice its 1.0 size), and the
        fields this package knows are kept, with ``size`` saying so (the
        library gives the others their defaults)."""
        from ._lib import lib
        size = ctypes.sizeof(cls)
        room = (ctypes.c_uint64 * (2 * size // 8 + 1))()   # aligned for any field
        getattr(lib, cls._init)(ctypes.cast(room, ctypes.POINTER(cls)))
        params = cls.from_buffer_copy(bytes(room)[:size])
        params.size = size
        return params

    @classmethod
    def make(cls: Type[P], base: Optional[P] = None, **fields: Any) -> P:
        """The defaults (or a copy of base) with fields overridden by keyword."""
        if base is None:
            params = cls.defaults()
        elif isinstance(base, cls):
            params = cls.from_buffer_copy(base)
        else:
            raise TypeError(f"params must be a {cls.__name__}, got {type(base).__name__}")
        params.update(**fields)
        return params

    @classmethod
    def keyword_parameters(cls) -> List[inspect.Parameter]:
        """inspect.Parameters for the settable fields: keyword-only, C defaults, types."""
        defaults = cls.defaults()
        out = []
        for name, (_, ctype, *_) in zip(cls.field_names(), cls._fields_):
            if name == "size" or not _is_plain(ctype):
                continue
            if name in cls._enums:
                annotation = cls._enums[name]
            elif ctype in (c_float, c_double):
                annotation = float
            elif ctype is c_char_p:
                annotation = "Optional[str]"
            else:
                annotation = int
            default = getattr(defaults, name)
            if name in cls._enums:
                default = to_enum(cls._enums[name], default)
            elif isinstance(default, bytes):
                default = os.fsdecode(default)
            out.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                         annotation=annotation))
        return out

    def update(self: P, **fields: Any) -> P:
        """Set fields by keyword (enum fields also by name, str fields from str); returns
        self. TypeError for a field the struct lacks, or one newer than the library."""
        names = set(self.field_names()) - {"size"}
        for key, value in fields.items():
            if key not in names:
                known = ", ".join(sorted(names))
                raise TypeError(f"{type(self).__name__} has no field {key!r} (fields: {known})")
            if key in self._since:
                # a field an older library does not know: it would never read it
                from ._lib import version_number, version_string
                if version_number < self._since[key]:
                    raise TypeError(f"{type(self).__name__}.{key} is newer than the loaded "
                                    f"liblattice {version_string}, which would ignore it")
            if key in self._enums:
                value = to_enum(self._enums[key], value)
            elif dict(self._fields_).get(key) is c_char_p and value is not None:
                value = os.fsencode(value)  # paths and separators; the struct keeps the bytes
            setattr(self, key, value)
        return self


def _is_plain(ctype):
    return ctype in (c_int, c_uint, c_int64, c_uint64, c_size_t, c_float, c_double, c_char_p)


def with_fields(params_cls: Type[Params]) -> Callable[[Callable], Callable]:
    """Give a function taking ``**fields`` of params_cls a signature that lists them.

    help(), inspect.signature() and IDEs then show every field with its C
    default and type (``lr: float = 0.001``) instead of ``**fields``.
    """

    def decorate(fn):
        sig = inspect.signature(fn)
        params = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        taken = {p.name for p in params}
        extra = [p for p in params_cls.keyword_parameters() if p.name not in taken]
        at = next((i for i, p in enumerate(params) if p.kind is p.KEYWORD_ONLY), len(params))
        fn.__signature__ = sig.replace(parameters=params[:at] + extra + params[at:])
        return fn

    return decorate


class ModelOption(Enum):
    """A model option set by key (lattice_model_option): a :class:`ModelParams`
    attribute of the same name in lower case. Keys from 1000 on are experimental
    (doc/API.md, "Experimental options"): a 1.x release may change what one does,
    its bounds or its default, or retire it."""

    BLOCK_NORM = 1000
    BLOCK_RESCALE = 1001
    MASSIVE_OFFSET = 1002
    MASSIVE_LAYER = 1003
    MASSIVE_CHANNEL = 1004


RESERVED = "lattice_reserved_"  # the prefix of a slot the C header reserves


class ModelParams(Params):
    """lattice_model_params: a model's shape and initialisation.

    block_norm, block_rescale, massive_offset, massive_layer and
    massive_channel are the experimental model options (:class:`ModelOption`;
    doc/API.md, "Experimental options"). They read and set like fields, and go
    through the library by key (lattice_model_params_set_option): a value
    outside :meth:`option_bounds` raises :class:`LatticeError` with the
    library's reason. A 1.x release may change what they do."""

    _init = "lattice_model_params_init"
    _options = {m.name.lower(): m for m in ModelOption}
    _fields_ = [
        ("size", c_size_t),
        ("vocab_size", c_int),
        ("d_model", c_int),
        ("n_layers", c_int),
        ("n_active_layers", c_int),
        ("n_heads", c_int),
        ("n_kv_heads", c_int),
        ("head_dim", c_int),
        ("d_ff", c_int),
        ("rope_theta", c_float),
        ("qk_norm", c_int),
        ("tie_embeddings", c_int),
        ("max_batch", c_int),
        ("max_seq", c_int),
        ("seed", c_uint64),
        ("init_std", c_float),
        ("lattice_reserved_block_norm", c_int),  # ModelOption.BLOCK_NORM's slot
        ("lattice_reserved_block_rescale", c_int),
        ("lattice_reserved_massive_offset", c_float),
        ("lattice_reserved_massive_layer", c_int),
        ("lattice_reserved_massive_channel", c_int),
    ]

    @staticmethod
    def option_bounds(option: Union[ModelOption, str]) -> tuple:
        """The least and greatest values an option takes, (lo, hi), as the library
        says (lattice_model_option_bounds); ints for an integer option."""
        from ._handle import check
        from ._lib import lib
        option = to_enum(ModelOption, option)
        lo, hi = c_double(), c_double()
        check(lib.lattice_model_option_bounds(option, ctypes.byref(lo), ctypes.byref(hi)))
        if ModelParams._option_is_int(option):
            return int(lo.value), int(hi.value)
        return lo.value, hi.value

    @staticmethod
    def _option_is_int(option: ModelOption) -> bool:
        return dict(ModelParams._fields_)[RESERVED + option.name.lower()] is c_int


def _option_property(option: ModelOption) -> property:
    """A ModelParams attribute that reads and sets option through the library's keyed calls."""
    integer = ModelParams._option_is_int(option)
    what = f"ModelParams.{option.name.lower()}"

    def get(self) -> Union[int, float]:
        from ._handle import check
        from ._lib import lib
        if "lattice_model_params_get_option" in lib.missing:  # a 1.0 library: the slot itself
            return getattr(self, RESERVED + option.name.lower())
        value = c_double()
        check(lib.lattice_model_params_get_option(ctypes.byref(self), option,
                                                  ctypes.byref(value)))
        return int(value.value) if integer else f32(value.value)

    def set(self, value: Union[int, float]) -> None:
        from ._handle import check
        from ._lib import lib
        value = as_integer(value, what) if integer else as_number(value, what)
        check(lib.lattice_model_params_set_option(ctypes.byref(self), option, float(value)))

    return property(get, set, doc=f"The experimental model option ModelOption.{option.name}, "
                                  f"{'an int' if integer else 'a float'} within "
                                  f"option_bounds(ModelOption.{option.name}).")


for _option in ModelOption:
    setattr(ModelParams, _option.name.lower(), _option_property(_option))


class TensorInfo(Struct):
    _enums = {"group": Group}
    _fields_ = [
        ("name", c_char_p),
        ("ndim", c_int),
        ("shape", c_int64 * 2),
        ("data", float_p),
        ("grad", float_p),
        ("group", c_int),
        ("layer", c_int),
    ]


class OptimParams(Params):
    """lattice_optim_params: AdamW, its warmup and learning-rate schedule, clipping."""

    _init = "lattice_optim_params_init"
    _enums = {"lr_shape": LRShape}
    _fields_ = [
        ("size", c_size_t),
        ("lr", c_float),
        ("min_lr", c_float),
        ("warmup_steps", c_int64),
        ("total_steps", c_int64),
        ("beta1", c_float),
        ("beta2", c_float),
        ("eps", c_float),
        ("weight_decay", c_float),
        ("clip_norm", c_float),
        ("lr_shape", c_int),        # since 0.4
        ("decay_fraction", c_float),  # since 0.4
    ]


class DistillParams(Params):
    """lattice_distill_params: L = alpha * tau^2 * KL + gamma * CE."""

    _init = "lattice_distill_params_init"
    _enums = {"direction": KLDirection}
    _fields_ = [
        ("size", c_size_t),
        ("alpha", c_float),
        ("gamma", c_float),
        ("tau", c_float),
        ("direction", c_int),
        ("n_threads", c_int),
    ]


class DistillResultStruct(Struct):
    _fields_ = [
        ("loss", c_double),
        ("kl", c_double),
        ("ce", c_double),
        ("n_counted", c_int64),
    ]


class DataParams(Params):
    """lattice_data_params: tokens, documents, batching and the validation split."""

    _init = "lattice_data_params_init"
    _fields_ = [
        ("size", c_size_t),
        ("vocab_size", c_int),
        ("boundary_id", c_int),
        ("separator", c_char_p),
        ("batch_size", c_int),
        ("seq_len", c_int),
        ("pack", c_int),
        ("trim", c_int),
        ("val_fraction", c_float),
        ("seed", c_uint64),
        ("pad_id", c_int),
        ("val_path", c_char_p),
        ("split_long", c_int),
    ]


class BatchStruct(Struct):
    _fields_ = [
        ("tokens", int32_p),
        ("targets", int32_p),
        ("mask", uint8_p),
        ("batch", c_int),
        ("seq", c_int),
        ("n_tokens", c_int64),
    ]


class PositionStruct(Struct):
    _fields_ = [("epoch", c_int64), ("index", c_int64)]


class Phase(Params):
    """lattice_schedule_phase: one phase of a depth schedule (its budget, depth, what
    trains and how appended blocks start)."""

    _init = "lattice_schedule_phase_init"
    _enums = {"block_init": BlockInit}
    _fields_ = [
        ("size", c_size_t),
        ("steps", c_int64),
        ("tokens", c_int64),
        ("active_layers", c_int),
        ("train_from", c_int),
        ("reset_optimizer", c_int),
        ("block_init", c_int),
        ("rewind_data", c_int),      # since 0.2
        ("train_boundary", c_int),   # since 0.2
    ]


class CountersStruct(Struct):
    _fields_ = [
        ("steps", c_int64),
        ("tokens", c_int64),
        ("nonpad_tokens", c_int64),
        ("active_layer_tokens", c_int64),
        ("flops", c_double),
    ]


class MetricsStruct(Struct):
    _fields_ = [
        ("size", c_size_t),
        ("step", c_int64),
        ("phase", c_int),
        ("active_layers", c_int),
        ("loss", c_double),
        ("kl", c_double),
        ("ce", c_double),
        ("val_ce", c_double),
        ("lr", c_double),
        ("grad_norm", c_double),
        ("phase_end", c_int),
        ("counters", CountersStruct),
        ("seconds", c_double),
    ]


class BoundaryScaleResultStruct(Struct):
    _fields_ = [
        ("size", c_size_t),
        ("count", c_int64),
        ("mean", c_double),
        ("std", c_double),
        ("kurtosis", c_double),
        ("max", c_double),
    ]


class BlockRemovalResultStruct(Struct):
    _fields_ = [
        ("size", c_size_t),
        ("ce_full", c_double),
        ("ce_removed", c_double),
        ("dce", c_double),
        ("angle", c_double),
    ]


class AttentionSinksResultStruct(Struct):
    _fields_ = [
        ("size", c_size_t),
        ("mass0", c_double),
        ("sink_rate", c_double),
        ("top_ratio", c_double),
        ("top_token", c_int64),
        ("top_dim", c_int),
        ("value_norm0", c_double),
    ]


class LossResponseResultStruct(Struct):
    _fields_ = [
        ("size", c_size_t),
        ("baseline", c_double),
        ("jump", c_double),
        ("area", c_double),
        ("recovery", c_int64),
    ]


# ---- callbacks ----------------------------------------------------------------------
# Pointer arguments of callbacks are c_void_p (the same ABI as float *): the
# trampolines want addresses, and c_void_p hands them over as plain ints.

MetricsFn = CFUNCTYPE(c_int, c_void_p, POINTER(MetricsStruct))

TeacherFn = CFUNCTYPE(c_int, c_void_p, c_void_p, c_int, c_int, c_int, c_void_p)

SgemmFn = CFUNCTYPE(c_int, c_void_p, c_int, c_int, c_int, c_int, c_int, c_float,
                    c_void_p, c_int, c_void_p, c_int, c_float, c_void_p, c_int)
SgemmBatchedFn = CFUNCTYPE(c_int, c_void_p, c_int, c_int, c_int, c_int, c_int, c_float,
                           c_void_p, c_int, c_void_p, c_int, c_float, c_void_p, c_int, c_int)
SetThreadsFn = CFUNCTYPE(None, c_void_p, c_int)
DestroyFn = CFUNCTYPE(None, c_void_p)


class TrainerParams(Params):
    """lattice_trainer_params: evaluation cadence, seed and the step callbacks."""

    _init = "lattice_trainer_params_init"
    _fields_ = [
        ("size", c_size_t),
        ("eval_every", c_int64),
        ("eval_batches", c_int64),
        ("seed", c_uint64),
        ("on_step", MetricsFn),
        ("on_eval", MetricsFn),
        ("user", c_void_p),
        ("collective", c_void_p),  # 0.3; set by Trainer(dist=) through lattice_dist_trainer_params
        ("collective_user", c_void_p),
    ]


class BackendOps(Params):
    """lattice_backend_ops: the GEMMs of a custom backend (``Backend.custom``)."""

    _init = "lattice_backend_ops_init"
    _fields_ = [
        ("size", c_size_t),
        ("version", c_uint),
        ("user", c_void_p),
        ("sgemm", SgemmFn),
        ("sgemm_batched", SgemmBatchedFn),
        ("set_threads", SetThreadsFn),
        ("destroy", DestroyFn),
    ]


INFO_STRLEN = 64      # LATTICE_BACKEND_INFO_STRLEN
INFO_REASONLEN = 320  # LATTICE_BACKEND_INFO_REASONLEN


class BackendInfo(Struct):
    """lattice_backend_info (@since 0.2): set size to its sizeof before the call."""

    _fields_ = [
        ("size", c_size_t),
        ("name", ctypes.c_char * INFO_STRLEN),
        ("library", ctypes.c_char * INFO_STRLEN),
        ("kernels", ctypes.c_char * INFO_STRLEN),
        ("optimised", c_int),
        ("reason", ctypes.c_char * INFO_REASONLEN),
    ]
