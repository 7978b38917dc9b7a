"""Replay the fuzzer's regression corpus through the checkpoint reader.

Every file in ``tools/fuzz/corpus/<target>/`` is a seed or once made a reader crash,
allocate without bound or answer with something other than the project's own errors;
``tools/fuzz/targets.py`` says what each target reads and what counts as a failure.
The cases come from ``tests/conftest.py`` (``pytest_generate_tests``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def test_every_collector_target_has_a_regression_corpus(
    collector_fuzz_target: tuple[str, list[Path]],
) -> None:
    name, inputs = collector_fuzz_target
    assert inputs, f"tools/fuzz/corpus/{name}/ is empty"


def test_a_corpus_input_is_read_without_a_raw_exception(
    collector_fuzz_input: tuple[Callable[[bytes], None], Path],
) -> None:
    target, path = collector_fuzz_input
    target(path.read_bytes())
