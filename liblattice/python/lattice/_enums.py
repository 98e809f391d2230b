"""The public C enums as Python enums (append-only in C, as here), and to_enum,
which takes a member, an int or a name. lattice._types re-exports them; the
package exports them as lattice.NormPlacement, ...
"""

from __future__ import annotations

import enum
from typing import Any, Type, TypeVar

__all__ = ["NormPlacement", "NormKind", "Group", "KLDirection", "Split", "BlockInit", "Preset",
           "LRShape"]


# ---- enums (append-only in C) -------------------------------------------------------

class Enum(enum.IntEnum):
    """An IntEnum that prints its name: ``str(NormPlacement.POST) == "POST"``.

    (Python 3.11's IntEnum prints the number.) Members still compare equal to
    the C values and convert with int().
    """

    def __str__(self):
        return self.name

    def __format__(self, spec):
        return format(self.name, spec)


class NormPlacement(Enum):
    """Where the norms sit (lattice_norm_placement), for sublayers F:
    PRE h' = h + F(Norm(h)); POST h' = Norm(a * h + F(h)); PERI
    h' = h + Norm_out(F(Norm_in(h))) (sandwich)."""

    PRE = 0
    POST = 1
    PERI = 2


class NormKind(Enum):
    """Which norm: RMSNorm (RMS) or LayerNorm (LAYER)."""

    RMS = 0
    LAYER = 1


class Group(Enum):
    """A group of parameters, trained or frozen together (``Model.set_trainable``):
    the embedding, one layer, the boundary norm (final or entry) and the LM head;
    STATISTIC holds what the model keeps but never trains (a layer's running regular RMS)."""

    EMBEDDING = 0
    LAYER = 1
    BOUNDARY_NORM = 2
    HEAD = 3
    STATISTIC = 4


class KLDirection(Enum):
    """The distillation KL: FORWARD is KL(teacher || student), REVERSE KL(student || teacher)."""

    FORWARD = 0
    REVERSE = 1


class Split(Enum):
    """A part of a corpus: the training documents or the validation set."""

    TRAIN = 0
    VAL = 1


class BlockInit(Enum):
    """How a phase starts the layers it appends: RANDOM keeps the weights drawn at
    creation (the paper), IDENTITY zeroes their output projections, COPY copies the
    block below."""

    RANDOM = 0
    IDENTITY = 1
    COPY = 2


class LRShape(Enum):
    """The learning rate's shape after warmup (OptimParams.lr_shape)."""

    COSINE = 0
    WSD = 1


class Preset(Enum):
    """The paper's arms (``Schedule.preset``): JOINT (all layers), GROW (a block
    appended per phase), FREEZE (as GROW, only the new block trains), SINGLE_BLOCK,
    and all layers on grow's budget (JOINT_MATCHED_ACTIVE, JOINT_MATCHED_TOTAL)."""

    JOINT = 0
    GROW = 1
    FREEZE = 2
    SINGLE_BLOCK = 3
    JOINT_MATCHED_ACTIVE = 4
    JOINT_MATCHED_TOTAL = 5


E = TypeVar("E", bound=enum.IntEnum)


def to_enum(enum_type: Type[E], value: Any) -> E:
    """An enum member from a member, an int, or a case-insensitive name ("pre", "grow")."""
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        try:
            return enum_type[value.strip().upper().replace("-", "_")]
        except KeyError:
            names = ", ".join(m.name.lower() for m in enum_type)
            raise ValueError(f"unknown {enum_type.__name__} {value!r}; one of: {names}") from None
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum_type(value)
        except ValueError:
            raise ValueError(f"{value} is not a {enum_type.__name__}") from None
    raise TypeError(f"expected a {enum_type.__name__}, a name or an int, "
                    f"got {type(value).__name__}")
