"""Models (model.h): a Qwen3-style decoder with a growable active depth."""

from __future__ import annotations

import ctypes
import json
import os
from ctypes import byref, c_double, c_float, c_int, c_int32, c_int64, c_size_t, c_void_p
from typing import Any, List, Optional, Tuple, Union

from . import _buffers as B
from ._buffers import Ints, Mask, Tokens
from ._errors import LatticeError, Status
from ._handle import Handle, attribute_list, check, require, using
from ._lib import errmsg_buffer, lib
from ._types import (FilePath, Group, ModelParams, NormPlacement, TensorInfo, as_integer, as_size,
                     model_p, to_enum, with_fields)
from .backend import Backend
from .data import Data
from .norm import Norm, as_norm

__all__ = ["Model", "Tensor"]

WEIGHTS_NAME = "model.safetensors"
CONFIG_NAME = "config.json"
CONFIG_FLAG_LATTICE = 1  # LATTICE_MODEL_CONFIG_FLAG_LATTICE


class Tensor:
    """One parameter tensor: name, shape, group, and its data and gradient as float32 views.

    ``data`` and ``grad`` are writable memoryviews of shape ``shape`` over the
    model's memory; they keep the model's C object alive. Made by
    :meth:`Model.tensor` and :meth:`Model.tensors`, not by hand.
    """

    __slots__ = ("name", "ndim", "shape", "group", "layer", "data", "grad")
    name: str
    ndim: int
    shape: Tuple[int, ...]
    group: Group
    layer: int                  # the layer's index for Group.LAYER, else -1
    data: Optional[memoryview]
    grad: Optional[memoryview]  # None where the library keeps no gradient

    def __init__(self, info: TensorInfo, keep: object) -> None:
        rows, cols = info.shape[0], info.shape[1]
        shape = (rows, cols) if info.ndim == 2 else (rows,)
        for name, value in (("name", info.name.decode()), ("ndim", info.ndim),
                            ("shape", shape), ("group", to_enum(Group, info.group)),
                            ("layer", info.layer),
                            ("data", B.view(info.data, shape, c_float, keep)),
                            ("grad", B.view(info.grad, shape, c_float, keep))):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Tensor.{name} is read-only: a Tensor describes the model's "
                             "tensor, and setting an attribute would change nothing; write "
                             "the values into tensor.data (tensor.data[...] = ..., "
                             "numpy.asarray(tensor.data)[...] = ...)")

    def __repr__(self) -> str:
        return (f"Tensor({self.name!r}, shape={self.shape}, group={self.group.name}, "
                f"layer={self.layer})")


def _as_backend(backend):
    if backend is None or isinstance(backend, str):
        return Backend(backend or "default")
    return require(backend, Backend, "backend")


def _check_shape(status, params):
    """Raise for a failed model creation with lattice_model_params_check's reason."""
    if status:
        reason = errmsg_buffer()
        lib.lattice_model_params_check(byref(params), reason)
        check(status, reason.value.decode(errors="replace"))


# What to pass instead of a read-only copy where the library writes.
_OWN_BUFFER = "a writable buffer of your own (bytearray, array.array('f'), a NumPy array)"

class Model(Handle):
    """A model. Keyword arguments are :class:`ModelParams` fields over the C defaults::

        Model(vocab_size=64, d_model=32, n_layers=2, n_active_layers=2, n_heads=2,
              n_kv_heads=1, head_dim=16, d_ff=64, max_batch=4, max_seq=16,
              norm="post", backend=Backend("ref"))

    ``norm`` is a :class:`Norm` or a placement name (default pre-norm RMSNorm,
    eps 1e-6); ``backend`` a :class:`Backend` or a name (default "default").
    The model borrows the backend and keeps it alive.

    :meth:`logits`, :meth:`dlogits` and :meth:`hidden` return read-only
    copies (since 0.4; NumPy arrays over them are not writeable): passed where
    the library writes, as ``Distill.dense(..., dlogits=model.dlogits())``,
    one is refused with a TypeError that names :meth:`dlogits_view`. Their
    ``*_view()`` twins return zero-copy views of the model's buffers, valid
    only until the next forward overwrites them; ``dlogits_view()`` is the
    writable one, the buffer :meth:`backward` reads.
    """

    _destroy = "lattice_model_destroy"
    _errmsg = "lattice_model_errmsg"
    _creation_params = ModelParams
    _creation_how = ("model.params.{name} reads it; create another model for another "
                     "(lattice.Model(model.params, {name}=...))")
    _read_only_hints = {
        "n_active_layers": "!the active depth is model.active_layers (model.active_layers = n)",
        "seed": ("model.params.seed reads it; create another model for other weights "
                 "(lattice.Model(model.params, seed=7)), or draw one layer again "
                 "(model.init_layer(layer, seed))"),
        "params": ("a read-only copy of the settings; the shape is fixed at creation, "
                   "the active depth is model.active_layers"),
        "placement": "the norm placement is fixed at creation: create another model",
    }

    @with_fields(ModelParams)
    def __init__(self, params: Optional[ModelParams] = None, *,
                 norm: Union[Norm, NormPlacement, str, None] = None,
                 backend: Union[Backend, str, None] = None, **fields: Any) -> None:
        p = ModelParams.make(params, **fields)
        backend = _as_backend(backend)
        norm, own_norm = as_norm(norm)
        try:
            out = model_p()
            with using(norm, backend):
                status = lib.lattice_model_create(byref(p), norm._ptr, backend._ptr, byref(out))
        finally:
            if own_norm:
                norm.close()
        _check_shape(status, p)
        self._finish(out, backend)

    def _describe(self):
        return (f"{self.placement.name.lower()} {self.active_layers}/{self.n_layers} layers "
                f"d{self.d_model}")

    def _finish(self, out, backend):
        self._adopt(out, borrows=(backend,))
        self._bind(backend=backend)
        self._lend(_backend=backend)  # what grown() borrows, the user's handle closed or not
        self._fixed = self.params  # everything but n_active_layers is fixed at creation

    @classmethod
    def from_file(cls, path: FilePath, config: Optional[FilePath] = None, *,
                  backend: Union[Backend, str, None] = None, max_batch: Optional[int] = None,
                  max_seq: Optional[int] = None) -> Model:
        """A model with the shape and weights of a safetensors file.

        The shape comes from a Hugging Face Qwen3 config.json when config is
        given, else from the file's own metadata (files written by save()).
        max_batch and max_seq default to ModelParams' defaults.
        """
        backend = _as_backend(backend)
        defaults = ModelParams.defaults()
        max_batch = defaults.max_batch if max_batch is None else max_batch
        max_seq = defaults.max_seq if max_seq is None else max_seq
        out, err = model_p(), errmsg_buffer()
        with using(backend):
            status = lib.lattice_model_create_from_file(
                os.fsencode(path), None if config is None else os.fsencode(config),
                backend._ptr, max_batch, max_seq, byref(out), err)
        check(status, err.value.decode(errors="replace"))
        self = cls.__new__(cls)
        self._finish(out, backend)
        return self

    def save(self, path: FilePath) -> None:
        """Write the parameters (whole capacity) as safetensors, atomically."""
        self._call(lib.lattice_model_save, os.fsencode(path))

    def load(self, path: FilePath) -> None:
        """Read every parameter from a safetensors file of the same shapes."""
        self._call(lib.lattice_model_load, os.fsencode(path))

    def save_config(self, path: FilePath, *, qwen3_only: bool = True) -> None:
        """Write a Hugging Face Qwen3 ``config.json`` for the model (lattice_model_save_config).

        With :meth:`save`'s weights beside it, the pair loads as a Qwen3
        checkpoint: :meth:`from_file` (weights, config) gives the same logits.
        A model a Qwen3 config cannot describe (post- or peri-norm, LayerNorm,
        no q/k norm, a residual scale, a block-entry norm or rescale, layers
        inactive) raises LatticeError (Status.UNSUPPORTED, naming what);
        ``qwen3_only=False`` writes it as ``model_type`` "lattice" instead,
        as :meth:`save_pretrained` does. The "lattice" entry holds the
        settings Qwen3 has no key for. The write is atomic.
        """
        self._call(lib.lattice_model_save_config, os.fsencode(path),
                   0 if qwen3_only else CONFIG_FLAG_LATTICE)

    def save_pretrained(self, directory: FilePath) -> None:
        """Write ``config.json`` and ``model.safetensors`` into directory, as Hugging Face does.

        ``model.safetensors`` is :meth:`save`'s file (Qwen3 tensor names, the
        exact shape and norm placement in its metadata). ``config.json`` is
        :meth:`save_config`'s: a Qwen3 config (``model_type`` "qwen3") when
        the model is one (pre-norm RMSNorm with q/k norm, every layer active,
        no residual scale, no block-entry norm or rescale), else
        ``model_type`` "lattice"; its "lattice" entry holds the settings
        Qwen3 has no key for. Reopen with :meth:`from_pretrained`.
        """
        directory = os.fsdecode(directory)  # str or bytes, as the other paths
        os.makedirs(directory, exist_ok=True)
        self.save(os.path.join(directory, WEIGHTS_NAME))
        self.save_config(os.path.join(directory, CONFIG_NAME), qwen3_only=False)

    @classmethod
    def from_pretrained(cls, directory: FilePath, *, backend: Union[Backend, str, None] = None,
                        max_batch: Optional[int] = None, max_seq: Optional[int] = None) -> Model:
        """A model from a directory with ``config.json`` and ``model.safetensors``.

        A directory written by :meth:`save_pretrained` reopens exactly (the
        settings in the weights file's metadata); a Hugging Face Qwen3
        checkpoint (a single ``model.safetensors``) loads through its
        config.json, and so do weights written by save_pretrained whose
        metadata was lost when config.json is model_type "qwen3".
        max_batch and max_seq default to ModelParams' defaults. A config.json
        that is not a JSON object raises LatticeError (Status.FORMAT), one of
        a model_type other than "qwen3" or "lattice" Status.UNSUPPORTED, both
        naming the file.
        """
        directory = os.fsdecode(directory)  # str or bytes, as the other paths
        weights = os.path.join(directory, WEIGHTS_NAME)
        config_path = os.path.join(directory, CONFIG_NAME)
        if not os.path.isfile(weights):
            sharded = os.path.isfile(os.path.join(directory, WEIGHTS_NAME + ".index.json"))
            raise LatticeError(Status.NOT_FOUND, f"not found: {weights}" + (
                " (sharded checkpoints are not supported)" if sharded else ""))
        config = None
        if os.path.isfile(config_path):
            config = _read_config(config_path)
            if "lattice" in config:  # save_pretrained's: the weights' metadata is the setup
                if _has_lattice_metadata(weights):
                    config = None
                elif config.get("model_type") == "qwen3":
                    _check_qwen3_entry(config, config_path, weights)
                else:
                    raise LatticeError(Status.FORMAT, (
                        f"bad format: {weights} has no lattice.config metadata and {config_path} "
                        f"is model_type \"lattice\", which cannot give the shape (only a Qwen3 "
                        f"config.json can): save the model again with save_pretrained"))
        return cls.from_file(weights, None if config is None else config_path, backend=backend,
                             max_batch=max_batch, max_seq=max_seq)

    # ---- shape and settings ---------------------------------------------------------

    @staticmethod
    @with_fields(ModelParams)
    def check_params(params: Optional[ModelParams] = None, **fields: Any) -> None:
        """Raise LatticeError with the reason if the shape cannot make a model."""
        p = ModelParams.make(params, **fields)
        _check_shape(lib.lattice_model_params_check(byref(p), None), p)

    @staticmethod
    @with_fields(ModelParams)
    def estimate(params: Optional[ModelParams] = None, *,
                 norm: Union[Norm, NormPlacement, str, None] = None,
                 **fields: Any) -> Tuple[int, int]:
        """(n_params, arena_bytes) a model of this shape would have, without creating it."""
        p = ModelParams.make(params, **fields)
        norm, own_norm = as_norm(norm)
        n_params, arena_bytes = c_int64(), c_size_t()
        try:
            with using(norm):
                status = lib.lattice_model_estimate(byref(p), norm._ptr, byref(n_params),
                                                    byref(arena_bytes))
        finally:
            if own_norm:
                norm.close()
        _check_shape(status, p)
        return n_params.value, arena_bytes.value

    @property
    def params(self) -> ModelParams:
        """The ModelParams the model was created with (n_active_layers: the current count).

        A read-only copy: setting a field raises AttributeError. The shape is
        fixed at creation: for another, create another model
        (``lattice.Model(model.params, d_model=64)``); the active depth
        changes with ``model.active_layers = n``.
        """
        out = ModelParams()
        out.size = ctypes.sizeof(out)  # the bytes this package can take
        self._call(lib.lattice_model_get_params, byref(out))
        return out.read_only(
            "a model's shape is fixed at creation: create another "
            "(lattice.Model(model.params, d_model=64)); the active depth changes with "
            "model.active_layers = n")

    @property
    def vocab_size(self) -> int:
        """The vocabulary size (fixed at creation)."""
        return self._fixed.vocab_size

    @property
    def d_model(self) -> int:
        """The width of the residual stream (fixed at creation)."""
        return self._fixed.d_model

    @property
    def n_layers(self) -> int:
        """The layers the model holds, active or not (its capacity, fixed at creation)."""
        return self._fixed.n_layers

    @property
    def placement(self) -> NormPlacement:
        """Where the model's norms sit (fixed at creation)."""
        return NormPlacement(self._get(lib.lattice_model_get_placement))

    @property
    def active_layers(self) -> int:
        """How many of the first layers run, 1 .. n_layers; settable (``model.active_layers = n``).

        Every layer keeps its weights whether active or not: growing switches
        on layers as they were initialised at creation (or since).
        """
        return self._get(lib.lattice_model_get_active_layers)

    @active_layers.setter
    def active_layers(self, n_active: int) -> None:
        self._call(lib.lattice_model_set_active_layers,
                   as_integer(n_active, "Model.active_layers"))

    def grown(self, n_layers: int, *, max_batch: Optional[int] = None,
              max_seq: Optional[int] = None,
              backend: Union[Backend, str, None] = None) -> Model:
        """A new model of capacity ``n_layers`` holding this one (lattice_model_create_grown).

        Growing past the capacity fixed at creation (``active_layers`` stops
        at ``n_layers``)::

            big = small.grown(9)          # small: 3 layers, all active
            big.active_layers = 6         # switch on three of the new layers

        The new model has this one's settings (shape, options, seed, norm,
        backend unless ``backend`` is given), every tensor of this one
        copied (embedding, boundary norm, head, layers, running regular RMS),
        its active layers, trainable flags and skip range; the layers past
        this one's are drawn as ``Model(model.params, n_layers=n_layers)``
        draws them (same seed: the same values). While only the old layers
        are active its logits are this one's, bit for bit. ``max_batch`` and
        ``max_seq`` default to this model's. This model is left as it is;
        an Optim, Teacher or Trainer of it does not carry over.
        """
        n_layers = as_integer(n_layers, "Model.grown n_layers")
        max_batch = 0 if max_batch is None else as_integer(max_batch, "Model.grown max_batch")
        max_seq = 0 if max_seq is None else as_integer(max_seq, "Model.grown max_seq")
        self._resource  # ClosedError for a closed model
        if backend is None:  # this model's: the user's handle, or one of ours where it was closed
            backend = self._backend._alias() if self.backend.closed else self.backend
        else:
            backend = _as_backend(backend)
        out = model_p()
        self._call(lib.lattice_model_create_grown, n_layers, max_batch, max_seq, backend._ptr,
                   byref(out), using=(backend,))
        big = type(self).__new__(type(self))
        big._finish(out, backend)
        return big

    def init_layer(self, layer: int, seed: int) -> None:
        """Re-draw one layer's weights from seed (linear N(0, init_std^2), norms 1 and 0)."""
        self._call(lib.lattice_model_init_layer, layer, seed)

    def copy_layer(self, dst: int, src: int) -> None:
        """Copy every weight of layer src onto layer dst (stacking a block)."""
        self._call(lib.lattice_model_copy_layer, dst, src)

    def zero_layer_outputs(self, layer: int) -> None:
        """Zero a layer's attention and MLP output projections (o_proj, down_proj).

        Under pre-norm (and peri-norm) the layer then computes the identity, the
        LLaMA-Pro way of appending blocks; under post-norm it still normalises
        its input.
        """
        self._call(lib.lattice_model_zero_layer_outputs, layer)

    def set_trainable(self, group: Union[Group, str, int], trainable: bool = True,
                      layer: int = -1) -> None:
        """Mark a parameter group trainable or frozen (layer: the index for Group.LAYER).

        A frozen group gets no gradient work in backward, and optimizers leave it as it is.
        """
        self._call(lib.lattice_model_set_trainable, to_enum(Group, group), layer,
                   int(bool(trainable)))

    def is_trainable(self, group: Union[Group, str, int], layer: int = -1) -> bool:
        """Whether a parameter group is trainable (layer: the index for Group.LAYER)."""
        out = c_int()
        self._call(lib.lattice_model_get_trainable, to_enum(Group, group), layer, byref(out))
        return bool(out.value)

    def set_skip(self, first: int, count: int) -> None:
        """Skip layers [first, first + count) in later passes; count 0 clears the skip."""
        self._call(lib.lattice_model_set_skip, first, count)

    # ---- a step ---------------------------------------------------------------------

    def forward(self, tokens: Tokens, batch: Optional[int] = None,
                seq: Optional[int] = None) -> None:
        """Forward over the active layers; tokens is int32 [batch, seq] (or flat with sizes)."""
        self._forward(lib.lattice_model_forward, tokens, batch, seq)

    def _forward(self, fn, tokens, batch, seq):
        arr, batch, seq = B.batch_seq(tokens, batch, seq)
        self._call(fn, arr, batch, seq)

    @property
    def forward_shape(self) -> Optional[Tuple[int, int]]:
        """(batch, seq) of the forward whose activations the model holds, or None.

        Every forward sets it, whichever call ran it: :meth:`forward`, a
        trainer's step or evaluation, a model teacher's logits or recording, a
        diagnostic. None when no forward ran, or a change of
        :attr:`active_layers`, a skip range (:meth:`set_skip`), a load, a
        failed pass or a change of a layer's weights (:meth:`init_layer`,
        :meth:`copy_layer`, :meth:`zero_layer_outputs`) dropped the activations.
        """
        with self._using():
            return self._held_shape()

    def _held_shape(self):
        # the C model's own record (under the caller's lock): no copy of it here
        # to fall out of step with forwards run inside the library. A question,
        # not a failure: this thread's last_error() stays the earlier call's.
        batch, seq = c_int(), c_int()
        before = lib.lattice_last_error()
        if self._get(lib.lattice_model_get_forward_shape, byref(batch), byref(seq)) != Status.OK:
            lib.lattice_set_last_error(before)
            return None
        return batch.value, seq.value

    def _batch_seq(self, batch, seq, what):
        """The held forward's (batch, seq); a batch or seq given must equal it."""
        held = self._held_shape()
        if held is None:
            raise LatticeError(Status.STATE,
                               f"invalid state: {what}: the model holds no forward's activations "
                               "(none ran, or a change of the active layers or of a layer's "
                               "weights, a skip range, a load or a failed pass dropped them)")
        if (batch is not None and batch != held[0]) or (seq is not None and seq != held[1]):
            raise ValueError(f"{what}: the last forward was {held[0]} x {held[1]}, "
                             f"not {batch} x {seq}")
        return held

    def _need_forward(self, address, what):
        if not address:
            raise LatticeError(Status.STATE, f"invalid state: {what} needs a forward pass first")

    def _logits_out(self, fn, what, batch, seq, out, *args):
        """out(address, shape, *args) for the logits or dlogits buffer, under the lock."""
        with self._using() as res:
            address = fn(res.ptr)
            self._need_forward(address, what)
            batch, seq = self._batch_seq(batch, seq, what)
            return out(address, (batch, seq, self.vocab_size), *args)

    def logits(self, batch: Optional[int] = None, seq: Optional[int] = None) -> memoryview:
        """A read-only copy of the last forward's logits: float32 [batch, seq, vocab], yours to keep."""
        return self._logits_out(lib.lattice_model_get_logits, "logits", batch, seq, B.copy,
                                c_float, "Model.logits()", _OWN_BUFFER)

    def logits_view(self, batch: Optional[int] = None, seq: Optional[int] = None) -> memoryview:
        """Zero-copy read-only float32 view [batch, seq, vocab] of the model's logits buffer.

        The next forward (the model's, a trainer's, a teacher's or a diagnostic's)
        overwrites what it shows; use :meth:`logits` for values to keep.
        """
        return self._logits_out(lib.lattice_model_get_logits, "logits", batch, seq, B.view,
                                c_float, self._res, True)

    def dlogits(self, batch: Optional[int] = None, seq: Optional[int] = None) -> memoryview:
        """A read-only copy of the loss gradient w.r.t. the logits, float32 [batch, seq, vocab].

        To give :meth:`backward` a gradient, write into :meth:`dlogits_view` instead.
        Reading it counts as no loss: after a forward, :meth:`backward` still
        waits for one (a loss, or :meth:`dlogits_view`).
        """
        return self._logits_out(lib.lattice_model_get_dlogits_const, "dlogits", batch, seq, B.copy,
                                c_float, "Model.dlogits()",
                                "model.dlogits_view(), the buffer backward() reads")

    def dlogits_view(self, batch: Optional[int] = None, seq: Optional[int] = None) -> memoryview:
        """Writable float32 view [batch, seq, vocab] of the gradient buffer backward reads.

        Write a loss gradient here (``Distill.dense(..., dlogits=model.dlogits_view())``)
        before :meth:`backward`, asking for it after each forward: backward refuses
        a forward that neither a loss nor this view followed. Valid until the next
        forward.
        """
        return self._logits_out(lib.lattice_model_get_dlogits, "dlogits", batch, seq, B.view,
                                c_float, self._res)

    def cross_entropy(self, targets: Ints, mask: Mask = None) -> Tuple[float, int]:
        """Mean cross-entropy against int32 targets (uint8 mask, or None for all).

        Writes the gradient to dlogits. Returns (loss, n_counted).
        """
        loss, counted = c_float(), c_int64()
        self._targets_call(lib.lattice_model_cross_entropy, "cross_entropy", targets, mask,
                           loss, counted)
        return loss.value, counted.value

    def _targets_call(self, fn, what, targets, mask, *out):
        # the buffers sized by the last forward's shape: the one the C call sees
        with self._using():
            batch, seq = self._batch_seq(None, None, what)
            t = B.as_input(targets, c_int32, "targets", batch * seq)
            m = B.as_mask(mask, "mask", batch * seq)
            self._call(fn, t, m, *(byref(o) for o in out))

    def backward(self) -> None:
        """Backward pass from :meth:`dlogits_view` (the last forward's loss gradient).

        It overwrites the gradients (``Tensor.grad``) of the trainable groups,
        and does not add to them: a second ``backward()`` before the
        optimizer step replaces the first one's gradients, so two micro-batches
        do not accumulate. To accumulate, add each backward's ``Tensor.grad``
        into buffers of your own and write the sum back before ``optim.step()``
        (or train on the larger batch: ``Data`` and ``Trainer`` batch for you).
        Frozen groups' gradients are left as they were.
        """
        self._call(lib.lattice_model_backward)

    def _hidden_out(self, boundary, batch, seq, out, *args):
        """out(address, shape, *args) for a boundary's hidden states, under the lock."""
        address = c_void_p()
        with self._using():
            self._call(lib.lattice_model_get_hidden, boundary, byref(address))
            batch, seq = self._batch_seq(batch, seq, "hidden")
            return out(address.value, (batch, seq, self.d_model), *args)

    def hidden(self, boundary: int, batch: Optional[int] = None,
               seq: Optional[int] = None) -> memoryview:
        """A read-only copy of the residual stream at a boundary: float32 [batch, seq, d_model].

        Boundary 0 is the input of layer 0, boundary i the output of layer i - 1.
        """
        return self._hidden_out(boundary, batch, seq, B.copy, c_float, "Model.hidden()",
                                _OWN_BUFFER)

    def hidden_view(self, boundary: int, batch: Optional[int] = None,
                    seq: Optional[int] = None) -> memoryview:
        """Zero-copy read-only view of :meth:`hidden`'s buffer, valid until the next forward."""
        return self._hidden_out(boundary, batch, seq, B.view, c_float, self._res, True)

    # ---- parameters -----------------------------------------------------------------

    @property
    def n_tensors(self) -> int:
        """The number of parameter tensors (over the whole capacity)."""
        return self._get(lib.lattice_model_get_n_tensors)

    def tensor(self, key: Union[int, str]) -> Tensor:
        """A Tensor by index or by name ("model.layers.0.self_attn.q_proj.weight")."""
        info = TensorInfo()
        if not isinstance(key, (str, int)):
            raise TypeError(f"tensor key must be an index or a name, got {type(key).__name__}")
        # the Resource taken under the lock: a close on another thread after the
        # call cannot leave the Tensor's memory without an owner
        with self._using() as res:
            if isinstance(key, str):
                self._call(lib.lattice_model_find_tensor, key.encode(), byref(info))
            else:
                self._call(lib.lattice_model_get_tensor, key, byref(info))
            return Tensor(info, res)

    @property
    def tensors(self) -> List[Tensor]:
        """Every parameter tensor, in the library's order (:meth:`tensor` of each index).

        An attribute since 1.1 (``for t in model.tensors``): the call
        ``model.tensors()`` still works, deprecated (DeprecationWarning).
        """
        return attribute_list([self.tensor(i) for i in range(self.n_tensors)],
                              "model.tensors()", "model.tensors")

    @property
    def n_params(self) -> int:
        """Parameters over the whole capacity (tied weights counted once)."""
        return self._get(lib.lattice_model_get_n_params)

    def flops(self, batch: int, seq: int, with_backward: bool = False) -> float:
        """FLOPs of the GEMMs of one pass over the active layers (2 m n k each).

        Attention scores count the full seq x seq square, as computed; with
        with_backward, the backward's weight and input gradients are added.
        """
        return self._get(lib.lattice_model_get_flops, as_size(batch, "Model.flops batch"),
                         as_size(seq, "Model.flops seq"), int(bool(with_backward)))

    @property
    def arena_bytes(self) -> int:
        """Bytes of the model's arenas: parameters, gradients, activations, scratch."""
        return self._get(lib.lattice_model_get_arena_bytes)

    # ---- inference and evaluation (since 0.2) ---------------------------------------

    def forward_inference(self, tokens: Tokens, batch: Optional[int] = None,
                          seq: Optional[int] = None) -> None:
        """:meth:`forward` for inference: the same logits, and :meth:`backward` refuses
        (``Status.STATE``) until the next :meth:`forward`."""
        self._forward(lib.lattice_model_forward_inference, tokens, batch, seq)

    def cross_entropy_value(self, targets: Ints, mask: Mask = None) -> Tuple[float, int]:
        """Mean cross-entropy of the last forward against int32 targets (uint8 mask, or
        None for all), without writing dlogits. Returns (ce, n_counted)."""
        ce, counted = c_double(), c_int64()
        self._targets_call(lib.lattice_model_cross_entropy_value,
                           "cross_entropy_value", targets, mask, ce, counted)
        return ce.value, counted.value

    def evaluate(self, data: Data, max_batches: int = 0) -> float:
        """Validation cross-entropy over data's first max_batches validation batches
        (0: all), weighted by counted tokens: what ``Trainer.evaluate`` reports."""
        require(data, Data, "data")
        out = c_double()
        self._call(lib.lattice_model_evaluate, data._ptr, max_batches, byref(out), using=(data,))
        return out.value


# ---- from_pretrained's config.json ----------------------------------------------------

_MODEL_TYPES = ("qwen3", "lattice")  # what from_pretrained can load


def _json_kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "int",
            float: "number", type(None): "null"}.get(type(value), type(value).__name__)


def _read_config(path: str) -> dict:
    """config.json as a dict, its model_type one this library loads, or LatticeError naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise LatticeError(Status.FORMAT, f"bad format: {path}: {e}") from None
    except RecursionError:
        raise LatticeError(Status.FORMAT, f"bad format: {path}: nested deeper than Python's "
                                          "JSON reader goes") from None
    if not isinstance(config, dict):
        raise LatticeError(Status.FORMAT, f"bad format: {path} is not a JSON object "
                                          f"(a {_json_kind(config)})")
    model_type = config.get("model_type")
    if "model_type" in config and not isinstance(model_type, str):
        raise LatticeError(Status.FORMAT, f"bad format: {path}: model_type is not a string "
                                          f"(a {_json_kind(model_type)})")
    if model_type is not None and model_type not in _MODEL_TYPES:
        raise LatticeError(Status.UNSUPPORTED, (
            f"unsupported: {path}: model_type \"{model_type}\" cannot be loaded (only \"qwen3\" "
            f"and this library's own \"lattice\")"))
    if "lattice" in config and not isinstance(config["lattice"], dict):
        raise LatticeError(Status.FORMAT, f"bad format: {path}: \"lattice\" is not a JSON object "
                                          f"(a {_json_kind(config['lattice'])})")
    return config


def _has_lattice_metadata(weights: str) -> bool:
    """Whether a safetensors file's header holds lattice.config metadata.

    True where the header cannot be read: the library then reports what is wrong.
    """
    try:
        with open(weights, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if n > (100 << 20):
                return True
            header = json.loads(f.read(n))
        return "lattice.config" in (header.get("__metadata__") or {})
    except (OSError, ValueError, AttributeError, TypeError):
        return True


def _check_qwen3_entry(config: dict, path: str, weights: str) -> None:
    """A model_type "qwen3" config.json read for weights without metadata: its
    "lattice" entry (save_pretrained's) must describe a Qwen3 model, or the
    weights would load as another."""
    ours = config["lattice"]
    qwen3 = {"placement": "pre", "norm": "rms", "residual_scale": 1.0, "qk_norm": 1,
             "n_active_layers": config.get("num_hidden_layers"), "block_norm": 0,
             "block_rescale": 0, "massive_offset": 0.0}
    for key, want in qwen3.items():
        got = ours.get(key, want)
        if got != want:
            raise LatticeError(Status.FORMAT, (
                f"bad format: {weights} has no lattice.config metadata and {path}, read as "
                f"Qwen3, says lattice.{key} {json.dumps(got)} (Qwen3 means {json.dumps(want)})"))
