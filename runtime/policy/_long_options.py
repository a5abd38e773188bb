"""Long options by name, as GNU ``getopt_long`` reads them: the full name or any prefix of it.

``getopt_long`` (coreutils, sed, wget, curl, tar's argp, git's parse-options, Perl's
Getopt::Long) accepts any unambiguous prefix of a long option: ``cp --target=DIR`` is
``cp --target-directory=DIR``, ``wget --output-doc=F`` is ``--output-document=F``. Every
place the policy looks for a long option by name asks :func:`long_option`, so a check keyed
on ``--target-directory`` also sees ``--target``, ``--targ`` and ``--t``.

Why no full option tables: a prefix that is ambiguous in the real program's table makes it
exit with a usage error before it does anything, so reading such a prefix as any option it
could stand for can only refuse a command that would not run. Programs that accept no
abbreviation (node, bash) reject an unknown ``--ev`` the same way. What a table is needed
for is the other direction: an option whose *full* name is a prefix of another's is itself,
never the longer one (``install --strip`` is not ``--strip-program``, ``tar --checkpoint``
not ``--checkpoint-action``). :data:`_SHADOWING` lists those, per program, from the
programs' own ``--help`` (``tests/policy/test_policy_round6.py`` checks the lists against the
installed programs where they exist).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["long_option", "long_option_value"]

_L = frozenset

# GNU parallel's full option names that prefix others (its Getopt::Long options hash,
# 20221122; it has no --help listing them).
_PARALLEL = _L(
    {
        "--arg-file", "--argfile", "--block", "--color", "--color-fail", "--colorfail",
        "--colour", "--colour-fail", "--colourfail", "--compress", "--ctag", "--dr", "--filter",
        "--filter-host", "--group", "--halt", "--hostgroup", "--line-buffer", "--linebuffer",
        "--link", "--no-k", "--nok", "--pipe", "--regex", "--res", "--result", "--resume",
        "--round", "--semaphore", "--sql", "--ssh", "--sshlogin", "--tag", "--tmux", "--total",
        "--transfer", "--transfer-file", "--transferfile", "--xapply",
    }
)  # fmt: skip

#: Per program, long options whose full name is a proper prefix of another long option of
#: the same program: given in full they are themselves, not an abbreviation.
_SHADOWING: dict[str, frozenset[str]] = {
    "install": _L({"--strip"}),
    "objcopy": _L(
        {
            "--globalize-symbol",
            "--interleave",
            "--keep-global-symbol",
            "--keep-section",
            "--keep-symbol",
            "--localize-symbol",
            "--redefine-sym",
            "--strip-symbol",
            "--strip-unneeded",
            "--strip-unneeded-symbol",
            "--weaken",
            "--weaken-symbol",
        }
    ),
    "strip": _L({"--keep-section"}),
    "gpg": _L({"--encrypt", "--sign"}),
    "gpg2": _L({"--encrypt", "--sign"}),
    "sort": _L({"--version"}),
    # dpkg reads its options whole: '--status' (-s) is not '--status-logger' (its --help
    # also lists the families '--force-...', '--assert-...' as prefixes).
    "dpkg": _L(
        {
            "--assert-",
            "--force-",
            "--list",
            "--no-force-",
            "--refuse-",
            "--remove",
            "--status",
            "--validate-",
            "--verify",
        }
    ),
    "patch": _L({"--backup", "--version"}),
    "wget": _L({"--accept", "--certificate", "--private-key", "--reject", "--user", "--wait"}),
    "tar": _L(
        {
            "--checkpoint",
            "--exclude",
            "--exclude-caches",
            "--exclude-ignore",
            "--exclude-tag",
            "--exclude-vcs",
            "--file",
            "--group",
            "--list",
            "--newer",
            "--no-wildcards",
            "--overwrite",
            "--owner",
            "--sparse",
            "--wildcards",
            "--xattrs",
        }
    ),
    "unshare": _L({"--map-group", "--map-user", "--mount"}),
    # '--start' is not '--startas' (which names the program run).
    "start-stop-daemon": _L({"--pid", "--start"}),
    "systemd-run": _L({"--slice"}),
    "strace": _L({"--output", "--summary", "--trace"}),
    "valgrind": _L(
        {
            "--leak-check",
            "--trace-children",
            "--trace-children-skip",
            "--vgdb",
            "--xml",
            "--xtree-leak",
            "--xtree-memory",
        }
    ),
    "gdb": _L({"--batch"}),
    "less": _L({"--tag"}),
    "psql": _L({"--field-separator", "--record-separator"}),
    "npx": _L({"--workspace"}),
    "bash": _L({"--debug"}),
    # node reads its options whole; listed so that its full names stay themselves.
    **dict.fromkeys(
        ("node", "nodejs"),
        _L(
            {
                "--build-snapshot",
                "--cpu-prof",
                "--env-file",
                "--heap-prof",
                "--inspect",
                "--preserve-symlinks",
                "--prof",
                "--report-dir",
                "--secure-heap",
                "--test",
                "--test-reporter",
                "--watch",
            }
        ),
    ),
    "nsenter": _L({"--wd"}),
    "ionice": _L({"--class"}),
    "parallel": _PARALLEL,
    "curl": _L(
        {
            "--cert",
            "--compressed",
            "--cookie",
            "--crlf",
            "--data",
            "--disable",
            "--fail",
            "--form",
            "--ftp-ssl-ccc",
            "--mail-rcpt",
            "--socks5-gssapi",
            "--head",
            "--http2",
            "--http3",
            "--key",
            "--location",
            "--netrc",
            "--ntlm",
            "--output",
            "--parallel",
            "--proto",
            "--proxy",
            "--proxy-cert",
            "--proxy-key",
            "--remote-name",
            "--request",
            "--retry",
            "--socks4",
            "--socks5",
            "--ssl",
            "--trace",
            "--url",
            "--user",
        }
    ),
}


def long_option(value: str, names: Iterable[str], program: str = "") -> str | None:
    """Which of ``names`` (long options, ``--name``) the word ``value`` (``--opt`` or
    ``--opt=VALUE``) spells: the name itself, or a prefix of it of at least one letter that
    is not, in full, another option of ``program`` (:data:`_SHADOWING`). None for a word that
    is not a long option or spells none of them. A prefix of several names gives the first
    in sorted order (the program refuses it as ambiguous; see the module's docstring)."""
    if not value.startswith("--") or len(value) < 3:
        return None
    opt = value.split("=", 1)[0]
    wanted = sorted(names)
    if opt in wanted:
        return opt
    if opt in _SHADOWING.get(program, ()):
        return None
    return next((n for n in wanted if n.startswith("--") and n.startswith(opt)), None)


def long_option_value(value: str, names: Iterable[str], program: str = "") -> str | None:
    """The attached value of ``--opt=VALUE`` when ``--opt`` spells one of ``names``
    (:func:`long_option`), else None."""
    if "=" not in value or long_option(value, names, program) is None:
        return None
    return value.split("=", 1)[1]
