"""A call plan's profile: the key under which the zygote keeps spares for calls like it.

One function for both ends: the broker makes it once per profile and sends it with the
spawn (``SandboxBackend._profile``), the zygote makes it for a spawn without one
(``Zygote._profile``); ``tests/sandbox/test_plan_cache.py`` checks that they agree.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["plan_profile"]


def plan_profile(plan: Mapping[str, Any]) -> str:
    """The plan without its call id, as sorted JSON, with the environment as a digest.

    Why a digest: the plan carries the environment already, and the spawn message goes
    whole into one control packet (SOCK_SEQPACKET, bounded by the socket's send buffer);
    the environment written out here too halved what a call could carry. Calls with equal
    environments have equal digests, so the profile still tells them apart."""
    body = {k: v for k, v in plan.items() if k not in ("call_id", "env")}
    env = plan.get("env") or {}
    items = sorted(env.items())
    body["env_sha256"] = hashlib.sha256(
        json.dumps(items, ensure_ascii=True).encode("ascii")
    ).hexdigest()
    return json.dumps(body, sort_keys=True)
