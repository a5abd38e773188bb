"""The policy layer of the broker: may this call run, under which limits, with what egress.

Public surface::

    Policy.load(path) / Policy.from_toml(text, source) / Policy.default()
    policy.decide(call, spec, profile=None) -> Decision
    policy.tool_visible(name, profile=None) -> bool
    policy.sandbox_mode, .redact_keys, .max_concurrent, .max_queued,
    .max_queued_total, .network, .budget(tool),
    policy.env(session)
    NetworkRules.check(scheme, host, port) -> NetworkVerdict; .address_allowed(host, ip)

Layers: ``schema`` (the file's models) -> ``_load`` (TOML, error locations) -> ``engine``
(``Policy``) using ``paths`` (lexical path rules), ``commands`` + ``shell`` + ``wrappers``
(command rules on a bashlex parse), ``network`` (egress rules) and ``conditions``.
"""

from __future__ import annotations

from runtime.errors import PolicyError
from runtime.policy.engine import Policy, default_policy_path
from runtime.policy.network import NetworkRules, NetworkVerdict
from runtime.policy.schema import PolicyFile, json_schema

__all__ = [
    "NetworkRules",
    "NetworkVerdict",
    "Policy",
    "PolicyError",
    "PolicyFile",
    "default_policy_path",
    "json_schema",
]
