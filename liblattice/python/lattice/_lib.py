"""Loading liblattice, and the one table of its prototypes.

The library is looked for in this order:

1. the path in the ``LATTICE_LIBRARY`` environment variable (and nowhere else
   when it is set);
2. ``liblattice.so.<major>`` (``liblattice.<major>.dylib``, ``lattice-<major>.dll``)
   in this package's directory, next to it, or one directory further up;
3. the library directory of the prefix ``meson install`` put it in, recorded
   in the generated ``_config.py``: first relative to this package (a staged
   ``DESTDIR`` install, a prefix moved as a whole), then as an absolute path;
4. where pkg-config's ``lattice.pc`` says (``PKG_CONFIG_PATH`` is honoured):
   its ``libdir``, then the directory above the ``.pc`` file itself (a
   prefix staged or moved as a whole); a package installed by pip has no
   ``_config.py``, and this is how it finds a library under a prefix;
5. the SONAME alone, through the system's loader: ``LD_LIBRARY_PATH``, then
   the directories of ``/etc/ld.so.conf`` (``ldconfig``'s cache) and the
   system's own.

``library_path`` says which file was loaded (the SONAME itself for step 5).
When all fail, the ImportError lists every place tried and what to set.
``ctypes.util.find_library`` is not used: it is soft-deprecated, and it may
pick a library of another major version.
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
import sysconfig
from ctypes import (POINTER, c_char_p, c_double, c_float, c_int, c_int64, c_size_t,
                    c_uint, c_uint64, c_void_p)

from . import _types as T
from ._errors import LatticeError, Status

# The ABI this package was written for: lattice_version_number() // 10000.
MAJOR = 1

STATUS = c_int  # lattice_status, converted by the callers (they add the handle's message)


def _library_names(major):
    if sys.platform == "darwin":
        return [f"liblattice.{major}.dylib"]
    if os.name == "nt":
        return [f"lattice-{major}.dll", f"liblattice-{major}.dll"]
    return [f"liblattice.so.{major}"]


def _installed_dirs(package_dir):
    """(directory, why) of the library as meson recorded it at install time (none from pip)."""
    try:
        from . import _config
    except ImportError:
        return []
    dirs = []
    if getattr(_config, "LIBDIR_FROM_PACKAGE", None):
        dirs.append((os.path.normpath(os.path.join(package_dir, _config.LIBDIR_FROM_PACKAGE)),
                     "the prefix meson installed this package in"))
    if getattr(_config, "LIBDIR", None):
        dirs.append((_config.LIBDIR, "the prefix meson installed this package in"))
    return dirs


def _pkg_config_dirs(tried):
    """(directory, why) of the library as pkg-config's lattice.pc says; failures go to tried."""
    dirs = []
    for variable in ("libdir", "pcfiledir"):
        command = ["pkg-config", f"--variable={variable}", "lattice"]
        shown = " ".join(command)
        try:
            r = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, timeout=30)
        except FileNotFoundError:
            tried.append("pkg-config: not found on PATH (apt-get install pkg-config)")
            return dirs
        except (OSError, subprocess.SubprocessError) as e:
            tried.append(f"{shown}: {e}")
            return dirs
        value = r.stdout.strip()
        if r.returncode != 0:  # pkgconf says nothing; pkg-config "Package lattice was not found"
            where = os.environ.get("PKG_CONFIG_PATH")
            tried.append(f"{shown}: no lattice.pc in PKG_CONFIG_PATH={where!r} or the default "
                         "directories" if where else f"{shown}: no lattice.pc in the default "
                         "directories (PKG_CONFIG_PATH is not set)")
            return dirs
        if not value:
            tried.append(f"{shown}: lattice.pc has no {variable}")
            continue
        if variable == "libdir":
            dirs.append((value, shown))
        else:  # LIBDIR/pkgconfig/lattice.pc: the prefix moved, the .pc file's prefix= not
            dirs.append((os.path.dirname(value), f"the directory above lattice.pc ({value})"))
    return dirs


def _libdir_hint():
    """meson's default libdir on this system: lib/<multiarch triplet> on Debian, else lib."""
    triplet = sysconfig.get_config_var("MULTIARCH")
    return f"lib/{triplet}" if triplet else "lib"


def _not_found(names, tried):
    lib = _libdir_hint()
    return ImportError(
        "liblattice not found. Tried:\n  " + "\n  ".join(tried) + "\n"
        "Set one of these (<prefix>: the --prefix given to meson setup):\n"
        f"  LATTICE_LIBRARY=/path/to/{names[0]}   the file itself\n"
        f"  PKG_CONFIG_PATH=<prefix>/{lib}/pkgconfig   where meson installed lattice.pc\n"
        f"  LD_LIBRARY_PATH=<prefix>/{lib}   where the system's loader looks first\n"
        "or install it where the loader looks without them (meson's default prefix, /usr/local).")


def _load():
    """(CDLL, path) of the library, looked for in the order of the module's docstring."""
    path = os.environ.get("LATTICE_LIBRARY")
    if path:
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            raise ImportError(f"LATTICE_LIBRARY={path!r} cannot be loaded: {e}") from e
    names = _library_names(MAJOR)
    package_dir = os.path.dirname(os.path.abspath(__file__))
    parent = os.path.dirname(package_dir)
    tried = []

    def try_dirs(directories):
        seen = set()
        for directory, why in directories:
            for name in names:
                candidate = os.path.join(directory, name)
                if candidate in seen:
                    continue
                seen.add(candidate)
                suffix = f" ({why})" if why else ""
                if os.path.exists(candidate):
                    try:
                        return ctypes.CDLL(candidate), candidate
                    except OSError as e:
                        tried.append(f"{candidate}{suffix}: {e}")
                else:
                    tried.append(f"{candidate}{suffix}: no such file")
        return None

    found = try_dirs([(package_dir, ""), (parent, ""), (os.path.dirname(parent), "")] +
                     _installed_dirs(package_dir))
    if not found:
        found = try_dirs(_pkg_config_dirs(tried))
    if found:
        return found
    for name in names:
        try:
            return ctypes.CDLL(name), name
        except OSError as e:
            tried.append(f"{name} (the loader's search: LD_LIBRARY_PATH, ldconfig's cache, "
                         f"the system's directories): {e}")
    raise _not_found(names, tried)


# Functions of the core headers deliberately left out of the table: name -> why.
# (lattice/dist.h belongs to liblattice-mpi, another library: its table is in dist.py.)
NOT_WRAPPED = {
    "lattice_trainer_set_collective":
        "the data-parallel hook for C transports; lattice.Dist attaches liblattice-mpi's",
    "lattice_trainer_collective_reduce_gradients": "part of the same hook",
}

# name: (restype, argtypes). Every lattice_* function of the public headers,
# in header order; tests/python checks this table against the headers.
PROTOTYPES = {
    # common.h
    "lattice_status_string": (c_char_p, [c_int]),
    "lattice_version_number": (c_uint, []),
    "lattice_version_string": (c_char_p, []),
    "lattice_last_error": (c_char_p, []),
    "lattice_set_last_error": (None, [c_char_p]),
    # backend.h
    "lattice_backend_ops_init": (None, [POINTER(T.BackendOps)]),
    "lattice_backend_create": (STATUS, [c_char_p, POINTER(T.backend_p)]),
    "lattice_backend_create_custom": (STATUS, [c_char_p, POINTER(T.BackendOps),
                                               POINTER(T.backend_p)]),
    "lattice_backend_destroy": (None, [T.backend_p]),
    "lattice_backend_get_name": (c_char_p, [T.backend_p]),
    "lattice_backend_set_threads": (STATUS, [T.backend_p, c_int]),
    "lattice_backend_get_threads": (c_int, [T.backend_p]),
    # since 1.0: options the library no longer reads from the environment
    "lattice_backend_set_parallel": (STATUS, [T.backend_p, c_int]),
    "lattice_backend_get_parallel": (c_int, [T.backend_p]),
    "lattice_backend_set_attention_kernel": (STATUS, [T.backend_p, c_char_p]),
    "lattice_backend_get_attention_kernel": (c_char_p, [T.backend_p]),
    # since 1.1
    "lattice_backend_set_gemm_precision": (STATUS, [T.backend_p, c_char_p]),
    "lattice_backend_get_gemm_precision": (c_char_p, [T.backend_p]),
    "lattice_backend_sgemm": (STATUS, [T.backend_p, c_int, c_int, c_int, c_int, c_int, c_float,
                                       T.float_p, c_int, T.float_p, c_int, c_float, T.float_p,
                                       c_int]),
    "lattice_backend_has_blis": (c_int, []),
    "lattice_backend_get_info": (STATUS, [T.backend_p, POINTER(T.BackendInfo)]),
    # norm.h
    "lattice_norm_create": (STATUS, [c_int, c_int, c_float, POINTER(T.norm_p)]),
    "lattice_norm_destroy": (None, [T.norm_p]),
    "lattice_norm_set_residual_scale": (STATUS, [T.norm_p, c_float]),
    "lattice_norm_get_placement": (c_int, [T.norm_p]),
    "lattice_norm_get_kind": (c_int, [T.norm_p]),
    "lattice_norm_get_eps": (c_float, [T.norm_p]),
    "lattice_norm_get_residual_scale": (c_float, [T.norm_p]),
    "lattice_norm_placement_name": (c_char_p, [c_int]),
    "lattice_norm_placement_from_name": (STATUS, [c_char_p, POINTER(c_int)]),
    # model.h
    "lattice_model_params_init": (None, [POINTER(T.ModelParams)]),
    "lattice_model_params_check": (STATUS, [POINTER(T.ModelParams), c_char_p]),
    "lattice_model_params_set_option": (STATUS, [POINTER(T.ModelParams), c_int, c_double]),
    "lattice_model_params_get_option": (STATUS, [POINTER(T.ModelParams), c_int,
                                                 POINTER(c_double)]),
    "lattice_model_option_bounds": (STATUS, [c_int, POINTER(c_double), POINTER(c_double)]),
    "lattice_model_estimate": (STATUS, [POINTER(T.ModelParams), T.norm_p, POINTER(c_int64),
                                        POINTER(c_size_t)]),
    "lattice_model_create": (STATUS, [POINTER(T.ModelParams), T.norm_p, T.backend_p,
                                      POINTER(T.model_p)]),
    "lattice_model_destroy": (None, [T.model_p]),
    "lattice_model_errmsg": (c_char_p, [T.model_p]),
    "lattice_model_get_params": (STATUS, [T.model_p, POINTER(T.ModelParams)]),
    "lattice_model_get_placement": (c_int, [T.model_p]),
    "lattice_model_set_active_layers": (STATUS, [T.model_p, c_int]),
    "lattice_model_get_active_layers": (c_int, [T.model_p]),
    "lattice_model_init_layer": (STATUS, [T.model_p, c_int, c_uint64]),
    "lattice_model_copy_layer": (STATUS, [T.model_p, c_int, c_int]),
    "lattice_model_zero_layer_outputs": (STATUS, [T.model_p, c_int]),
    "lattice_model_set_trainable": (STATUS, [T.model_p, c_int, c_int, c_int]),
    "lattice_model_get_trainable": (STATUS, [T.model_p, c_int, c_int, POINTER(c_int)]),
    "lattice_model_set_skip": (STATUS, [T.model_p, c_int, c_int]),
    "lattice_model_forward": (STATUS, [T.model_p, T.int32_p, c_int, c_int]),
    "lattice_model_get_logits": (c_void_p, [T.model_p]),
    "lattice_model_get_dlogits": (c_void_p, [T.model_p]),
    "lattice_model_get_dlogits_const": (c_void_p, [T.model_p]),  # since 1.1
    "lattice_model_cross_entropy": (STATUS, [T.model_p, T.int32_p, T.uint8_p, POINTER(c_float),
                                             POINTER(c_int64)]),
    "lattice_model_backward": (STATUS, [T.model_p]),
    "lattice_model_get_hidden": (STATUS, [T.model_p, c_int, POINTER(c_void_p)]),
    "lattice_model_get_forward_shape": (STATUS, [T.model_p, POINTER(c_int), POINTER(c_int)]),
    "lattice_model_get_n_tensors": (c_int, [T.model_p]),
    "lattice_model_get_tensor": (STATUS, [T.model_p, c_int, POINTER(T.TensorInfo)]),
    "lattice_model_find_tensor": (STATUS, [T.model_p, c_char_p, POINTER(T.TensorInfo)]),
    "lattice_model_get_n_params": (c_int64, [T.model_p]),
    "lattice_model_get_flops": (c_double, [T.model_p, c_int, c_int, c_int]),
    "lattice_model_get_arena_bytes": (c_size_t, [T.model_p]),
    "lattice_model_save": (STATUS, [T.model_p, c_char_p]),
    "lattice_model_load": (STATUS, [T.model_p, c_char_p]),
    "lattice_model_create_from_file": (STATUS, [c_char_p, c_char_p, T.backend_p, c_int, c_int,
                                                POINTER(T.model_p), c_char_p]),
    "lattice_model_save_config": (STATUS, [T.model_p, c_char_p, c_uint]),
    "lattice_model_create_grown": (STATUS, [T.model_p, c_int, c_int, c_int, T.backend_p,
                                            POINTER(T.model_p)]),
    # optim.h
    "lattice_optim_params_init": (None, [POINTER(T.OptimParams)]),
    "lattice_optim_create": (STATUS, [T.model_p, POINTER(T.OptimParams), POINTER(T.optim_p)]),
    "lattice_optim_destroy": (None, [T.optim_p]),
    "lattice_optim_errmsg": (c_char_p, [T.optim_p]),
    "lattice_optim_set_params": (STATUS, [T.optim_p, POINTER(T.OptimParams)]),
    "lattice_optim_get_params": (STATUS, [T.optim_p, POINTER(T.OptimParams)]),
    "lattice_optim_step": (STATUS, [T.optim_p, POINTER(c_float)]),
    "lattice_optim_reset": (STATUS, [T.optim_p]),
    "lattice_optim_get_lr": (c_float, [T.optim_p]),
    "lattice_optim_get_steps": (c_int64, [T.optim_p]),
    # distill.h
    "lattice_distill_params_init": (None, [POINTER(T.DistillParams)]),
    "lattice_distill_create": (STATUS, [POINTER(T.DistillParams), POINTER(T.distill_p)]),
    "lattice_distill_destroy": (None, [T.distill_p]),
    "lattice_distill_errmsg": (c_char_p, [T.distill_p]),
    "lattice_distill_get_params": (STATUS, [T.distill_p, POINTER(T.DistillParams)]),
    "lattice_distill_dense": (STATUS, [T.distill_p, T.float_p, T.float_p, T.int32_p, T.uint8_p,
                                       c_int64, c_int, T.float_p,
                                       POINTER(T.DistillResultStruct)]),
    "lattice_distill_topk": (STATUS, [T.distill_p, T.float_p, T.int32_p, T.float_p, c_int,
                                      T.int32_p, T.uint8_p, c_int64, c_int, T.float_p,
                                      POINTER(T.DistillResultStruct)]),
    "lattice_distill_model": (STATUS, [T.distill_p, T.model_p, T.float_p, c_int, T.int32_p,
                                       T.uint8_p, POINTER(T.DistillResultStruct)]),
    # data.h
    "lattice_data_params_init": (None, [POINTER(T.DataParams)]),
    "lattice_data_create_text": (STATUS, [c_char_p, POINTER(T.DataParams), POINTER(T.data_p),
                                          c_char_p]),
    "lattice_data_create_tokens": (STATUS, [c_char_p, c_int, POINTER(T.DataParams),
                                            POINTER(T.data_p), c_char_p]),
    "lattice_data_create_memory": (STATUS, [T.int32_p, c_int64, POINTER(T.DataParams),
                                            POINTER(T.data_p), c_char_p]),
    "lattice_data_destroy": (None, [T.data_p]),
    "lattice_data_errmsg": (c_char_p, [T.data_p]),
    "lattice_data_get_params": (STATUS, [T.data_p, POINTER(T.DataParams)]),
    "lattice_data_get_n_documents": (c_int64, [T.data_p, c_int]),
    "lattice_data_get_n_tokens": (c_int64, [T.data_p, c_int]),
    "lattice_data_next": (STATUS, [T.data_p, POINTER(T.BatchStruct)]),
    "lattice_data_get_n_val_batches": (c_int64, [T.data_p]),
    "lattice_data_get_val_batch": (STATUS, [T.data_p, c_int64, POINTER(T.BatchStruct)]),
    "lattice_data_get_position": (STATUS, [T.data_p, POINTER(T.PositionStruct)]),
    "lattice_data_set_position": (STATUS, [T.data_p, POINTER(T.PositionStruct)]),
    # schedule.h
    "lattice_schedule_phase_init": (None, [POINTER(T.Phase)]),
    "lattice_schedule_create": (STATUS, [POINTER(T.schedule_p)]),
    "lattice_schedule_create_preset": (STATUS, [c_int, c_int, c_int, c_int64, c_int,
                                                POINTER(T.schedule_p)]),
    "lattice_schedule_get_preset_phases": (STATUS, [c_int, c_int, c_int, c_int64, c_int,
                                                    POINTER(T.Phase), c_int, POINTER(c_int)]),
    "lattice_schedule_destroy": (None, [T.schedule_p]),
    "lattice_schedule_errmsg": (c_char_p, [T.schedule_p]),
    "lattice_schedule_add_phase": (STATUS, [T.schedule_p, POINTER(T.Phase)]),
    "lattice_schedule_get_n_phases": (c_int, [T.schedule_p]),
    "lattice_schedule_get_phase": (STATUS, [T.schedule_p, c_int, POINTER(T.Phase)]),
    "lattice_schedule_set_rewind_data": (STATUS, [T.schedule_p, c_int]),
    "lattice_schedule_get_max_layers": (c_int, [T.schedule_p]),
    "lattice_schedule_get_total_steps": (c_int64, [T.schedule_p]),
    "lattice_schedule_get_position": (STATUS, [T.schedule_p, POINTER(c_int), POINTER(c_int64)]),
    "lattice_schedule_is_finished": (c_int, [T.schedule_p]),
    "lattice_schedule_record": (STATUS, [T.schedule_p, c_int64, c_int64, c_double,
                                         POINTER(c_int)]),
    "lattice_schedule_get_counters": (STATUS, [T.schedule_p, POINTER(T.CountersStruct)]),
    "lattice_schedule_set_position": (STATUS, [T.schedule_p, c_int, c_int64,
                                               POINTER(T.CountersStruct)]),
    # teacher.h
    "lattice_teacher_create_model": (STATUS, [T.model_p, POINTER(T.teacher_p)]),
    "lattice_teacher_create_callback": (STATUS, [T.TeacherFn, c_void_p, c_int, c_int, c_int,
                                                 POINTER(T.teacher_p)]),
    "lattice_teacher_destroy": (None, [T.teacher_p]),
    "lattice_teacher_errmsg": (c_char_p, [T.teacher_p]),
    "lattice_teacher_get_vocab_size": (c_int, [T.teacher_p]),
    "lattice_teacher_logits": (STATUS, [T.teacher_p, T.int32_p, c_int, c_int,
                                        POINTER(c_void_p)]),
    "lattice_teacher_get_flops": (c_double, [T.teacher_p, c_int, c_int]),
    "lattice_teacher_init_student": (STATUS, [T.teacher_p, T.model_p]),
    "lattice_teacher_create_file": (STATUS, [c_char_p, POINTER(T.teacher_p), c_char_p]),
    "lattice_teacher_get_k": (c_int, [T.teacher_p]),
    "lattice_teacher_topk": (STATUS, [T.teacher_p, T.int32_p, c_int, c_int, POINTER(c_void_p),
                                      POINTER(c_void_p)]),
    "lattice_teacher_record": (STATUS, [T.teacher_p, T.data_p, c_int64, c_int, c_char_p]),
    # trainer.h
    "lattice_trainer_params_init": (None, [POINTER(T.TrainerParams)]),
    "lattice_trainer_create": (STATUS, [T.model_p, T.teacher_p, T.distill_p, T.data_p,
                                        T.optim_p, T.schedule_p, POINTER(T.TrainerParams),
                                        POINTER(T.trainer_p)]),
    "lattice_trainer_destroy": (None, [T.trainer_p]),
    "lattice_trainer_errmsg": (c_char_p, [T.trainer_p]),
    "lattice_trainer_step": (STATUS, [T.trainer_p, POINTER(T.MetricsStruct)]),
    "lattice_trainer_run": (STATUS, [T.trainer_p]),
    "lattice_trainer_evaluate": (STATUS, [T.trainer_p, POINTER(c_double)]),
    # trainer.h: checkpoints
    "lattice_trainer_save_checkpoint": (STATUS, [T.trainer_p, c_char_p]),
    "lattice_trainer_load_checkpoint": (STATUS, [T.trainer_p, c_char_p]),
    "lattice_trainer_load_checkpoint_flags": (STATUS, [T.trainer_p, c_char_p, c_uint]),
    # diag.h
    "lattice_diag_create": (STATUS, [T.model_p, POINTER(T.diag_p)]),
    "lattice_diag_destroy": (None, [T.diag_p]),
    "lattice_diag_errmsg": (c_char_p, [T.diag_p]),
    # diag.h, since 0.4: results that begin with their size
    "lattice_diag_measure_boundary_scale": (STATUS, [T.diag_p, T.int32_p, T.uint8_p, c_int,
                                                     c_int, T.uint8_p, c_int,
                                                     POINTER(T.BoundaryScaleResultStruct), c_int]),
    "lattice_diag_measure_block_removal": (STATUS, [T.diag_p, T.int32_p, T.int32_p, T.uint8_p,
                                                    c_int, c_int, c_int, c_int,
                                                    POINTER(T.BlockRemovalResultStruct)]),
    "lattice_diag_measure_loss_response": (STATUS, [POINTER(c_double), c_int64, c_int64,
                                                    c_int64, c_int64,
                                                    POINTER(T.LossResponseResultStruct)]),
    "lattice_diag_measure_attention_sinks": (STATUS, [T.diag_p, T.int32_p, c_int, c_int,
                                                      c_double,
                                                      POINTER(T.AttentionSinksResultStruct),
                                                      c_int, POINTER(c_double), c_int]),
    # model.h, since 0.2
    "lattice_model_forward_inference": (STATUS, [T.model_p, T.int32_p, c_int, c_int]),
    "lattice_model_cross_entropy_value": (STATUS, [T.model_p, T.int32_p, T.uint8_p, POINTER(c_double),
                                    POINTER(c_int64)]),
    "lattice_model_evaluate": (STATUS, [T.model_p, T.data_p, c_int64, POINTER(c_double)]),
    # A header added later: its functions go here, its structs into
    # _types.py, and its classes into a module named after it.
}


class _Missing:
    """Stands in for a function this build of the library lacks (an older minor version)."""

    def __init__(self, name):
        self.__name__ = name

    def __call__(self, *args):
        raise LatticeError(Status.UNSUPPORTED,
                           f"unsupported: {self.__name__} is not in this liblattice "
                           f"({version_string})")


def _range_checked(name, fn, argtypes):
    """fn, or a function that first checks each integer argument against its C type.

    ctypes itself truncates (an int argument of 2**32 arrives as 0); an
    argument its type cannot hold raises OverflowError here, before the call.
    """
    checks = tuple((i, t) for i, t in enumerate(argtypes) if t in T.INT_RANGES)
    strings = tuple(i for i, t in enumerate(argtypes) if t is c_char_p)

    def call(*args):
        if len(args) == len(argtypes):   # else ctypes says how many it wants
            args = list(args)
            for i, ctype in checks:
                args[i] = T.check_int(args[i], ctype, f"{name}: argument {i + 1}")
            for i in strings:   # a path or name the library would read cut at the NUL
                T.check_no_nul(args[i], f"{name}: argument {i + 1}")
        try:
            return fn(*args)
        except ctypes.ArgumentError as e:
            # ctypes' "argument 3: TypeError: wrong type": say what the argument takes
            found = re.match(r"argument (\d+):", str(e))
            i = int(found.group(1)) - 1 if found else -1
            if not 0 <= i < min(len(args), len(argtypes)):
                raise
            want = T.wanted(argtypes[i]) or f"a {getattr(argtypes[i], '__name__', 'value')}"
            raise TypeError(f"{name}: argument {i + 1} must be {want}, got "
                            f"{type(args[i]).__name__} {args[i]!r}") from None

    call.__name__ = call.__qualname__ = name
    return call


class _Library:
    """A loaded library with every prototype of a table (PROTOTYPES) applied, its
    integer arguments range-checked (_range_checked)."""

    def __init__(self, cdll, prototypes=PROTOTYPES):
        self._cdll = cdll
        self.missing = []
        for name, (restype, argtypes) in prototypes.items():
            try:
                fn = getattr(cdll, name)
            except AttributeError:
                self.missing.append(name)
                setattr(self, name, _Missing(name))
                continue
            fn.restype = restype
            fn.argtypes = argtypes
            setattr(self, name, _range_checked(name, fn, argtypes))


library_path: str  # the file loaded (the SONAME itself when the system's loader found it)
_cdll, library_path = _load()
lib = _Library(_cdll)

version_number: int = lib.lattice_version_number()  # MAJOR * 10000 + MINOR * 100 + PATCH
version_string: str = lib.lattice_version_string().decode()
if version_number // 10000 != MAJOR:
    raise ImportError(f"liblattice {version_string} has major version {version_number // 10000}; "
                      f"this package needs major version {MAJOR}")


ERRMSG_SIZE: int = 256  # LATTICE_ERRMSG_SIZE


def status_string(status: int) -> str:
    """lattice_status_string: the library's short text for a status."""
    return lib.lattice_status_string(int(status)).decode()


def last_error() -> str:
    """lattice_last_error: why this thread's latest failing call failed."""
    return (lib.lattice_last_error() or b"").decode(errors="replace")


def errmsg_buffer() -> ctypes.Array:
    """A buffer for the errmsg argument of create functions (LATTICE_ERRMSG_SIZE bytes)."""
    return ctypes.create_string_buffer(ERRMSG_SIZE)

