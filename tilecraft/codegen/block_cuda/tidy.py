"""Parentheses the expression printers add and C does not need, removed from printed lines.

The printers parenthesize every operation they print (`(a + b)`, `(x_ / 4)`): composing text
stays correct without precedence bookkeeping. This pass removes the pairs whose removal cannot
change how C parses the line:

    a parenthesized name or number where an operand starts   `((bz_) * 1024)` -> `(bz_ * 1024)`
      (not after a name or `>`, where it is a call's argument list, nor before `(` or a name,
      where it is a cast)
    a whole index, call argument or assigned value            `S_[(k_ % 2)]`   -> `S_[k_ % 2]`
      (between `[` and `]`, `(` or `,` and `,` or `)`, an assignment and `;`; no top-level comma)
    a pair directly inside another pair                       `((x + 1))`      -> `(x + 1)`
    an operand of + - * / % whose operators bind tighter      `(a * 8) + b`    -> `a * 8 + b`
      (or as tight, on the left: `(a - b) + c`; shifts, bitwise and relational operators, where
      C's precedence reads badly, keep theirs)

Preprocessor lines, comments and string or character literals are left as they are.
"""

from __future__ import annotations

_OPERAND_START = set("([,=+-*/%&|^?:!~<")
_ARITH = {"+": 12, "-": 12, "*": 13, "/": 13, "%": 13}
_TWO = ("<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "->", "::", "++", "--", "+=", "-=",
        "*=", "/=", "%=", "&=", "|=", "^=")
_LEVEL = {"<<": 11, ">>": 11, "<": 10, "<=": 10, ">": 10, ">=": 10, "==": 9, "!=": 9, "&": 8,
          "^": 7, "|": 6, "&&": 5, "||": 4, "?": 3, ":": 3, ",": 1, **_ARITH}
_POSTFIX = ("->", "::", "++", "--")  # parts of an operand, not operators between operands
_NAME = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")


def tidy_source(source: str) -> str:
    """`source` with the redundant parentheses of every line removed."""
    return "\n".join(tidy_line(line) for line in source.split("\n"))


def tidy_line(line: str) -> str:
    if "(" not in line or line.lstrip().startswith("#"):
        return line
    code, rest = _split_comment(line)
    while True:
        new = _strip_once(code)
        if new == code:
            return code + rest
        code = new


def _outside_literals(text: str):
    """(position, character) of the characters of `text` outside string and char literals."""
    quote = None
    i = 0
    while i < len(text):
        c = text[i]
        if quote is not None:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        else:
            yield i, c
        i += 1


def _split_comment(line: str) -> tuple[str, str]:
    """(code, `// comment`) of a line; quotes in the code hide what they contain."""
    if '"' not in line and "'" not in line:
        i = line.find("//")
        return (line, "") if i < 0 else (line[:i], line[i:])
    for i, _ in _outside_literals(line):
        if line.startswith("//", i):
            return line[:i], line[i:]
    return line, ""


def _pairs(code: str) -> list[tuple[int, int]]:
    """Matching (open, close) positions of the parentheses outside literals; [] if unbalanced."""
    stack, pairs = [], []
    for i, c in _outside_literals(code):
        if c == "(":
            stack.append(i)
        elif c == ")":
            if not stack:
                return []
            pairs.append((stack.pop(), i))
    return pairs if not stack else []


def _before(code: str, i: int) -> tuple[str, str]:
    """The last two non-blank characters before position i ('' where none)."""
    j = i - 1
    while j >= 0 and code[j] == " ":
        j -= 1
    k = j - 1
    while k >= 0 and code[k] == " ":
        k -= 1
    return (code[j] if j >= 0 else ""), (code[k] if k >= 0 else "")


def _after(code: str, i: int) -> str:
    j = i + 1
    while j < len(code) and code[j] == " ":
        j += 1
    return code[j] if j < len(code) else ""


def _atom(text: str) -> bool:
    return bool(text) and all(c in _NAME for c in text) and not text.startswith(".")


def _top_level_comma(code: str, lo: int, hi: int) -> bool:
    depth = 0
    for c in code[lo:hi]:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            return True
    return False


def _redundant(code: str, lo: int, hi: int) -> bool:
    prev, prev2 = _before(code, lo)
    nxt = _after(code, hi)
    inner = code[lo + 1:hi].strip()
    if _atom(inner):
        return prev in _OPERAND_START and nxt != "(" and nxt not in _NAME
    if _top_level_comma(code, lo + 1, hi):
        return False
    if prev == "[" and nxt == "]":
        return True
    if prev in ("(", ",") and nxt in (")", ","):
        return True
    if _assigns(prev, prev2) and nxt == ";":
        return True
    return _by_precedence(code, lo, hi)


def _after_keyword(code: str, lo: int) -> bool:
    """The operator before position lo follows `return` (or another word that is no operand)."""
    words = code[:lo].rstrip()[:-1].split()
    return bool(words) and words[-1] in ("return", "case", "else", "do")


def _assigns(prev: str, prev2: str) -> bool:
    """`prev` ends an assignment operator (`=`, `+=`, ...; not `==`, `<=`, ...)."""
    return prev == "=" and prev2 not in ("=", "!", "<", ">")


def _by_precedence(code: str, lo: int, hi: int) -> bool:
    """Whether the pair (lo, hi) is an operand of + - * / % (or stands alone in a list or an
    index) whose own operators bind at least as tightly as the operators around it."""
    prev, prev2 = _before(code, lo)
    nxt = _after(code, hi)
    if prev in _ARITH:
        if prev2 in _OPERAND_START or prev2 in ("", ">") or _after_keyword(code, lo):
            return False  # a unary minus or a dereference: keep
        left = _ARITH[prev]
    elif prev in ("(", "[", ",") or _assigns(prev, prev2):
        left = 0
    else:
        return False
    if nxt in _ARITH:
        j = code.index(nxt, hi + 1)
        if code[j:j + 2] in _TWO:
            return False  # `->`, `++`, `+=`, ...
        right = _ARITH[nxt]
    elif nxt in (")", "]", ",", ";"):
        right = 0
    else:
        return False
    inner, ops = _loosest(code[lo + 1:hi])
    if (left or right) and ops & {"/", "%"}:
        return False  # `(i / 8) * 8` reads better than `i / 8 * 8`
    return inner > left and inner >= right


def _loosest(text: str) -> tuple[int, set]:
    """The precedence of the loosest-binding operator outside nested brackets of the C
    expression `text` (16 where there is none; 0 where unsure), and those operators."""
    level, depth, i, operand, ops = 16, 0, 0, False, set()
    while i < len(text):
        c = text[i]
        if c in "\"'":
            return 0, ops
        if c in "([{" or c == "<" and i and text[i - 1] in _NAME:  # (`cast<float>`)
            depth += 1
            operand = True
        elif c in ")]}" or c == ">" and depth and (text[i - 1] in _NAME or text[i - 1] == "*"):
            depth -= 1
            if depth < 0:
                return 0, ops
        elif depth or c == " ":
            pass
        elif c in _NAME:
            operand = True
        elif text[i:i + 2] in _POSTFIX:
            i += 1
        elif text[i:i + 2] in _LEVEL or c in _LEVEL:
            op = text[i:i + 2] if text[i:i + 2] in _LEVEL else c
            if operand:  # binary
                level = min(level, _LEVEL[op])
                ops.add(op)
            elif op not in ("-", "+", "*", "&"):
                return 0, ops
            i += len(op) - 1
            operand = False
        elif c in "!~":
            operand = False
        else:
            return 0, ops  # `=`, `.` after a bracket, anything unexpected
        i += 1
    return level, ops


def _strip_once(code: str) -> str:
    """`code` without the redundant pairs that do not nest in one another (the outermost)."""
    drop: set[int] = set()
    taken: list[tuple[int, int]] = []
    for lo, hi in sorted(_pairs(code)):
        if any(a < lo and hi < b for a, b in taken):
            continue  # inside a pair removed in this round: judged again on the new text
        if _redundant(code, lo, hi):
            drop.update((lo, hi))
            taken.append((lo, hi))
    if not drop:
        return code
    cuts = sorted(drop)
    return "".join(code[a + 1:b] for a, b in zip([-1, *cuts], [*cuts, len(code)]))
