"""Parsing for the shell walker: bashlex (guarded against its hang), the retry for what it
cannot read (``time``, ``[[ ]]``, arithmetic, quoted here-doc delimiters), the syntax tree's
lists, pipelines and functions, and a simple command's redirects and here-documents.

What an attacker controls is the whole string: input the parser cannot read is an
``unparseable`` hazard, never a guess. See :mod:`runtime.policy.shell`.
"""

from __future__ import annotations

import re
from typing import Any

from runtime.policy._arith import text_assignments
from runtime.policy._arrays import rewrite_arrays
from runtime.policy._bashlex_tables import import_bashlex
from runtime.policy._braces import expand_braces
from runtime.policy._case import rewrite_cases
from runtime.policy._heredoc import expands, substitutions, unescaped
from runtime.policy._shell_model import MAX_COMMAND_CHARS, MAX_DEPTH
from runtime.policy._shell_state import WalkerState
from runtime.policy.argv import Word, literal_text

__all__ = ["ParseMixin"]

# ``import bashlex`` with its parser's tables read, not rebuilt (~90 ms a process); the
# package's ``errors`` and ``subst`` modules come with it (its parser imports them).
bashlex = import_bashlex()


def _guard_bashlex() -> None:
    """Make bashlex refuse an unclosed ``${`` instead of looping forever.

    Why: bashlex 0.18's word expansion (``subst._expandwordinternal``) moves its index to
    what ``_paramexpand`` returns, and for ``${`` without a closing ``}`` that is 0 (its
    ``str.find`` gives -1, plus one): the loop starts the word over, for ever, growing its
    output. A five-character command (``a'${'``) froze the broker, holding the GIL, in the
    middle of a policy decision. A returned index that does not move forward becomes the
    ``ParsingError`` bashlex raises for other bad substitutions; the walker's ``parse`` turns
    that into an ``unparseable`` hazard (ask or deny, never allow). Hazard: this replaces a
    private function of bashlex for the whole process; a bashlex without it (or that fixed
    it) is left as it is, and ``tests/policy/test_shell_hang.py`` fails if the hang is back.
    """
    subst = getattr(bashlex, "subst", None)
    original = getattr(subst, "_paramexpand", None)
    if original is None or getattr(original, "_runtime_guard", False):
        return

    def paramexpand(parserobj: Any, string: str, sindex: int) -> Any:
        node, end = original(parserobj, string, sindex)
        if end <= sindex:
            raise bashlex.errors.ParsingError("bad substitution: no closing '}'", string, sindex)
        return node, end

    paramexpand._runtime_guard = True  # type: ignore[attr-defined]
    subst._paramexpand = paramexpand  # type: ignore[union-attr]


_guard_bashlex()

_TIME_RE = re.compile(r"(^|[;&|(\n]\s*)time(?:\s+-p)?\s+(?![\s-])")
# 'time' followed by another option is not bash's keyword (and dash has none): it is
# /usr/bin/time, a wrapper ('time -f %e rm -rf /' runs rm). Quoting it makes it a word.
_TIME_PROGRAM_RE = re.compile(r"(^|[;&|(\n]\s*)time(?=\s+-)")
_ARITH_RE = re.compile(r"\$\(\([^()$`]*\)\)")
_QUOTED_HEREDOC_RE = re.compile(r"<<(-?)\s*(?:(['\"])(\w+)\2|\\(\w+))")
_DBRACKET_OPEN_RE = re.compile(r"(?<![^\s;&|(!])\[\[(?=\s)")
_DBRACKET_CLOSE_RE = re.compile(r"(?<=\s)\]\](?=$|[\s;&|)])")
_OUT_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
# bash opens a socket for /dev/tcp and /dev/udp whichever way the redirect points: an input
# redirect from one ('cat < /dev/tcp/host/80') is listed with the output targets, so that
# the rules on redirect targets (commands.deny.dev-tcp) see it.
_SOCKET_PATH_RE = re.compile(r"^/+dev/+(tcp|udp)/")
_IN_REDIRECTS = frozenset({"<", "<<", "<<-", "<<<"})
# A literal word holding an array subscript ('name[...]') with a command substitution in it
# ('[$(]' in a regular expression names no array).
_SUBSCRIPT_CODE_RE = re.compile(r"(?<![A-Za-z0-9_\\])[A-Za-z_][A-Za-z0-9_]*\[[^\]]*(\$\(|`)")


def _brace_words(n: Any, text: str, word: Word) -> list[Word]:
    """A command's word as the words bash passes: a literal braced word ('f{,.bak}') is
    its expansion (:mod:`runtime.policy._braces`), each one fixed; any other word is
    itself. Brace expansion applies to a command's words only, not to assignments or
    redirect targets."""
    if not word.dynamic or not hasattr(n, "pos"):
        return [word]
    expanded = expand_braces(text[n.pos[0] : n.pos[1]])
    if expanded is None:
        return [word]
    return [Word(w) for w in expanded]


def _readable(text: str) -> str:
    """``text`` without what bashlex cannot read but that holds no command. bashlex lacks
    the 'time' keyword and '[[ ]]': dropping 'time' and reading '[[ ]]' as '[ ]' removes no
    command from the text, so the retry sees at least every command that would run.
    Arithmetic without substitutions inside holds no command: a parameter stands in."""
    retry = _DBRACKET_CLOSE_RE.sub(
        "]",
        _DBRACKET_OPEN_RE.sub("[", _TIME_PROGRAM_RE.sub(r"\1\\time", _TIME_RE.sub(r"\1", text))),
    )
    retry = _ARITH_RE.sub("$_ARITH", retry)
    # bashlex has no array assignments and no 'case' (runtime/policy/_arrays.py, _case.py).
    arrays = rewrite_arrays(retry)
    retry = retry if arrays is None else arrays
    cased = rewrite_cases(retry)
    return retry if cased is None else cased


def _retry_text(text: str) -> str:
    """What :meth:`ParseMixin.parse` gives bashlex when ``text`` itself fails: see
    :func:`_readable`, and quoted here-document delimiters unquoted (bashlex rejects
    them; the walker remembers their bodies are literal)."""
    return _QUOTED_HEREDOC_RE.sub(
        lambda m: "<<" + m.group(1) + (m.group(3) or m.group(4)), _readable(text)
    )


def _parses(text: str) -> bool:
    try:
        bashlex.parse(text)
    except Exception:  # bashlex raises many types; all mean "not a whole command"
        return False
    return True


def _complete(text: str) -> bool:
    """Whether ``text`` parses as a whole command list, as :meth:`ParseMixin.parse` reads
    it (used to find where a here-document's '$(' ends)."""
    return _parses(text) or _parses(_retry_text(text))


class ParseMixin(WalkerState):
    """The syntax tree: lists, pipelines, functions, redirects (a part of the walker)."""

    def parse(self, text: str, depth: int, feeds: tuple[str, ...] = ()) -> None:
        if depth > MAX_DEPTH:
            self.hazard("unparseable", "commands nested too deeply")
            return
        if "\x00" in text:
            self.hazard("unparseable", "NUL byte in command")
            return
        if len(text) > MAX_COMMAND_CHARS:
            self.hazard("unparseable", f"command longer than {MAX_COMMAND_CHARS} characters")
            return
        if not text.strip():
            return
        self.expansion_assignments(text, depth, feeds)
        try:
            trees = bashlex.parse(text)
        except Exception as exc:  # bashlex raises many types; all mean "cannot read it"
            retry = _retry_text(text)
            # bashlex rejects quoted here-doc delimiters (<<'EOF'); their bodies are literal,
            # which is remembered so that the body is not read for substitutions.
            for m in _QUOTED_HEREDOC_RE.finditer(_readable(text)):
                self.literal_heredocs.add(m.group(3) or m.group(4))
            try:
                if retry == text:
                    raise
                trees = bashlex.parse(retry)
                text = retry
            except Exception:
                self.hazard("unparseable", f"shell parser cannot read it ({type(exc).__name__})")
                return
        for tree in trees:
            self.node(tree, text, depth, feeds)

    def expansion_assignments(self, text: str, depth: int, feeds: tuple[str, ...]) -> None:
        """Variables ``text`` sets in arithmetic ('$((N=1))', '((N++))', 'a[N=1]') and
        default expansions ('${N:=V}'), judged as 'N=V' is (:mod:`._arith`). Read from the
        text, not the tree: bashlex parses no arithmetic (the retry replaces it) and keeps a
        '${...}' expansion's text, here-documents' bodies included, unparsed."""
        found = text_assignments(text)
        if found.unknown_name:
            self.hazard("dynamic", "an expansion assigns a variable named at run time", feeds)
        if found.words:
            self.environment(found.words, depth, feeds)

    def node(self, n: Any, text: str, depth: int, feeds: tuple[str, ...]) -> None:
        if self.full():
            return
        kind = n.kind
        if kind == "for":
            self.for_loop(n, text, depth, feeds)
        elif kind == "command":
            self.command(n, text, depth, feeds, piped=False)
        elif kind == "pipeline":
            self.pipeline(n, text, depth, feeds)
        elif kind == "function":
            self.function(n, text, depth, feeds)
        elif kind in ("word", "assignment"):
            self.word(n, text, depth)
        elif kind == "compound" and getattr(n, "redirects", None):
            self.compound(n, text, depth, feeds)
        else:
            for child in self.children(n):
                self.node(child, text, depth, feeds)

    def for_loop(self, n: Any, text: str, depth: int, feeds: tuple[str, ...]) -> None:
        """'for NAME in WORDS; do ...; done' assigns each word to NAME before the body
        runs (and 'for NAME; do' each positional parameter, known at run time only): judged
        as 'NAME=WORD' is, so that 'for PATH in /tmp/bin; do ls; done' is PATH's rule's."""
        parts = list(n.parts)
        name = parts[1] if len(parts) > 1 and parts[1].kind == "word" else None
        rest = parts[2:] if name is not None else parts
        values: list[Word] | None = None  # None: no 'in': the positional parameters
        if rest and rest[0].kind == "reservedword" and rest[0].word == "in":
            values = []
            rest = rest[1:]
            while rest and rest[0].kind == "word":
                w, _ = self.word(rest[0], text, depth)
                values.extend(_brace_words(rest[0], text, w))
                rest = rest[1:]
        if name is not None:
            var, _ = self.word(name, text, depth)
            env = [
                Word(f"{var.value}={v.value}", var.dynamic or v.dynamic)
                for v in (values if values is not None else [Word("", dynamic=True)])
            ]
            self.environment(env, depth, feeds)
        for child in rest:
            self.node(child, text, depth, feeds)

    def compound(self, n: Any, text: str, depth: int, feeds: tuple[str, ...]) -> None:
        """A compound command with redirects ('{ ...; } > FILE', 'for ...; done < IN',
        '( sh ) <<< TEXT'): its targets are walked as a simple command's are (their
        substitutions, a here-document's); an input redirect feeds every command inside,
        as a pipe into it does (a shell there reads code from it); an output target is
        written with what the commands print (judged by the path rules, and a script
        written so is only known when it runs)."""
        outputs: list[Word] = []
        fed = False
        for r in n.redirects:
            target = r.output if hasattr(r.output, "kind") else None
            if r.type in _IN_REDIRECTS:
                fed = True
                heredoc = getattr(r, "heredoc", None)
                if heredoc is not None:
                    delimiter = target.word if target is not None else ""
                    self.heredoc(
                        heredoc.value.rsplit("\n", 1)[0], delimiter in self.literal_heredocs, depth
                    )
            if target is not None:
                w, _ = self.word(target, text, depth)
                if r.type in _OUT_REDIRECTS or _SOCKET_PATH_RE.match(w.value):
                    outputs.append(w)
        if fed:
            self.fed += 1
        try:
            for child in self.children(n):
                self.node(child, text, depth, feeds)
        finally:
            if fed:
                self.fed -= 1
        for w in outputs:
            if not w.dynamic:
                self.note_write(w.value, [], None, False)
        if outputs:
            self.simple(
                [],
                (),
                tuple(outputs),
                feeds=feeds,
                stdin_code=False,
                stdin=None,
                depth=depth,
                wrappers=(),
            )

    @staticmethod
    def children(n: Any) -> list[Any]:
        out: list[Any] = []
        for attr in ("parts", "list"):
            out.extend(getattr(n, attr, None) or [])
        for attr in ("command", "output"):
            child = getattr(n, attr, None)
            if child is not None and hasattr(child, "kind"):
                out.append(child)
        return out

    def pipeline(self, n: Any, text: str, depth: int, feeds: tuple[str, ...]) -> None:
        upstream: tuple[str, ...] = feeds
        first = True
        for part in n.parts:
            if part.kind in ("pipe", "reservedword"):
                continue
            if self.full():
                return
            before = len(self.commands)
            if part.kind == "command":
                self.command(part, text, depth, upstream, piped=not first)
            elif first:
                self.node(part, text, depth, upstream)
            else:
                # A compound command the pipe feeds: any command inside may read the input
                # ('curl x | (bash)', 'cat x | { true; python3; }').
                self.fed += 1
                try:
                    self.node(part, text, depth, upstream)
                finally:
                    self.fed -= 1
            upstream = upstream + tuple(c.program for c in self.commands[before:] if c.program)
            first = False

    def function(self, n: Any, text: str, depth: int, feeds: tuple[str, ...]) -> None:
        # bashlex's name node: 'function f { ...; }' starts its parts with the keyword.
        name_node = getattr(n, "name", None)
        name = str(getattr(name_node, "word", ""))
        before = len(self.commands)
        # A call's input is the body's ('f <<EOF', 'curl x | f'): any command in it may
        # read it, as in a compound command a pipe feeds.
        self.fed += 1
        try:
            for child in n.parts[1:]:
                self.node(child, text, depth, feeds)
        finally:
            self.fed -= 1
        if name:
            self.redefined.add(name)
        if name and any(c.program == name for c in self.commands[before:]):
            self.hazard("fork_bomb", f"function {name!r} calls itself (fork-bomb shape)")

    def heredoc(self, body: str, quoted: bool, depth: int) -> Word:
        """A here-document's text, as the command reads it. A quoted delimiter's body is
        literal; an unquoted one without ``$`` or a backquote is its text unescaped; an
        unquoted one that expands is known only at run time (a run-time word: a shell
        fed it asks, :meth:`shell_string`) and its command substitutions run wherever
        the document goes ('cat > f <<EOF ... $(date)'), so they are walked as commands
        (:mod:`._heredoc`). Where one cannot be delimited for certain, the whole body is
        read as shell and the call asks."""
        if quoted:
            return Word(body)
        if not expands(body):
            return Word(unescaped(body))
        found = substitutions(body, _complete)
        if found is None:
            self.hazard(
                "dynamic", "here-document body runs substitutions the walker cannot delimit"
            )
            self.parse(body, depth + 1)
        else:
            for code in found:
                self.parse(code, depth + 1)
        return Word(body, dynamic=True)

    def command(
        self, n: Any, text: str, depth: int, upstream: tuple[str, ...], *, piped: bool
    ) -> None:
        words: list[Word] = []
        assigns: list[str] = []
        redirects: list[Word] = []
        subst_feeds: list[str] = []
        stdin: Word | None = None  # a here-document's or here-string's text
        stdin_redirected = False
        for part in n.parts:
            if part.kind == "word":
                w, inner = self.word(part, text, depth)
                words.extend(_brace_words(part, text, w))
                subst_feeds.extend(inner)
                if not w.dynamic and _SUBSCRIPT_CODE_RE.search(w.value):
                    # 'let "a[$(rm -rf /)]=1"', 'test -v "a[...]"', 'read "a[...]"': bash
                    # evaluates a quoted array subscript where it reads the word as a
                    # variable name or an expression, and runs its substitutions.
                    self.stored_code(w.value, depth, upstream)
            elif part.kind == "assignment":
                assigns.append(part.word.split("=", 1)[0].rstrip("+"))
                w, _ = self.word(part, text, depth)
                self.env_values([w], depth, upstream)
            elif part.kind == "redirect":
                rtype = part.type
                target = part.output if hasattr(part.output, "kind") else None
                if rtype in _IN_REDIRECTS:
                    stdin_redirected = True
                    heredoc = getattr(part, "heredoc", None)
                    if heredoc is not None:
                        delimiter = target.word if target is not None else ""
                        stdin = self.heredoc(
                            heredoc.value.rsplit("\n", 1)[0],
                            delimiter in self.literal_heredocs,
                            depth,
                        )
                if target is not None:
                    w, inner = self.word(target, text, depth)
                    subst_feeds.extend(inner)
                    if rtype == "<<<":
                        stdin = w
                    if rtype in _OUT_REDIRECTS or _SOCKET_PATH_RE.match(w.value):
                        redirects.append(w)
        for w in redirects:
            if not w.dynamic:
                self.note_write(
                    w.value, words, literal_text(stdin), stdin is not None and not stdin.dynamic
                )
        self.simple(
            words,
            tuple(assigns),
            tuple(redirects),
            feeds=upstream + tuple(subst_feeds),
            stdin_code=piped or stdin_redirected or self.fed > 0,
            stdin=stdin,
            depth=depth,
            wrappers=(),
        )
