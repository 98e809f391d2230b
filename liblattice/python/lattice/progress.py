"""A progress bar for training runs: tqdm when it is installed, plain lines otherwise."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Optional, TextIO, Union

from .schedule import Schedule

if TYPE_CHECKING:  # trainer.py imports this module
    from .trainer import Metrics

__all__ = ["Progress", "progress"]

try:
    import tqdm as _tqdm
except ImportError:  # optional: python3-tqdm
    _tqdm = None


class Progress:
    """An ``on_step`` callback for :class:`lattice.Trainer` that shows how a run goes.

    With tqdm installed it drives a ``tqdm`` bar (loss, validation CE and
    active depth as its postfix); without it, it writes one line to ``file``
    every ``every`` steps (default: about 20 lines per run). It never stops the
    run. ``total`` is a step count or a :class:`lattice.Schedule` (its
    ``total_steps``, when every phase has a step budget).

    The bar closes itself once ``total`` steps are shown, and the
    :class:`lattice.Trainer` it is given to closes it when its schedule
    finishes and when :meth:`lattice.Trainer.run` returns or raises, so the
    next output starts on a line of its own. A closed Progress shows nothing
    more: use one per run.
    """

    def __init__(self, total: Union[int, Schedule, None] = None, *, desc: str = "train",
                 every: Optional[int] = None, file: Optional[TextIO] = None,
                 use_tqdm: Optional[bool] = None) -> None:
        if total is not None and not isinstance(total, int):
            total = total.total_steps
        self.total = total if total is not None and total >= 0 else None
        self.desc = desc
        self.file = file
        self.every = every if every else max(1, (self.total or 20) // 20)
        self.val_ce = None
        if use_tqdm is None:
            use_tqdm = _tqdm is not None
        if use_tqdm and _tqdm is None:
            raise ImportError("use_tqdm=True needs tqdm (apt-get install python3-tqdm)")
        self.bar = _tqdm.tqdm(total=self.total, desc=desc, file=file) if use_tqdm else None
        self.closed = False

    def __call__(self, metrics: Metrics) -> bool:
        """Show one step's metrics; returns False (the run goes on)."""
        if self.closed:
            return False
        if metrics.val_ce == metrics.val_ce:  # not NaN: measured at this step
            self.val_ce = metrics.val_ce
        if self.bar is not None:
            post = {"loss": f"{metrics.loss:.4f}", "layers": metrics.active_layers}
            if self.val_ce is not None:
                post["val_ce"] = f"{self.val_ce:.4f}"
            self.bar.set_postfix(post, refresh=False)
            self.bar.update(1)
        elif metrics.step % self.every == 0 or metrics.step == self.total:
            of = f"/{self.total}" if self.total else ""
            val = f" val_ce {self.val_ce:.4f}" if self.val_ce is not None else ""
            print(f"{self.desc}: step {metrics.step}{of} loss {metrics.loss:.4f}{val} "
                  f"layers {metrics.active_layers}", file=self.file or sys.stderr, flush=True)
        if self.total and metrics.step >= self.total:
            self.close()
        return False

    def close(self) -> None:
        """End the bar (its final line drawn once); later steps show nothing. Idempotent."""
        self.closed = True
        if self.bar is not None:
            bar, self.bar = self.bar, None
            bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def progress(total: Union[int, Schedule, None] = None, **kwargs: Any) -> Progress:
    """``Progress(total, **kwargs)``: ``Trainer(..., on_step=lattice.progress(schedule))``."""
    return Progress(total, **kwargs)
