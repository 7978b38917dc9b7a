"""Importing rankscribe.ranks never imports mpi4py and works with no MPI library."""

from __future__ import annotations

import os
import sys
import textwrap

from tests._support.launchers import Finished, run_bounded


def run(code: str) -> Finished:
    # A bare environment; RS_SRC (a development checkout's source folders) passes through.
    bare = {"PATH": "/usr/bin:/bin", **{k: v for k, v in os.environ.items() if k == "RS_SRC"}}
    return run_bounded(
        [sys.executable, "-c", textwrap.dedent(code)],
        timeout=60,
        env=bare,
        check=False,
        stderr_apart=True,
    )


def test_import_does_not_load_mpi4py() -> None:
    result = run("""
        import sys
        import rankscribe.ranks as ranks
        info = ranks.detect()
        coordinator = ranks.create_coordinator(info)
        assert coordinator.gather(1).values == {0: 1}
        loaded = sorted(m for m in sys.modules if m.startswith("mpi4py"))
        print(info.launcher, coordinator.backend, loaded)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "single single []"


def test_without_mpi_the_mpi_backend_says_what_to_install() -> None:
    # sys.modules["mpi4py"] = None makes `import mpi4py` fail, as on a machine without it.
    result = run("""
        import sys
        sys.modules["mpi4py"] = None
        import rankscribe.ranks as ranks
        import rankscribe.ranks.errors
        info = ranks.RankInfo(0, 2, 0, 2, "h", "pmi")
        try:
            ranks.create_coordinator(info)
        except ImportError as error:
            assert isinstance(error, ranks.errors.BackendUnavailableError)
            print(error)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("the MPI backend needs mpi4py, which is not installed: ")
    assert 'pip install "rankscribe-ranks[mpi]" mpich' in result.stdout
    assert len(result.stdout.strip().splitlines()) == 1


def test_the_ground_floor_loads_no_other_package_nor_numpy_protobuf_or_pillow() -> None:
    # ranks is the ground floor (docs/contributing.md): the writer stands on it, never the
    # other way. Run where the writer is installed too, this still loads none of it.
    result = run("""
        import sys
        import rankscribe.ranks
        import rankscribe.ranks.files
        import rankscribe.ranks.launchers
        prefixes = ("rankscribe.writer", "rankscribe.lineage", "rankscribe.collector",
                    "numpy", "google.protobuf", "PIL", "crc32c")
        print(sorted(m for m in sys.modules if m.startswith(prefixes)))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
