"""Replay the fuzzer's regression corpus through the summary and TensorBoard readers.

Every file in ``tools/fuzz/corpus/<target>/`` once made a reader crash, allocate
without bound or answer with something other than the project's own errors;
``tools/fuzz/targets.py`` says what each target reads and what counts as a failure.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path

import pytest

_TARGETS_PATH = Path(__file__).resolve().parents[2] / "tools" / "fuzz" / "targets.py"


def _load_targets():
    spec = importlib.util.spec_from_file_location("rankscribe_fuzz_targets", _TARGETS_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    # The fuzzer silences the project's loggers; the other tests of this session need them.
    project_logger = logging.getLogger("rankscribe")
    level = project_logger.level
    try:
        spec.loader.exec_module(module)
    finally:
        project_logger.setLevel(level)
    return module


targets = _load_targets()

CASES = [
    pytest.param(name, path, id=f"{name}/{path.name}")
    for name in sorted(targets.WRITER_TARGETS)
    for path in targets.corpus_inputs(name)
]


@pytest.mark.parametrize("target", sorted(targets.WRITER_TARGETS))
def test_every_writer_target_has_a_regression_corpus(target):
    assert targets.corpus_inputs(target), f"tools/fuzz/corpus/{target}/ is empty"


@pytest.mark.parametrize(("target", "path"), CASES)
def test_a_corpus_input_is_read_without_a_raw_exception(target, path):
    targets.WRITER_TARGETS[target](path.read_bytes())
