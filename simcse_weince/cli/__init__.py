"""The command layer: each module parses its command line, loads what the run needs and calls the libraries.

* :mod:`~simcse_weince.cli.train_text`: SimCSE, unsupervised and supervised (``train_unsup.py``, ``simcse-train``);
* :mod:`~simcse_weince.cli.train_vision`: SimCLR (``python -m simcse_weince.cli.train_vision``, ``simclr-train``);
* :mod:`~simcse_weince.cli.evaluate`: STS and transfer tasks (``evaluate_sts.py``, ``simcse-evaluate``);
* :mod:`~simcse_weince.cli.diagnose`: extreme-value diagnostics (``python -m simcse_weince.cli.diagnose``,
  ``simcse-diagnose``);
* :mod:`~simcse_weince.cli.token_cache`: builds a training text's token cache (``simcse-token-cache``);
* :mod:`~simcse_weince.cli.simulate`: the ground-truth experiments E1–E3 and the Ground truth II sweeps
  (``simcse-simulate``).

The libraries (``losses``, ``training``, ``text``, ``vision``, ``evaluation``, ``diagnostics``, ``simulation``)
never import this package (``tests/test_layout.py``).
"""
