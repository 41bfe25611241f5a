"""Test-only fault injection (``tests/kill``): with ``KILL_AT=module:Qualified.name:n:SIGNAL`` in the environment,
this process sends itself ``SIGNAL`` at the ``n``-th call of that function, before the call runs: a stop at a
chosen point (during loading, mid-step, during a save, during an evaluation), as a scheduler or the OOM killer
would stop it there. Python imports this module at start-up when its folder is on ``PYTHONPATH``; the function's
module is imported here, so that modules importing the function by name later get the wrapped one.
"""

from __future__ import annotations

import os

_SPEC = os.environ.get("KILL_AT")
if _SPEC:
    import functools
    import importlib
    import signal
    import time

    _module, _qualname, _n, _signal = _SPEC.split(":")
    _owner = importlib.import_module(_module)
    *_path, _name = _qualname.split(".")
    for _part in _path:
        _owner = getattr(_owner, _part)
    _original = _owner.__dict__[_name] if isinstance(_owner, type) else getattr(_owner, _name)
    _calls = [0]

    @functools.wraps(_original)
    def _stopping(*args, **kwargs):
        _calls[0] += 1
        if _calls[0] == int(_n):
            with open(os.environ["KILL_MARK"], "w") as mark:  # the test knows the point was reached
                mark.write(f"{_qualname} call {_n}\n")
            os.kill(os.getpid(), getattr(signal, _signal))
            if _signal == "SIGKILL":
                time.sleep(60)  # never returns: the kernel ends the process
        return _original(*args, **kwargs)

    setattr(_owner, _name, _stopping)
