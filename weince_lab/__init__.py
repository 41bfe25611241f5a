"""The lab: research code beside the library, never imported by it (``tests/test_layout.py``).

* :mod:`~weince_lab.simulation`: the ground truth — shortfall laws, winner laws with exact truths, simulated
  batches, the experiments E1–E3, a universe with a known similarity kernel and its Bayes search, table training,
  and the Ground truth II sweeps;
* :mod:`~weince_lab.simulate`: their command, ``simcse-simulate``;
* :mod:`~weince_lab.experiments`: the seeded experiment drivers (``python -m weince_lab.experiments.<driver>``),
  whose results are stored as data under ``experiments/results/``.

The lab imports the library (``simcse_weince``); the library imports nothing from the lab.
"""
