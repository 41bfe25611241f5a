"""The settings checker (:mod:`simcse_weince.core.checks`): each check against values it must accept and values it
must refuse (interval ends, nan, inf, bools, strings, integral floats, None), the one wording of its message, and
:func:`~simcse_weince.core.checks.check_fields` on a dataclass."""

from __future__ import annotations

import dataclasses
import doctest
import math
from types import SimpleNamespace

import pytest

from simcse_weince.core import checks

NAN, INF = math.nan, math.inf


def _refusal(check: checks.Check, value: object, name: str = "x", owner: object = None) -> str:
    """The message ``check`` refuses ``value`` with (the test fails when it accepts it)."""
    with pytest.raises(ValueError) as err:
        check(name, value, owner)
    return str(err.value)


def test_fail_is_the_one_wording() -> None:
    with pytest.raises(ValueError) as err:
        checks.fail("temperature", "> 0", -0.5)
    assert str(err.value) == "temperature must be > 0, got -0.5"
    assert _refusal(lambda n, v, o=None: checks.fail(n, "odd", v), "two") == "x must be odd, got 'two'"  # repr


@pytest.mark.parametrize(("value", "expected"), [
    (0, True), (-3, True), (1.5, True), (NAN, True), (INF, True),
    (True, False), (False, False), ("1", False), (None, False), (1j, False), ([1], False),
])  # fmt: skip
def test_is_real(value: object, expected: bool) -> None:
    assert checks.is_real(value) is expected


# (check, values it accepts, values it refuses, the expectation its message states)
CASES = {
    "real": (checks.real, [0, -2, 0.5, NAN, INF, -INF], [True, False, "1", None, 1j], "a number"),
    "finite": (checks.finite, [0, -3, 0.5, 1e308, -1e308], [NAN, INF, -INF, "1", None, [1.0]], "a finite number"),
    "positive": (checks.positive, [1e-300, 1, 2.5, INF], [0, 0.0, -0.0, -1, -INF, NAN, True, "1", None], "> 0"),
    "positive_finite": (
        checks.positive_finite,
        [1e-300, 1, 2.5, 1e308],
        [0, -1, INF, NAN, True, "2", None],
        "a finite number > 0",
    ),
    "non_negative": (
        checks.non_negative(),
        [0, 0.0, -0.0, 1e-300, 7],
        [-1e-300, -1, INF, NAN, True, "0", None],
        "a finite number >= 0",
    ),
    "non_negative with a note": (checks.non_negative(" (0 = off)"), [0, 0.5], [-0.5], "a finite number >= 0 (0 = off)"),
    "integer_at_least(1)": (
        checks.integer_at_least(1),
        [1, 2, 32.0, 10**20],
        [0, -1, 1.5, 0.999, True, "2", None, NAN, INF],
        "an integer >= 1",
    ),
    "integer_at_least(0)": (checks.integer_at_least(0), [0, 0.0, 3], [-1, -0.5, False], "an integer >= 0"),
    "within [0, 1]": (
        checks.within(0, 1),
        [0, 0.0, 0.5, 1, 1.0],
        [-1e-12, 1 + 1e-12, NAN, INF, -INF, True, "0.5", None],
        "in [0, 1]",
    ),
    "within (0, 1]": (checks.within(0, 1, open_low=True), [1e-300, 1], [0, 0.0, -1, 1.5, NAN], "in (0, 1]"),
    "within [0, 1)": (checks.within(0, 1, open_high=True), [0, 0.999], [1, 1.0, -0.1, NAN], "in [0, 1)"),
    "within (0, 1)": (checks.within(0, 1, open_low=True, open_high=True), [0.5], [0, 1], "in (0, 1)"),
    "within (0, 0.1]": (checks.within(0, 0.1, open_low=True), [1e-6, 0.1], [0, 0.1000001], "in (0, 0.1]"),
    "within [0, inf)": (checks.within(0, INF, open_high=True), [0, 1e308], [INF, -1], "in [0, inf)"),
    "one_of": (
        checks.one_of(["unit", "ols", "hill"]),
        ["unit", "hill"],
        ["mle", "OLS", None, 1],
        "one of ('unit', 'ols', 'hill')",
    ),
    "one_of a generator": (checks.one_of(x for x in ("a", "b")), ["a", "b", "b"], ["c"], "one of ('a', 'b')"),
    "boolean": (checks.boolean, [True, False], [1, 0, 1.0, "true", "false", None], "true or false"),
    "optional": (checks.optional(checks.finite), [None, 0, -2.5], [NAN, INF, "x"], "None or a finite number"),
    "optional, said": (
        checks.optional(checks.integer_at_least(0), "None (automatic)"),
        [None, 0, 5, 5.0],
        [-1, 2.5, True, NAN],
        "None (automatic) or an integer >= 0",
    ),
    "all_of": (checks.all_of(checks.real, checks.positive_finite), [1, 0.5], [0, INF, -1], "a finite number > 0"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_check_accepts_and_refuses(case: str) -> None:
    check, accepted, refused, expected = CASES[case]
    for value in accepted:
        assert check("knob", value) is None, value
        assert check("knob", value, SimpleNamespace()) is None, value  # an owner changes nothing
    for value in refused:
        assert _refusal(check, value, "knob") == f"knob must be {expected}, got {value!r}"


def test_within_states_its_interval() -> None:
    assert checks.within(0, 1).interval == "[0, 1]"
    assert checks.within(0, 0.1, open_low=True).interval == "(0, 0.1]"
    assert checks.within(-1, 1, open_low=True, open_high=True).interval == "(-1, 1)"


def test_all_of_lets_the_first_refusal_speak() -> None:
    both = checks.all_of(checks.real, checks.positive)
    assert _refusal(both, "3") == "x must be a number, got '3'"  # not "> 0": real is first
    assert _refusal(both, -3) == "x must be > 0, got -3"
    reversed_order = checks.all_of(checks.positive, checks.real)
    assert _refusal(reversed_order, "3") == "x must be > 0, got '3'"
    assert checks.all_of()("x", "anything") is None  # no check: nothing to refuse


PAIR = checks.ordered("lo", "hi", "clamp")
BOUNDED = checks.ordered("lo", "hi", "clamp", bounded=True)


@pytest.mark.parametrize(("lo", "hi"), [(0.5, 16.0), (1, 1), (1e-300, 1e-300), (2, INF)])
def test_ordered_accepts_0_below_low_up_to_high(lo: float, hi: float) -> None:
    assert PAIR("lo", lo, SimpleNamespace(lo=lo, hi=hi)) is None
    assert PAIR("hi", hi, SimpleNamespace(lo=lo, hi=hi)) is None  # on either field: it reads both


@pytest.mark.parametrize(("lo", "hi"), [(2, 1), (0, 1), (-1, 1), (0, 0), (NAN, 1), (1, NAN), ("1", 2), (INF, INF)])
def test_ordered_refuses_the_pair(lo: object, hi: object) -> None:
    owner = SimpleNamespace(lo=lo, hi=hi)
    if (lo, hi) == (INF, INF):  # 0 < inf <= inf holds: only the bounded pair refuses it
        assert PAIR("lo", lo, owner) is None
        assert _refusal(BOUNDED, lo, "lo", owner) == "clamp must satisfy 0 < lo <= hi < inf, got (inf, inf)"
        return
    assert _refusal(PAIR, lo, "lo", owner) == f"clamp must satisfy 0 < lo <= hi, got {(lo, hi)!r}"
    assert _refusal(BOUNDED, hi, "hi", owner) == f"clamp must satisfy 0 < lo <= hi < inf, got {(lo, hi)!r}"


def test_a_bounded_pair_refuses_an_infinite_high() -> None:
    owner = SimpleNamespace(lo=0.5, hi=INF)
    assert _refusal(BOUNDED, 0.5, "lo", owner) == "clamp must satisfy 0 < lo <= hi < inf, got (0.5, inf)"
    assert BOUNDED("lo", 0.5, SimpleNamespace(lo=0.5, hi=1e308)) is None


def test_setting_is_the_fields_metadata() -> None:
    assert checks.setting(checks.finite, "A margin.") == {"check": checks.finite, "help": "A margin."}


_CLAMP = checks.ordered("low", "high", "clamp")


@dataclasses.dataclass(frozen=True)
class _Knobs:
    count: int = dataclasses.field(default=2, metadata=checks.setting(checks.integer_at_least(1), "A count."))
    share: float = dataclasses.field(default=0.5, metadata=checks.setting(checks.within(0, 1), "A share."))
    burn: int | None = dataclasses.field(
        default=None, metadata=checks.setting(checks.optional(checks.integer_at_least(0)), "A burn.")
    )
    cap: float | None = dataclasses.field(default=None, metadata=checks.setting(checks.optional(checks.finite), "."))
    low: float = dataclasses.field(default=1.0, metadata=checks.setting(_CLAMP, "Low end."))
    high: float = dataclasses.field(default=2.0, metadata=checks.setting(_CLAMP, "High end."))
    on: bool = dataclasses.field(default=True, metadata=checks.setting(checks.boolean, "A switch."))
    mode: str = dataclasses.field(default="a", metadata=checks.setting(checks.one_of("ab"), "A mode."))
    free: float = 0.0  # no check: anything passes, numbers are still stored as floats

    def __post_init__(self) -> None:
        checks.check_fields(self)


@dataclasses.dataclass
class _Mutable:
    n: int = dataclasses.field(default=1, metadata=checks.setting(checks.integer_at_least(1), "A count."))

    def __post_init__(self) -> None:
        checks.check_fields(self)


def test_check_fields_stores_numbers_as_their_declared_type() -> None:
    k = _Knobs(count=32.0, share=1, burn=3.0, cap=2, low=1, high=5, free=3)
    assert (k.count, k.share, k.burn, k.cap, k.low, k.high, k.free) == (32, 1.0, 3, 2.0, 1.0, 5.0, 3.0)
    types = [type(v) for v in (k.count, k.share, k.burn, k.cap, k.low, k.high, k.free)]
    assert types == [int, float, int, float, float, float, float]
    assert type(_Mutable(n=4.0).n) is int
    d = _Knobs()
    assert (d.burn, d.cap, d.on, d.mode) == (None, None, True, "a")  # None stays None, a bool stays a bool
    unchecked = _Knobs(free="x")  # a field without a check is not checked, and a string is not converted
    assert unchecked.free == "x"
    assert _Knobs(free=True).free is True  # a bool is not a number: not converted to 1.0


@pytest.mark.parametrize(("values", "message"), [
    ({"count": 0}, "count must be an integer >= 1, got 0"),
    ({"count": 2.5}, "count must be an integer >= 1, got 2.5"),
    ({"share": NAN}, "share must be in [0, 1], got nan"),
    ({"burn": -1}, "burn must be None or an integer >= 0, got -1"),
    ({"cap": INF}, "cap must be None or a finite number, got inf"),
    ({"low": 3.0}, "clamp must satisfy 0 < low <= high, got (3.0, 2.0)"),
    ({"high": 0.5}, "clamp must satisfy 0 < low <= high, got (1.0, 0.5)"),
    ({"on": 1}, "on must be true or false, got 1"),
    ({"mode": "c"}, "mode must be one of ('a', 'b'), got 'c'"),
    ({"count": 0, "mode": "c"}, "count must be an integer >= 1, got 0"),  # the first field in order speaks
    ({"mode": "c", "share": 2}, "share must be in [0, 1], got 2"),
])  # fmt: skip
def test_check_fields_refuses_in_field_order(values: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        _Knobs(**values)
    assert str(err.value) == message
    with pytest.raises(ValueError, match="n must be an integer >= 1, got 0"):
        _Mutable(n=0)


def test_the_module_example_runs() -> None:
    failed, tried = doctest.testmod(checks, optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failed == 0


def test_the_arguments_wording_of_the_same_checks() -> None:
    """The argument groups' checks say "; got" (pinned by their tests), and refuse NaN as every check does."""
    from typing import Literal

    checks.check_choice("pooler", "avg", Literal["avg", "cls"])
    with pytest.raises(ValueError, match=r"^pooler must be one of avg, cls; got 'max'$"):
        checks.check_choice("pooler", "max", Literal["avg", "cls"])
    checks.check_at_least("eval_max_pairs", None, 2)
    checks.check_at_least("eval_max_pairs", 2, 2)
    for bad in (1, float("nan")):
        with pytest.raises(ValueError, match=r"^eval_max_pairs must be >= 2; got "):
            checks.check_at_least("eval_max_pairs", bad, 2)
    checks.check_in("adam_beta1", 0.0, checks.within(0, 1, open_high=True))
    with pytest.raises(ValueError, match=r"^adam_beta1 must be in \[0, 1\); got 1.0$"):
        checks.check_in("adam_beta1", 1.0, checks.within(0, 1, open_high=True))
