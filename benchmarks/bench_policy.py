"""Policy decision cost (the broker overhead target is <= 50 us per simple call, DESIGN §10).

Run: python benchmarks/bench_policy.py
"""

from __future__ import annotations

import time

from runtime.models import BackendKind, ToolCall, ToolSpec
from runtime.policy import Policy


def _spec(name: str, category: str, roles: dict[str, str]) -> ToolSpec:
    return ToolSpec.model_validate(
        {
            "name": name,
            "description": "bench",
            "category": category,
            "parameters": {"type": "object"},
            "backend": BackendKind.MOCK,
            "arg_roles": roles,
        }
    )


def bench(label: str, policy: Policy, call: ToolCall, spec: ToolSpec, n: int = 20_000) -> None:
    policy.decide(call, spec)  # warm the caches, as a long-running broker has them
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            policy.decide(call, spec)
        best = min(best, (time.perf_counter() - t0) / n)
    print(f"{label:<44} {best * 1e6:8.2f} us/decision")


def main() -> None:
    policy = Policy.default()
    bench(
        "json_parse (data, no roles)",
        policy,
        ToolCall(tool="json_parse", arguments={"text": "{}"}),
        _spec("json_parse", "data", {}),
    )
    bench(
        "read_file (path rules)",
        policy,
        ToolCall(tool="read_file", arguments={"path": "src/pkg/module.py"}),
        _spec("read_file", "file", {"path": "read_path"}),
    )
    bench(
        "delete_file (write path rules)",
        policy,
        ToolCall(tool="delete_file", arguments={"path": "build/out", "recursive": True}),
        _spec("delete_file", "file", {"path": "write_path"}),
    )
    t0 = time.perf_counter()
    n = 5000
    for i in range(n):
        # A new path each time: the path cache misses, the deny globs (and what could lie
        # below the path) are matched afresh.
        policy.decide(
            ToolCall(tool="delete_file", arguments={"path": f"build/{i}/out"}),
            _spec("delete_file", "file", {"path": "write_path"}),
        )
    print(
        f"{'delete_file (new path, uncached)':<44} "
        f"{(time.perf_counter() - t0) / n * 1e6:8.2f} us/decision"
    )
    bench(
        "shell_exec (cached command analysis)",
        policy,
        ToolCall(tool="shell_exec", arguments={"command": "ls -la | grep x && make test"}),
        _spec("shell_exec", "shell", {"command": "command", "cwd": "cwd"}),
    )
    t0 = time.perf_counter()
    n = 200
    for i in range(n):
        policy.decide(
            ToolCall(tool="shell_exec", arguments={"command": f"ls -la {i} | wc"}),
            _spec("shell_exec", "shell", {"command": "command"}),
        )
    print(
        f"{'shell_exec (first parse, uncached)':<44} "
        f"{(time.perf_counter() - t0) / n * 1e6:8.2f} us/decision"
    )


if __name__ == "__main__":
    main()
