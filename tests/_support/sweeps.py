"""The harness of the bad-argument sweeps (tests/<package>/test_bad_arguments_sweep.py).

A sweep walks every public name of a package: for each that takes arguments, its
suite gives one call that works (``VALID``: name -> function of ``tmp_path``
returning positional and keyword arguments) and its own rules for the obvious
wrong values of an annotation; this module turns those into test cases and
checks a case's refusal. What each package must do with a wrong argument is
docs/contributing.md's rule: its own error, deriving from the built-in it
refines, naming the argument.

Only the standard library and pytest are imported here: every tox env imports
this module, each with its own package alone installed.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

#: (positional, keyword) arguments of a call.
Arguments = tuple[tuple[Any, ...], dict[str, Any]]
#: name -> a call that works, its arguments made in the test's tmp_path.
ValidCalls = Mapping[str, Callable[[Path], Arguments]]


def public_callables(*modules: ModuleType) -> dict[str, Callable[..., Any]]:
    """The callables of the modules' ``__all__`` that are not exceptions (a later module wins)."""
    found: dict[str, Callable[..., Any]] = {}
    for module in modules:
        for name in module.__all__:
            item = getattr(module, name)
            if callable(item) and not (isinstance(item, type) and issubclass(item, Exception)):
                found[name] = item
    return found


def assert_swept_or_left_out(
    public: Iterable[str], valid: Iterable[str], left_out: Iterable[str]
) -> None:
    """Every public name has a valid call or a reason to be left out, never both."""
    assert set(public) == set(valid) | set(left_out)
    assert not set(valid) & set(left_out)


def sweep_cases(
    public: Mapping[str, Callable[..., Any]],
    valid: ValidCalls,
    wrong_values: Callable[[str, str], list[Any]],
) -> list[Any]:
    """One case per (name with a valid call, argument, wrong value of its annotation)."""
    cases = []
    for function_name, function in sorted(public.items()):
        if function_name not in valid:
            continue
        for parameter in inspect.signature(function).parameters.values():
            for wrong in wrong_values(parameter.name, str(parameter.annotation)):
                cases.append(
                    pytest.param(
                        function_name,
                        parameter.name,
                        wrong,
                        id=f"{function_name}({parameter.name}={wrong!r})",
                    )
                )
    return cases


def refusal(
    function: Callable[..., Any],
    arguments: Arguments,
    argument: str,
    wrong: Any,
    error: type[Exception],
    *,
    says: str | None = None,
) -> Exception:
    """Call ``function`` as ``arguments`` with ``argument`` replaced by ``wrong``; return the error.

    The call must raise ``error``, which must also be a ValueError, TypeError or
    OSError and say ``says`` (by default: the argument's name).
    """
    positional, keywords = arguments
    bound = inspect.signature(function).bind_partial(*positional, **keywords)
    bound.arguments[argument] = wrong
    with pytest.raises(error) as caught:
        function(*bound.args, **bound.kwargs)
    expected = argument if says is None else says
    assert expected in str(caught.value), str(caught.value)
    assert isinstance(caught.value, (TypeError, ValueError, OSError))
    return caught.value


def obvious_wrong_values(name: str, annotation: str) -> list[Any]:  # noqa: PLR0911 - one per form
    """Obvious wrong values for an argument annotated ``annotation``.

    None where a path or mapping belongs, an int where a str belongs, a str or a bool or a
    float where an int belongs; a timeout also gets infinity, NaN and a negative number
    (the job view's and the lineage manager's sweeps; the writer and collector have theirs).
    """
    optional = "None" in annotation
    if "PathLike" in annotation or name.endswith(("_dir", "directory")):
        return [5, b"bytes/path"] + ([] if optional else [None])
    if "Mapping" in annotation or annotation.startswith("dict"):
        return [5, "text"] + ([] if optional else [None])
    if "Sequence[int]" in annotation:
        return [5, None, "01"]
    if annotation.startswith("bool"):
        return ["yes", 1] + ([] if optional else [None])
    if annotation.startswith("int"):
        return ["1", True, 1.5] + ([] if optional else [None])
    if annotation == "float" and "timeout" in name:
        return ["1", True, math.inf, math.nan, -1.0]
    if annotation.startswith("str"):
        return [5] + ([] if optional else [None])
    return []
