#!/usr/bin/env python3
"""Install a tox env's packages with uv, torch's wheel the one pip would choose.

    python tools/tox_install.py PACKAGE ...     (tox.ini: the torch envs' install_command)

torch's CPU build comes from where pip is configured to look (a folder of wheels on
the machine, PyTorch's CPU index), which uv does not read; and PyPI's own torch of the
same version is a CUDA build of several GB. So this asks pip for the wheel of the pinned
torch (``pip download --no-deps``: pip's configuration, its choice among the versions
it finds, and nothing installed), then has uv install that very file together with
every other package in one resolution, so that what depends on torch (Lightning,
transformers, accelerate) is given that file, never a torch from PyPI.

pip installs everything, as it did before, when the packages pin no torch (``torch==X``)
or no ``uv`` is on the PATH (tox-uv brings one beside tox); the line printed says which.
Measured in whole CI runs on a clean clone (2 cores): the setup of collector-torch and
integrations took 31 and 36 s with pip, 10 and 11 s with this tool.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: A pinned torch among the packages: ``torch==2.13.0`` (an exact version, nothing else).
TORCH_PIN = re.compile(r"torch==[0-9][0-9A-Za-z.+!_-]*")


def torch_pin(packages: list[str]) -> str | None:
    """The one ``torch==X`` among the packages, if there is exactly one."""
    pins = [package for package in packages if TORCH_PIN.fullmatch(package)]
    return pins[0] if len(pins) == 1 else None


def uv_command(uv: str, packages: list[str], wheel: Path, pin: str) -> list[str]:
    """``uv`` installing the packages into this interpreter's env, ``pin`` replaced by
    ``wheel``."""
    rest = [str(wheel) if package == pin else package for package in packages]
    return [uv, "pip", "install", "--python", sys.executable, *rest]


def pip_command(packages: list[str]) -> list[str]:
    """pip installing the packages as the other envs' install_command did."""
    return [sys.executable, "-I", "-m", "pip", "install", "--no-compile", *packages]


def download_wheel(pin: str, folder: Path) -> Path:
    """The wheel pip would install for ``pin``, downloaded (or copied) into ``folder``."""
    pip = [sys.executable, "-I", "-m", "pip"]
    done = subprocess.run(
        [*pip, "download", "--no-deps", "--only-binary", ":all:", "--dest", str(folder), pin],
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"tox_install: pip download {pin} failed (exit {done.returncode})")
    wheels = sorted(folder.glob("torch-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"tox_install: pip download {pin} left {len(wheels)} wheels in {folder}")
    return wheels[0]


def main(packages: list[str]) -> int:
    if not packages:
        print("usage: python tools/tox_install.py PACKAGE ...", file=sys.stderr)
        return 2
    pin, uv = torch_pin(packages), shutil.which("uv")
    if pin is None or uv is None:
        why = "no torch==X among them" if pin is None else "no uv on the PATH"
        print(f"tox_install: pip installs the packages ({why})", flush=True)
        return subprocess.run(pip_command(packages), check=False).returncode
    with tempfile.TemporaryDirectory(prefix="tox-install-", dir=sys.prefix) as folder:
        wheel = download_wheel(pin, Path(folder))
        print(f"tox_install: uv installs the packages, {pin} from {wheel.name}", flush=True)
        return subprocess.run(uv_command(uv, packages, wheel, pin), check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
