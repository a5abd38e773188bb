from __future__ import annotations

import sys
from pathlib import Path

import pytest

# benchmarks/ is not a package on the wheel path; tests import it from the repository root.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def servers():
    from benchmarks.security.fixtures import Servers

    with Servers() as s:
        yield s
