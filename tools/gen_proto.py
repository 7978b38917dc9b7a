#!/usr/bin/env python3
"""Regenerate the committed protobuf modules of rankscribe-writer from proto/.

    python tools/gen_proto.py           # rewrite the writer's pb/*_pb2.py(i)
    python tools/gen_proto.py --check   # exit 1 if they differ from a fresh generation

The generator is pinned: code that protoc N.x generates refuses to import on
protobuf runtimes older than N.x, so the generator must match the lowest
protobuf the writer declares (protobuf>=6.31.1, i.e. protoc 31.1, shipped in
grpcio-tools 1.74.0). When the running interpreter lacks that exact
grpcio-tools, the script builds a private virtual environment under
.cache/ once and re-runs itself there, so the command works on a fresh machine.
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

GENERATOR = "grpcio-tools"
GENERATOR_VERSION = "1.74.0"

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PROTO_DIR = PROTO_ROOT / "rankscribe" / "writer" / "pb"
PACKAGE_SRC = ROOT / "packages" / "rankscribe-writer" / "src"
OUTPUT_DIR = PACKAGE_SRC / "rankscribe" / "writer" / "pb"
PRIVATE_VENV = ROOT / ".cache" / f"gen-proto-{GENERATOR}-{GENERATOR_VERSION}"
REEXEC_MARK = "RANKSCRIBE_GEN_PROTO_REEXEC"


def _installed_generator_version() -> str | None:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python < 3.8
        return None
    try:
        return version(GENERATOR)
    except PackageNotFoundError:
        return None


def _reexec_in_private_venv(argv: list[str]) -> int:
    python = PRIVATE_VENV / "bin" / "python"
    if not python.exists():
        print(
            f"gen_proto: creating {PRIVATE_VENV.relative_to(ROOT)} with "
            f"{GENERATOR}=={GENERATOR_VERSION}",
            file=sys.stderr,
        )
        venv.EnvBuilder(with_pip=True, clear=True).create(PRIVATE_VENV)
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                f"{GENERATOR}=={GENERATOR_VERSION}",
            ],
            check=True,
        )
    env = dict(os.environ, **{REEXEC_MARK: "1"})
    return subprocess.call([str(python), str(Path(__file__).resolve()), *argv], env=env)


def _proto_sources() -> list[Path]:
    return sorted(PROTO_DIR.glob("*.proto"))


def _generate(into: Path) -> None:
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).resolve().parent / "_proto"
    sources = [str(path.relative_to(PROTO_ROOT)) for path in _proto_sources()]
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={into}",
        f"--pyi_out={into}",
        *sources,
    ]
    status = protoc.main(args)
    if status != 0:
        raise SystemExit(f"gen_proto: protoc failed with status {status}")


def _generated_files(directory: Path) -> dict[str, str]:
    return {
        path.name: path.read_text(encoding="utf-8")
        for path in sorted(directory.iterdir())
        if path.name.endswith(("_pb2.py", "_pb2.pyi"))
    }


def _compare(fresh: dict[str, str], committed: dict[str, str]) -> list[str]:
    problems = []
    for name in sorted(set(fresh) | set(committed)):
        if name not in committed:
            problems.append(f"missing: {name}")
        elif name not in fresh:
            problems.append(f"stale (no .proto generates it): {name}")
        elif fresh[name] != committed[name]:
            diff = difflib.unified_diff(
                committed[name].splitlines(),
                fresh[name].splitlines(),
                f"committed/{name}",
                f"generated/{name}",
                lineterm="",
                n=1,
            )
            problems.append(f"differs: {name}\n" + "\n".join(list(diff)[:20]))
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="fail if the committed generated code is stale; change nothing",
    )
    args = parser.parse_args(argv)

    if _installed_generator_version() != GENERATOR_VERSION:
        if os.environ.get(REEXEC_MARK):
            print(f"gen_proto: {GENERATOR}=={GENERATOR_VERSION} is not importable", file=sys.stderr)
            return 2
        return _reexec_in_private_venv(argv)

    with tempfile.TemporaryDirectory() as scratch:
        scratch_path = Path(scratch)
        _generate(scratch_path)
        fresh = _generated_files(scratch_path / "rankscribe" / "writer" / "pb")
        OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
        committed = _generated_files(OUTPUT_DIR)
        problems = _compare(fresh, committed)
        if args.check:
            if problems:
                print(
                    "gen_proto --check: generated code is stale; run 'python tools/gen_proto.py'",
                    file=sys.stderr,
                )
                for problem in problems:
                    print(problem, file=sys.stderr)
                return 1
            print(f"gen_proto --check: {len(fresh)} generated files match proto/")
            return 0
        for name in committed:
            if name not in fresh:
                (OUTPUT_DIR / name).unlink()
        for name, text in fresh.items():
            (OUTPUT_DIR / name).write_text(text, encoding="utf-8")
        print(f"gen_proto: wrote {len(fresh)} files to {OUTPUT_DIR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
