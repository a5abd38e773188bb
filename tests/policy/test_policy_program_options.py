"""Options that run a program, second red-team round on the readers of
runtime/policy/_tool_options.py: compiler drivers by every name (O1), a gcc response file
and the variables that play '-B' (O2), the files ed's commands write (O3), and the general
rule's spellings of program-running options, go's and gm4's (O7). Each attack below was
allowed before."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from _policy_helpers import verdict

from runtime.policy import Policy

RM = ("deny", "commands.deny.rm-root")
ASK = ("ask", "commands.hazard.interpreter")


# O1: every GCC driver runs its subprograms through '-wrapper' (c89 and c99 are
# 'exec gcc ... "$@"'); versioned and target-prefixed names too.
@pytest.mark.parametrize(
    "command",
    [
        "c99 -wrapper rm,-rf,/ -c a.c",
        "c89 -wrapper rm,-rf,/ -c a.c",
        "cpp -wrapper rm,-rf,/ a.c",
        "gfortran -wrapper rm,-rf,/ -c a.f90",
        "gccgo -wrapper rm,-rf,/ -c a.go",
        "gdc -wrapper rm,-rf,/ -c a.d",
        "gnat -wrapper rm,-rf,/ a.adb",
        "gm2 -wrapper rm,-rf,/ -c a.mod",
        "gfortran-12 -wrapper rm,-rf,/ -c a.f90",
        "x86_64-linux-gnu-cpp-12 -wrapper rm,-rf,/ a.c",
        "aarch64-linux-gnu-gccgo -wrapper rm,-rf,/ -c a.go",
    ],
)
def test_every_compiler_driver_is_read(policy: Policy, command: str) -> None:
    assert verdict(policy, command) == RM, command


@pytest.mark.parametrize(
    "command", ["c99 -B ./x -c a.c", "cpp -B./x a.c", "gfortran -fplugin=./p.so -c a.f90"]
)
def test_every_compiler_driver_asks_for_code_it_cannot_read(policy: Policy, command: str) -> None:
    assert verdict(policy, command) == ASK, command


@pytest.mark.parametrize(
    "command",
    [
        "c99 -O2 -o app a.c",
        "c89 -c a.c",
        "cpp -P -DDEBUG=1 a.h",
        "gfortran -O2 -o sim sim.f90",
        "gccgo -o app main.go",
    ],
)
def test_ordinary_compiler_driver_calls_stay_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


@pytest.mark.parametrize("driver", ["c99", "c89", "cpp"])
def test_the_posix_drivers_run_the_wrapper(tmp_path: Path, driver: str) -> None:
    """Why: c99, c89 and cpp run their subprograms through '-wrapper' as gcc does."""
    if shutil.which(driver) is None or shutil.which("gcc") is None:
        pytest.skip(f"{driver} is not installed")
    (tmp_path / "a.c").write_text("int main(void) { return 0; }\n")
    subprocess.run(
        [driver, "-wrapper", "sh,-c,touch ran", "-c" if driver != "cpp" else "-P", "a.c"],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        timeout=60,
    )
    assert (tmp_path / "ran").exists(), driver
