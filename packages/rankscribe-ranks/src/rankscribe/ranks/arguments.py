"""The argument checks of every RankScribe package: one rule and one wording per form.

A sibling-facing module (``docs/contributing.md``, "Sibling modules"): the writer,
lineage and the collector check their public functions' arguments through it, each
raising its own errors. Not part of ``rankscribe.ranks.__all__``.

Each package makes one :class:`ArgumentChecks` with its own pair of error classes (a
``TypeError`` and a ``ValueError`` subclass rooted in the package's base error), so an
argument refused by the lineage package is a ``LineageParamTypeError`` and still a
``TypeError``. The rules are the same everywhere: ``bool`` is a subclass of ``int``
(``isinstance(True, int)`` holds), and every check refuses it where an int or a number
is asked for (a flag given where a count belongs is a mistake, not the count 1).

One wording names the argument, the form expected, and the value received with its
type::

    max_points must be an int >= 4, got True (bool)
    max_points must be an int >= 4, got 2

and, for an argument of a public class or function (``owner=``), MindSpore's sentence
(``For 'SummaryRecord', the argument ...``), so a search for the original's message
finds ours::

    For 'SummaryRecord', the argument 'num_process' must be an int >= 1, but got 0.

Imports the standard library only (ranks is the ground floor).
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TypeGuard, cast

__all__ = [
    "ArgumentChecks",
    "is_int",
    "is_integral",
    "is_number",
    "is_real",
    "shown",
]


def shown(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, so a huge argument keeps a message short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_int(value: object) -> TypeGuard[int]:
    """Whether ``value`` is a Python int and not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_integral(value: object) -> TypeGuard[numbers.Integral]:
    """Whether ``value`` is an integer of any type (NumPy's included) and not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is a Python int or float and not a bool (NaN and infinities included)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_real(value: object) -> TypeGuard[numbers.Real]:
    """Whether ``value`` is a real number of any type (int, float, NumPy's) and not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _int_form(minimum: int | None) -> str:
    return "an int" if minimum is None else f"an int >= {minimum}"


class ArgumentChecks:
    """The argument checks, raising ``type_error`` for a wrong type, ``value_error`` for a
    value of the right type that cannot be used.

    Every ``check_*`` method returns the value it accepted (converted where its
    docstring says so) and takes ``owner``: the public class or function the
    argument was given to, for MindSpore's wording (see the module docstring).
    """

    def __init__(self, type_error: type[TypeError], value_error: type[ValueError]) -> None:
        self.type_error = type_error
        self.value_error = value_error

    def message(
        self, name: str, form: str, value: object, *, owner: str | None = None, verb: str = "be"
    ) -> str:
        """The one wording: ``name`` must be ``form``, and what ``value`` was, with its type.

        ``verb`` "hold" speaks of the items of a collection (``ranks must hold ...``).
        """
        got = f"{shown(value)} ({type(value).__name__})"
        if owner is not None:
            return f"For '{owner}', the argument '{name}' must {verb} {form}, but got {got}."
        return f"{name} must {verb} {form}, got {got}"

    def value_message(
        self, name: str, form: str, value: object, *, owner: str | None = None
    ) -> str:
        """The wording for a value of the right type: its type goes without saying."""
        if owner is not None:
            return f"For '{owner}', the argument '{name}' must be {form}, but got {shown(value)}."
        return f"{name} must be {form}, got {shown(value)}"

    def wrong_type(
        self, name: str, form: str, value: object, *, owner: str | None = None
    ) -> TypeError:
        """The error (to raise) for ``value`` of the wrong type."""
        return self.type_error(self.message(name, form, value, owner=owner))

    def wrong_value(
        self, name: str, form: str, value: object, *, owner: str | None = None
    ) -> ValueError:
        """The error (to raise) for ``value`` of the right type that cannot be used."""
        return self.value_error(self.value_message(name, form, value, owner=owner))

    def check_int(
        self,
        name: str,
        value: object,
        *,
        minimum: int | None = None,
        integral: bool = False,
        owner: str | None = None,
    ) -> int:
        """``value`` as an int ``>= minimum`` (when given); a bool is refused.

        ``integral`` accepts any integer type (NumPy's scalars), returned as ``int``.
        """
        return self._check_int(name, value, minimum, integral, owner, or_none=False)

    def check_optional_int(
        self,
        name: str,
        value: object,
        *,
        minimum: int | None = None,
        integral: bool = False,
        owner: str | None = None,
    ) -> int | None:
        """None, or ``value`` as :meth:`check_int` checks it (the messages say "or None")."""
        if value is None:
            return None
        return self._check_int(name, value, minimum, integral, owner, or_none=True)

    def _check_int(
        self,
        name: str,
        value: object,
        minimum: int | None,
        integral: bool,
        owner: str | None,
        *,
        or_none: bool,
    ) -> int:
        form = _int_form(minimum) + (" or None" if or_none else "")
        if not (is_integral(value) if integral else is_int(value)):
            raise self.wrong_type(name, form, value, owner=owner)
        number = int(cast(numbers.Integral, value))  # checked just above
        if minimum is not None and number < minimum:
            raise self.wrong_value(name, form, number, owner=owner)
        return number

    def check_rank(self, name: str, value: object, world_size: int) -> int:
        """A rank of a ``world_size``-rank job: an int in ``range(world_size)``."""
        rank = self.check_int(name, value, minimum=0)
        if rank >= world_size:
            raise self.wrong_value(name, f"in range(world_size) = range({world_size})", rank)
        return rank

    def check_number(
        self,
        name: str,
        value: object,
        *,
        positive: bool = False,
        finite: bool = False,
        unit: str = "",
        owner: str | None = None,
    ) -> float:
        """``value`` as a float: an int or a float, not a bool nor NaN.

        ``positive`` and ``finite`` refuse ``<= 0`` and infinities; ``unit`` ("seconds",
        say) completes the expected form: ``a number of seconds``.
        """
        form = f"a number of {unit}" if unit else "a number"
        if not is_number(value):
            raise self.wrong_type(name, form, value, owner=owner)
        if math.isnan(value):  # the right type, a wrong value: compares false with everything
            raise self.wrong_value(name, form, value, owner=owner)
        if (positive and not value > 0) or (finite and not math.isfinite(value)):
            wanted = " and ".join(
                word for word, on in (("positive", positive), ("finite", finite)) if on
            )
            raise self.wrong_value(name, wanted, value, owner=owner)
        return float(value)

    def check_seconds(self, name: str, value: object, *, owner: str | None = None) -> float:
        """``value`` as a finite number of seconds ``>= 0`` (``inf`` would wait forever)."""
        form = "a finite number of seconds >= 0"
        if not is_number(value):
            raise self.wrong_type(name, form, value, owner=owner)
        try:
            seconds = float(value)
        except OverflowError:  # an int too large for a float
            seconds = math.inf
        if not (math.isfinite(seconds) and seconds >= 0):
            raise self.wrong_value(name, form, value, owner=owner)
        return seconds

    def check_bool(self, name: str, value: object, *, owner: str | None = None) -> bool:
        """``value`` when it is a bool (0, 1 or a str given for a flag is a mistake)."""
        if not isinstance(value, bool):
            raise self.wrong_type(name, "a bool", value, owner=owner)
        return value

    def check_optional_bool(
        self, name: str, value: object, *, owner: str | None = None
    ) -> bool | None:
        """None, or ``value`` as :meth:`check_bool` checks it."""
        if value is not None and not isinstance(value, bool):
            raise self.wrong_type(name, "a bool or None", value, owner=owner)
        return value

    def check_path(self, name: str, value: object, *, owner: str | None = None) -> str:
        """``value`` (a str or an ``os.PathLike`` of a str) as a str: not empty, no NUL."""
        form = "a path (a str or os.PathLike)"
        text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
        if not isinstance(text, str):
            raise self.wrong_type(name, form, value, owner=owner)
        if not text or "\0" in text:
            raise self.wrong_value(
                name, "a non-empty path without NUL characters", text, owner=owner
            )
        return text

    def check_optional_path(
        self, name: str, value: object, *, owner: str | None = None
    ) -> str | None:
        """None, or ``value`` as :meth:`check_path` checks it."""
        if value is None:
            return None
        if not isinstance(value, (str, os.PathLike)):
            raise self.wrong_type(name, "a path (a str or os.PathLike) or None", value, owner=owner)
        return self.check_path(name, value, owner=owner)

    def check_host(self, name: str, value: object, *, owner: str | None = None) -> str | None:
        """None, or a host name that can be part of a file name: no separator, no NUL."""
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.wrong_type(name, "a str or None", value, owner=owner)
        forbidden = {"/", "\0", os.sep} | ({os.altsep} if os.altsep else set())
        if not value or any(character in value for character in forbidden):
            raise self.wrong_value(
                name, "a non-empty file-name part (no '/', no NUL)", value, owner=owner
            )
        return value

    def check_ranks(self, name: str, value: object, *, owner: str | None = None) -> list[int]:
        """``value`` as a list of ranks: a sequence (not a str) of ints ``>= 0``."""
        if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
            raise self.wrong_type(name, "a sequence of ranks (ints >= 0)", value, owner=owner)
        for item in value:
            if not is_int(item) or item < 0:
                raise self.value_error(
                    self.message(name, "ranks (ints >= 0)", item, owner=owner, verb="hold")
                )
        return list(value)

    def check_mapping(
        self, name: str, value: object, *, owner: str | None = None
    ) -> Mapping[object, object]:
        """``value`` when it is a mapping (a dict, say)."""
        if not isinstance(value, Mapping):
            raise self.wrong_type(name, "a mapping", value, owner=owner)
        return value

    def check_optional_mapping(
        self, name: str, value: object, *, owner: str | None = None
    ) -> Mapping[object, object] | None:
        """None, or ``value`` when it is a mapping."""
        if value is not None and not isinstance(value, Mapping):
            raise self.wrong_type(name, "a mapping or None", value, owner=owner)
        return value

    def check_choice(
        self, name: str, value: object, choices: Collection[str], *, owner: str | None = None
    ) -> str:
        """``value`` when it is one of ``choices`` (strings)."""
        if not isinstance(value, str) or value not in choices:
            form = "one of " + ", ".join(repr(choice) for choice in choices)
            raise self.value_error(self.message(name, form, value, owner=owner))
        return value

    def check_callable(
        self, name: str, value: object, *, owner: str | None = None, optional: bool = False
    ) -> None:
        """``value`` is callable (or None when ``optional``)."""
        if (value is None and optional) or callable(value):
            return
        form = "a function or None" if optional else "a function"
        raise self.wrong_type(name, form, value, owner=owner)

    def check_optional_text(
        self, name: str, value: object, *, owner: str | None = None
    ) -> str | None:
        """None or a non-empty str."""
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.wrong_type(name, "a str or None", value, owner=owner)
        if not value:
            raise self.wrong_value(name, "a non-empty str or None", value, owner=owner)
        return value

    def check_iterable(
        self, name: str, value: object, *, owner: str | None = None, optional: bool = False
    ) -> None:
        """``value`` is an iterable (of batches, say), or None when ``optional``."""
        if (value is None and optional) or isinstance(value, Iterable):
            return
        form = "an iterable or None" if optional else "an iterable"
        raise self.wrong_type(name, form, value, owner=owner)
