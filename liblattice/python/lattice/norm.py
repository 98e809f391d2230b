"""Normalization placement (norm.h)."""

from __future__ import annotations

from ctypes import byref, c_int
from typing import Optional, Tuple, Union

from ._handle import Handle, check
from ._lib import lib
from ._types import NormKind, NormPlacement, as_number, f32, norm_p, to_enum

__all__ = ["Norm"]


class Norm(Handle):
    """Where the norms sit (pre, post, peri) and which norm (RMSNorm, LayerNorm).

    Models copy what they need, so a Norm may be closed once its models exist.
    ``residual_scale`` is post-norm's a in Norm(a * h + F(h)) (DeepNorm-style).
    """

    _destroy = "lattice_norm_destroy"

    def __init__(self, placement: Union[NormPlacement, str, int] = NormPlacement.PRE,
                 kind: Union[NormKind, str, int] = NormKind.RMS, eps: float = 1e-6,
                 residual_scale: Optional[float] = None) -> None:
        placement = to_enum(NormPlacement, placement)
        kind = to_enum(NormKind, kind)
        eps = as_number(eps, "Norm(eps=...)")
        out = norm_p()
        check(lib.lattice_norm_create(placement, kind, eps, byref(out)),
              f"norm {placement.name.lower()}/{kind.name.lower()} eps {eps}")
        self._adopt(out)
        if residual_scale is not None:
            self.residual_scale = residual_scale

    def _describe(self):
        scale = self.residual_scale
        return (f"{Norm.placement_name(self.placement)} {self.kind.name.lower()} eps {self.eps:g}"
                + ("" if scale == 1.0 else f" residual scale {scale:g}"))

    @property
    def placement(self) -> NormPlacement:
        """Where the norms sit."""
        return NormPlacement(self._get(lib.lattice_norm_get_placement))

    @property
    def kind(self) -> NormKind:
        """Which norm: RMSNorm or LayerNorm."""
        return NormKind(self._get(lib.lattice_norm_get_kind))

    @property
    def eps(self) -> float:
        """The epsilon added to the variance (float32)."""
        return f32(self._get(lib.lattice_norm_get_eps))

    @property
    def residual_scale(self) -> float:
        """Post-norm's a in Norm(a * h + F(h)): 1 unless set (post-norm only); settable."""
        return f32(self._get(lib.lattice_norm_get_residual_scale))

    @residual_scale.setter
    def residual_scale(self, scale: float) -> None:
        scale = as_number(scale, "Norm.residual_scale")
        check(self._get(lib.lattice_norm_set_residual_scale, scale),
              f"residual scale {scale} (post-norm only; positive and finite)")

    @staticmethod
    def placement_name(placement: Union[NormPlacement, int]) -> str:
        """The library's short name of a placement ("pre", "post", "peri")."""
        return lib.lattice_norm_placement_name(int(placement)).decode()

    @staticmethod
    def placement_from_name(name: str) -> NormPlacement:
        """Parse "pre", "post" or "peri" with the library's parser."""
        out = c_int()
        check(lib.lattice_norm_placement_from_name(name.encode(), byref(out)),
              f"placement {name!r}")
        return NormPlacement(out.value)


def as_norm(norm: Union[Norm, NormPlacement, str, int, None]) -> Tuple[Norm, bool]:
    """(Norm, whether it is a new one to close) from a Norm, a placement (name or member),
    or None (pre-norm RMSNorm)."""
    if isinstance(norm, Norm):
        norm._resource
        return norm, False
    if norm is None:
        return Norm(), True
    if isinstance(norm, (str, int)):
        return Norm(norm), True
    raise TypeError(f"norm must be a lattice.Norm or a placement, got {type(norm).__name__}")
