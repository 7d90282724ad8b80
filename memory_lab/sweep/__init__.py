"""Sweeps: memories × sources × run options from one YAML spec, run, resumed and measured.

.. code-block:: python

    from memory_lab.sweep import load, run_sweep, report

    sweep = load("benchmarks/sweeps/classic.yaml", {"BEAM": "BEAM/chats"})
    run_sweep(sweep)            # each run in OUT/<key>; a folder holding a run is resumed
    print(report(sweep))        # what it cost the machine, each memory's figures, the answer

``memory-lab sweep SPEC`` is the same from the command line. The spec's format is in
``memory_lab.sweep.spec``; the sampler in ``.sampler``; the embedding floor in ``.floor``;
the figures and the "which memory?" rule in ``.figures``; growth per doubling in ``.growth``.
"""

from memory_lab.sweep.execute import run_sweep
from memory_lab.sweep.report import report
from memory_lab.sweep.spec import Run, Sweep, load

__all__ = ["Run", "Sweep", "load", "report", "run_sweep"]
