"""``python -m runtime.backends.wasm.build [OUT_DIR] [--force]``: build the wasm guests.

Prints one ``name<TAB>path`` line per guest. CI runs this before the wasm tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

from runtime.backends.wasm._build import build_guests

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    force = "--force" in args
    rest = [a for a in args if a != "--force"]
    built = build_guests(Path(rest[0]) if rest else None, force=force)
    for name, path in built.items():
        sys.stdout.write(f"{name}\t{path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
