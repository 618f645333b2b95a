"""``make release-check``: the distributions as a user gets them, built and tried outside the checkout.

1. Builds the sdist from the checkout, then the wheel from the unpacked sdist (as an installer building
   from source would), with the main env's locked hatchling: no network, no build isolation.
2. Checks the sdist: LICENSE, every file the README links, nothing outside the shipped folders, no copy
   of a file under ``tests/`` (its data includes code reduced from other repositories, which stays in
   the repository); and the wheel: the package, its metadata and the license only.
3. Installs the wheel into two fresh virtualenvs in a temporary directory outside the checkout, with
   uv: one with ``[all]``, one with no extra (the linter alone, as the pre-commit hook installs it).
   The dependencies are constrained to the main env's lock (``--constraints``), the set the test suite
   ran, so a new upstream release cannot fail the check; uv reuses its cache and downloads what it
   lacks (a fresh machine, a cold cache).
4. In each, from a directory outside the checkout: the package imported is the installed one;
   ``airflow-durable --version``; ``check`` on the example DAGs gives the checkout's findings. With
   ``[all]``: every operator module imports, and ``airflow-durable demo`` runs (offline: the emulator is
   on loopback, and a proxy that refuses every connection stands for the outside world). Without an
   extra: no Airflow, and ``demo`` says it needs it.

The virtualenvs are removed at the end; the distributions stay in ``--out``. Exit status 1 names each
failed step. ``python -m tests.release_check --help`` for the options.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What the sdist may hold at its top level (pyproject.toml's [tool.hatch.build.targets.sdist]).
SDIST_TOP = {
    "airflow_durable",
    "docs",
    "README.md",
    "CHANGELOG.md",
    "SECURITY.md",
    "LICENSE",
    "pyproject.toml",
    "PKG-INFO",
    ".gitignore",
}
# Files this small (empty __init__.py, one-line stubs) say nothing about where content came from.
COPY_MIN_BYTES = 200
LINK = re.compile(r"\]\((?P<target>[^)#\s]+)(?:#[^)]*)?\)")
# Any connection but to loopback goes to this proxy, on a port nothing listens on: the demo must not
# need the network.
OFFLINE = {
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
}


class CheckFailed(Exception):
    """One step found the distribution wrong: the message says what."""


def run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600):
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


def ok(done: subprocess.CompletedProcess[str], what: str) -> subprocess.CompletedProcess[str]:
    if done.returncode != 0:
        raise CheckFailed(f"{what}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done


# --------------------------------------------------------------------------- build
def build(python: str, out: Path) -> tuple[Path, Path]:
    """The sdist from the checkout, then the wheel from the unpacked sdist."""
    out = out.resolve()  # the wheel is built with the unpacked sdist as the working directory
    shutil.rmtree(out, ignore_errors=True)
    dist = out / "dist"
    dist.mkdir(parents=True)
    hatch = [python, "-m", "hatchling", "build"]
    ok(run([*hatch, "-t", "sdist", "-d", str(dist)], cwd=ROOT), "building the sdist")
    (sdist,) = dist.glob("*.tar.gz")
    unpacked = out / "sdist"
    with tarfile.open(sdist) as archive:
        archive.extractall(unpacked, filter="data")
    (source,) = unpacked.iterdir()
    ok(run([*hatch, "-t", "wheel", "-d", str(dist)], cwd=source), "building the wheel from the sdist")
    (wheel,) = dist.glob("*.whl")
    return sdist, wheel


def _version() -> str:
    text = (ROOT / "airflow_durable" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    assert found, "no __version__ in airflow_durable/__init__.py"
    return found[1]


def _tests_data_digests() -> dict[str, str]:
    tracked = run(["git", "ls-files", "-z", "tests"], cwd=ROOT).stdout.split("\0")
    digests = {}
    for name in filter(None, tracked):
        data = (ROOT / name).read_bytes()
        if len(data) >= COPY_MIN_BYTES:
            digests[hashlib.sha256(data).hexdigest()] = name
    if not digests:
        raise CheckFailed("no tracked file under tests/ to compare with: run it from a git checkout")
    return digests


def check_sdist(sdist: Path) -> None:
    with tarfile.open(sdist) as archive:
        members = {m.name.split("/", 1)[1]: m for m in archive.getmembers() if m.isfile() and "/" in m.name}
        contents = {name: archive.extractfile(m).read() for name, m in members.items()}  # type: ignore[union-attr]
    problems = []
    top = {name.split("/")[0] for name in contents}
    if top - SDIST_TOP:
        problems.append(f"unexpected at the top of the sdist: {sorted(top - SDIST_TOP)}")
    if "LICENSE" not in contents:
        problems.append("no LICENSE")
    if f"Version: {_version()}" not in contents.get("PKG-INFO", b"").decode():
        problems.append(f"PKG-INFO does not say Version: {_version()}")
    readme = contents.get("README.md", b"").decode()
    linked = {m["target"] for m in LINK.finditer(readme) if "://" not in m["target"]}
    if not linked:
        problems.append("the README links no file (the link pattern no longer matches it?)")
    missing = sorted(t for t in linked if t.rstrip("/") not in contents and f"{t.rstrip('/')}/" not in top)
    if missing:
        problems.append(f"files the README links are not in the sdist: {missing}")
    problems += [f"{name} is from tests/" for name in contents if name.startswith("tests/")]
    from_tests = _tests_data_digests()
    for name, data in contents.items():
        copied = from_tests.get(hashlib.sha256(data).hexdigest())
        if copied:
            problems.append(f"{name} is a copy of {copied} (tests/ data does not ship)")
    if problems:
        raise CheckFailed("the sdist:\n  " + "\n  ".join(problems))


def check_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    problems = []
    if {n.split("/")[0] for n in names} != {"airflow_durable", info}:
        problems.append(f"top-level entries: {sorted({n.split('/')[0] for n in names})}")
    if f"{info}/licenses/LICENSE" not in names:
        problems.append("no licenses/LICENSE")
    if wheel.name != f"airflow_durable-{_version()}-py3-none-any.whl":
        problems.append(f"named {wheel.name}")
    if problems:
        raise CheckFailed("the wheel:\n  " + "\n  ".join(problems))


# --------------------------------------------------------------------------- installed
class Venv:
    """A fresh virtualenv outside the checkout with the wheel (and ``extra``) installed by uv."""

    def __init__(self, base: Path, name: str, uv: str, python: str) -> None:
        self.path = base / name
        self.env = {
            k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "AIRFLOW_HOME")
        }
        self.env.update({"UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1", "COLUMNS": "200"})
        self.uv = uv
        self.cwd = base  # outside the checkout: the checkout's package cannot shadow the installed one
        ok(
            run([uv, "venv", "--quiet", "--python", python, str(self.path)], cwd=base, env=self.env),
            "uv venv",
        )

    @property
    def python(self) -> str:
        return str(self.path / "bin" / "python")

    def install(self, requirement: str, constraints: Path | None) -> float:
        started = time.monotonic()
        argv = [self.uv, "pip", "install", "--python", self.python, requirement]
        if constraints is not None:
            argv += ["--constraints", str(constraints)]
        ok(run(argv, cwd=self.cwd, env=self.env, timeout=1800), f"uv pip install {requirement}")
        return time.monotonic() - started

    def command(self, *args: str, env: dict[str, str] | None = None, timeout: float = 300):
        return run(
            [str(self.path / "bin" / "airflow-durable"), *args],
            cwd=self.cwd,
            env={**self.env, **(env or {})},
            timeout=timeout,
        )

    def python_code(self, code: str) -> str:
        return ok(run([self.python, "-c", code], cwd=self.cwd, env=self.env), f"python -c {code!r}").stdout

    def check_is_installed(self) -> None:
        where = self.python_code("import airflow_durable; print(airflow_durable.__file__)").strip()
        if not Path(where).is_relative_to(self.path):
            raise CheckFailed(f"imported airflow_durable from {where}, not from the virtualenv {self.path}")

    def check_version(self) -> None:
        done = ok(self.command("--version"), "airflow-durable --version")
        if done.stdout != f"airflow-durable {_version()}\n":
            raise CheckFailed(f"airflow-durable --version said {done.stdout!r}")

    def check_example_dags(self, expected: subprocess.CompletedProcess[str]) -> None:
        done = self.command("check", str(ROOT / "example_dags"))
        if (done.returncode, done.stdout) != (expected.returncode, expected.stdout):
            raise CheckFailed(
                "check on example_dags/ differs from the checkout's: exit "
                f"{done.returncode} vs {expected.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            )


def _operator_modules() -> set[str]:
    return {
        f"airflow_durable.operators.{m.stem}"
        for m in (ROOT / "airflow_durable" / "operators").glob("[a-z]*.py")
    }


def check_all(venv: Venv, expected_check: subprocess.CompletedProcess[str], demo_system: str) -> None:
    venv.check_is_installed()
    venv.check_version()
    imported = json.loads(
        venv.python_code(
            "import importlib, json\nfrom airflow_durable.catalogue import OPERATORS\n"
            "modules = sorted({o.durable_module for o in OPERATORS})\n"
            "for m in modules: importlib.import_module(m)\n"
            "print(json.dumps(modules))"
        )
    )
    if set(imported) != _operator_modules():
        raise CheckFailed(f"the catalogue's operator modules {imported} are not airflow_durable/operators/")
    venv.check_example_dags(expected_check)
    done = venv.command("demo", "--system", demo_system, "--format", "json", "-q", env=OFFLINE, timeout=900)
    try:
        result = json.loads(done.stdout)
    except ValueError:
        result = None
    if done.returncode != 0 or not isinstance(result, dict) or not result.get("as_expected"):
        raise CheckFailed(
            f"airflow-durable demo: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    if "Warning" in done.stderr:
        raise CheckFailed(f"airflow-durable demo warned:\n{done.stderr[-3000:]}")


def check_core(venv: Venv, expected_check: subprocess.CompletedProcess[str]) -> None:
    venv.check_is_installed()
    absent = venv.python_code("import importlib.util as u; print(u.find_spec('airflow'))").strip()
    if absent != "None":
        raise CheckFailed(f"the install without an extra has Airflow: {absent}")
    venv.check_version()
    venv.check_example_dags(expected_check)
    done = venv.command("demo", "--format", "json")
    if done.returncode != 1 or "Apache Airflow is not installed" not in done.stderr:
        raise CheckFailed(f"demo without Airflow: exit {done.returncode}\n{done.stderr[-2000:]}")


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.release_check", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--uv", default=shutil.which("uv"), help="the uv to install with (make: .venv-tools/bin/uv)"
    )
    parser.add_argument("--python", default=sys._base_executable, help="the interpreter of the virtualenvs")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "release", help="where the builds go")
    parser.add_argument(
        "--constraints",
        type=Path,
        default=ROOT / "requirements" / "airflow-3.3.txt",
        help="pin the dependencies to this lock file; --no-constraints: resolve the newest releases",
    )
    parser.add_argument("--no-constraints", dest="constraints", action="store_const", const=None)
    parser.add_argument(
        "--demo-system", default="databricks", help="the system the demo runs (default databricks)"
    )
    args = parser.parse_args(argv)
    # Absolute: the virtualenvs are made and used from a temporary directory.
    uv = shutil.which(args.uv) if args.uv else None
    if not uv:
        parser.error(f"--uv {args.uv}: not found (make release-check passes the bootstrapped one)")
    args.uv = str(Path(uv).absolute())
    python = shutil.which(args.python)
    if not python:
        parser.error(f"--python {args.python}: not found")
    args.python = str(Path(python).absolute())
    if args.constraints is not None:
        if not args.constraints.is_file():
            parser.error(f"--constraints {args.constraints}: no such file")
        args.constraints = args.constraints.absolute()

    failed: list[str] = []
    started = time.monotonic()

    def step(name: str, action: Callable[[], object]) -> object:
        began = time.monotonic()
        print(f"release-check: {name} ...", flush=True)
        try:
            value = action()
        except (CheckFailed, subprocess.TimeoutExpired) as err:
            failed.append(name)
            print(f"release-check: {name} FAILED ({time.monotonic() - began:.0f} s)\n{err}", file=sys.stderr)
            return None
        print(f"release-check: {name} ok ({time.monotonic() - began:.0f} s)", flush=True)
        return value

    built = step("build the sdist, then the wheel from it", lambda: build(sys.executable, args.out))
    if built is None:
        return 1
    sdist, wheel = built  # type: ignore[misc]
    print(f"release-check: built {sdist.name} and {wheel.name} in {args.out / 'dist'}")
    step("sdist contents", lambda: check_sdist(sdist))
    step("wheel contents", lambda: check_wheel(wheel))
    # What the checkout's own command finds: the installed ones must find the same.
    expected = run(
        [sys.executable, "-m", "airflow_durable.cli", "check", str(ROOT / "example_dags")], cwd=ROOT
    )
    base = Path(tempfile.mkdtemp(prefix="afd-release-check-"))
    try:
        if base.resolve().is_relative_to(ROOT.resolve()):
            raise SystemExit(f"release-check: the temporary directory {base} is inside the checkout")
        cases: list[tuple[str, str, Callable[[Venv], None]]] = [
            (
                "all",
                f"{wheel}[all]",
                functools.partial(check_all, expected_check=expected, demo_system=args.demo_system),
            ),
            ("no extra", str(wheel), functools.partial(check_core, expected_check=expected)),
        ]
        for name, requirement, check in cases:
            venv = step(
                f"[{name}] install into a fresh virtualenv",
                functools.partial(_installed, base, name, requirement, args),
            )
            if isinstance(venv, Venv):
                step(f"[{name}] try the installed package", functools.partial(check, venv))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    took = time.monotonic() - started
    if failed:
        print(f"release-check: FAILED in {took:.0f} s: {'; '.join(failed)}", file=sys.stderr)
        return 1
    print(f"release-check: passed in {took:.0f} s")
    return 0


def _installed(base: Path, name: str, requirement: str, args: argparse.Namespace) -> Venv:
    venv = Venv(base, name.replace(" ", "-"), args.uv, args.python)
    took = venv.install(requirement, args.constraints)
    print(f"release-check: installed {requirement.rsplit('/', 1)[-1]} in {took:.0f} s")
    return venv


if __name__ == "__main__":
    raise SystemExit(main())
