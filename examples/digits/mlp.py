"""A small NumPy multi-layer perceptron for the digits example, data-parallel over MPI.

Nothing here knows about RankScribe: it is the "user's model". The training
script wraps it in RankScribe's NumPy adapters and callbacks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

Array = np.ndarray


@dataclass
class Digits:
    """scikit-learn's digits (1,797 8x8 images, shipped with the package): train/test split."""

    train_images: Array  # (N, 1, 8, 8) float32 in [0, 1]
    train_labels: Array  # (N,) int64
    test_images: Array
    test_labels: Array

    @classmethod
    def load(cls, seed: int, test_fraction: float = 0.2) -> Digits:
        from sklearn.datasets import load_digits  # noqa: PLC0415 - only the example needs it

        data = load_digits()
        images = (data.images / 16.0).astype(np.float32)[:, None, :, :]
        labels = data.target.astype(np.int64)
        order = np.random.default_rng(seed).permutation(len(labels))
        cut = int(len(labels) * (1 - test_fraction))
        train, test = order[:cut], order[cut:]
        return cls(images[train], labels[train], images[test], labels[test])


@dataclass
class MLP:
    """64 -> hidden (ReLU) -> 10, softmax cross-entropy."""

    weights: dict[str, Array] = field(default_factory=dict)

    @classmethod
    def create(cls, hidden: int, seed: int) -> MLP:
        rng = np.random.default_rng(seed)
        return cls(
            {
                "fc1.weight": (rng.standard_normal((64, hidden)) * np.sqrt(2 / 64)).astype(
                    np.float32
                ),
                "fc1.bias": np.zeros(hidden, dtype=np.float32),
                "fc2.weight": (rng.standard_normal((hidden, 10)) * np.sqrt(1 / hidden)).astype(
                    np.float32
                ),
                "fc2.bias": np.zeros(10, dtype=np.float32),
            }
        )

    def logits(self, images: Array) -> tuple[Array, Array, Array]:
        flat = images.reshape(len(images), -1)
        hidden = np.maximum(flat @ self.weights["fc1.weight"] + self.weights["fc1.bias"], 0)
        return flat, hidden, hidden @ self.weights["fc2.weight"] + self.weights["fc2.bias"]

    def loss_and_gradients(self, images: Array, labels: Array) -> tuple[float, dict[str, Array]]:
        flat, hidden, logits = self.logits(images)
        shifted = logits - logits.max(axis=1, keepdims=True)
        probabilities = np.exp(shifted)
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        count = len(labels)
        loss = float(-np.log(probabilities[np.arange(count), labels] + 1e-12).mean())
        d_logits = probabilities
        d_logits[np.arange(count), labels] -= 1
        d_logits /= count
        d_hidden = (d_logits @ self.weights["fc2.weight"].T) * (hidden > 0)
        gradients = {
            "fc2.weight": hidden.T @ d_logits,
            "fc2.bias": d_logits.sum(axis=0),
            "fc1.weight": flat.T @ d_hidden,
            "fc1.bias": d_hidden.sum(axis=0),
        }
        return loss, {name: grad.astype(np.float32) for name, grad in gradients.items()}

    def correct(self, images: Array, labels: Array) -> int:
        return int((self.logits(images)[2].argmax(axis=1) == labels).sum())


class Optimizer:
    """Plain SGD, or SGD with momentum 0.9."""

    def __init__(self, model: MLP, kind: str, learning_rate: float) -> None:
        self.model = model
        self.kind = kind
        self.learning_rate = learning_rate
        self._velocity = {name: np.zeros_like(value) for name, value in model.weights.items()}

    def apply(self, gradients: dict[str, Array]) -> None:
        for name, gradient in gradients.items():
            update = gradient
            if self.kind == "momentum":
                self._velocity[name] = 0.9 * self._velocity[name] + gradient
                update = self._velocity[name]
            self.model.weights[name] -= self.learning_rate * update
