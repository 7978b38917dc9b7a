"""A Hugging Face ``Trainer`` run recorded by every process: ``RankScribeCallback``.

    torchrun --nproc_per_node 2 examples/transformers/train.py --summary-dir runs/hf

A tiny BERT built from a config (nothing downloaded) learns a synthetic
token-classification rule. Each process writes ``runs/hf/rank_<r>/``; rank 0
writes the job's merged lineage and job view into ``runs/hf/`` (a rerun goes
to ``runs/hf-2``).
"""

from __future__ import annotations

import argparse
import os

import torch
from torch.utils.data import Dataset
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

from rankscribe.collector.transformers import RankScribeCallback


class Synthetic(Dataset):
    """Sequences whose label is whether token 7 occurs in them."""

    def __init__(self, samples: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, 32, (samples, 12), generator=generator)
        self.labels = (self.ids == 7).any(dim=1).long()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[index], "labels": self.labels[index]}


def accuracy(prediction: object) -> dict[str, float]:
    logits, labels = prediction.predictions, prediction.label_ids  # type: ignore[attr-defined]
    return {"accuracy": float((logits.argmax(-1) == labels).mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summary-dir", default="runs/hf")
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--epochs", type=float, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    training = TrainingArguments(
        output_dir=args.output_dir or os.path.join(args.summary_dir + "-checkpoints"),
        num_train_epochs=args.epochs,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=16,
        learning_rate=5e-3,
        logging_steps=2,
        eval_strategy="epoch",
        save_strategy="epoch",
        report_to=[],
        use_cpu=True,
        ddp_backend="gloo" if int(os.environ.get("WORLD_SIZE", "1")) > 1 else None,
        disable_tqdm=True,
        seed=0,
    )
    trainer = Trainer(
        model=model,
        args=training,
        train_dataset=Synthetic(192, 1),
        eval_dataset=Synthetic(64, 2),
        compute_metrics=accuracy,
        callbacks=[RankScribeCallback(args.summary_dir, collect_freq=4)],
    )
    trainer.train()


if __name__ == "__main__":
    main()
