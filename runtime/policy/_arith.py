"""Variables a command sets without ``NAME=VALUE`` syntax: arithmetic and ``${N:=V}``.

Bash assigns inside an arithmetic expression (``$((N=1))``, ``((N+=1))``, ``$[N++]``, ``let
N=1``, an indexed array's subscript ``a[N=1]`` wherever a name is read as a variable, the
offset of ``${x:N=1}``, the operands of ``[[ A -eq B ]]``, and every value assigned to a
``declare -i`` variable) and in a default assignment (``${N:=V}``, ``${N=V}``). With ``set
-a``, or when the name is already exported (``PATH``, ``BASH_ENV``), the value reaches
every later program, as ``N=V`` does: the walker judges them as that plain assignment
(:meth:`runtime.policy._shell_code.CodeMixin.environment`).

:func:`text_assignments` reads them from a command's text as written. Quotes inside an
expression are dropped before its operands are read (bash removes double quotes there:
``(( "PATH"=5 ))`` and ``(( P""ATH=5 ))`` assign PATH). A form inside single quotes or a
quoted here-document assigns nothing but its names are still read (over-approximation: a
name a rule denies then asks or denies, never the reverse).

The run-time rule: an assignment whose target is built at run time (``$((x$i=1))``,
``${!ref:=V}``) names no variable known here, which the walker treats as it does any name
only known at run time; so does an expansion anywhere in the text of ``((...))``,
``$((...))``, ``$[...]`` or ``let`` (:data:`RUNTIME_TEXT`): it is expanded into the
expression before it is read, so ``i=1,N=2; ((x=$i))`` assigns N; and so does a value known
at run time given to a ``declare -i`` variable (:mod:`._integer_vars`). This is deliberate
for everyday arithmetic too: ``((count += $n))``, ``while (( i < $max ))`` and ``let "x = $a
+ 1"`` ask, because ``$n`` is whatever text the variable holds at that point (read from a
file, a command's output), and bash evaluates that text as an expression; telling a number
from ``PATH=5`` would need the value's origin, data flow the walker does not track. (The
same loop written with a bare name, ``((count += n))``, is allowed: bash reads n's value
as an expression again too, the case not followed below.) The rule does not apply to text bash
reads as literal here (:mod:`._literal_spans`): an awk or jq program in single quotes
(``awk '{ if ((n = split($0, a)) > 1) ... }'``) expands nothing; shell code in single
quotes given to ``bash -c``, ``sh -c`` or ``eval`` is parsed again by the walker, where the
rule applies.

Not followed: an arithmetic expression reads a variable's value as an expression again
(``x=N=1; : $((x))``, ``[[ x -eq 1 ]]``), and an expansion in a subscript or an ``[[ -eq
]]`` operand (``${a[$i]}``, ``[[ $n -gt 0 ]]``, everyday code) is read only for the names
it assigns in its own text: what such a value holds is data flow the walker does not track.
"""

from __future__ import annotations

import functools
import re

from runtime.policy._integer_vars import (
    INTEGER_DECL_RE,
    integer_variables,
    obscured_declaration,
    runtime_values,
)
from runtime.policy._literal_spans import LiteralSpans, literal_spans
from runtime.policy.argv import Word

__all__ = ["RUNTIME_TEXT", "Found", "arith_targets", "text_assignments"]

#: What makes an arithmetic expression's text known only at run time: an expansion
#: ('$x', '${x}', '$(cmd)') or a command substitution in backquotes.
RUNTIME_TEXT = frozenset("$`")

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# An assignment operator in an arithmetic expression: '=' (not '==', '<=', '>=', '!='),
# 'OP=' and '++'/'--' (on the operand before or after it).
_ASSIGN_OP_RE = re.compile(r"<<=|>>=|[-+*/%&|^]=|\+\+|--|(?<![=!<>])=(?!=)")
# The characters an operand's name may be made of, with those of an expansion in it
# ('x$i', '${x}', '`cmd`'): an operand holding an expansion is named at run time.
_OPERAND_RE = re.compile(r"[A-Za-z0-9_${}`]+")
_OPERAND_TAIL_RE = re.compile(r"[A-Za-z0-9_${}`]+$")
_EXPANSION_CHARS = frozenset("${}`")
# Where an arithmetic expression starts: '((' (a command, 'for ((', '$(('), '$['.
_ARITH_OPEN_RE = re.compile(r"\(\(|\$\[")
# An indexed array's subscript: 'NAME[' not preceded by a name's character, or an element's
# in a compound assignment ('a=([N=1]=x)').
_SUBSCRIPT_RE = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*\[|(?<=[(\s])\[")
# '${' and the parameter: an indirection ('!'), a name or special parameter, a subscript.
_PARAM_RE = re.compile(r"(!?)([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])(\[[^\]]*\])?")
_ARITH_TEST_RE = re.compile(r"\s-(eq|ne|lt|le|gt|ge)\s")
# Quoting inside an arithmetic expression: bash removes double quotes from it ('((
# "PATH"=5 ))', '$(( P""ATH=5 ))' and '${a["PATH"=5]}' assign PATH) and refuses single
# quotes and backslashes, which other shells may not. All are dropped before the operands
# are read, so that no quote splits a name; a '$' before a quote with them ('$"PATH"' is a
# translated string: PATH where no message catalogue translates it).
_QUOTING_RE = re.compile(r"\$?[\"']|\\")
# What makes a default value's text something the walker does not expand here.
_RUNTIME_VALUE_CHARS = frozenset("$`\"'\\")


class Found:
    """What a text assigns: ``NAME=VALUE`` words (a value only known at run time is a
    dynamic word), and whether some assignment's name is only known at run time."""

    def __init__(self) -> None:
        self.words: list[Word] = []
        self.unknown_name = False

    def arithmetic(self, expr: str, *, whole: bool = False, literal: bool = False) -> None:
        """The names the arithmetic expression ``expr`` assigns, to values known at run
        time only. ``whole``: ``expr`` is a whole expression (not a subscript or an
        operand), whose expansions make it known only at run time. ``literal``: ``expr``
        is text bash does not evaluate here (single quotes, a quoted here-document): its
        names are kept, over-read, but its '$' is no expansion."""
        names, runtime = arith_targets(expr)
        if not literal and (runtime or (whole and RUNTIME_TEXT.intersection(expr))):
            self.unknown_name = True
        for name in names:
            self.words.append(Word(f"{name}=", dynamic=True))


def _closing(text: str, start: int, opener: str, closer: str, depth: int) -> int:
    """Where the text that opened ``depth`` levels of ``opener`` just before ``start`` is
    closed: the index of the closer that closes the outermost of them (the end of ``text``
    when it is not closed). One pass over the text per bracket kind (:func:`_matches`): a
    scan from every opener was quadratic in a text of many openers."""
    return _matches(text, opener, closer)[start - depth]


@functools.lru_cache(maxsize=8)
def _matches(text: str, opener: str, closer: str) -> tuple[int, ...]:
    """For every index of ``text`` holding ``opener``, the index of the closer that closes
    it (``len(text)`` when none does); other indexes hold ``len(text)`` too."""
    out = [len(text)] * len(text)
    stack: list[int] = []
    for i, c in enumerate(text):
        if c == opener:
            stack.append(i)
        elif c == closer and stack:
            out[stack.pop()] = i
    return tuple(out)


#: How far before an assignment operator its operand is looked for. An operand, or a
#: subscript skipped, reaching that far is taken for one named at run time (a name is never
#: that long): reading the whole text before each of many operators was quadratic.
_OPERAND_WINDOW = 1024


def _operand_before(expr: str, end: int) -> str:
    """The operand that ends at ``end`` (an array element's subscript skipped), looked for
    in the :data:`_OPERAND_WINDOW` characters before it; one that may reach past them is
    returned marked as named at run time ('$...')."""
    lo = max(0, end - _OPERAND_WINDOW)
    head = expr[lo:end].rstrip()
    if head.endswith("]"):
        depth = 0
        for i in range(len(head) - 1, -1, -1):
            depth += {"]": 1, "[": -1}.get(head[i], 0)
            if depth == 0:
                head = head[:i].rstrip()
                break
        else:
            return "$" if lo else ""  # its '[' is before the window (or nowhere)
    m = _OPERAND_TAIL_RE.search(head)
    if m is None:
        return ""
    return "$" + m.group(0) if lo and m.start() == 0 else m.group(0)


def _operand_after(expr: str, start: int) -> str:
    m = _OPERAND_RE.match(expr[start:].lstrip())
    return m.group(0) if m else ""


def _operands(expr: str) -> list[str]:
    """The operands the assignment operators in ``expr`` assign to ('++'/'--' either side)."""
    out: list[str] = []
    for m in _ASSIGN_OP_RE.finditer(expr):
        out.append(_operand_before(expr, m.start()))
        if m.group(0) in ("++", "--"):
            out.append(_operand_after(expr, m.end()))
    return [o for o in out if o]


def arith_targets(expr: str) -> tuple[list[str], bool]:
    """The variables the arithmetic expression ``expr`` assigns ('a=1, b+=2, c++', 'a[i]=1'
    is 'a'), and whether some assignment's target is built at run time ('x$i=1',
    '${p}++'). An operand that is no name (a number) assigns nothing (bash refuses it).
    Quotes are dropped first (:data:`_QUOTING_RE`): '"PATH"=5' and 'P""ATH=5' assign PATH."""
    operands = _operands(_QUOTING_RE.sub("", expr))
    runtime = any(_EXPANSION_CHARS.intersection(o) for o in operands)
    return [o for o in operands if _NAME_RE.fullmatch(o)], runtime


def _arith_spans(text: str, found: Found, spans: LiteralSpans) -> None:
    covered = 0  # an expression inside one already read was read with it (its names, '$')
    for m in _ARITH_OPEN_RE.finditer(text):
        if m.start() < covered:
            continue
        if m.group(0) == "$[":
            end = _closing(text, m.end(), "[", "]", 1)
        else:
            end = _closing(text, m.end(), "(", ")", 2)
        covered = end
        literal = spans.holds(m.start(), end)
        found.arithmetic(text[m.end() : end], whole=True, literal=literal)


def _subscripts(text: str, found: Found, spans: LiteralSpans) -> None:
    covered = 0  # as in _arith_spans: reading each nested one again was quadratic
    for m in _SUBSCRIPT_RE.finditer(text):
        if m.start() < covered:
            continue
        end = _closing(text, m.end(), "[", "]", 1)
        if m.group(0) == "[" and not text.startswith(("]=", "]+="), end):
            continue  # a bare '[' that is no element's subscript ('[ -f x ]', a glob)
        covered = end
        found.arithmetic(text[m.end() : end], literal=spans.holds(m.start(), end))


#: A run-time default value is kept in its word up to this many characters (it is matched
#: as dynamic); copying each nested one whole was quadratic.
_VALUE_KEPT = 4096


def _parameter_expansions(
    text: str, found: Found, spans: LiteralSpans, integers: frozenset[str]
) -> None:
    """'${N:=V}' and '${N=V}' assign N; the offset and length of '${x:OFF:LEN}' are
    arithmetic. Nested expansions are found on their own (every '${' is read); an offset's
    expression inside one already read was read with it."""
    if "${" not in text:
        return  # nothing to read (and no index of the text to build)
    special = _next_runtime_char(text)
    covered = 0
    for m in re.finditer(r"\$\{", text):
        end = _closing(text, m.end(), "{", "}", 1)
        literal = spans.holds(m.start(), end)
        p = _PARAM_RE.match(text, m.end(), end)
        if p is None:
            continue
        at = p.end()
        if text.startswith(":=", at, end) or text.startswith("=", at, end):
            start = at + (2 if text[at] == ":" else 1)
            runtime = special[start] < end
            if p.group(1):  # '${!ref:=V}': the variable ref names, at run time
                found.unknown_name = found.unknown_name or not literal
            elif _NAME_RE.fullmatch(p.group(2)):
                value = text[start : min(end, start + _VALUE_KEPT) if runtime else end]
                found.words.append(Word(f"{p.group(2)}={value}", dynamic=runtime))
                # An integer variable's value is an expression: one known at run time
                # only may assign any variable.
                if runtime and p.group(2) in integers and not literal:
                    found.unknown_name = True
        elif (
            text.startswith(":", at, end)
            and text[at + 1 : at + 2] not in ("-", "=", "?", "+")
            and m.start() >= covered
        ):
            covered = end
            found.arithmetic(text[at + 1 : end], literal=literal)


def _next_runtime_char(text: str) -> list[int]:
    """For every index of ``text`` (and its end), the index of the first character at or
    after it that makes a value known at run time only (``len(text)`` when none)."""
    out = [len(text)] * (len(text) + 1)
    nxt = len(text)
    for i in range(len(text) - 1, -1, -1):
        if text[i] in _RUNTIME_VALUE_CHARS:
            nxt = i
        out[i] = nxt
    return out


def _arith_tests(text: str, found: Found, spans: LiteralSpans) -> None:
    """'[[ A -eq B ]]' (and -ne, -lt, ...) reads A and B as arithmetic expressions. Each
    '[[' to the next ']]', found by str.find (a lazy regex tried every '[[' to the end of a
    text with no ']]': quadratic)."""
    i = text.find("[[")
    while i >= 0:
        j = text.find("]]", i + 2)
        if j < 0:
            return  # no '[[' after this one is closed either
        body = text[i + 2 : j]
        if _ARITH_TEST_RE.search(body):
            found.arithmetic(body, literal=spans.holds(i, j + 2))
        i = text.find("[[", j + 2)


def text_assignments(text: str) -> Found:
    """What the shell text ``text`` assigns in arithmetic and default expansions."""
    found = Found()
    spans = literal_spans(text)
    integers = frozenset[str]()
    if INTEGER_DECL_RE.search(text):
        # A 'declare -i' variable's every assignment is an arithmetic expression
        # ('declare -i n; n=PATH=1'): the whole text is read as one for the names it
        # assigns (over-read: its '$' may be anything), and a value known only at run
        # time given to such a variable is the run-time rule's (:mod:`._integer_vars`).
        found.arithmetic(text, literal=True)
        declared = integer_variables(text, spans)
        if declared is None or runtime_values(text, declared, spans):
            found.unknown_name = True
        integers = declared or frozenset()
    if obscured_declaration(text, spans):  # '\\declare -i n; n=$(cat cfg)'
        found.arithmetic(text, literal=True)
        found.unknown_name = True
    _arith_spans(text, found, spans)
    _subscripts(text, found, spans)
    _arith_tests(text, found, spans)
    _parameter_expansions(text, found, spans, integers)
    return found
