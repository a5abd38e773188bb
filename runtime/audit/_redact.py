"""Secret redaction before anything reaches the audit file.

Two layers, both recursive over dicts and lists and both working on a copy (the caller's object
is never mutated — the broker still has to run the call with the real arguments):

1. By key. A dict key (or the name in a ``[name, value]`` header pair) that names a credential
   has its whole value replaced: HTTP ``authorization``/``proxy-authorization``/
   ``authentication``/``cookie``/``set-cookie``, token-like names (``token``, ``api_key``,
   ``secret``, ``password``, ``session``, ``csrf``, ``subscription_key``...), and the extra
   keys the policy names. Keys are compared case-insensitively with ``-``, ``_``, ``.``,
   spaces and camelCase boundaries treated alike, so ``X-Api-Key``, ``apiKey`` and
   ``API_KEY`` are one name; ``max_tokens`` is not a token (plural word).
   A ``{"key"|"name": NAME, "value": X}`` object whose NAME is secret-like (``set_env``'s
   arguments, Kubernetes env entries) has X redacted: here a name ending in ``key`` or
   ``pass`` counts too (``OPENAI_KEY``).
2. By value. Inside every string: bearer/basic credentials, ``Authorization:``/
   ``Authentication:``/``Cookie:`` header lines, ``name=value`` pairs whose name is
   secret-like or one the policy names (shell ``export``, query strings, signed URLs'
   ``X-Amz-Signature``/``sig``; quoted as in JSON or a dict literal, ``"password": "v"``,
   also escaped inside a JSON string, the quoted value up to its closing quote),
   ``<password>v</password>`` elements, URL passwords and token-like URL user names, AWS
   access key ids, private-key PEM blocks and well-known token prefixes (GitHub, GitLab
   ``glpat-``, Slack, OpenAI/Anthropic ``sk-``, Google ``AIza``, JWTs). Then the same
   rules again inside each percent-encoded piece, decoded once (a URL in another's
   ``?to=`` parameter holds its ``=`` and ``&`` as ``%3D`` and ``%26``): a changed piece
   is encoded again, ``[REDACTED]`` in clear.
3. Command lines, by program (``_redact_command``): ``curl -u user:PASS`` (``--user``,
   ``-U``/``--proxy-user``; httpie ``-a``/``--auth``), the MySQL/MariaDB clients' attached
   ``-pPASS`` (``-p NAME`` is their database), ``sshpass -p``, ``redis-cli -a``, the MongoDB
   tools' ``-p``, the OpenLDAP tools' ``-w``, ``sqlcmd -P``, ``twine -p``, ``htpasswd -b``'s
   password word, ``-p`` after ``login`` for docker/podman/nerdctl/buildah/skopeo/helm/oc/az
   (``docker run -p 8080:80`` is a port and stays), any ``--password VALUE``-like long option
   (``--token``, ``--client-secret``, ``--oauth2-bearer``...; not ``--password-stdin``/
   ``--no-password``), taking the next word whatever it starts with, and
   ``set``/``config`` commands naming a secret (``aws configure set aws_secret_access_key
   VALUE``, ``git config github.token VALUE``).
   The same rules run across a list's string elements, as an argv (a command or custom
   tool's array argument): ``["curl", "-u", "bob:PASS"]``, ``["--token", "T"]`` have the
   value element replaced and the option kept, whatever the value element looks like alone.

Hazard: redaction is best effort by nature (a secret with no recognisable name or shape cannot
be told from data). The arguments *digest* is computed over the unredacted arguments, so a
record still proves which exact call was made without storing the secret; when redaction
changed them it is keyed with the log's secret (``_digestkey``), so that it cannot be used to
test guesses at the redacted values.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from runtime import _speedups

__all__ = ["REDACTED", "Redactor", "redact"]

REDACTED = "[REDACTED]"

# Words that make a key secret wherever they appear in it (after splitting into words).
_SECRET_WORDS = frozenset(
    {
        "authorization",
        "authentication",
        "auth",
        "cookie",
        "token",
        "secret",
        "password",
        "pass",
        "passwd",
        "passphrase",
        "pwd",
        "session",
        "credential",
        "credentials",
        "apikey",
        "sessionid",
        "privatekey",
        "accesskey",
        "secretkey",
        "clientsecret",
        "accesstoken",
        "refreshtoken",
        "authtoken",
        "idtoken",
        "bearer",
        "signature",
        "csrf",
        "xsrf",
    }
)
# Two-word names: "api key", "private key", "set cookie" ... (adjacent words).
_SECRET_PAIRS = frozenset(
    {
        ("api", "key"),
        ("access", "key"),
        ("private", "key"),
        ("secret", "key"),
        ("client", "secret"),
        ("signing", "key"),
        ("encryption", "key"),
        ("subscription", "key"),  # Ocp-Apim-Subscription-Key
        ("account", "key"),  # a storage account's key
        ("master", "key"),
        ("function", "key"),
        ("functions", "key"),  # X-Functions-Key
        ("app", "key"),
        ("application", "key"),  # DD-Application-Key
    }
)

_WORD_SPLIT = re.compile(r"[^a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

# Hazard: every string here is attacker-controlled (an LLM wrote it), so each rule must run in
# linear time. Patterns start at a boundary the run cannot contain (a lookbehind), use
# possessive or bounded quantifiers, and never nest two unbounded runs over the same
# characters ("a.token." * 400 took 46 s with the naive name=value pattern).
_NAME_CHARS = "A-Za-z0-9_.-"
_SECRETISH_NAME = re.compile(
    r"token|secret|passw(?:or)?d|passphrase|api[_-]?key|access[_-]?key|private[_-]?key|"
    r"client[_-]?secret|session[_-]?id|credential|signature",
    re.IGNORECASE,
)
# Words that make an assigned name secret-like only as whole words (``DB_PASS``, ``PWD``;
# not ``bypass``, ``compass``).
_SECRETISH_WORDS = frozenset({"pass", "pwd"})
# Last words that make the name in a {"key"/"name": NAME, "value": X} object secret-like
# (``OPENAI_KEY``): an object that sets a variable says what the value is.
_SECRET_LAST_WORDS = frozenset({"key", "pass"})
# name = value / name: value, the name a maximal run matched once from its start; also with
# the name quoted, as in JSON or a dict literal ("password": "v", {\"token\": \"v\"}: a
# closing quote, maybe escaped, between the name and the colon), and the value quoted
# (group 3: the opening quote, maybe escaped).
_ASSIGNMENT = re.compile(
    rf"(?<![{_NAME_CHARS}])([{_NAME_CHARS}]++)((?:\\{{0,8}}+[\"'])?+[ \t]*+[=:][ \t]*+)"
    r"(\\{0,8}+[\"'])?+"
)
_ASSIGNED_VALUE = re.compile(r"(?!\[REDACTED)[^\s&'\";,]++")
# A quoted value: up to the matching quote, a backslash escaping the next character (JSON
# text's \"); after an escaped opening quote (JSON inside a JSON string), up to the next
# backslash or quote.
_QUOTED_VALUE = {
    '"': re.compile(r'(?!\[REDACTED)(?:[^"\\\r\n]++|\\.)++'),
    "'": re.compile(r"(?!\[REDACTED)[^'\r\n]++"),
    "\\": re.compile(r"(?!\[REDACTED)[^\"'\\\r\n]++"),
}
# <password>value</password>: an XML-ish element whose name is secret-like.
_ELEMENT = re.compile(rf"<([{_NAME_CHARS}]++)(?:[ \t][^<>]*+)?+>([^<]++)</\1>")

# A percent-encoded piece of a string: a run between query/shell separators (a URL's
# ``to=`` value holding a whole encoded URL) with a ``%`` in it. Its start is a boundary the
# run cannot contain and its first part stops at the first ``%``: linear.
_PIECE = r"(?<![^\s'\"<>=&?#;,])[^\s'\"<>=&?#;,%]*+%[0-9A-Fa-f]{2}[^\s'\"<>=&?#;,]*+"
_ENCODED_PIECE = re.compile(_PIECE)

# A parameter whose name is percent-encoded (``?t%6Fken=T``, ``api%5Fkey=K``): the value
# rules read names in clear, so the name is decoded once and judged as a key. Its name
# is such a piece, so it stops at the first ``=``: linear.
_ENCODED_NAME = re.compile(rf"({_PIECE})=([^\s'\"<>&#;,]++)")

# (pattern, replacement) applied in order to every string value.
_VALUE_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"-----BEGIN ([A-Z0-9 ]{0,40})PRIVATE KEY-----.*?(?:-----END \1PRIVATE KEY-----|\Z)",
            re.DOTALL,
        ),
        "[REDACTED PRIVATE KEY]",
    ),
    (
        re.compile(
            r"(?im)^([ \t]*+(?:(?:proxy-)?authorization|authentication|(?:set-)?cookie|x-api-key))"
            r"([ \t]*+:[ \t]*+)[^\r\n]++"
        ),
        r"\1\2" + REDACTED,
    ),
    (
        re.compile(
            r"(?i)\b((?:proxy-)?authorization|authentication|(?:set-)?cookie|x-api-key)"
            r"([ \t]*+:[ \t]*+)[^'\"\r\n]++"
        ),
        r"\1\2" + REDACTED,
    ),
    (
        re.compile(r"(?i)\b(bearer|basic|token)([ \t]++)[A-Za-z0-9\-._~+/]{8,4096}+=*+"),
        r"\1\2" + REDACTED,
    ),
    (
        re.compile(
            r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]{0,31}+://[^/\s:@]{1,256}+:)[^/\s@]{1,256}+(@)"
        ),
        r"\1" + REDACTED + r"\2",
    ),
    (
        # A URL's user name that is a token (no password: https://TOKEN@host/): one long
        # run of letters and digits both (a user name such as git@ or bob@ stays).
        re.compile(
            r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]{0,31}+://)"
            r"(?=[^/\s:@]{0,255}+@)(?=[^/\s:@]{0,254}?[0-9])(?=[^/\s:@]{0,254}?[a-z])"
            r"[A-Za-z0-9_.~%+-]{20,256}+(@)"
        ),
        r"\1" + REDACTED + r"\2",
    ),
    (
        re.compile(
            r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA|ASCA)[A-Z0-9]{16}\b"
        ),
        REDACTED,
    ),
    (
        re.compile(
            r"(?<![A-Za-z0-9_-])(?:gh[pousr]_[A-Za-z0-9]{20,255}+|github_pat_[A-Za-z0-9_]{20,255}+"
            r"|xox[abposr]-[A-Za-z0-9-]{10,255}+|sk-[A-Za-z0-9_-]{20,512}+"
            r"|AIza[A-Za-z0-9_-]{30,64}+|glpat-[A-Za-z0-9_-]{20,255}+"
            r"|eyJ[A-Za-z0-9_-]{8,4096}+\.eyJ[A-Za-z0-9_-]{8,4096}+\.[A-Za-z0-9_-]{8,4096}+)"
        ),
        REDACTED,
    ),
)


def _secretish_name(name: str, extra: frozenset[tuple[str, ...]]) -> bool:
    """Whether the name of a ``name=value`` pair, an option or a setting is secret-like:
    the patterns above, a whole word ``pass``/``pwd``, or a name the policy lists."""
    if _SECRETISH_NAME.search(name):
        return True
    words = _normalise(name)
    return not _SECRETISH_WORDS.isdisjoint(words) or words in extra


def _redact_assignments(s: str, extra: frozenset[tuple[str, ...]] = frozenset()) -> str:
    """``password=x``, ``API_KEY: x``, ``?token=x``, ``&sig=x``: keep the name, redact the
    value. ``extra`` are the policy's key names (normalised words)."""
    out: list[str] = []
    pos = 0
    for m in _ASSIGNMENT.finditer(s):
        if m.start() < pos:
            continue
        name = m.group(1)
        # "sig" (a signed URL's signature: Azure SAS, many CDNs) only as "sig=": the
        # redaction gate tests that fragment ("sig" alone is in "design", "signal").
        if not (
            _secretish_name(name, extra) or (m.group(2) == "=" and name.lower().endswith("sig"))
        ):
            continue
        quote = m.group(3)
        if quote is None:
            value = _ASSIGNED_VALUE.match(s, m.end())
        else:
            value = _QUOTED_VALUE["\\" if quote[0] == "\\" else quote].match(s, m.end())
        if value is None:
            continue
        out.append(s[pos : m.end()])
        out.append(REDACTED)
        pos = value.end()
    if out:
        out.append(s[pos:])
        s = "".join(out)
    if "</" not in s:
        return s
    return _ELEMENT.sub(
        lambda m: (
            m[0].replace(f">{m[2]}<", f">{REDACTED}<", 1)
            if _secretish_name(m[1], extra) and not m[2].startswith("[REDACTED")
            else m[0]
        ),
        s,
    )


# -- command lines ---------------------------------------------------------------------------
# A shell word (quotes kept; first characters of the alternatives disjoint, all possessive:
# linear), or a run of command separators.
_CMD_TOKEN = re.compile(
    r"""(?P<sep>[;&|\n]++)|(?P<tok>(?:[^\s'";&|]++|'[^']*+'?|"(?:[^"\\]++|\\.)*+"?)++)""",
    re.DOTALL,
)
# Programs whose option's value is "user:password" (the part after the first colon).
_USERPASS_OPTIONS = {
    "curl": frozenset({"-u", "--user", "-U", "--proxy-user"}),
    "http": frozenset({"-a", "--auth"}),
    "https": frozenset({"-a", "--auth"}),
}
_MYSQL = ("mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow", "mysqlcheck")
_MARIADB = ("mariadb", "mariadb-dump", "mariadb-admin", "mariadb-import", "mariadb-show")
_MONGO = ("mongo", "mongosh", "mongodump", "mongorestore", "mongoexport", "mongoimport")
_LOGIN = ("docker", "podman", "nerdctl", "buildah", "skopeo", "helm", "oc", "az")
_LDAP = tuple(
    f"ldap{c}"
    for c in ("search", "modify", "add", "delete", "compare", "modrdn", "whoami", "passwd", "exop")
)
# Programs with a short password option: (option, also as a separate word?, only after a
# "login" word?). The MySQL clients read "-p NAME" as a database name (the password is
# only ever attached: -pSECRET); a container tool's (and az's) -p is a port or something
# else unless it logs in.
_PASSWORD_OPTIONS: dict[str, tuple[str, bool, bool]] = {
    **dict.fromkeys(_MYSQL + _MARIADB, ("-p", False, False)),
    **dict.fromkeys(_MONGO, ("-p", True, False)),
    **dict.fromkeys(_LOGIN, ("-p", True, True)),
    **dict.fromkeys(_LDAP, ("-w", True, False)),
    "sshpass": ("-p", True, False),
    "redis-cli": ("-a", True, False),
    "sqlcmd": ("-P", True, False),
    "twine": ("-p", True, False),
}
# htpasswd's batch mode (-b) takes the password as a positional word: the third (file, user,
# password), the second with -n (no file). -C and -r take a number.
_HTPASSWD = "htpasswd"
_HTPASSWD_VALUED = frozenset({"-C", "-r"})
_PROGRAMS = frozenset(_USERPASS_OPTIONS) | frozenset(_PASSWORD_OPTIONS) | {_HTPASSWD}
# Long options whose next word is a secret, for any program: the name ends with a secret
# word (--password, --db-password, --token, --client-secret...), not --no-password, not
# --password-stdin / --token-file (flags, or a path).
_SECRET_LONG_OPTION = re.compile(
    r"--(?!no-)(?:[a-z0-9]+-)*(?:password|passwd|pass|passphrase|token|secret|api-?key|"
    r"access-key|secret-key|private-key|client-secret|credentials?|bearer)",
    re.IGNORECASE,
)
# Words that make a command set a named value: "aws configure set NAME VALUE", "git config
# NAME VALUE", "npm config set NAME VALUE".
_SETTERS = frozenset({"set", "config", "configure"})


def _unquoted(word: str) -> str:
    return word.replace("'", "").replace('"', "")


class _CommandWords:
    """The command-line rules' state from one word to the next (module doc, item 3), for a
    command line's shell words and an argv list's elements alike.

    A separator ends the command (:meth:`reset`); a word whose file name is a listed program
    starts one (so ``sudo curl``, ``sshpass -p X mysql -pY`` and ``/usr/bin/curl`` are
    seen); an option of that program, or any secret long option, marks the next word (or
    its own attached value) as the secret, whatever it starts with (as getopt takes an
    option's required argument: ``--password -Xy9`` is the password ``-Xy9``). Constant
    work per character of a word."""

    __slots__ = ("batch", "expect", "extra", "login", "positional", "prog", "setter")

    def __init__(self, extra: frozenset[tuple[str, ...]]) -> None:
        self.extra = extra
        self.prog = ""
        self.login = self.setter = False
        # What the next word is: "" nothing, "whole" a secret, "userpass" user:secret,
        # "skip" an option's value that is no secret.
        self.expect = ""
        # htpasswd: its flags seen (1 -b, 2 -n), its positional words seen.
        self.batch = self.positional = 0

    def reset(self) -> None:
        self.prog, self.login, self.setter, self.expect = "", False, False, ""
        self.batch = self.positional = 0

    def armed(self) -> bool:
        """Whether the next word is taken as a secret (a scalar argv element too)."""
        return self.expect in ("whole", "userpass")

    def _htpasswd(self, bare: str) -> str | None:
        if bare.startswith("-") and not bare.startswith("--") and len(bare) > 1:
            if bare in _HTPASSWD_VALUED:
                self.expect = "skip"
            else:
                self.batch |= (1 if "b" in bare else 0) | (2 if "n" in bare else 0)
            return None
        self.positional += 1
        at = 2 if self.batch & 2 else 3
        return REDACTED if self.batch & 1 and self.positional == at else None

    def word(self, word: str) -> str | None:
        """What ``word`` (quotes kept, as written) is replaced with, or None to keep it."""
        bare = _unquoted(word)
        if "[REDACTED" in word:  # a value rule got there first
            self.expect = ""
            return None
        expect, self.expect = self.expect, ""
        if expect:
            if expect == "whole":
                return REDACTED
            if expect == "skip":
                return None
            user, colon, secret = bare.partition(":")
            return f"{user}:{REDACTED}" if colon and secret else None
        name = bare.rsplit("/", 1)[-1]
        if name in _PROGRAMS:
            self.prog, self.login, self.setter = name, False, False
            self.batch = self.positional = 0
            return None
        if self.prog == _HTPASSWD:
            return self._htpasswd(bare)
        if bare in _SETTERS:
            self.setter = True
            return None
        if bare == "login":
            self.login = True
            return None
        prog = self.prog
        if bare.startswith("-"):
            option, eq, value = bare.partition("=")
            if prog in _USERPASS_OPTIONS:
                options = _USERPASS_OPTIONS[prog]
                if option in options:
                    if not eq:
                        self.expect = "userpass"
                        return None
                    user, colon, secret = value.partition(":")
                    return f"{option}={user}:{REDACTED}" if colon and secret else None
                short = next((o for o in options if len(o) == 2 and bare.startswith(o)), None)
                if short is not None and not eq and ":" in bare:
                    user, _, secret = bare[2:].partition(":")
                    return f"{short}{user}:{REDACTED}" if secret else None
            spec = _PASSWORD_OPTIONS.get(prog)
            if spec is not None and (self.login or not spec[2]):
                flag, separate, _ = spec
                if bare == flag:
                    self.expect = "whole" if separate else ""
                    return None
                if bare.startswith(flag) and not bare.startswith("--"):
                    return flag + REDACTED
            if not eq and _SECRET_LONG_OPTION.fullmatch(option):
                self.expect = "whole"
            return None
        if self.setter and _secretish_name(bare, self.extra):
            self.expect = "whole"
        return None


def _redact_command(s: str, extra: frozenset[tuple[str, ...]] = frozenset()) -> str:
    """Credentials passed as command-line options or settings (module doc, item 3), word by
    word (:class:`_CommandWords`); a separator (``;``, ``&``, ``|``, newline) ends the
    command."""
    out: list[str] = []
    pos = 0
    words = _CommandWords(extra)
    for m in _CMD_TOKEN.finditer(s):
        if m.group("sep") is not None:
            words.reset()
            continue
        shown = words.word(m.group("tok"))
        if shown is not None:
            out.append(s[pos : m.start()])
            out.append(shown)
            pos = m.end()
    if not out:
        return s
    out.append(s[pos:])
    return "".join(out)


def _redact_argv(items: list[Any], extra: frozenset[tuple[str, ...]]) -> None:
    """The command-line rules across an argv list's elements, in place: ``items`` are the
    elements already redacted one by one, each string one word (``["--password", "x"]``,
    ``["curl", "-u", "bob:pw"]``: the value element is replaced, the option kept). A
    scalar element (``["cmd", "--password", 12345678]``) is an option's value like a string
    one; any non-string element then ends the command: no option's value runs across it.

    Hazard: the audit log's gate (:meth:`Redactor.may_redact`) sees the whole arguments'
    text, so a list whose value element alone looks harmless still reaches this rule: every
    word that arms it (a program, a secret option or setting name) holds a gate fragment."""
    words = _CommandWords(extra)
    for i, item in enumerate(items):
        if type(item) is not str and not isinstance(item, str):
            if words.armed() and item is not None and not isinstance(item, (dict, list, tuple)):
                items[i] = REDACTED
            words.reset()
            continue
        shown = words.word(item)
        if shown is not None:
            items[i] = shown


# Cheap gate, in C substring tests (one regex alternation of the fragments cost ~2x more per
# character here: the engine tries every branch at every position). A text passes it — cannot
# hold a secret key name or match a value rule — when none of these occurs:
#
# - in its lower-cased letters and digits with everything else deleted (``_squash``): every
#   built-in secret key word, pair and joined form contains one of the words below, and a key
#   name's words, joined, occur there contiguously whatever separated them ("to-ken"); the
#   alphanumeric fragments of the value rules are implied (each contains one) or listed;
# - in the lower-cased text: the value-rule fragments that need their punctuation;
# - in the original text: the twelve prefixes of the AWS key-id rule, the one case-sensitive
#   rule.
_SQUASHED_FRAGMENTS = (
    "auth",
    "cookie",
    "token",
    "secret",
    "pass",
    "pwd",
    "session",
    "credential",
    "key",
    "bearer",
    "signature",
    "csrf",
    "xsrf",
    "basic",
    "xox",
    "aiza",
    "eyj",
    # The programs of the command-line rules whose trigger holds no word above.
    "curl",
    "http",
    "mysql",
    "mariadb",
    "mongo",
    "redis",
    "login",
    "ldap",
    "sqlcmd",
    "twine",
)
# The AWS key-id rule is the only case-sensitive one: its prefixes, tested on the original.
_AWS_PREFIXES = tuple(
    ["AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AIPA", "ANPA", "ANVA", "AROA", "APKA", "ASCA"]
)
# The value-rule fragments that need their punctuation: with an underscore, and the others.
_UNDERSCORED_FRAGMENTS = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")
_PUNCTUATED_FRAGMENTS = ("://", "sk-", "glpat-", "sig=", "sig%3d")
_NON_ALNUM = bytes(b for b in range(256) if not (48 <= b <= 57 or 97 <= b <= 122))


def _squash(low: str) -> str:
    # str, not bytes: ``in`` on short bytes costs ~3x more than on str here.
    return low.encode("utf-8", "surrogatepass").translate(None, _NON_ALNUM).decode("ascii")


# The fragments tested on the lower-cased text, for the accelerator (the Python code below
# tests the same ones, grouped).
_LOWERED_FRAGMENTS = (*_UNDERSCORED_FRAGMENTS, *_PUNCTUATED_FRAGMENTS)


def _maybe_secret(text: str, squashed_fragments: tuple[str, ...] = _SQUASHED_FRAGMENTS) -> bool:
    """Whether ``text`` may hold a secret key name or value (the gate above): the
    accelerator's answer, or :func:`_py_maybe_secret`'s for text it leaves to it (any
    character beyond ASCII: Unicode lower-casing can make ASCII letters of them)."""
    hit = _gate(text, _AWS_PREFIXES, _LOWERED_FRAGMENTS, squashed_fragments)
    if hit is NotImplemented:
        return _py_maybe_secret(text, squashed_fragments)
    return hit is True


_JSON_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.?)", re.DOTALL)
_SIMPLE_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}


def _json_unescaped(text: str) -> str | None:
    """The JSON text ``text`` with its string escapes decoded, or None when a backslash in
    it starts no JSON escape (not JSON text: the gate then stays open)."""
    bad = False

    def decoded(m: re.Match[str]) -> str:
        nonlocal bad
        escape = m[1]
        if len(escape) == 5:
            return chr(int(escape[1:], 16))
        char = _SIMPLE_ESCAPES.get(escape)
        if char is None:
            bad = True
            return ""
        return char

    out = _JSON_ESCAPE.sub(decoded, text)
    return None if bad else out


def _py_maybe_secret(
    text: str,
    squashed_fragments: tuple[str, ...] = _SQUASHED_FRAGMENTS,
    json_text: bool = False,
) -> bool:
    if json_text and "\\" in text:
        unescaped = _json_unescaped(text)
        if unescaped is None:
            return True
        text = unescaped
    if _fragment_in(text, squashed_fragments):
        return True
    # A percent escape can spell a fragment (``?t%6Fken=T``): decoded once, as the redactor
    # decodes (_ENCODED_NAME, _ENCODED_PIECE). The accelerator leaves such text to this code.
    if "%" in text:
        decoded = unquote(text, errors="surrogateescape")
        return decoded != text and _fragment_in(decoded, squashed_fragments)
    return False


def _fragment_in(text: str, squashed_fragments: tuple[str, ...]) -> bool:
    # One test for a character every fragment of a group holds skips the group's tests.
    if "A" in text:
        for prefix in _AWS_PREFIXES:
            if prefix in text:
                return True
    low = text.lower()
    if "_" in low:
        for fragment in _UNDERSCORED_FRAGMENTS:
            if fragment in low:
                return True
    for fragment in _PUNCTUATED_FRAGMENTS:
        if fragment in low:
            return True
    squashed = _squash(low)
    for word in squashed_fragments:  # noqa: SIM110 - any() over a genexpr is slower
        if word in squashed:
            return True
    return False


def _py_gate(
    text: str, exact: Any, lowered: Any, squashed: tuple[str, ...], json_text: bool = False
) -> Any:
    return NotImplemented


def _first_gate(
    text: str, exact: Any, lowered: Any, squashed: tuple[str, ...], json_text: bool = False
) -> Any:
    # Deferred to the first test: every process imports this module (sandbox children too).
    _select(_speedups.module())
    return _gate(text, exact, lowered, squashed, json_text)


#: The accelerator's ``maybe_secret(text, exact, lowered, squashed)`` (True, False or
#: NotImplemented), or a stand-in that always leaves the answer to the Python code.
_gate: Callable[..., Any] = _first_gate


def _select(mod: Any) -> None:
    """Use the accelerator ``mod`` (:func:`runtime._speedups.module`), or the Python code
    when None. Tests call it to run the same inputs through both."""
    global _gate  # noqa: PLW0603 - the one switch, read on every call
    _gate = _py_gate if mod is None else mod.maybe_secret


def _normalise(key: str) -> tuple[str, ...]:
    return tuple(w for w in _WORD_SPLIT.split(_CAMEL.sub("_", key).lower()) if w)


class Redactor:
    """A redaction rule set: the built-in one plus ``extra_keys`` (from the policy).

    Extra keys are names compared like built-in ones, word-normalised: ``"X-Tenant-Id"``
    redacts ``x_tenant_id`` and ``xTenantId`` too.
    """

    __slots__ = ("_cache", "_extra", "_gate")

    def __init__(self, extra_keys: Iterable[str] = ()) -> None:
        self._extra = frozenset(_normalise(k) for k in extra_keys if k)
        self._cache: dict[str, bool] = {}
        # An extra key with no word in it ("-") matches every key without letters or digits:
        # no fragment can rule that out.
        self._gate: tuple[str, ...] | None = (
            None
            if () in self._extra
            else (*_SQUASHED_FRAGMENTS, *sorted({"".join(w) for w in self._extra}))
        )

    def may_redact(self, text: str) -> bool:
        """False when :meth:`__call__` provably returns an equal copy of the JSON value whose
        JSON text (any escaping, e.g. canonical) is ``text``: neither a secret key name nor
        a value rule's fragment occurs in it (the gate above). C-speed passes over the text
        instead of the walk: with its escapes decoded (an escape spells a separator with
        letters: ``to\\nken`` is "to", newline, "ken", which the redactor joins into
        "token"), what occurs in a key or string occurs in the text, and lower-casing is per
        character.
        """
        gate = self._gate
        if gate is None:
            return True
        hit = _gate(text, _AWS_PREFIXES, _LOWERED_FRAGMENTS, gate, True)  # _maybe_secret, inline
        return _py_maybe_secret(text, gate, True) if hit is NotImplemented else hit is True

    def gate_args(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None:
        """The fragments :meth:`may_redact` tests, ``(exact, lowered, squashed)``, for the
        accelerator's ``journal_request`` (the same gate inside the write-ahead record's one
        call), or None when no fragment can rule redaction out."""
        gate = self._gate
        return None if gate is None else (_AWS_PREFIXES, _LOWERED_FRAGMENTS, gate)

    def is_secret_key(self, key: str) -> bool:
        hit = self._cache.get(key)
        if hit is None:
            words = _normalise(key)
            joined = "".join(words)
            hit = (
                words in self._extra
                or joined in _SECRET_WORDS
                or any(w in _SECRET_WORDS for w in words)
                or any(p in _SECRET_PAIRS for p in itertools.pairwise(words))
            )
            if len(self._cache) < 4096:  # keys come from untrusted input: bound the memo
                self._cache[key] = hit
        return hit

    def redact_url(self, url: str) -> str:
        """``url`` with its credentials hidden, by its parts: the user information whole (a
        token is often the user name, ``https://:pw@`` has none), and every query or
        fragment parameter whose name, percent-decoded (``t%6Fken``), is a secret key
        (:meth:`is_secret_key`: the policy's names too); then :meth:`redact_str`. For the
        URLs a call's egress log records, which the gateway followed (a redirect's
        ``Location`` is the server's text, not the call's arguments)."""
        return self._redact_url(url, True)

    def _redact_url(self, url: str, decode: bool) -> str:
        try:
            parts = urlsplit(url)
        except ValueError:
            return self.redact_str(url)
        if not parts.scheme or not parts.netloc:
            return self._redact_str(url, decode)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
        rebuilt = urlunsplit(
            (
                parts.scheme,
                netloc,
                parts.path,
                self._redact_params(parts.query),
                self._redact_params(parts.fragment),
            )
        )
        return self._redact_str(rebuilt, decode)

    def _redact_params(self, text: str) -> str:
        if "=" not in text:
            return text
        out = []
        for item in text.split("&"):
            name, sep, value = item.partition("=")
            secret = sep and value and self.is_secret_key(unquote(name))
            out.append(f"{name}={REDACTED}" if secret else item)
        return "&".join(out)

    def redact_str(self, s: str) -> str:
        """``s`` with the value rules (module doc, items 2 and 3) applied, and then again
        to each percent-encoded piece decoded once (:meth:`_redact_encoded`)."""
        return self._redact_str(s, True)

    def _redact_str(self, s: str, decode: bool) -> str:
        gate = self._gate
        if len(s) < 8 or (gate is not None and not _maybe_secret(s, gate)):
            return s
        for pattern, repl in _VALUE_RULES:
            s = pattern.sub(repl, s)
        s = _redact_command(_redact_assignments(s, self._extra), self._extra)
        if decode and "%" in s:
            s = _ENCODED_NAME.sub(self._redact_encoded_name, s)
            s = _ENCODED_PIECE.sub(self._redact_encoded, s)
        return s

    def _redact_encoded_name(self, m: re.Match[str]) -> str:
        """``NAME=VALUE`` (``_ENCODED_NAME``) with VALUE hidden when NAME, decoded once, is
        a secret key (:meth:`is_secret_key`), as :meth:`redact_url` judges a URL's."""
        name = m[1]
        if self.is_secret_key(unquote(name, errors="surrogateescape")):
            return f"{name}={REDACTED}"
        return m[0]

    def _redact_encoded(self, m: re.Match[str]) -> str:
        """A percent-encoded piece (``_ENCODED_PIECE``) with the secrets of its decoded text
        hidden: a URL passed in another's query (``?to=https%3A%2F%2Fh%2F%3Ftoken%3DT``)
        holds its ``=`` and ``&`` encoded, so no rule sees its parameters. Decoded once
        (``%253D`` stays ``%3D``: each level would cost a pass, and the pieces shrink by only
        two characters a level), redacted as a URL (:meth:`redact_url`'s parameter names
        decoded too), and encoded again when that changed it: the characters the piece had
        in clear stay in clear, and the ``[REDACTED]`` marker reads as itself."""
        piece = m[0]
        decoded = unquote(piece, errors="surrogateescape")
        if decoded == piece or len(decoded) < 8:
            return piece
        gate = self._gate
        if gate is not None and "%" not in decoded and not _maybe_secret(decoded, gate):
            return piece  # as redact_url would: the common case, without its urlsplit
        shown = self._redact_url(decoded, False)
        if shown == decoded:
            return piece
        safe = "".join({c for c in piece if c != "%" and c.isascii() and not c.isalnum()})
        return quote(shown, safe=safe + "[]", errors="surrogateescape")

    def _secret_setting(self, obj: Any) -> bool:
        """Whether ``obj`` (a dict) sets a secret-named variable: ``{"key"|"name": NAME,
        "value": ...}`` with NAME a secret key name, or one ending in ``key``/``pass``."""
        name = obj.get("key")
        if name is None:
            name = obj.get("name")
        if type(name) is not str or not name:
            return False
        if self.is_secret_key(name):
            return True
        words = _normalise(name)
        return bool(words) and words[-1] in _SECRET_LAST_WORDS

    def __call__(self, obj: Any) -> Any:
        """A redacted deep copy of ``obj`` (dicts and lists copied; scalars shared)."""
        t = type(obj)
        if t is str:
            return self.redact_str(obj)
        if t is dict or isinstance(obj, dict):
            secret = self.is_secret_key
            out = {
                k: (REDACTED if isinstance(k, str) and secret(k) else self(v))
                for k, v in obj.items()
            }
            if "value" in out and out["value"] is not None and self._secret_setting(obj):
                out["value"] = REDACTED
            return out
        if t is list or t is tuple or isinstance(obj, (list, tuple)):
            if (
                len(obj) == 2
                and isinstance(obj[0], str)
                and self.is_secret_key(obj[0])
                and obj[1] is not None
            ):
                return [obj[0], REDACTED]  # a ("Authorization", "...") header pair
            items = [self(v) for v in obj]
            if len(items) > 1:
                _redact_argv(items, self._extra)  # an argv: ["--password", "x"]
            return items
        if isinstance(obj, str):
            return self.redact_str(str.__str__(obj))
        return obj


_DEFAULT = Redactor()


def redact(obj: Any, keys: Iterable[str] = ()) -> Any:
    """A copy of the JSON value ``obj`` with secrets replaced by ``"[REDACTED]"``.

    ``keys`` are extra secret key names (the policy's ``redact_keys``). Never mutates ``obj``.
    """
    redactor = Redactor(keys) if keys else _DEFAULT
    return redactor(obj)
