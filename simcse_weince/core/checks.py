"""The settings checker: one home for every range check of every configuration.

A check is a callable ``check(name, value, owner=None)`` that returns nothing when ``value`` is acceptable and
raises ``ValueError("<name> must be <expected>, got <value!r>")`` otherwise; ``owner`` is the configuration the
value belongs to, read only by checks on several fields (:func:`ordered`). The reusable checks:

* :func:`finite`, :func:`positive`, :func:`positive_finite`, :func:`non_negative` (finite, ≥ 0);
* :func:`integer_at_least` (``n``), :func:`within` (an interval, each end open or closed), :func:`one_of` (a set),
  :func:`boolean`, :func:`ordered` (a pair of fields ``low ≤ high``);
* :func:`optional` (``None`` or the wrapped check), :func:`real` (a number, not a bool or a string).

A dataclass field carries its check and its ``--help`` text in its metadata (:func:`setting`);
:func:`check_fields`, called from ``__post_init__``, runs them all and stores accepted numbers as their declared
type (an integral YAML ``32.0`` as ``32``, a YAML ``1`` as ``1.0``).

Example:
    >>> import dataclasses
    >>> @dataclasses.dataclass(frozen=True)
    ... class Knobs:
    ...     q: float = dataclasses.field(default=0.2, metadata=setting(within(0, 1), "A quantile."))
    ...     def __post_init__(self):
    ...         check_fields(self)
    >>> Knobs(q=2.0)
    Traceback (most recent call last):
    ValueError: q must be in [0, 1], got 2.0
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from collections.abc import Callable, Iterable
from typing import Any, get_args, get_type_hints

Check = Callable[..., None]  # check(name, value, owner=None) -> None, or ValueError


def fail(name: str, expected: str, value: Any) -> None:
    """``ValueError("<name> must be <expected>, got <value!r>")``, the one wording of every check."""
    raise ValueError(f"{name} must be {expected}, got {value!r}")


def is_real(value: Any) -> bool:
    """Whether ``value`` is a real number (``bool`` and strings are not)."""
    return not isinstance(value, bool) and isinstance(value, numbers.Real)


def _is_finite(value: Any) -> bool:
    try:
        return math.isfinite(value)
    except TypeError:
        return False


def real(name: str, value: Any, owner: Any = None) -> None:
    """A number (not a bool, not a string)."""
    if not is_real(value):
        fail(name, "a number", value)


def finite(name: str, value: Any, owner: Any = None) -> None:
    """A finite number."""
    if not _is_finite(value):
        fail(name, "a finite number", value)


def positive(name: str, value: Any, owner: Any = None) -> None:
    """A number > 0 (``inf`` allowed)."""
    if not (is_real(value) and value > 0):
        fail(name, "> 0", value)


def positive_finite(name: str, value: Any, owner: Any = None) -> None:
    """A finite number > 0."""
    if not (is_real(value) and _is_finite(value) and value > 0):
        fail(name, "a finite number > 0", value)


def non_negative(note: str = "") -> Check:
    """A finite number ≥ 0; ``note`` (such as ``" (0 = off)"``) follows the expectation in the message."""

    def check(name: str, value: Any, owner: Any = None) -> None:
        if not (is_real(value) and _is_finite(value) and value >= 0):
            fail(name, f"a finite number >= 0{note}", value)

    return check


def integer_at_least(low: int) -> Check:
    """An integer ≥ ``low`` (an integral float such as ``32.0`` counts)."""

    def check(name: str, value: Any, owner: Any = None) -> None:
        if not (is_real(value) and _is_finite(value) and int(value) == value and value >= low):
            fail(name, f"an integer >= {low}", value)

    return check


def within(low: float, high: float, *, open_low: bool = False, open_high: bool = False) -> Check:
    """A number in the interval from ``low`` to ``high``, each end closed unless said open: ``within(0, 1,
    open_low=True)`` is (0, 1]."""
    text = f"{'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"

    def check(name: str, value: Any, owner: Any = None) -> None:
        ok = is_real(value) and not math.isnan(value)
        ok = ok and (low < value if open_low else low <= value) and (value < high if open_high else value <= high)
        if not ok:
            fail(name, f"in {text}", value)

    check.interval = text  # type: ignore[attr-defined]
    return check


def one_of(choices: Iterable[Any]) -> Check:
    """One of ``choices`` (the message lists them as a tuple)."""
    allowed = tuple(choices)

    def check(name: str, value: Any, owner: Any = None) -> None:
        if value not in allowed:
            fail(name, f"one of {allowed}", value)

    return check


def boolean(name: str, value: Any, owner: Any = None) -> None:
    """``True`` or ``False``."""
    if not isinstance(value, bool):
        fail(name, "true or false", value)


def optional(check: Check, meaning: str = "None") -> Check:
    """``None`` or a value ``check`` accepts; the message reads ``<meaning> or <check's expectation>``."""

    def wrapped(name: str, value: Any, owner: Any = None) -> None:
        if value is None:
            return
        try:
            check(name, value, owner)
        except ValueError as err:
            expected = str(err).split(" must be ", 1)[1].rsplit(", got ", 1)[0]
            fail(name, f"{meaning} or {expected}", value)

    return wrapped


def ordered(low: str, high: str, label: str, *, bounded: bool = False) -> Check:
    """The pair of fields ``low``, ``high`` of the owner satisfies ``0 < low <= high`` (and ``high < inf`` when
    ``bounded``); reported under ``label`` with the pair as the value. Put it on both fields: it reads both."""

    def check(name: str, value: Any, owner: Any = None) -> None:
        pair = (getattr(owner, low), getattr(owner, high))
        ok = all(is_real(v) and not math.isnan(v) for v in pair) and 0 < pair[0] <= pair[1]
        if not ok or (bounded and not pair[1] < math.inf):
            order = f"0 < {low} <= {high}" + (" < inf" if bounded else "")
            raise ValueError(f"{label} must satisfy {order}, got {pair!r}")

    return check


def all_of(*checks: Check) -> Check:
    """Every one of ``checks``, in order (the first that fails speaks)."""

    def check(name: str, value: Any, owner: Any = None) -> None:
        for one in checks:
            one(name, value, owner)

    return check


# ---- the command-line arguments' wording ---------------------------------------------------------------------
# The training, text and vision argument groups have always said "<name> must be <expected>; got <value>" (their
# tests and users' scripts match it): the same checks, that wording.
def argument_fail(name: str, expected: str, value: Any) -> None:
    """``ValueError("<name> must be <expected>; got <value!r>")``."""
    raise ValueError(f"{name} must be {expected}; got {value!r}")


def check_choice(name: str, value: Any, choices: Any) -> None:
    """One of the values of a ``Literal`` type (listed by name, comma-separated)."""
    allowed = get_args(choices)
    if value not in allowed:
        argument_fail(name, f"one of {', '.join(map(str, allowed))}", value)


def check_at_least(name: str, value: float | None, minimum: float) -> None:
    """``None`` or a number ≥ ``minimum``."""
    if value is not None and not value >= minimum:
        argument_fail(name, f">= {minimum}", value)


def check_in(name: str, value: Any, interval: Check) -> None:
    """A value :func:`within` accepts, in the arguments' wording."""
    try:
        interval(name, value)
    except ValueError:
        argument_fail(name, f"in {interval.interval}", value)  # type: ignore[attr-defined]


def setting(check: Check, help: str) -> dict[str, Any]:
    """The metadata of a checked dataclass field: its range check and its ``--help`` text."""
    return {"check": check, "help": help}


def _number_type(hint: Any) -> type | None:
    """``int`` for ``int`` / ``int | None``, ``float`` for ``float`` / ``float | None``, else ``None``."""
    members = get_args(hint) or (hint,)
    return next((t for t in (int, float) if t in members), None)


@functools.cache
def _number_types(cls: type) -> dict[str, type]:
    """``{field: int or float}`` of a config class's number fields (``bool`` is none)."""
    return {name: kind for name, hint in get_type_hints(cls).items() if (kind := _number_type(hint)) is not None}


def check_fields(owner: Any) -> None:
    """A checked dataclass's ``__post_init__``: every field's check (its :func:`setting` metadata, fields without
    one are skipped), then the accepted numbers stored as their declared type (works on frozen dataclasses)."""
    for f in dataclasses.fields(owner):
        check = f.metadata.get("check")
        if check is not None:
            check(f.name, getattr(owner, f.name), owner)
    for name, kind in _number_types(type(owner)).items():
        value = getattr(owner, name)
        if is_real(value):
            object.__setattr__(owner, name, kind(value))
