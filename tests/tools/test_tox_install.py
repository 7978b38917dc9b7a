"""tools/tox_install.py: the torch envs' packages installed by uv, torch the wheel pip chooses.

Made-up wheels stand in for torch: pip's folder holds the "CPU build", uv's index holds an
impostor of the same version and a package that depends on torch. The env must end with
pip's wheel, whatever uv could have found on its own.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "tox_install.py"


def make_wheel(folder: Path, name: str, version: str, body: str, requires: str = "") -> Path:
    """A pure-Python wheel of one module ``name`` whose ``BUILD`` is ``body``."""
    tag = f"{name}-{version}"
    path = folder / f"{tag}-py3-none-any.whl"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    if requires:
        metadata += f"Requires-Dist: {requires}\n"
    files = {
        f"{name}/__init__.py": f"BUILD = {body!r}\n",
        f"{tag}.dist-info/METADATA": metadata,
        f"{tag}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(f"{file},,\n" for file in files) + f"{tag}.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as archive:
        for file, text in files.items():
            archive.writestr(file, text)
        archive.writestr(f"{tag}.dist-info/RECORD", record)
    return path


def env_python(tmp_path: Path) -> Path:
    """A new virtual env with pip, as tox's virtualenv runner makes one."""
    directory = tmp_path / "env"
    venv.create(directory, with_pip=True)
    return directory / "bin" / "python"


def run_tool(python: Path, packages: list[str], environment: dict[str, str]) -> str:
    done = subprocess.run(
        [str(python), str(TOOL), *packages],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def installed(python: Path, module: str) -> str:
    done = subprocess.run(
        [str(python), "-c", f"import {module}; print({module}.BUILD)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def wheels(tmp_path: Path) -> dict[str, Path]:
    """pip's folder (torch's CPU build) and uv's (an impostor torch, a package needing torch)."""
    pips, uvs = tmp_path / "pip-wheels", tmp_path / "uv-wheels"
    pips.mkdir()
    uvs.mkdir()
    make_wheel(pips, "torch", "2.13.0+cpu", "cpu")
    make_wheel(uvs, "torch", "2.13.0", "impostor")
    make_wheel(uvs, "needs_torch", "1.0", "needs", requires="torch>=2")
    return {"pip": pips, "uv": uvs}


def offline(wheels: dict[str, Path], path: str) -> dict[str, str]:
    """pip and uv reading only their own folder; ``path``: the PATH the tool sees."""
    keep = {key: value for key, value in os.environ.items() if not key.startswith(("PIP_", "UV_"))}
    return {
        **keep,
        "PATH": path,
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels["pip"]),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "UV_NO_INDEX": "1",
        "UV_FIND_LINKS": str(wheels["uv"]),
        "UV_OFFLINE": "1",
        "UV_NO_CONFIG": "1",
    }


def with_uv(tmp_path: Path, wheels: dict[str, Path]) -> tuple[Path, dict[str, str]]:
    """A new env's python and the offline environment with uv on its PATH (skipped without
    uv, which tox-uv brings beside tox)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("no uv on the PATH (tox-uv brings one beside tox)")
    python = env_python(tmp_path)
    path = os.pathsep.join([str(Path(uv).parent), str(python.parent), "/usr/bin", "/bin"])
    return python, offline(wheels, path)


def test_uv_installs_the_torch_wheel_pip_chose_for_every_package_that_needs_it(
    tmp_path: Path, wheels: dict[str, Path]
) -> None:
    python, environment = with_uv(tmp_path, wheels)
    # uv alone would take its own torch (the impostor) for needs_torch; it is given pip's.
    output = run_tool(python, ["needs_torch", "torch==2.13.0"], environment)
    assert "uv installs the packages, torch==2.13.0 from torch-2.13.0+cpu" in output, output
    assert installed(python, "torch") == "cpu"
    assert installed(python, "needs_torch") == "needs"
    # The downloaded wheel is not left in the env.
    assert not list(python.parents[1].glob("tox-install-*"))


def test_a_pin_pip_cannot_find_fails_in_one_line_and_installs_nothing(
    tmp_path: Path, wheels: dict[str, Path]
) -> None:
    python, environment = with_uv(tmp_path, wheels)
    done = subprocess.run(
        [str(python), str(TOOL), "needs_torch", "torch==9.9.9"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0
    assert "tox_install: pip download torch==9.9.9 failed" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    missing = subprocess.run([str(python), "-c", "import needs_torch"], check=False, timeout=60)
    assert missing.returncode != 0
    assert not list(python.parents[1].glob("tox-install-*"))


def test_pip_installs_everything_without_uv_on_the_path(
    tmp_path: Path, wheels: dict[str, Path]
) -> None:
    python = env_python(tmp_path)
    environment = offline(wheels, os.pathsep.join([str(python.parent), "/usr/bin", "/bin"]))
    if shutil.which("uv", path=environment["PATH"]) is not None:
        pytest.skip("uv is installed system-wide here")
    environment["PIP_FIND_LINKS"] = f"{wheels['pip']} {wheels['uv']}"
    output = run_tool(python, ["needs_torch", "torch==2.13.0"], environment)
    assert "pip installs the packages (no uv on the PATH)" in output, output
    # pip's choice among versions: the local build sorts above the plain version.
    assert installed(python, "torch") == "cpu"
    assert installed(python, "needs_torch") == "needs"


def test_the_torch_envs_install_through_the_tool() -> None:
    config = configparser.ConfigParser(interpolation=None)
    config.read(ROOT / "tox.ini", encoding="utf-8")
    command = config["testenv"]["torch_install"]
    assert command.split()[:2] == ["python", "{toxinidir}/tools/tox_install.py"], command
    torch_envs = [
        name
        for name in config.sections()
        if name.startswith("testenv:") and "torch==" in config[name].get("deps", "")
    ]
    assert sorted(torch_envs) == ["testenv:collector-torch", "testenv:integrations"]
    for name in torch_envs:
        assert config[name]["install_command"] == "{[testenv]torch_install}", name
        assert config[name]["runner"] == "virtualenv", name
