"""Here-documents (runtime/policy/_heredoc.py): the commands an unquoted body runs are found
as bash delimits them, and a body that expands is text known only at run time.

Two things changed together. A body's substitutions used to be found by reading the whole
body as shell, which made any ``$(...)`` in a document ask (``cat > notes <<EOF ... built
on $(date)``). And a document fed to a shell was judged as its raw text, so ``bash <<EOF
... echo $X`` ran X's ``; rm -rf /`` unseen: the outer shell expands the body before the
inner one reads it as a script.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from _policy_helpers import verdict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.policy import Policy
from runtime.policy._heredoc import expands, substitutions, unescaped
from runtime.policy._shell_parse import _complete

RM = ("deny", "commands.deny.rm-root")
BASH = shutil.which("bash")
DASH = shutil.which("dash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed")


def doc(body: str, head: str = "cat") -> str:
    return f"{head} <<EOF\n{body}\nEOF"


# What agents write: documents with a date, a commit, a user name, sums, variables.
EVERYDAY = [
    doc("built on $(date)", "cat > notes.txt"),
    doc("fix: bump version\n\nat $(git rev-parse --short HEAD)", "git commit -F -"),
    doc("user: `whoami`", "cat > who.txt"),
    doc("total: $((a + b))", "cat"),
    doc("home is $HOME and ${USER:-nobody}", "cat > env.txt"),
    doc("lines: $(wc -l < data.txt) of $(ls | wc -l) files", "tee report.md"),
    doc("price \\$5, literal \\`tick\\`", "cat"),
    doc('{"when": "$(date -u +%FT%TZ)"}', "cat > meta.json"),
    doc('files:\n$(for f in *.py; do echo "- $f"; done)', "cat > index.md"),
]


@pytest.mark.parametrize("command", EVERYDAY)
def test_everyday_documents_are_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


@pytest.mark.parametrize(
    "body",
    [
        "$(rm -rf /)",
        "a $(echo x) b $(rm -rf /)",
        "${x:-$(rm -rf /)}",
        "`rm -rf /`",
        "$(( $(rm -rf /) + 1 ))",
        # bash reads '$((' that closes with a single ')' as a subshell's substitution.
        "$((echo a); rm -rf /)",
        # A backslash-newline is removed first: '$' and '(' join.
        "$\\\n(rm -rf /)",
        # Inside backquotes bash keeps '\"', dash removes it: either reading runs rm.
        '`echo \\"a;rm -rf /\\"`',
        # ... and dash's reading may expose what bash's quotes hide.
        '`echo \\"\'\\" ; rm -rf / ; \\"\'\\"`',
        "$(echo ')'; rm -rf /)",
        "$(echo $(echo a); rm -rf /)",
    ],
)
def test_substitutions_in_a_body_are_judged(policy: Policy, body: str) -> None:
    assert verdict(policy, doc(body)) == RM, body


@pytest.mark.parametrize(
    "body",
    [
        # A '#' may start a comment, inside which bash reads past ')'.
        "$(echo a # )\nrm -rf /)",
        # A here-document inside a substitution.
        "$(cat <<X\n)\nX\n)",
        # Quotes inside an arithmetic expansion.
        '$(( "(" ))',
        "$(unterminated",
    ],
)
def test_bodies_the_walker_cannot_delimit_ask(policy: Policy, body: str) -> None:
    assert substitutions(body, _complete) is None
    assert verdict(policy, doc(body))[0] != "allow", body


@pytest.mark.skipif(DASH is None, reason="dash is not installed")
def test_dash_reads_a_backquoted_escaped_quote_as_a_quote(tmp_path: Path) -> None:
    """Why both readings of a backquoted command are judged: in bash's reading the
    commands sit inside single quotes, and dash runs them."""
    assert DASH is not None
    script = doc('`echo \\"\'\\" ; touch ran ; \\"\'\\"`')
    subprocess.run([DASH, "-c", script], cwd=tmp_path, check=False, capture_output=True)
    assert (tmp_path / "ran").exists()


def test_escaped_substitution_is_text(policy: Policy) -> None:
    assert substitutions("\\$(rm -rf /) and \\`rm -rf /\\`", _complete) == []
    assert verdict(policy, doc("\\$(rm -rf /)"))[0] == "allow"


def test_quoted_delimiter_body_is_literal(policy: Policy) -> None:
    assert verdict(policy, "cat <<'EOF'\n$(rm -rf /)\nEOF")[0] == "allow"


def test_many_candidate_ends_are_bounded() -> None:
    """Each ')' is a parse of the text before it: a body of many stops early (None: the
    walker asks) instead of making the decision quadratic."""
    body = "$(echo " + "(" * 200 + ")" * 200
    assert substitutions(body, _complete) is None


def test_expands_and_unescaped() -> None:
    assert expands("a $x")
    assert expands("a `b`")
    assert expands("$\\\n(x)")
    assert not expands("a \\$x \\`b\\` c\\\\")
    assert unescaped("a \\$x \\`b\\` c\\\\ \\n d\\\ne") == "a $x `b` c\\ \\n de"


# --- what a shell reads from an expanding document is built at run time -------------------


@pytest.mark.parametrize(
    "command",
    [
        "X='; rm -rf /'; " + doc("echo $X", "bash"),
        doc("echo $X", "sh"),
        doc("echo `cat args`", "bash -s"),
        'bash <<< "echo $X"',
        'sh <<< "$CMD"',
    ],
)
def test_shell_reading_an_expanding_document_asks(policy: Policy, command: str) -> None:
    assert verdict(policy, command) == ("ask", "commands.hazard.dynamic"), command


@needs_bash
def test_bash_runs_what_an_expanding_document_becomes(tmp_path: Path) -> None:
    """Why: the outer shell expands the body, the inner one runs the result."""
    assert BASH is not None
    script = "X='; touch ran'; " + doc("echo $X", "bash")
    subprocess.run([BASH, "-c", script], cwd=tmp_path, check=False, capture_output=True)
    assert (tmp_path / "ran").exists()


def test_shell_reading_a_literal_document(policy: Policy) -> None:
    assert verdict(policy, doc("echo hi\nls -la", "bash"))[0] == "allow"
    assert verdict(policy, doc("rm -rf /", "bash")) == RM
    # A visible deny in an expanding script still denies.
    assert verdict(policy, doc("rm -rf /\necho $X", "bash")) == RM
    # An escaped '$' reaches the inner shell as '$': its script is 'echo $(rm -rf /)'.
    assert verdict(policy, doc("echo \\$(rm -rf /)", "bash")) == RM


def test_sql_client_reading_an_expanding_document_asks(policy: Policy) -> None:
    assert verdict(policy, doc("$Q", "psql"))[0] == "ask"
    assert verdict(policy, doc("select 1;", "psql"))[0] == "allow"


@needs_bash
def test_script_written_from_an_escaped_document_is_judged(policy: Policy, tmp_path: Path) -> None:
    """'cat > a.sh <<EOF' with '\\$(cmd)' writes '$(cmd)': running a.sh runs cmd."""
    assert BASH is not None
    script = doc("\\$(touch ran)", "cat > a.sh") + "\nbash a.sh"
    subprocess.run([BASH, "-c", script], cwd=tmp_path, check=False, capture_output=True)
    assert (tmp_path / "ran").exists()
    assert verdict(policy, doc("\\$(rm -rf /)", "cat > a.sh") + "\nbash a.sh") == RM


# --- differential: what bash and dash run is inside what the walker found ------------------

_FRAGMENTS = [
    "text ",
    '"',
    "'",
    "(",
    ")",
    "\\",
    "$",
    "#",
    "\n",
    ";",
    "$(m M{i})",
    "`m M{i}`",
    "$((1+2))",
    "$(( $(m M{i}) + 1 ))",
    "${x:-$(m M{i})}",
    "$((m M{i}); m M{j})",
    "\\$(m M{i})",
    "$\\\n(m M{i})",
    "$(echo ')'; m M{i})",
    '$(echo "("; m M{i})',
    "$(case a in a) m M{i};; esac)",
    '`echo \\"a;m M{i}\\"`',
    "$(m M{i} # )\nm M{j})",
    "$(echo $(m M{i}) m M{j})",
]


def _body(picks: list[int]) -> str:
    out = []
    for n, k in enumerate(picks):
        out.append(_FRAGMENTS[k].replace("{i}", str(2 * n)).replace("{j}", str(2 * n + 1)))
    return "".join(out)


def _ran(shell: str, body: str, tmp: Path) -> set[str]:
    log = tmp / "log"
    log.write_text("")
    script = 'm() { printf "%s\\n" "$1" >> log; }\ncat >/dev/null <<EOF\n' + body + "\nEOF\n"
    subprocess.run([shell, "-c", script], cwd=tmp, check=False, capture_output=True, timeout=10)
    return set(re.findall(r"M[0-9]+", log.read_text()))


@pytest.mark.parametrize("shell", [BASH, DASH], ids=["bash", "dash"])
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(picks=st.lists(st.integers(0, len(_FRAGMENTS) - 1), min_size=1, max_size=6))
def test_markers_shells_run_are_in_what_was_found(
    shell: str | None, picks: list[int], tmp_path: Path
) -> None:
    if shell is None:
        pytest.skip("shell is not installed")
    body = _body(picks)
    if "\nEOF\n" in f"\n{body}\n":
        return
    found = substitutions(body, _complete)
    ran = _ran(shell, body, tmp_path)
    if found is None:
        return  # the walker reads the whole body as shell and asks
    seen = "\n".join(found)
    missed = {marker for marker in ran if not re.search(rf"\bm {marker}\b", seen)}
    assert not missed, (body, found, ran)
