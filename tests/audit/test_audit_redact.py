from __future__ import annotations

import copy
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.audit import REDACTED, redact
from runtime.audit._canonical import canonical_json
from runtime.audit._redact import Redactor


@pytest.mark.parametrize(
    "key",
    [
        "Authorization",
        "proxy-authorization",
        "Cookie",
        "Set-Cookie",
        "token",
        "access_token",
        "refreshToken",
        "api_key",
        "API-KEY",
        "apiKey",
        "apikey",
        "X-Api-Key",
        "secret",
        "client_secret",
        "clientSecret",
        "password",
        "PASSWD",
        "aws_access_key_id",
        "AWS_SECRET_ACCESS_KEY",
        "private_key",
        "privateKey",
        "session",
        "sessionId",
        "SESSION_TOKEN",
        "GITHUB_TOKEN",
    ],
)
def test_secret_keys_are_redacted(key: str) -> None:
    assert redact({key: "value", "other": "keep"}) == {key: REDACTED, "other": "keep"}


@pytest.mark.parametrize(
    "key",
    [
        "Authentication",  # finding L3: stored in clear in a http_get call's headers
        "X-Authentication",
        "X-CSRF",
        "_csrf",
        "X-XSRF",
        "Ocp-Apim-Subscription-Key",
        "X-Functions-Key",
        "DD-Application-Key",
        "storageAccountKey",
        "master_key",
        "appKey",
    ],
)
def test_more_credential_header_names_are_secret(key: str) -> None:
    """Names of credential headers seen in the wild that no secret word or pair matched."""
    assert redact({key: "value", "other": "keep"}) == {key: REDACTED, "other": "keep"}
    assert redact({"headers": [[key, "value"]]}) == {"headers": [[key, REDACTED]]}
    assert Redactor().may_redact(f'{{"{key}":"value"}}')


def test_an_authentication_header_line_is_redacted() -> None:
    out = redact({"command": "curl -H 'Authentication: SEKRET5' https://h/"})["command"]
    assert "SEKRET5" not in out and "Authentication: " in out


@pytest.mark.parametrize(
    "key", ["max_tokens", "path", "key", "monkey", "keyboard", "content", "account", "app"]
)
def test_ordinary_keys_are_kept(key: str) -> None:
    assert redact({key: "value"}) == {key: "value"}


def test_nested_and_header_pairs() -> None:
    value = {
        "request": {
            "headers": [["Authorization", "Basic dXNlcjpwYXNz"], ["Accept", "text/html"]],
            "body": {"items": [{"password": {"nested": "x"}}, 1, None]},
        }
    }
    assert redact(value) == {
        "request": {
            "headers": [["Authorization", REDACTED], ["Accept", "text/html"]],
            "body": {"items": [{"password": REDACTED}, 1, None]},
        }
    }


@pytest.mark.parametrize(
    ("text", "secret", "kept"),
    [
        ("curl -H 'Authorization: Bearer abc.def-ghi_jkl' https://x", "abc.def", "curl -H"),
        ("Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGci", "Bearer"),
        ("export API_KEY=s3cr3tvalue && run", "s3cr3tvalue", "&& run"),
        ("https://example.com/cb?token=abcdef123&x=1", "abcdef123", "x=1"),
        ("git clone https://bob:hunter2@example.com/r.git", "hunter2", "bob:"),
        ("id AKIAIOSFODNN7EXAMPLE in logs", "AKIAIOSFODNN7EXAMPLE", "in logs"),
        ("use ghp_abcdefghijklmnopqrstuvwxyz0123 now", "ghp_abcdefghij", "now"),
        ("key sk-ant-api03-abcdefghijklmnopqrstuv", "abcdefghijklmnop", "key"),
        ("Cookie: session=abc; theme=dark\nAccept: */*", "session=abc", "Accept: */*"),
        (
            "before\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n"
            "-----END OPENSSH PRIVATE KEY-----\nafter",
            "b3BlbnNzaC1rZXk",
            "after",
        ),
        ("-----BEGIN PRIVATE KEY-----\nMIIEvQ truncated", "MIIEvQ", "[REDACTED PRIVATE KEY]"),
    ],
)
def test_secret_values_in_strings(text: str, secret: str, kept: str) -> None:
    out = redact({"command": text})["command"]
    assert secret not in out
    assert kept in out
    assert "REDACTED" in out


def test_plain_strings_unchanged() -> None:
    value = {"command": "ls -la /workspace | grep token_count.py", "n": 3}
    assert redact(value)["n"] == 3
    assert redact("hello world") == "hello world"


def test_policy_keys() -> None:
    assert redact({"tenant": "acme", "Tenant-Name": "x"}, ["tenant"]) == {
        "tenant": REDACTED,
        "Tenant-Name": "x",
    }
    assert redact({"x_internal_ref": 1, "xInternalRef": 2}, ["X-Internal-Ref"]) == {
        "x_internal_ref": REDACTED,
        "xInternalRef": REDACTED,
    }


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=4),
    max_leaves=20,
)


@settings(deadline=None)
@given(JSON)
def test_never_mutates_the_input(value: Any) -> None:
    before = copy.deepcopy(value)
    out = redact(value, ["a"])
    assert value == before
    if isinstance(value, (dict, list)):
        assert out is not value


@settings(deadline=None)
@given(st.dictionaries(st.sampled_from(["token", "password", "cookie"]), JSON, min_size=1))
def test_secret_keys_redact_any_value(value: dict[str, Any]) -> None:
    assert redact(value) == dict.fromkeys(value, REDACTED)


@pytest.mark.parametrize(
    "text",
    [
        "a.token." * 6000,  # the naive name=value pattern took 46 s on 400 of these
        "a-" * 25000 + "secret",
        "a:" * 25000 + "token",
        "\n" * 50000 + "cookie",
        "x://a:" * 8000,
        "sk-" * 16000,
        "eyJ" * 16000,
        "-----BEGIN " * 4000,
        "token=" * 8000,
        "curl -u a:b " * 4000,
        "mysql -p" * 8000,
        "'" * 50000 + "--password",
        "htpasswd -b " * 8000,
        "ldapsearch -w " * 8000,
        '"\\' * 25000 + "--token x",
        "set --token " * 4000,
        "--" + "a1-" * 20000 + "x --password",
        "https://" + "a1" * 20000 + "@h",
        "https://" + "a1-" * 80 + "@" * 20000,
        "%41" * 20000 + "token=",
        "a%" * 25000 + " token=",
        "token=" + "%3D" * 20000,
        "sig%3D" * 8000,
    ],
    ids=lambda t: repr(t[:12]),
)
def test_adversarial_strings_finish(text: str) -> None:
    # No timing assertion: a super-linear rule would run for hours and hit the test timeout.
    out = redact({"command": text})["command"]
    assert isinstance(out, str)


def test_assignments_in_urls_and_shell() -> None:
    text = "curl 'https://h/cb?x=1&token=abc&y=2' ; export DB_PASSWORD=hunter2 ok=fine"
    out = redact(text)
    assert "abc" not in out and "hunter2" not in out
    assert "x=1" in out and "y=2" in out and "ok=fine" in out


@pytest.mark.parametrize(
    ("text", "secret", "kept"),
    [
        ("curl -u admin:Hunter2Passw0rdX https://h/x", "Hunter2", "curl -u admin:"),
        ("curl --user=admin:Hunter2Passw0rdX https://h/x", "Hunter2", "--user=admin:"),
        ("curl -uadmin:Hunter2Passw0rdX https://h/x", "Hunter2", "-uadmin:"),
        ("sudo /usr/bin/curl -U proxy:Pr0xyPassw0rd https://h", "Pr0xyPass", "-U proxy:"),
        ("http -a bob:HttpieS3cret example.org", "HttpieS3cret", "-a bob:"),
        ("mysql -uroot -pS3cr3tDbPassw0rd -e 'select 1'", "S3cr3t", "-uroot -p"),
        ("mysqldump -u root -p'S3cr3t Pw' db", "S3cr3t", "mysqldump -u root"),
        ("sshpass -p 'MyS3cretSSHpass' ssh user@host", "MyS3cret", "ssh user@host"),
        ("sshpass -pMyS3cretSSHpass ssh user@host", "MyS3cret", "ssh user@host"),
        ("docker login -u me -p dckr_pat_AbCdEfGhIjKlMnOp reg", "dckr_pat", "-u me -p"),
        ("podman login --password P0dm4nPass reg.io", "P0dm4nPass", "reg.io"),
        ("redis-cli -a s3cretredis ping", "s3cretredis", "ping"),
        ("mongosh -u admin -p m0ngopass db", "m0ngopass", "-u admin"),
        ("tool --password hunter2pass --verbose", "hunter2pass", "--verbose"),
        ("tool --db-password=hunter2pass x", "hunter2pass", "x"),
        ("vault login --client-secret Cl13ntS3cret", "Cl13ntS3cret", "vault login"),
        ("DB_PASS=abc123secretvalue ./run", "abc123secret", "./run"),
        ("export MYSQL_PWD=abc123secretvalue", "abc123secret", "MYSQL_PWD="),
        (
            "aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "wJalrXUtn",
            "aws_secret_access_key",
        ),
        ("git config --global github.token ghtoken123456", "ghtoken123456", "github.token"),
        ("git clone https://glpat-AbCdEfGhIjKlMnOpQrSt@gitlab.com/x/y.git", "glpat-", "gitlab"),
        ("git clone https://ab12cd34ef56gh78ij90kl@github.com/x.git", "ab12cd34", "github"),
        ("token glpat-AbCdEfGhIjKlMnOpQrSt here", "glpat-AbCd", "here"),
        (
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F2024"
            "&X-Amz-Date=20240101T000000Z&X-Amz-Signature=abcdef0123456789",
            "abcdef0123456789",
            "X-Amz-Date=20240101T000000Z",
        ),
        ("https://h/o?X-Goog-Credential=sa%40p.iam&X-Goog-Signature=0123abcd", "0123abcd", "h/o"),
        ("https://a.blob.core.windows.net/c?sv=2022-11-02&sig=AbCd%2B123&se=x", "AbCd", "sv="),
        ("https://h/x?signature=abc123def&design=ok", "abc123def", "design=ok"),
    ],
)
def test_command_line_and_url_credentials(text: str, secret: str, kept: str) -> None:
    out = redact({"command": text})["command"]
    assert secret not in out, out
    assert kept in out and REDACTED in out, out


@pytest.mark.parametrize(
    "text",
    [
        "docker run -p 8080:80 nginx",  # a port: docker's -p is a password only after login
        "python -m http.server -p 8080",
        "mysql -u root -p mydb",  # -p alone prompts; "mydb" is the database
        "ssh -p 2222 user@host",
        "sudo -u postgres:admin psql",  # sudo's -u is a user, not curl's user:password
        "docker run -u 1000:1000 img",
        "curl -u admin https://h/x",  # no password given: curl asks for it
        "git clone git@github.com:x/y.git; ssh://git@host/x",
        "echo design signal assign; pass the salt; bypass=1",
        "docker login --password-stdin -u me registry",
        "psql --no-password mydb",
        "tool --token-file /run/secrets/t",
        "https://h/x?page=2&sort_key=name&sigma=1",
    ],
)
def test_ordinary_command_lines_are_kept(text: str) -> None:
    assert redact({"command": text}) == {"command": text}


def test_policy_keys_apply_inside_strings() -> None:
    url = "https://h/v1?key=AIKEY2&sig=SIG3&page=2"
    assert redact(url, ["key", "sig"]) == f"https://h/v1?key={REDACTED}&sig={REDACTED}&page=2"
    assert redact("X_TENANT_ID=acme ./run", ["X-Tenant-Id"]) == f"X_TENANT_ID={REDACTED} ./run"
    assert redact("key=AIKEY2 page=2") == "key=AIKEY2 page=2"  # not a built-in name


@pytest.mark.parametrize(
    "value",
    [
        {"key": "GITHUB_TOKEN", "value": "gho_notreallyashapeXYZ"},
        {"key": "OPENAI_KEY", "value": "plainsecretvalue123"},
        {"name": "DB_PASS", "value": "x"},
        {"name": "aws_secret_access_key", "value": {"nested": 1}},
    ],
)
def test_a_secret_named_setting_has_its_value_redacted(value: dict[str, Any]) -> None:
    out = redact(value)
    assert out["value"] == REDACTED
    assert {k: v for k, v in out.items() if k != "value"} == {
        k: v for k, v in value.items() if k != "value"
    }


@pytest.mark.parametrize(
    "value",
    [
        {"key": "PATH", "value": "/usr/bin"},
        {"name": "keyboard_layout", "value": "us"},
        {"key": "OPENAI_KEY"},
        {"key": "OPENAI_KEY", "value": None},
        {"key": 3, "value": "x"},
    ],
)
def test_other_settings_are_kept(value: dict[str, Any]) -> None:
    assert redact(value) == value


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        # The red team's redirect target: names the policy lists, and a signed URL's.
        (
            "http://h/final?sig=S1&X-Amz-Signature=0123456789abcdef&key=K2",
            "http://h/final?sig=[REDACTED]&X-Amz-Signature=[REDACTED]&key=[REDACTED]",
        ),
        ("https://:password@host/", "https://[REDACTED]@host/"),
        ("https://glpat-abcdefabcdef1234@host/p?q=1", "https://[REDACTED]@host/p?q=1"),
        ("http://h/?t%6Fken=abcdefgh&page=2", "http://h/?t%6Fken=[REDACTED]&page=2"),
        ("http://h/#access_token=xyz123456", "http://h/#access_token=[REDACTED]"),
        ("http://h/plain?page=2&q=cats", "http://h/plain?page=2&q=cats"),
    ],
)
def test_urls_are_redacted_by_their_parts(url: str, shown: str) -> None:
    """The egress log's URLs (the usage is not redacted as arguments are): user information
    whole, and parameters by their percent-decoded names, the policy's included."""
    assert Redactor(frozenset({"sig", "key"})).redact_url(url) == shown


# Finding L3: a URL passed in another's query has its "=" and "&" percent-encoded, so no
# rule saw its parameters: the audit record kept ``access_token%3DSEKRETQ`` in clear while the
# egress log, which records the followed URL decoded, hid it.
_INNER = "http://127.0.0.1:18082/echo?access_token=SEKRETQ&sig=SEKRETS"
_NESTED = f"http://127.0.0.1:18081/redir307?to={quote(_INNER, safe='')}&token=SEKRETQ0"
_NESTED_SHOWN = (
    "http://127.0.0.1:18081/redir307?to=http%3A%2F%2F127.0.0.1%3A18082%2Fecho%3F"
    "access_token%3D[REDACTED]%26sig%3D[REDACTED]&token=[REDACTED]"
)


def test_a_nested_percent_encoded_url_has_its_parameters_redacted() -> None:
    assert redact({"url": _NESTED}) == {"url": _NESTED_SHOWN}
    # The egress log's form of the same URL agrees.
    assert Redactor().redact_url(_NESTED) == _NESTED_SHOWN


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # Only an encoded "sig=": the gate has to open on "sig%3D" (no other fragment).
        # A changed piece is encoded again, in upper-case hex.
        (
            "/r?to=http%3a%2f%2fh%2f%3fa%3d1%26sig%3dS1",
            "/r?to=http%3A%2F%2Fh%2F%3Fa%3D1%26sig%3D[REDACTED]",
        ),
        # A form body, a path segment (its "/" were in clear: they stay so), a quoted
        # shell word.
        ("data=password%3Dhunter2%26user%3Dbob", "data=password%3D[REDACTED]%26user%3Dbob"),
        (
            "GET /go/https%3A%2F%2Fh%3Ftoken%3DT1 HTTP/1.1",
            "GET /go/https%3A//h%3Ftoken%3D[REDACTED] HTTP/1.1",
        ),
        ("curl 'x?next=%2Fcb%3Fapi_key%3DS2'", "curl 'x?next=%2Fcb%3Fapi_key%3D[REDACTED]'"),
        # The decoded URL's parameter names are decoded too, as redact_url's are.
        (
            f"?to={quote('http://h/?t%6Fken=T3', safe='')}",
            "?to=http%3A%2F%2Fh%2F%3Ft%256Fken%3D[REDACTED]",
        ),
    ],
)
def test_percent_encoded_pieces_are_redacted_once_decoded(text: str, shown: str) -> None:
    assert redact({"v": text}) == {"v": shown}
    assert Redactor().may_redact(canonical_json({"v": text}).decode())


@pytest.mark.parametrize(
    "text",
    [
        "https://h/?to=http%3A%2F%2Fh%2F%3Fq%3Ddesign%26page%3D1&token=",  # nothing secret
        "100%25 of the token budget, 50%off, %zz, %",  # not encodings of anything secret
        "x?to=http%253A%252F%252Fh%253Ftoken%253DT",  # decoded once only: still encoded
    ],
)
def test_percent_encoded_pieces_without_secrets_are_kept_as_written(text: str) -> None:
    assert redact({"v": text}) == {"v": text}
