"""The hooks of a test's stand-in executor that have nothing to do."""

from __future__ import annotations


class QuietExecutor:
    """``followup_ok``, ``close_case``, ``reap`` and ``close`` of the runner's Executor, as a
    stand-in with no processes and no case state needs them: nothing to check or end."""

    def followup_ok(self) -> bool:
        return True

    def close_case(self) -> None:
        pass

    def reap(self) -> None:
        pass

    def close(self) -> None:
        pass
