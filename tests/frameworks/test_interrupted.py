"""Training stopped before its end: rank 0 of several says how to merge.

The end of training, which merges the job's lineage, never comes when the
fit raises; Lightning tells its callbacks (``on_exception``) and then its
loggers (``finalize("failed")``). The logger closes the run with the
exception, as a training loop would, and rank 0 of a job of several warns
with the command that makes the job's lineage. Transformers' callbacks and
Accelerate's trackers hear of no exception: rank 0 says it when the process
exits (a script of its own here, so that its exit is seen). The rank is rank 0
of 2 (injected into the collector the integration makes, with a coordinator
whose rank 1 never reports), so each runs in one process.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

from rankscribe.collector import SummaryCollector
from rankscribe.lineage.recording import read_train_stop
from rankscribe.ranks import RankInfo
from rankscribe.writer.events import load_dir
from tests._support.launchers import clean_environment, run_bounded
from tests.collector.coordinators import RankZeroAlone
from tests.frameworks.checks import quiet_trainer
from tests.frameworks.conftest import JOB_TIMEOUT, ROOT

pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch")


def _fit(
    lightning: Any,
    integration: Any,
    directory: Path,
    fail_at: int | None,
    error: BaseException | None = None,
) -> str:
    """A 4-step fit whose step ``fail_at`` raises ``error`` (a RuntimeError by default);
    the job's directory."""
    raised = RuntimeError("the data ran out") if error is None else error

    class Tiny(lightning.LightningModule):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch: Any, index: int) -> Any:
            if index == fail_at:
                raise raised
            features, target = batch
            return torch.nn.functional.mse_loss(self.layer(features), target)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    logger = integration.RankScribeLogger(
        directory, collect_specified_data={"collect_landscape": None}
    )
    trainer = quiet_trainer(lightning, logger, max_steps=4)
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    if fail_at is None:
        trainer.fit(Tiny(), loader)
    elif isinstance(raised, KeyboardInterrupt):
        # Lightning ends a fit that Ctrl-C stopped by sys.exit(1), SIGINT left ignored.
        handler = signal.getsignal(signal.SIGINT)
        try:
            with pytest.raises(SystemExit):
                trainer.fit(Tiny(), loader)
        finally:
            signal.signal(signal.SIGINT, handler)
    else:
        with pytest.raises(RuntimeError, match="the data ran out"):
            trainer.fit(Tiny(), loader)
    return str(logger.log_dir)


def _lightning_as_rank_zero_of_two(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """Lightning and the integration, whose collectors are rank 0 of 2 (rank 1 never reports)."""
    lightning = pytest.importorskip("lightning.pytorch")
    from rankscribe.collector import lightning as integration

    rank = RankInfo(0, 2, 0, 2, "host", "pmi")

    class RankZeroOfTwo(SummaryCollector):
        def __init__(self, summary_dir: Any, **options: Any) -> None:
            options.update(rank_info=rank, coordinator=RankZeroAlone(rank))
            super().__init__(summary_dir, **options)

    monkeypatch.setattr(integration, "SummaryCollector", RankZeroOfTwo)
    return lightning, integration


def test_rank_zero_of_a_failed_fit_says_how_to_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    lightning, integration = _lightning_as_rank_zero_of_two(monkeypatch)
    job = _fit(lightning, integration, tmp_path / "failed", fail_at=2)
    said = [r.getMessage() for r in caplog.records if "rankscribe-lineage merge" in r.getMessage()]
    assert said == [
        "Training stopped (RuntimeError) before the job's lineage was merged: run "
        f"`rankscribe-lineage merge {job}` once every rank has stopped."
    ]
    caplog.clear()
    _fit(lightning, integration, tmp_path / "finished", fail_at=None)
    assert [r for r in caplog.records if "rankscribe-lineage merge" in r.getMessage()] == []


def test_a_fit_that_ctrl_c_stopped_keeps_the_signal_in_its_stop_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lightning names the KeyboardInterrupt to its loggers (``on_exception``, then
    ``finalize("failed")``): the rank's files are closed, then its record says SIGINT."""
    lightning, integration = _lightning_as_rank_zero_of_two(monkeypatch)
    job = Path(_fit(lightning, integration, tmp_path, fail_at=2, error=KeyboardInterrupt()))
    assert read_train_stop(job / "rank_0") == ("KeyboardInterrupt", ANY, ANY, "SIGINT", False)
    assert [path.stat().st_mode & 0o777 for path in (job / "rank_0").glob("*_MS")] == [0o400]


#: Rank 0 of 2 in a script's process: the integration's collectors are made so.
RANK_ZERO_OF_TWO = """
import sys
from rankscribe.collector import SummaryCollector
from rankscribe.ranks import RankInfo
from tests.collector.coordinators import RankZeroAlone

RANK = RankInfo(0, 2, 0, 2, "host", "pmi")


class RankZeroOfTwo(SummaryCollector):
    def __init__(self, summary_dir, **options):
        options.update(rank_info=RANK, coordinator=RankZeroAlone(RANK))
        super().__init__(summary_dir, **options)
"""

ACCELERATE = """
import accelerate
from rankscribe.collector import accelerate as integration

integration.SummaryCollector = RankZeroOfTwo
tracker = integration.RankScribeTracker(sys.argv[1])
accelerator = accelerate.Accelerator(cpu=True, log_with=[tracker])
accelerator.init_trackers("tiny", config={"learning_rate": 0.1})
for step in range(1, 4):
    accelerator.log({"loss": 1.0 / step}, step=step)
if sys.argv[2] == "raise":
    raise RuntimeError("the data ran out")
if sys.argv[2] == "end":
    accelerator.end_training()
if sys.argv[2] == "sigterm":  # a scheduler's, once rank 1 wrote what it held
    import os, pathlib, signal, time

    (pathlib.Path(sys.argv[1]) / ".rankscribe-terminated-1").touch()
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
"""

TRANSFORMERS = """
import torch
import transformers
from rankscribe.collector import transformers as integration

integration.SummaryCollector = RankZeroOfTwo


class Samples(torch.utils.data.Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, index):
        if index >= 8:
            raise RuntimeError("the data ran out")
        return {"input_ids": torch.tensor([1, 2, 3, index % 5 + 4]), "labels": torch.tensor(0)}


config = transformers.BertConfig(
    vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=16, max_position_embeddings=8, num_labels=2,
)
arguments = transformers.TrainingArguments(
    output_dir=sys.argv[2], max_steps=4, per_device_train_batch_size=4, report_to=[],
    save_strategy="no", use_cpu=True, disable_tqdm=True, dataloader_drop_last=True,
)
transformers.Trainer(
    model=transformers.BertForSequenceClassification(config), args=arguments,
    train_dataset=Samples(), callbacks=[integration.RankScribeCallback(sys.argv[1])],
).train()
"""


def _run_script(tmp_path: Path, body: str, *arguments: str | Path) -> tuple[int, str]:
    """The script's exit code and what it printed (stderr apart)."""
    script = tmp_path / "train.py"
    script.write_text(RANK_ZERO_OF_TWO + body)
    env = clean_environment(
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    finished = run_bounded(
        [sys.executable, script, *arguments],
        timeout=JOB_TIMEOUT,
        env=env,
        cwd=tmp_path,
        check=False,
        stderr_apart=True,
    )
    return finished.returncode, finished.stderr


def _merge_lines(printed: str) -> list[str]:
    return [line for line in printed.splitlines() if "rankscribe-lineage merge" in line]


@pytest.mark.parametrize(
    ("ending", "why"), [("raise", "RuntimeError"), ("leave", "the process exited")]
)
def test_rank_zero_of_an_accelerate_job_that_never_ended_says_how_to_merge(
    tmp_path: Path, ending: str, why: str
) -> None:
    """An exception out of the loop, or a script that stops without ``end_training``: the
    process's exit says it, naming the exception Python printed, if any."""
    pytest.importorskip("accelerate")
    job = tmp_path / "runs" / "acc"
    code, printed = _run_script(tmp_path, ACCELERATE, job, ending)
    assert code == (1 if ending == "raise" else 0), printed
    [line] = _merge_lines(printed)
    assert line.endswith(
        f"Training stopped ({why}) before the job's lineage was merged: run "
        f"`rankscribe-lineage merge {job}` once every rank has stopped."
    ), printed
    assert (job / "rank_0").is_dir()


def test_rank_zero_of_an_accelerate_job_sent_sigterm_keeps_the_signal_in_its_stop_record(
    tmp_path: Path,
) -> None:
    """Accelerate's trackers hear of no SIGTERM either: at the process's end the run left
    open is said to have stopped on the signal's ``Terminated``, so the job view does not
    take the rank for one that raised (Python keeps no SystemExit as the last error)."""
    pytest.importorskip("accelerate")
    job = tmp_path / "runs" / "acc"
    code, printed = _run_script(tmp_path, ACCELERATE, job, "sigterm")
    assert code == -signal.SIGTERM, printed
    [line] = _merge_lines(printed)
    assert line.endswith(
        "Training stopped (Terminated) before the job's lineage was merged: run "
        f"`rankscribe-lineage merge {job}` once every rank has stopped."
    ), printed
    assert read_train_stop(job / "rank_0") == ("Terminated", ANY, ANY, "SIGTERM", False)


def test_an_accelerate_job_that_ends_training_says_nothing_at_exit(tmp_path: Path) -> None:
    pytest.importorskip("accelerate")
    code, printed = _run_script(tmp_path, ACCELERATE, tmp_path / "runs" / "acc", "end")
    assert code == 0, printed
    assert _merge_lines(printed) == []


def test_rank_zero_of_a_transformers_job_whose_training_raised_says_how_to_merge(
    tmp_path: Path,
) -> None:
    """``Trainer.train`` raising at its third step (the data loader's error)."""
    pytest.importorskip("transformers")
    job = tmp_path / "runs" / "hf"
    code, printed = _run_script(tmp_path, TRANSFORMERS, job, tmp_path / "out")
    assert code == 1, printed
    assert "RuntimeError: the data ran out" in printed
    [line] = _merge_lines(printed)
    assert line.endswith(
        "Training stopped (RuntimeError) before the job's lineage was merged: run "
        f"`rankscribe-lineage merge {job}` once every rank has stopped."
    ), printed


#: The data loader's 201st sample (the 51st step's first: the sampler shuffles, so it is
#: counted by calls) sends the process SIGTERM, as a scheduler's time limit would; one
#: process (the integration's own collector).
TRANSFORMERS_SIGTERM = (
    TRANSFORMERS.replace("integration.SummaryCollector = RankZeroOfTwo\n", "")
    .replace(
        "class Samples(torch.utils.data.Dataset):",
        "CALLS = []\n\n\nclass Samples(torch.utils.data.Dataset):",
    )
    .replace(
        """        if index >= 8:
            raise RuntimeError("the data ran out")
""",
        """        CALLS.append(index)
        if len(CALLS) == 201:
            import os, signal

            os.kill(os.getpid(), signal.SIGTERM)
""",
    )
    .replace("return 16", "return 4000")
    .replace("max_steps=4", "max_steps=900")
)


def test_a_transformers_job_sent_sigterm_writes_its_steps_then_ends_by_it(tmp_path: Path) -> None:
    """Transformers' callbacks hear nothing of the SIGTERM that stops ``Trainer.train``: the
    collector's run is closed at the process's end, what it kept written, before the
    writer closes its records (before, the kept steps were lost: "the scalars of 17
    names were not recorded")."""
    pytest.importorskip("transformers")
    assert TRANSFORMERS_SIGTERM.count("CALLS") == 3
    assert "integration.SummaryCollector" not in TRANSFORMERS_SIGTERM
    job = tmp_path / "runs" / "hf"
    code, printed = _run_script(tmp_path, TRANSFORMERS_SIGTERM, job, tmp_path / "out")
    assert code == -signal.SIGTERM, printed
    assert "SIGTERM during training" in printed
    assert "were not recorded" not in printed
    steps = [
        event.step
        for event in load_dir(job)
        for value in event.values
        if value.tag == "rankscribe/step_time" and event.step is not None
    ]
    # Every step that ended: 50, or 49 where the loader fetches a batch ahead (accelerate's
    # loader, which the Trainer uses, does: the 51st step's first sample comes in the 50th).
    assert max(steps) in (49, 50)
    [summary] = job.glob("*_MS")
    assert summary.stat().st_mode & 0o222 == 0  # closed
