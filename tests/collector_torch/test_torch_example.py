"""examples/torch/train.py, run as a user would: under torchrun and under mpiexec, two ranks.

Each launch trains one short epoch of the DDP example and is checked on what it
leaves on disk: a summary dir per rank, the job's merged lineage at the top, and
checkpoints that load back into the example's own model.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from rankscribe.collector import load_checkpoint
from rankscribe.lineage import get_run_lineage, get_summary_lineage
from rankscribe.writer.reader import scalars
from tests._support.launchers import clean_environment, run_bounded

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "torch" / "train.py"
TIMEOUT = 240.0  # two ranks importing torch on two shared cores, plus one epoch


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("torch_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _launch(command: list[str], cwd: Path) -> str:
    process = run_bounded(
        command,
        timeout=TIMEOUT,
        cwd=cwd,
        env=clean_environment(OMP_NUM_THREADS="1"),
        check=False,
    )
    print(f"{' '.join(command[:3])}: {process.seconds:.1f} s\n{process.output}")
    assert process.returncode == 0, process.output
    return process.output


def _launcher(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        pytest.fail(
            f"{name} is not installed beside {sys.executable}: run `tox -e collector-torch`"
        )
    return str(path)


LAUNCHES = {
    "torchrun": lambda: [_launcher("torchrun"), "--standalone", "--nproc_per_node", "2"],
    "mpiexec": lambda: [_launcher("mpiexec"), "-n", "2", sys.executable],
}


@pytest.mark.slow
@pytest.mark.parametrize("launcher", sorted(LAUNCHES))
def test_the_ddp_example_records_both_ranks_and_the_job(tmp_path: Path, launcher: str) -> None:
    summary_dir = tmp_path / "runs" / "cnn"
    output = _launch(
        [
            *LAUNCHES[launcher](),
            str(EXAMPLE),
            "--summary-dir",
            str(summary_dir),
            "--epochs",
            "1",
            "--collect-freq",
            "5",
        ],
        cwd=tmp_path,
    )

    assert "trained 1 epochs on 2 rank(s)" in output
    for rank in (0, 1):
        rank_dir = summary_dir / f"rank_{rank}"
        recorded = scalars(rank_dir)
        losses = recorded["loss/auto"]
        assert losses and all(value > 0 for _, value in losses)
        # Given the DDP network, the probe records the local gradient before the reduce.
        norms = recorded["rankscribe/gradient/norm/0"]
        assert len(norms) == 22 and all(value > 0 for _, value in norms)
    lineage = get_summary_lineage(str(summary_dir))
    hyper = lineage["hyper_parameters"]
    assert (hyper["device_num"], hyper["batch_size"], hyper["optimizer"]) == (2, 32, "SGD")
    assert lineage["algorithm"]["network"] == "DigitsCNN"
    job = get_run_lineage(str(summary_dir))
    assert job is not None
    verdicts = job.section("user_defined")
    assert (verdicts["job/gradient_check"], verdicts["job/gradient_ranks"]) == ("checked", "")
    assert 0.0 <= lineage["metric"]["accuracy"] <= 1.0
    # 1,437 training digits in two DistributedSampler shards of 718, each trained in 22
    # full batches of 32 (the loader drops the rest): the samples the job trained on.
    assert lineage["train_dataset"]["train_dataset_size"] == 2 * 22 * 32

    example = _load_example()
    model = example.DigitsCNN()
    checkpoints = sorted((summary_dir / "rank_0").glob("digits-cnn-*.ckpt"))
    assert [path.name for path in checkpoints] == ["digits-cnn-1_22.ckpt"]
    parameters, _ = load_checkpoint(str(checkpoints[0]))
    state = {name: torch.from_numpy(value.copy()) for name, value in parameters.items()}
    model.load_state_dict(state)  # strict: every parameter present, with its shape
    rank_1, _ = load_checkpoint(str(summary_dir / "rank_1" / "digits-cnn-1_22.ckpt"))
    for name, value in parameters.items():  # DDP keeps the ranks' weights identical
        torch.testing.assert_close(torch.from_numpy(rank_1[name]), torch.from_numpy(value))
