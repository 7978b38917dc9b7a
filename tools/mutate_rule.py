#!/usr/bin/env python3
"""Single changes to the straggler rule, and whether the tests catch each one.

    python tools/mutate_rule.py [--list] [--only TEXT ...] [--jobs 2] [--timeout SECONDS]
                                [--tests PATH ...] [--require 0.9] [--json PATH]

A rule whose constants were each moved to fix one scenario can keep constants and
branches that no test needs: a change to them passes every test, and the next person
cannot tell what they are for. This tool makes each single change (a *mutant*) to the
straggler rule in a copy of the ``rankscribe-jobview`` sources, runs the tests against
that copy (``--tests``; by default the job view's tests and the detection benchmark's),
and prints which tests killed it (failed) and which mutants survived. It changes no file
of the checkout.

The mutants (``--list`` prints them):

- **constants**: each of the rule's constants (``RULE_CONSTANTS``: its thresholds, bars
  and edges, not the evidence's layout) made 50 % smaller and 50 % larger; an int at
  least one smaller or larger, a tuple element by element;
- **branches**: in each function of the rule (``RULE_FUNCTIONS``), each operand of a
  boolean combination (``a | b | c``, ``a & b``, ``and``, ``or``) removed, and each
  ``if`` made never to be taken.

A mutant is *killed* when the tests fail (or run past ``--timeout``, counted apart), and
*survives* when they pass: then either a test is missing, or the change does not change
what the rule decides (an equivalent mutant: ``EQUIVALENT`` lists each with its reason,
and the share killed is given of all mutants and of those not equivalent). The exit
status is 1 when fewer than ``--require`` of the mutants not equivalent are killed
(``--require 0`` never fails), 2 when the unchanged rule fails its own tests or the copy
is not what the tests import.

Each mutant's tests stop at their first failure (``pytest -x``), so a killed mutant costs
seconds and a surviving one the whole selection (~25 s for the default); two jobs on two
cores run the 75 mutants in a few minutes.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "packages" / "rankscribe-jobview" / "src"
VERDICTS = Path("rankscribe/jobview/job/verdicts")
RULE = VERDICTS / "_straggler_verdicts.py"
EVIDENCE = VERDICTS / "_stragglers.py"
#: The rule's constants, per file: what decides a verdict. The evidence's layout (its
#: field offsets, ``PERIODS``, ``BLOCK_SIZES``, ``TOP_SIZES``, ``MAX_BLOCKS``) is left
#: alone: changing it changes what is recorded, not what is judged.
RULE_CONSTANTS: dict[Path, tuple[str, ...]] = {
    RULE: (
        "FLOOR_ERRORS",
        "NOISE_STEPS",
        "NORMAL_SPREAD",
        "LIKE_NOISE",
        "MATERIAL_ERRORS",
        "SHIFTED_SPREAD",
        "BURST_FLOORS",
        "CONFIDENCE_RANKS",
    ),
    EVIDENCE: ("CLIPSHARE", "EDGES", "LEAD_EDGES"),
}
#: The functions (``Class.method`` for a method) of the rule whose branches are mutated:
#: from a timing's sums since each rank's onset to the ranks a record names.
RULE_FUNCTIONS: dict[Path, tuple[str, ...]] = {
    RULE: (
        "confidence_for",
        "_moderated",
        "_duty",
        "_duty_noise",
        "_steady",
        "_periods",
        "_judge_tag",
        "_WallClock.rank_cost",
        "_WallClock._block_size",
        "_WallClock.group_cost",
        "_WallClock._usual",
        "_long_leads_often",
        "_poisson_tail_below",
        "_judgements",
        "_wall_named",
    ),
}
#: Mutants that change no verdict whatever the timings, with the reason (a shortcut, a
#: guard another one repeats): when one survives it is counted apart, not as a missing
#: test; when one is killed it was not equivalent, and the tool says so.
EQUIVALENT: dict[str, str] = {
    "_judgements: `if len(part.ranks) < 2` never taken": (
        "a shortcut: one rank has no others, its excess is NaN and nothing is named"
    ),
    "_judgements: `if not bool(judged.named.any())` never taken": (
        "a shortcut: without a slow rank _wall_named names nobody"
    ),
    "_steady: `count > 0` removed from a `&` of 2": (
        "a rank without steps is never named: min_steps is 1 or more"
    ),
    "_wall_named: `len(slow) > 1` removed from a `and` of 2": (
        "one rank is a block of one, whose cost is its own lead: not a floor above its own"
    ),
    "_wall_named: `len(rows) < 2` removed from a `or` of 2": (
        "one rank's group cost is its own lead, under the floor when it is not alone"
    ),
}
# The rule's own tests first: a killed mutant stops at its first failure (`-x`).
DEFAULT_TESTS = (
    "tests/jobview/test_straggler_rule.py",
    "tests/jobview/test_judge_timings.py",
    "tests/jobview",
    "tests/tools/test_detection_bench.py",
)
SCALES = (0.5, 1.5)


@dataclass(frozen=True)
class Mutant:
    """One change: the bytes ``start:end`` of ``path`` (relative to the sources) replaced
    by ``text``; ``name`` says what it is."""

    name: str
    path: Path
    start: int
    end: int
    text: str

    def apply(self, source: bytes) -> bytes:
        return source[: self.start] + self.text.encode() + source[self.end :]


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # "killed", "survived", "timeout"
    seconds: float
    by: str  # the first failing test, or what the run printed last


class _Offsets:
    """Byte offsets of an :mod:`ast` node's start and end in one file's source."""

    def __init__(self, source: bytes) -> None:
        self.source = source
        self._lines = [0]
        for line in source.splitlines(keepends=True):
            self._lines.append(self._lines[-1] + len(line))

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = self._lines[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]
        end_line, end_col = node.end_lineno, node.end_col_offset  # type: ignore[attr-defined]
        return start, self._lines[end_line - 1] + end_col

    def text(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end].decode()


def _scaled(value: object, scale: float) -> object:
    """``value`` (a number or a tuple of numbers) times ``scale``; an int moved by 1 at
    least, rounded, and kept at 1 or more where it was."""
    if isinstance(value, tuple):
        return tuple(_scaled(item, scale) for item in value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"not a number: {value!r}")
    if isinstance(value, int):
        moved = round(value * scale)
        if moved == value:
            moved = value + (1 if scale > 1 else -1)
        return max(moved, 1) if value >= 1 else moved
    return value * scale


def constant_mutants(path: Path, source: bytes, names: Sequence[str]) -> Iterator[Mutant]:
    """Each module constant of ``names`` in ``path`` at each of ``SCALES``."""
    offsets, tree = _Offsets(source), ast.parse(source)
    found: set[str] = set()
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if not isinstance(target, ast.Name) or target.id not in names or value is None:
            continue
        found.add(target.id)
        literal = ast.literal_eval(value)
        start, end = offsets.span(value)
        for scale in SCALES:
            text = repr(_scaled(literal, scale))
            yield Mutant(f"{target.id} x{scale:g}: {literal!r} -> {text}", path, start, end, text)
    missing = sorted(set(names) - found)
    if missing:
        raise SystemExit(f"mutate_rule: {path} has no constant {', '.join(missing)}")


def _functions(tree: ast.Module, names: Sequence[str]) -> Iterator[tuple[str, ast.FunctionDef]]:
    """The functions of ``names`` (``Class.method`` for a method) in ``tree``."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                qualified = f"{node.name}.{getattr(item, 'name', '')}"
                if isinstance(item, ast.FunctionDef) and qualified in names:
                    yield qualified, item


def _chain(node: ast.BinOp) -> list[ast.expr]:
    """The operands of a chain of one operator: ``a | b | c`` -> ``[a, b, c]``."""
    operands: list[ast.expr] = []
    for side in (node.left, node.right):
        if isinstance(side, ast.BinOp) and type(side.op) is type(node.op):
            operands += _chain(side)
        else:
            operands.append(side)
    return operands


def _nested_in_chain(node: ast.BinOp, parents: dict[ast.AST, ast.AST]) -> bool:
    parent = parents.get(node)
    return isinstance(parent, ast.BinOp) and type(parent.op) is type(node.op)


def branch_mutants(path: Path, source: bytes, names: Sequence[str]) -> Iterator[Mutant]:
    """In each function of ``names``: each operand of a boolean combination removed, and
    each ``if`` never taken."""
    offsets, tree = _Offsets(source), ast.parse(source)
    found: set[str] = set()
    for name, function in _functions(tree, names):
        found.add(name)
        parents = {
            child: node for node in ast.walk(function) for child in ast.iter_child_nodes(node)
        }
        # Annotations decide nothing (and are strings here: ``from __future__ import
        # annotations``): only the body's code is changed.
        annotations = {
            id(inner)
            for node in ast.walk(function)
            if isinstance(node, ast.AnnAssign)
            for inner in ast.walk(node.annotation)
        }
        body = [node for statement in function.body for node in ast.walk(statement)]
        for node in body:
            if id(node) in annotations:
                continue
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr | ast.BitAnd):
                if _nested_in_chain(node, parents):
                    continue  # the chain's outermost node makes its mutants
                operands, joint = _chain(node), " | " if isinstance(node.op, ast.BitOr) else " & "
            elif isinstance(node, ast.BoolOp):
                operands = list(node.values)
                joint = " or " if isinstance(node.op, ast.Or) else " and "
            elif isinstance(node, ast.If):
                start, end = offsets.span(node.test)
                test = " ".join(offsets.text(node.test).split())
                yield Mutant(f"{name}: `if {test}` never taken", path, start, end, "False")
                continue
            else:
                continue
            start, end = offsets.span(node)
            texts = [offsets.text(operand) for operand in operands]
            for index, removed in enumerate(texts):
                rest = joint.join(f"({text})" for i, text in enumerate(texts) if i != index)
                said = " ".join(removed.split())
                yield Mutant(
                    f"{name}: `{said}` removed from a `{joint.strip()}` of {len(texts)}",
                    path,
                    start,
                    end,
                    f"({rest})",
                )
    missing = sorted(set(names) - found)
    if missing:
        raise SystemExit(f"mutate_rule: {path} has no function {', '.join(missing)}")


def all_mutants(sources: Path = SOURCES) -> list[Mutant]:
    """Every mutant of the rule in ``sources`` (a ``src`` folder of rankscribe-jobview)."""
    mutants: list[Mutant] = []
    for path, names in RULE_CONSTANTS.items():
        mutants += constant_mutants(path, (sources / path).read_bytes(), names)
    for path, names in RULE_FUNCTIONS.items():
        mutants += branch_mutants(path, (sources / path).read_bytes(), names)
    for mutant in mutants:  # each mutant must still be Python
        ast.parse(mutant.apply((sources / mutant.path).read_bytes()))
    return mutants


def _snapshot(folder: Path) -> Path:
    """The sources as they are now, which every mutant starts from: an edit of the
    checkout while the tool runs changes none of them (a mutant's offsets are the
    snapshot's)."""
    copy = folder / "snapshot"
    shutil.copytree(SOURCES, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _environment(copy: Path) -> dict[str, str]:
    """The environment whose ``rankscribe.jobview`` is the copy's (ahead of an editable
    install's path: ``rankscribe`` is a namespace package)."""
    paths = [str(copy), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths), PYTHONDONTWRITEBYTECODE="1")


def _copy_with(mutant: Mutant | None, sources: Path, folder: Path) -> Path:
    copy = folder / "src"
    shutil.copytree(sources, copy)
    if mutant is not None:
        target = copy / mutant.path
        target.write_bytes(mutant.apply(target.read_bytes()))
    return copy


def _first_failure(output: str) -> str:
    found = re.search(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE)
    if found:
        return found.group(1)
    lines = [line for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _in_order(tests: Sequence[str]) -> list[str]:
    """The test files of ``tests`` in the order given, a folder's in name order, each once:
    pytest runs the files it is given in that order, but a folder's files in its own,
    which would put the rule's tests after the folder's others even when named first."""
    files: list[str] = []
    for test in tests:
        path = ROOT / test
        found = sorted(path.rglob("test_*.py")) if path.is_dir() else [path]
        files += [str(item.relative_to(ROOT)) for item in found]
    return list(dict.fromkeys(files))


def run_tests(
    mutant: Mutant | None,
    sources: Path,
    tests: Sequence[str],
    timeout: float,
    *,
    stop_first: bool = True,
) -> Outcome | None:
    """The tests run against ``sources`` changed by ``mutant`` (None: unchanged)."""
    with tempfile.TemporaryDirectory(prefix="rankscribe-mutant-") as folder:
        env = _environment(_copy_with(mutant, sources, Path(folder)))
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE"]
        command += ["-x"] if stop_first else []
        started = time.perf_counter()
        try:
            done = subprocess.run(
                [*command, *_in_order(tests)],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            seconds = time.perf_counter() - started
            return None if mutant is None else Outcome(mutant, "timeout", seconds, "")
        seconds = time.perf_counter() - started
    if done.returncode == 5:
        raise SystemExit(f"mutate_rule: no tests collected from {' '.join(tests)}")
    status = "survived" if done.returncode == 0 else "killed"
    by = _first_failure(done.stdout + done.stderr) if status == "killed" else ""
    placeholder = Mutant("unchanged", RULE, 0, 0, "")
    return Outcome(mutant or placeholder, status, seconds, by)


def _check_imports_the_copy(sources: Path) -> None:
    """The tests must import the copy, not the checkout: else every mutant survives."""
    with tempfile.TemporaryDirectory(prefix="rankscribe-mutant-") as folder:
        copy = _copy_with(None, sources, Path(folder))
        module = ".".join(RULE.with_suffix("").parts)
        done = subprocess.run(
            [sys.executable, "-c", f"import {module} as m; print(m.__file__)"],
            cwd=ROOT,
            env=_environment(copy),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        imported = done.stdout.strip()
        if done.returncode != 0 or not Path(imported).is_relative_to(copy):
            print(f"the tests import {imported or done.stderr.strip()!r}, not the copy")
            raise SystemExit(2)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument(
        "--only", nargs="+", default=[], help="only mutants whose name holds one of these"
    )
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once")
    parser.add_argument(
        "--timeout",
        type=float,
        default=0.0,
        help="seconds a mutant's tests may take "
        "(default: 5 times the unchanged rule's, at least 60)",
    )
    parser.add_argument("--tests", nargs="+", default=list(DEFAULT_TESTS))
    parser.add_argument(
        "--require", type=float, default=0.9, help="the share of mutants that must be killed"
    )
    parser.add_argument("--json", type=Path, help="write every outcome to this file")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be 1 or more, got {args.jobs}")
    if not 0.0 <= args.require <= 1.0:
        parser.error(f"--require must be a share from 0 to 1, got {args.require}")
    with tempfile.TemporaryDirectory(prefix="rankscribe-mutants-") as folder:
        return _mutate(args, _snapshot(Path(folder)))


def _mutate(args: argparse.Namespace, sources: Path) -> int:
    """Run (or list) the mutants of ``sources`` that ``args`` select; the exit status."""
    chosen = all_mutants(sources)
    mutants = [m for m in chosen if not args.only or any(o in m.name for o in args.only)]
    if args.list:
        for index, mutant in enumerate(mutants, 1):
            print(f"{index:3d} {mutant.path.name}: {mutant.name}")
        return 0
    if not mutants:
        print(f"no mutant's name holds any of {args.only}")
        return 2
    _check_imports_the_copy(sources)
    baseline = run_tests(None, sources, args.tests, 3600.0, stop_first=False)
    if baseline is None or baseline.status != "survived":
        print(f"the unchanged rule fails its tests: {baseline.by if baseline else 'timeout'}")
        return 2
    timeout = args.timeout or max(60.0, 5 * baseline.seconds)
    print(f"{len(mutants)} mutants; the unchanged rule's tests pass in {baseline.seconds:.0f} s")
    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for outcome in pool.map(lambda m: run_tests(m, sources, args.tests, timeout), mutants):
            assert outcome is not None
            outcomes.append(outcome)
            mark = {"killed": "killed  ", "timeout": "timeout ", "survived": "SURVIVED"}
            name = outcome.mutant.name
            if name in EQUIVALENT:
                mark["survived"] = "equivalent"
                if outcome.status != "survived":
                    outcome.by += f" (listed as equivalent: {EQUIVALENT[name]}; it is not)"
            print(
                f"{mark[outcome.status]} {outcome.seconds:5.1f} s  {outcome.mutant.path.name}: "
                f"{outcome.mutant.name}" + (f"  <- {outcome.by}" if outcome.by else ""),
                flush=True,
            )
    killed = sum(outcome.status != "survived" for outcome in outcomes)
    equivalent = sum(
        outcome.status == "survived" and outcome.mutant.name in EQUIVALENT for outcome in outcomes
    )
    judged = len(outcomes) - equivalent
    share = killed / judged if judged else 1.0
    timeouts = sum(outcome.status == "timeout" for outcome in outcomes)
    print(
        f"killed {killed} of {len(outcomes)} ({killed / len(outcomes):.0%}; {timeouts} by "
        f"the timeout); {equivalent} equivalent; killed {share:.0%} of the other "
        f"{judged}; required {args.require:.0%}: {'met' if share >= args.require else 'NOT met'}"
    )
    if args.json:
        rows = [
            {
                "mutant": o.mutant.name,
                "file": o.mutant.path.name,
                "status": o.status,
                "equivalent": o.mutant.name in EQUIVALENT,
                "seconds": round(o.seconds, 2),
                "by": o.by,
            }
            for o in outcomes
        ]
        args.json.write_text(json.dumps({"killed": killed, "mutants": rows}, indent=1) + "\n")
    return 0 if share >= args.require else 1


if __name__ == "__main__":
    sys.exit(main())
