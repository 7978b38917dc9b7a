"""examples/torch/train.py as the README runs it (mpiexec -n 2), then run again.

- The README's checkpoint snippet runs as written against the first job's files
  (``load_checkpoint`` returns a ``LoadedCheckpoint`` named tuple).
- The merged lineage counts the test set once (every rank evaluated all of it) and
  the training set's shards summed, and says which it was.
- A second run goes to ``<job>-2`` and leaves the first job's files as they were.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import sys
from pathlib import Path
from types import ModuleType

import pytest

from rankscribe.lineage import get_run_lineage, get_summary_lineage
from rankscribe.writer.reader import scalars
from tests._support.readme import README, readme_block
from tests._support.snapshots import snapshot


def _sibling(name: str) -> ModuleType:
    """A test module beside this one (tests are imported with --import-mode=importlib)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The launch helpers of the example's own test (bounded runs, a clean environment).
EXAMPLE_TEST = _sibling("test_torch_example")
EXAMPLE = EXAMPLE_TEST.EXAMPLE
MARKER = "<!-- tested by tests/collector_torch/test_readme_checkpoint.py -->"
TEST_SAMPLES = 360  # 20 % of scikit-learn's 1,797 digits
TRAIN_SAMPLES = 2 * 22 * 32  # two DistributedSampler shards, 22 full batches of 32 each


def mpiexec_example(cwd: Path, *options: str) -> str:
    return str(
        EXAMPLE_TEST._launch(
            [
                EXAMPLE_TEST._launcher("mpiexec"),
                "-n",
                "2",
                sys.executable,
                str(EXAMPLE),
                "--summary-dir",
                "runs/torch",
                *options,
            ],
            cwd=cwd,
        )
    )


@pytest.mark.slow
def test_the_readme_checkpoint_a_counted_test_set_and_a_rerun(tmp_path: Path) -> None:
    mpiexec_example(tmp_path)  # the README's command: 3 epochs
    job = tmp_path / "runs" / "torch"

    printed = io.StringIO()
    with contextlib.chdir(tmp_path), contextlib.redirect_stdout(printed):
        exec(
            compile(readme_block(MARKER), str(README), "exec"),
            {"DigitsCNN": EXAMPLE_TEST._load_example().DigitsCNN},
        )
    shape, append_info = printed.getvalue().rsplit(" ", 1)[0], printed.getvalue().split()[-1]
    assert ast.literal_eval(shape.strip()) == (10, 256)  # what the README's comment says
    assert ast.literal_eval(append_info) == {}
    assert "# (10, 256) {}" in readme_block(MARKER)

    lineage = get_summary_lineage(str(job))
    assert lineage["valid_dataset"]["valid_dataset_size"] == TEST_SAMPLES  # not 2 x 360
    assert lineage["train_dataset"]["train_dataset_size"] == TRAIN_SAMPLES
    merged = get_run_lineage(str(job))
    assert merged is not None
    user = merged.section("user_defined")
    assert (user["valid_dataset_sharding"], user["train_dataset_sharding"]) == ("whole", "shards")
    first = snapshot(job)
    first_losses = scalars(job / "rank_0")["loss/auto"]

    output = mpiexec_example(tmp_path, "--epochs", "1")
    assert f"runs/torch already holds a run; this one goes to {Path('runs/torch-2')}" in output
    assert output.count("already holds a run") == 1  # rank 0 says it
    assert snapshot(job) == first  # not one byte of the first job changed
    assert scalars(job / "rank_0")["loss/auto"] == first_losses
    second = tmp_path / "runs" / "torch-2"
    for rank in (0, 1):
        steps = [step for step, _ in scalars(second / f"rank_{rank}")["loss/auto"]]
        assert steps == [1, 10, 20]  # one epoch of 22 steps, every 10th kept: no repeats
        assert [path.name for path in (second / f"rank_{rank}").glob("*.ckpt")] == [
            "digits-cnn-1_22.ckpt"
        ]
    assert get_summary_lineage(str(second))["hyper_parameters"]["epoch"] == 1
