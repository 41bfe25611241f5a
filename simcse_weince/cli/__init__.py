"""The command layer: each module parses its command line, loads what the run needs and calls the libraries.

* :mod:`~simcse_weince.cli.train_text`: unsupervised SimCSE (``train_unsup.py``, ``simcse-train``);
* :mod:`~simcse_weince.cli.train_vision`: SimCLR (``python -m simcse_weince.cli.train_vision``, ``simclr-train``);
* :mod:`~simcse_weince.cli.evaluate`: STS and transfer tasks (``evaluate_sts.py``, ``simcse-evaluate``);
* :mod:`~simcse_weince.cli.diagnose`: extreme-value diagnostics (``python -m simcse_weince.cli.diagnose``,
  ``simcse-diagnose``).

The libraries (``losses``, ``training``, ``text``, ``vision``, ``evaluation``, ``diagnostics``) never import
this package (``tests/test_layout.py``).
"""
