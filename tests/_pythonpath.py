"""PYTHONPATH for a test's child interpreter: the checkout first, then what the test run's own
PYTHONPATH held. Replacing it with the checkout alone lost the site-packages an unprivileged
run reaches through PYTHONPATH (/usr/bin/python3 as another user: the venv's interpreter lives
under root's home), so its children could not import the project's dependencies."""

from __future__ import annotations

import os
from pathlib import Path


def python_path(first: Path) -> str:
    return os.pathsep.join([str(first), *filter(None, [os.environ.get("PYTHONPATH")])])
