"""The command layer: each module parses its command line, loads what the run needs and calls the libraries.

* :mod:`~simcse_weince.cli.train_text`: SimCSE, unsupervised and supervised (``train_unsup.py``, ``simcse-train``);
* :mod:`~simcse_weince.cli.train_vision`: SimCLR (``python -m simcse_weince.cli.train_vision``, ``simclr-train``);
* :mod:`~simcse_weince.cli.evaluate`: STS and transfer tasks (``evaluate_sts.py``, ``simcse-evaluate``);
* :mod:`~simcse_weince.cli.diagnose`: extreme-value diagnostics (``python -m simcse_weince.cli.diagnose``,
  ``simcse-diagnose``);
* :mod:`~simcse_weince.cli.token_cache`: builds a training text's token cache (``simcse-token-cache``);
* the ground-truth command ``simcse-simulate`` is the lab's (:mod:`weince_lab.simulate`).

The libraries (``losses``, ``training``, ``text``, ``vision``, ``evaluation``, ``diagnostics``)
never import this package (``tests/test_layout.py``).
"""
