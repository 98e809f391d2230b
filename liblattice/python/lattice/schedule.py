"""Depth schedules: phases with a growing (or fixed) active depth (schedule.h)."""

from __future__ import annotations

from ctypes import byref, c_int, c_int64
from dataclasses import astuple, dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from ._handle import Handle, check
from ._lib import lib
from ._types import BlockInit, CountersStruct, Phase, Preset, schedule_p, to_enum, with_fields

__all__ = ["Schedule", "Counters"]


@dataclass(frozen=True)
class Counters:
    """Counters of a run: steps, tokens (padding included), non-pad tokens, tokens times
    the active layers they ran through, and FLOPs."""

    steps: int = 0
    tokens: int = 0
    nonpad_tokens: int = 0
    active_layer_tokens: int = 0
    flops: float = 0.0

    @classmethod
    def _from(cls, c):
        return cls(c.steps, c.tokens, c.nonpad_tokens, c.active_layer_tokens, c.flops)


class Schedule(Handle):
    """A list of phases and the run's position in them.

    ``Schedule()`` is empty (or takes phases: Phase structs or dicts of Phase
    fields); ``Schedule.preset("grow", n_blocks, block_size, steps_per_phase)``
    builds an arm of the paper. The presets do not spend the same compute:
    see :meth:`preset` for the budget-matched joint arms.
    """

    _destroy = "lattice_schedule_destroy"
    _errmsg = "lattice_schedule_errmsg"

    def __init__(self, phases: Iterable[Union[Phase, Dict[str, Any]]] = ()) -> None:
        out = schedule_p()
        check(lib.lattice_schedule_create(byref(out)))
        self._adopt(out)
        for phase in phases:
            if isinstance(phase, dict):
                self.add_phase(**phase)
            else:
                self.add_phase(phase)

    @staticmethod
    def preset_phases(preset: Union[Preset, str, int], n_blocks: int = 3, block_size: int = 3,
                      steps_per_phase: int = 50000,
                      block_init: Union[BlockInit, str, int] = BlockInit.RANDOM) -> List[Phase]:
        """The phases :meth:`preset` would hold, as Phases to edit before building a
        schedule of one's own (``Schedule(phases)``), with no schedule made."""
        args = (to_enum(Preset, preset), n_blocks, block_size, steps_per_phase,
                to_enum(BlockInit, block_init))
        what = (f"preset {preset!r} with {n_blocks} x {block_size} layers, "
                f"{steps_per_phase} steps per phase")
        n = c_int(0)
        check(lib.lattice_schedule_get_preset_phases(*args, None, 0, byref(n)), what)
        out = (Phase * n.value)()
        check(lib.lattice_schedule_get_preset_phases(*args, out, n.value, byref(n)), what)
        return [Phase.make(p) for p in out]

    @classmethod
    def preset(cls, preset: Union[Preset, str, int], n_blocks: int = 3, block_size: int = 3,
               steps_per_phase: int = 50000,
               block_init: Union[BlockInit, str, int] = BlockInit.RANDOM,
               rewind_data: bool = False) -> Schedule:
        """An arm of the paper; rewind_data=True replays the first phase's data in every phase.

        preset is a :class:`Preset` or its name. steps_per_phase is per
        phase, and the arms have different numbers of phases, so they do not
        spend the same compute: ``preset("joint", 3, 2, 30)`` is one phase of
        30 steps, ``preset("grow", 3, 2, 30)`` three (90 steps, 1, 2 then 3
        blocks active); "freeze" is as grow, "single_block" is grow's first
        phase. To compare joint training with grow at a matched budget, use
        the budget-matched presets (schedule.h):

        - ``"joint_matched_active"`` (Preset.JOINT_MATCHED_ACTIVE): all layers
          for as many steps as give grow's active-layer tokens,
          steps_per_phase * (n_blocks + 1) / 2 (60 steps here, in phases of
          steps_per_phase with the learning rate restarting at each);
        - ``"joint_matched_total"`` (Preset.JOINT_MATCHED_TOTAL): all layers,
          n_blocks phases: grow's total tokens (90 steps here), the learning
          rate restarting at the same boundaries.

        ``total_steps`` and ``counters`` (active_layer_tokens) show what a
        schedule spends.
        """
        out = schedule_p()
        check(lib.lattice_schedule_create_preset(to_enum(Preset, preset), n_blocks, block_size,
                                                 steps_per_phase, to_enum(BlockInit, block_init),
                                                 byref(out)),
              f"preset {preset!r} with {n_blocks} x {block_size} layers, "
              f"{steps_per_phase} steps per phase")
        self = cls.__new__(cls)
        self._adopt(out)
        if rewind_data:
            self.set_rewind_data(True)
        return self

    @with_fields(Phase)
    def add_phase(self, phase: Optional[Phase] = None, **fields: Any) -> None:
        """Append a phase: a Phase, and/or Phase fields over lattice_schedule_phase_init's defaults."""
        p = Phase.make(phase, **fields)
        self._call(lib.lattice_schedule_add_phase, byref(p))

    def _describe(self):
        n = len(self)
        if n == 0:
            return "no phases"
        phase, step = self.position
        total = self.total_steps
        where = "finished" if phase == n else f"phase {phase} step {step}"
        return (f"{n} phase{'' if n == 1 else 's'}, {where}"
                + (f", {total} steps in all" if total >= 0 else ""))

    def __len__(self) -> int:
        """The number of phases."""
        return self._get(lib.lattice_schedule_get_n_phases)

    @property
    def n_phases(self) -> int:
        """The number of phases, as ``len(schedule)``."""
        return len(self)

    def phase(self, index: int) -> Phase:
        """The phase at index: a read-only copy (phases are fixed once added; build another
        schedule from ``Phase.make(schedule.phase(i), steps=...)``)."""
        out = Phase.defaults()  # its size asks for every field this package knows
        self._call(lib.lattice_schedule_get_phase, index, byref(out))
        return out.read_only("a schedule's phases are fixed once added: build another "
                             "schedule (lattice.Schedule([lattice.Phase.make("
                             "schedule.phase(0), steps=10)]))")

    @property
    def phases(self) -> List[Phase]:
        """Every phase, in order (read-only copies, as :meth:`phase` gives them)."""
        return [self.phase(i) for i in range(len(self))]

    def set_rewind_data(self, on: bool = True) -> None:
        """Replay the shard: every phase after the first starts the data where the run began."""
        self._call(lib.lattice_schedule_set_rewind_data, 1 if on else 0)

    @property
    def max_layers(self) -> int:
        """The largest active depth over the phases."""
        return self._get(lib.lattice_schedule_get_max_layers)

    @property
    def total_steps(self) -> int:
        """Total steps when every phase has a step budget, else -1."""
        return self._get(lib.lattice_schedule_get_total_steps)

    @property
    def position(self) -> Tuple[int, int]:
        """(phase, step within it); phase is n_phases once finished."""
        phase, step = c_int(), c_int64()
        self._call(lib.lattice_schedule_get_position, byref(phase), byref(step))
        return phase.value, step.value

    @property
    def finished(self) -> bool:
        """Whether every phase is complete."""
        return bool(self._get(lib.lattice_schedule_is_finished))

    def record(self, tokens: int, nonpad_tokens: int, flops: float = 0.0) -> bool:
        """Record one step; returns True when it ended its phase."""
        ended = c_int()
        self._call(lib.lattice_schedule_record, tokens, nonpad_tokens, flops, byref(ended))
        return bool(ended.value)

    @property
    def counters(self) -> Counters:
        """What the run has spent so far (steps, tokens, active-layer tokens, FLOPs)."""
        out = CountersStruct()
        self._call(lib.lattice_schedule_get_counters, byref(out))
        return Counters._from(out)

    def set_position(self, phase: int, step_in_phase: int = 0,
                     counters: Optional[Counters] = None) -> None:
        """Restore a position and counters (None zeroes them)."""
        c = None if counters is None else byref(CountersStruct(*astuple(counters)))
        self._call(lib.lattice_schedule_set_position, phase, step_in_phase, c)
