"""Tolerant LaTeX → operator tree (OPT) parser (Zhong 2023 thesis §3.1, Figures 3.1–3.2).

`parse_latex` never raises. Operators become internal nodes, operands leaves (typed by
`symbols.leaf_token`). Commutative operators (ADD, MUL, EQ, …) keep unordered children and flatten
associative chains (`a+b+c` → one ADD); non-commutative ones (FRAC, LT, APPLY, …) get `rank1`, `rank2`, …
children; scripts give SUBSUP with BASE/SUB/SUP children (Zhong 2023 thesis, Fig. 3.1). Subtraction is ADD with a NEG
child; `a/b` is FRAC. Parenthesised sub-expressions stay separate subtrees (Zhong 2023 thesis, Fig. 3.2: `(a+bc)+xy`).

Robustness bounds: at most `lexer.MAX_TOKENS` tokens are parsed; recursion is counted and nesting
deeper than `MAX_DEPTH` is collapsed (skipped to the end of its group). Every recovery — truncation,
collapse, unbalanced or unmatched delimiters, missing arguments, stray tokens — is recorded, and the
result is then a partial tree with `complete=False` and the reasons in `error`. The parser is a
recursive-descent/precedence-climbing parser with no backtracking, so time is linear in the tokens.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mathscout.limits import MAX_TREE_DEPTH
from mathscout.structure.lexer import LEXER, Token, tokenize
from mathscout.structure.opt import Node, ParseResult
from mathscout.structure.symbols import (
    ACCENTS,
    ADDITIVE,
    ALIASES,
    ALL_CLOSERS,
    BIG_OPERATORS,
    BINARY_OPS,
    CLOSERS,
    COMMA,
    CONSTANTS,
    DELIMITED_TOKENS,
    DELIMITER_ALIASES,
    DOTS,
    ENVIRONMENTS_WITH_SPEC,
    FONTS,
    FUNCTION_LETTERS,
    FUNCTIONS,
    GREEK,
    INFIX_FRACTIONS,
    MATRIX_ENVIRONMENTS,
    MULTIPLICATIVE,
    NEGATED_RELATIONS,
    OPENERS,
    PREFIX_OPS,
    RELATION_LIKE,
    SCRIPTED_BASES,
    SCRIPTED_BIG_OPERATORS,
    SYMBOLS,
    TRANSPARENT,
    TWO_ARG_OPERATORS,
    BinaryOp,
    leaf_token,
)

MAX_DEPTH = 60  # recursion budget: ≤ ~300 Python frames, ≈ 15–30 nesting levels (real formulas use < 30)
MAX_ERRORS = 5
NO_MATH = "no math content"  # the error of a formula with nothing to parse (`&`, `\\quad`, `$$`)

_END: Token = ("", "", -1, -1)
_RANKS = [f"rank{i}" for i in range(256)]

# binary operators, plus every relation negated with `\not`
_OPS: dict[str, BinaryOp] = dict(BINARY_OPS)
for _sym, _op in BINARY_OPS.items():
    if _sym in RELATION_LIKE and _sym not in NEGATED_RELATIONS:
        _OPS["\\not" + _sym] = _op._replace(token="N" + _op.token, symbol="\\not" + _sym)
_CANONICAL_SYMBOLS = {"ADD": "+", "MUL": "\\cdot", "COMMA": ","}  # one symbol for each flattened chain
_MID = _OPS["\\mid"]
_PARALLEL = _OPS["\\parallel"]
_TEXT_SEPARATOR = BinaryOp(COMMA, "COMMA", "\\text", False, True, separator=True)
_TEXT_OPS = {"mod": _OPS["\\bmod"], "and": _TEXT_SEPARATOR}
_CONNECTORS = frozenset(
    "if|for|and|or|where|otherwise|when|with|s.t.|st|then|as|since|thus|hence|so|else|but|on|in|is|are|of|all|"
    "any|some|let|to|at|by|iff|whenever|given|which|that|has|have|be|not|also|while|because|i.e.|e.g.|a.e.|"
    "resp.|such that|for all|for every|for each|for some|for any|if and only if|else if|we have|and so|so that|"
    "in which|there exists|there is|provided that|almost everywhere|with respect to|as well as".split("|")
)
_QVAR_IN_TEXT = re.compile(r"\\qvar\s*\{([^{}]*)\}")

# what can start an operand: "atom", "func", "bigop", "font" (decided by its argument), "bar" (| opens or
# closes), "opsym" (an operator symbol that is an operand only where one is expected), None (cannot)
_CLASS: dict[str, str | None] = {}
for _v in (*_OPS, *PREFIX_OPS, *INFIX_FRACTIONS, *ALL_CLOSERS, "\\right", "\\not"):
    _CLASS[_v] = None
for _v in (
    *OPENERS,
    "{",
    "\\left",
    "^",
    "_",
    "'",
    "\\pmod",
    *GREEK,
    *CONSTANTS,
    DOTS,
    *TWO_ARG_OPERATORS,
    "\\sqrt",
    *ACCENTS,
    *TRANSPARENT,
    *SCRIPTED_BASES,
):
    _CLASS[_v] = "atom"
for _v in SYMBOLS:
    _CLASS[_v] = "opsym" if _v in _OPS else "atom"
_CLASS["!"] = "opsym"
_CLASS.update(dict.fromkeys(FONTS, "font"))
_CLASS.update(dict.fromkeys(FUNCTIONS, "func"))
_CLASS.update(dict.fromkeys(BIG_OPERATORS, "bigop"))
_CLASS.update({"|": "bar", "\\|": "bar"})

_GROUP_OPEN = frozenset({"{", "(", "[", "\\{", "\\langle", "\\lfloor", "\\lceil"})
_GROUP_CLOSE = frozenset({"}", ")", "]", "\\}", "\\rangle", "\\rfloor", "\\rceil"})
_ROW_KINDS = ("env", "top")
_LINE_CONTINUATIONS = frozenset({*RELATION_LIKE, "+", "-", "\\pm", "\\mp", "\\cdot", "\\times"})
_NOT_SYMBOL_OPS = frozenset({",", ";", "&", "\\\\", "\\quad", "\\qquad", ".", ":"})


def parse_latex(latex: str, lexer: int = LEXER) -> ParseResult:
    """Parse one formula's LaTeX (without `$` delimiters) into an OPT with lexer version `lexer` (a structure index's
    formulas and queries: the version its manifest records, `lexer.recorded_lexer`); never raises."""
    if not isinstance(latex, str):
        return ParseResult(None, False, "not a string")
    try:
        result = _Parser(latex, lexer).parse()
    except RecursionError:  # a safety net: MAX_DEPTH keeps recursion well below the interpreter limit
        return ParseResult(None, False, "nesting too deep")
    if result.tree is not None and _flatten_deep(
        result.tree
    ):  # chains built in loops (`x^x^x…`) nest without recursing
        flattened = f"formula tree deeper than {MAX_TREE_DEPTH} levels flattened"
        return ParseResult(result.tree, False, "; ".join(filter(None, [result.error, flattened])))
    return result


def _flatten_deep(tree: Node, limit: int = MAX_TREE_DEPTH) -> bool:
    """Replace, in place and without recursion, each subtree rooted at depth `limit` by one MUL of its leaves (as
    `_Parser._collapse` does); whether any was."""
    flattened = False
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        for i, child in enumerate(node.children):
            if not child.children:
                continue
            if depth + 1 < limit:
                stack.append((child, depth + 1))
                continue
            leaves = list(child.leaves())
            node.children[i] = leaves[0] if len(leaves) == 1 else Node("MUL", "\\cdot", leaves, True)
            flattened = True
    return flattened


def _rank(i: int) -> str:
    return _RANKS[i] if i < 256 else f"rank{i}"


def _ranked(token: str, symbol: str, operands: Sequence[Node | None]) -> Node | None:
    """A non-commutative operator: operands under rank nodes (positions kept when one is missing)."""
    children = [Node(_rank(i), "", [o]) for i, o in enumerate(operands, 1) if o is not None]
    return Node(token, symbol, children) if children else None


def _apply(head: Node, args: list[Node]) -> Node:
    """Function application: APPLY(rank1 = function, rank2… = arguments)."""
    applied = _ranked("APPLY", head.symbol, [head, *args])
    assert applied is not None  # the head is an operand
    return applied


def _lines(nodes: list[Node | None]) -> Node | None:
    kept = [n for n in nodes if n is not None]
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else Node("LINES", "\\\\", kept, True)


def _normalize(tokens: list[Token]) -> list[Token]:
    """Token rewrites that need a little context: `\\not=` → `\\neq`, `\\stackrel{?}{=}` → `=`,
    `:=` → `\\coloneqq`; alignment `&` dropped and `\\\\` line breaks inside one equation joined
    (outside matrix-like environments)."""
    out: list[Token] = []
    envs: list[str] = []
    i, n = 0, len(tokens)
    while i < n:
        tok = tokens[i]
        kind, val = tok[0], tok[1]
        i += 1
        if kind == "B":
            envs.append(val.rstrip("*"))
        elif kind == "E":
            if envs:
                envs.pop()
        elif kind != "c":
            pass
        elif val == "\\not":
            if i < n and tokens[i][1] in RELATION_LIKE:
                nxt = tokens[i]
                i += 1
                out.append(("c", NEGATED_RELATIONS.get(nxt[1], "\\not" + nxt[1]), tok[2], nxt[3]))
            continue
        elif val in SCRIPTED_BASES:
            relation, after = _annotated_relation(tokens, i)
            if relation is not None:
                out.append(("c", relation, tok[2], tokens[after - 1][3]))
                i = after
                continue
        elif val == ":" and i < n and tokens[i][1] == "=":
            out.append(("c", "\\coloneqq", tok[2], tokens[i][3]))
            i += 1
            continue
        elif val == "&" or val == "\\\\":
            in_matrix = bool(envs) and envs[-1] in MATRIX_ENVIRONMENTS
            if not in_matrix:
                if val == "&":
                    continue
                j = i
                while j < n and tokens[j][1] == "&":
                    j += 1
                follows = tokens[j][1] if j < n else ""
                precedes = out[-1][1] if out else ""
                if follows in _LINE_CONTINUATIONS or precedes in _LINE_CONTINUATIONS or not follows or not precedes:
                    continue
            if i < n and tokens[i][1] == "[":  # `\\\\[2pt]` spacing
                j = i + 1
                while j < n and j < i + 6 and tokens[j][0] in "ln":
                    j += 1
                if j < n and tokens[j][1] == "]":
                    i = j + 1
        out.append(tok)
    return out


def _annotated_relation(tokens: list[Token], i: int) -> tuple[str | None, int]:
    """For `\\stackrel{A}{R}` / `\\overset{A}{R}` with R a single relation: (R, index after it)."""
    n = len(tokens)
    if i >= n:
        return None, i
    if tokens[i][1] == "{":  # skip {A} (bounded lookahead)
        depth, j = 0, i
        while j < n and j < i + 60:
            v = tokens[j][1]
            if tokens[j][0] == "c":
                if v == "{":
                    depth += 1
                elif v == "}":
                    depth -= 1
                    if depth == 0:
                        break
            j += 1
        else:
            return None, i
        j += 1
    else:
        j = i + 1
    if j < n and tokens[j][1] in RELATION_LIKE:
        return tokens[j][1], j + 1
    if j + 2 < n and tokens[j][1] == "{" and tokens[j + 2][1] == "}" and tokens[j + 1][1] in RELATION_LIKE:
        return tokens[j + 1][1], j + 3
    return None, i


def _bar_layout(tokens: list[Token]) -> tuple[dict[str, list[int]], dict[int, int]]:
    """For `|` and `\\|` bars (not `\\left|`/`\\right|` delimiters), `\\langle` and `\\rangle`: the index of
    the next one after each position, and for each bar the index closing the group that contains it
    (len(tokens) at top level)."""
    n = len(tokens)
    closing: dict[int, int] = {}
    enclosing: dict[int, int] = {}  # bar index -> index of the opener of its innermost group (-1: none)
    stack: list[int] = []
    bars: list[int] = []
    angles: list[int] = []  # \\langle and \\rangle positions (a ⟩ may close a Dirac ket |ψ⟩)
    i = 0
    while i < n:
        kind, v = tokens[i][0], tokens[i][1]
        if v == "\\rangle" or v == "\\langle":  # not grouping here: kets |ψ⟩ and bras ⟨ψ| are unbalanced
            angles.append(i)
        elif kind == "B" or (kind == "c" and (v in _GROUP_OPEN or v == "\\left")):
            stack.append(i)
            i += 1 if v == "\\left" else 0
        elif kind == "E" or (kind == "c" and (v in _GROUP_CLOSE or v == "\\right")):
            if stack:
                closing[stack.pop()] = i
            i += 1 if v == "\\right" else 0
        elif kind == "c" and (v == "|" or v == "\\|"):
            enclosing[i] = stack[-1] if stack else -1
            bars.append(i)
        i += 1
    marks = {b: tokens[b][1] for b in bars} | {a: tokens[a][1] for a in angles}
    next_bar = {v: [n] * (n + 1) for v in ("|", "\\|", "\\rangle", "\\langle")}
    following = dict.fromkeys(next_bar, n)
    for p in range(n - 1, -1, -1):
        if p in marks:
            following[marks[p]] = p
        for v, arr in next_bar.items():
            arr[p] = following[v]
    group_end = {b: closing.get(enclosing[b], n) for b in bars}
    return next_bar, group_end


def _connector_text(text: str) -> str | None:
    """The normalised text if `\\text{…}` is prose between formulas: a known connector (`if`, `for all`)
    or words set off by spaces (`\\text{ provided }`); `\\text{Var}`, `\\text{area}` are operands."""
    norm = " ".join(text.replace(",", " ").split()).lower().strip(".;:")
    if not norm or norm in _CONNECTORS or norm in _TEXT_OPS:
        return norm
    spaced = text[:1].isspace() or text[-1:].isspace() or " " in norm
    return norm if spaced and norm.replace(" ", "").replace("-", "").isalpha() else None


class _Parser:
    def __init__(self, latex: str, lexer: int = LEXER) -> None:
        lexed = tokenize(latex, lexer=lexer)
        self.errors: list[str] = list(lexed.errors)
        self.toks = _normalize(lexed.tokens)
        self.n = len(self.toks)
        self.pos = 0
        self.ctx: list[str] = ["top"]
        self.depth = 0
        # Parenthesised nodes (never flattened into a parent), by id; the nodes are held here so that
        # their ids cannot be reused by other nodes while this parse runs.
        self.grouped: dict[int, Node] = {}
        has_bars = "|" in latex or "vert" in latex or "Vert" in latex
        self.next_bar, self.bar_group_end = _bar_layout(self.toks) if has_bars else ({}, {})

    # --- driver ---------------------------------------------------------------------------------
    def parse(self) -> ParseResult:
        if self.n == 0:
            return ParseResult(None, False, "; ".join(self.errors) or NO_MATH)
        rows = self._rows()
        tree = _lines([self._join(row) for row in rows])
        if tree is None and not self.errors:
            self._error(NO_MATH)
        return ParseResult(tree, not self.errors, "; ".join(self.errors))

    def _error(self, message: str) -> None:
        if len(self.errors) < MAX_ERRORS and message not in self.errors:
            self.errors.append(message)

    def _peek(self) -> Token:
        return self.toks[self.pos] if self.pos < self.n else _END

    def _leaf(self, token: str, symbol: str, tok: Token, wildcard: bool = False) -> Node:
        return Node(token, symbol, [], False, wildcard, tok[2], tok[3])

    @staticmethod
    def _join(parts: list[Node | None]) -> Node | None:
        kept = [p for p in parts if p is not None]
        if not kept:
            return None
        return kept[0] if len(kept) == 1 else _ranked("COMMA", ",", kept)

    # --- rows, expressions, binary operators ----------------------------------------------------
    def _rows(self) -> list[list[Node | None]]:
        """Cells separated by `&`, rows by `\\\\` (top level and environments)."""
        rows: list[list[Node | None]] = [[]]
        while True:
            rows[-1].append(self._expr())
            tok = self._peek()
            if tok[0] == "c" and tok[1] == "&":
                self.pos += 1
            elif tok[0] == "c" and tok[1] == "\\\\":
                self.pos += 1
                rows.append([])
            else:
                return rows

    def _expr(self) -> Node | None:
        """A whole group's content: stops at a closer of any open group; stray tokens are skipped."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.depth -= 1
            return self._collapse()
        parts: list[Node | None] = []
        while True:
            before = self.pos
            parts.append(self._binary(COMMA))
            tok = self._peek()
            if tok is _END:
                break
            if tok[0] == "c" and tok[1] in INFIX_FRACTIONS:  # {a \over b}, {n \choose k}
                self.pos += 1
                numerator = self._join(parts)
                denominator = self._expr()
                self.depth -= 1
                token = INFIX_FRACTIONS[tok[1]]
                symbol = {"FRAC": "\\frac", "BINOM": "\\binom"}.get(token, tok[1])
                return _ranked(token, symbol, [numerator, denominator])
            if self._is_closer(tok):
                break
            if self.pos == before:
                self.pos += 1
                self._error(f"unexpected {tok[1] or tok[0]}")
        self.depth -= 1
        return self._join(parts)

    def _is_closer(self, tok: Token) -> bool:
        kind, v = tok[0], tok[1]
        if kind == "E":
            return "env" in self.ctx
        if kind != "c" or v not in ALL_CLOSERS:
            return False
        if v == "|":  # closes |x|, or a bra ⟨ψ| when no ⟩ follows in the group
            return self.ctx[-1] == "bar" or (self.ctx[-1] == "angle" and self._bra_closer())
        if v == "\\|":
            return self.ctx[-1] == "norm"
        if v == "&" or v == "\\\\":
            return self.ctx[-1] in _ROW_KINDS
        return any(v in CLOSERS[k] for k in self.ctx)

    def _peek_op(self) -> BinaryOp | None:
        if self.pos >= self.n:
            return None
        kind, v = self.toks[self.pos][0], self.toks[self.pos][1]
        if kind == "T":
            norm = _connector_text(v)
            return None if norm is None else _TEXT_OPS.get(norm, _TEXT_SEPARATOR)
        if kind != "c":
            return None
        if v == "|":
            return None if self._is_closer(self.toks[self.pos]) else _MID
        if v == "\\|":
            return None if self.ctx[-1] == "norm" else _PARALLEL
        op = _OPS.get(v)
        if op is not None and (v == "&" or v == "\\\\") and self.ctx[-1] in _ROW_KINDS:
            return None
        return op

    def _binary(self, min_level: int) -> Node | None:
        """Precedence climbing over the levels of `symbols.BINARY_OPS`; chains are folded per level."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.depth -= 1
            return self._collapse()
        lhs = self._prefix()
        op = self._peek_op()
        while op is not None and op.level >= min_level:
            level = op.level
            pairs: list[tuple[BinaryOp, Node | None]] = []
            while op is not None and op.level == level:
                self.pos += 1
                pairs.append((op, self._binary(level + 1)))
                op = self._peek_op()
            lhs = self._fold(lhs, pairs)
        self.depth -= 1
        return lhs

    def _fold(self, lhs: Node | None, pairs: list[tuple[BinaryOp, Node | None]]) -> Node | None:
        """`a op1 b op2 c …` at one level: runs of one flattenable operator become one node (a+b-c →
        ADD(a, b, NEG c); a<b<c → LT(rank1..3)); mixed runs nest left to right (a<b≤c → LE(LT(a,b), c))."""
        current: BinaryOp | None = None
        operands: list[Node | None] = [lhs]
        for op, rhs in pairs:
            if op.wrap and rhs is not None:
                rhs = Node(op.wrap, op.symbol, [rhs])
            if current is None:
                current = op
            elif op.token != current.token or not current.flatten:
                operands = [self._build(current, operands)]
                current = op
            operands.append(rhs)
        return self._build(current, operands) if current is not None else lhs

    def _build(self, op: BinaryOp, operands: list[Node | None]) -> Node | None:
        if op.separator:
            operands = [o for o in operands if o is not None]
            if len(operands) <= 1:
                return operands[0] if operands else None
        symbol = _CANONICAL_SYMBOLS.get(op.token, op.symbol)
        if not op.commutative:
            return _ranked(op.token, symbol, operands)
        children: list[Node] = []
        for o in operands:
            if o is None:
                continue
            if o.token == op.token and o.commutative and id(o) not in self.grouped:
                children.extend(o.children)
            else:
                children.append(o)
        return Node(op.token, symbol, children, True) if children else None

    def _prefix(self) -> Node | None:
        """Unary operators (`-x`, `\\pm`, `\\neg`, `\\forall x \\in A`), then implicit multiplication."""
        tok = self._peek()
        kind, v = tok[0], tok[1]
        if kind == "c":
            if v in PREFIX_OPS:
                token, level = PREFIX_OPS[v]
                self.pos += 1
                symbol = v
                if v == "\\exists" and self._peek()[1] == "!":
                    self.pos += 1
                    symbol = "\\exists!"
                operand = self._binary(level)
                if operand is None:
                    return self._leaf("SYM", symbol, tok)
                return Node(token, symbol, [operand]) if token else operand
            if v in _OPS and v not in _NOT_SYMBOL_OPS:  # an operator where an operand belongs: `f(\cdot)`, `x^{*}`
                nxt = self.toks[self.pos + 1] if self.pos + 1 < self.n else _END
                if (
                    nxt is _END
                    or nxt[1] == ","
                    or self._is_closer(nxt)
                    or (_OPS[v].level >= ADDITIVE and nxt[0] == "c" and nxt[1] in _OPS)
                ):
                    self.pos += 1
                    return self._leaf("SYM", v, tok)
        return self._implicit(False)

    # --- implicit multiplication and factors ----------------------------------------------------
    def _implicit(self, stop_at_function: bool) -> Node | None:
        """Juxtaposed factors (`2xy`, `\\sin x \\cos y`) → MUL."""
        factors: list[Node] = []
        toks, n = self.toks, self.n
        while self.pos < n:
            tok = toks[self.pos]
            cls = self._atom_class(tok, bool(factors))
            if cls is None:
                break
            if stop_at_function and (cls == "func" or cls == "bigop" or (factors and self._differential())):
                break
            before = self.pos
            node = self._factor(tok, cls)
            if node is not None:
                factors.append(node)
            elif self.pos == before:
                break
        if not factors:
            return None
        if len(factors) == 1:
            return factors[0]
        children: list[Node] = []
        for f in factors:
            if f.token == "MUL" and f.commutative and id(f) not in self.grouped:
                children.extend(f.children)
            else:
                children.append(f)
        return Node("MUL", "\\cdot", children, True)

    def _differential(self) -> bool:
        """At `dx` (a `d` then a letter): a function's argument ends there (`\\ln x\\,dx`)."""
        tok = self.toks[self.pos]
        return tok[1] == "d" and tok[0] == "l" and self.pos + 1 < self.n and self.toks[self.pos + 1][0] == "l"

    def _atom_class(self, tok: Token, have_operand: bool) -> str | None:
        """What `tok` starts: 'atom', 'func' (function name), 'bigop', or None (not an operand)."""
        kind, v = tok[0], tok[1]
        if kind == "c":
            cls = _CLASS.get(v, "atom")  # unknown commands and characters are operands
            if cls is None or cls == "atom" or cls == "func" or cls == "bigop":
                return cls
            if cls == "bar":
                if have_operand and self._is_closer(tok):
                    return None  # closes the enclosing |…| (or a bra)
                # `|` opens |…| only if another bar follows inside the same group: P(A|B), d|n stay binary
                return "atom" if self._bar_group(v) is not None else None
            if cls == "font":
                return "func" if FONTS[v] == "" and self._font_word(self.pos) is not None else "atom"
            return None if have_operand else "atom"  # opsym
        if kind == "T":
            if _connector_text(v) is not None:  # prose: an operand only when it stands alone in a group
                if have_operand or not v.strip():
                    return None
                nxt = self.toks[self.pos + 1] if self.pos + 1 < self.n else _END
                return "atom" if nxt is _END or self._is_closer(nxt) else None
            word = v.strip()
            if word.isalpha() and len(word) > 1 and self.pos + 1 < self.n and self.toks[self.pos + 1][1] == "(":
                return "func"  # \\text{Var}(X)
            return "atom"
        if kind == "F":
            return "bigop" if self._operator_name(v) in BIG_OPERATORS else "func"
        return None if kind == "E" else "atom"

    def _bar_group(self, v: str) -> str | None:
        """What the bar at the current position opens: 'bar'/'norm' if a matching bar follows inside the same
        group, 'ket' if a `\\rangle` does (`|ψ\\rangle`), else None."""
        end = self.bar_group_end.get(self.pos, self.n)
        following = self.next_bar.get(v)
        next_bar = following[self.pos + 1] if following is not None else self.n
        if v == "|" and self.ctx[-1] != "angle":
            ket_end = self._ket_end()
            if ket_end < min(end, next_bar, self.next_bar["\\langle"][self.pos + 1]):
                return "ket"
        return OPENERS[v] if next_bar < end else None

    def _bra_closer(self) -> bool:
        end = self.bar_group_end.get(self.pos, self.n)
        return not self._ket_end() < end

    def _ket_end(self) -> int:
        """Index of the next `\\rangle` after the current position (len(tokens) if none is known)."""
        kets = self.next_bar.get("\\rangle")
        return kets[self.pos + 1] if kets is not None else self.n

    def _factor(self, tok: Token, cls: str) -> Node | None:
        if cls == "func":
            return self._function()
        if cls == "bigop":
            self.pos += 1
            name = self._operator_name(tok[1]) if tok[0] == "F" else tok[1]
            return self._big_operator(BIG_OPERATORS[name], name, tok)
        node = self._scripts(self._atom())
        if node is not None and self._peek()[1] == "(" and self._looks_applied(node):
            node = self._scripts(_apply(node, self._paren_args()))
        return node

    def _looks_applied(self, node: Node) -> bool:
        """`f(x)`, `u(x,t)`, `f'(x)`, `f_n(x)` are applications; `a(b+c)` is a product."""
        if id(node) in self.grouped:
            return False
        base = node
        if node.token == "SUBSUP":
            if node.children[0].token != "BASE":
                return False
            base = node.children[0].children[0]
        if base.token != "VAR" or not base.is_leaf:
            return False
        if base.symbol in FUNCTION_LETTERS:
            return True
        i = self.pos + 1  # otherwise only for simple arguments: letters separated by commas
        toks, n = self.toks, self.n
        for _ in range(8):
            if i >= n or not (toks[i][0] == "l" or toks[i][1] in GREEK):
                return False
            i += 1
            if i < n and toks[i][1] == ")":
                return True
            if i >= n or toks[i][1] != ",":
                return False
            i += 1
        return False

    def _paren_args(self) -> list[Node]:
        content = self._atom()
        if content is None:
            return []
        if content.token in ("TUPLE", "INTERVAL"):
            return [rank.children[0] for rank in content.children]
        return [content]

    def _function(self) -> Node | None:
        """`\\sin x`, `\\log_2 n`, `\\sin^2(x)`, `\\operatorname{rank} A`, `\\max(a,b)` → APPLY."""
        tok = self._peek()
        kind, v = tok[0], tok[1]
        if kind == "c" and v in FONTS:
            font_word = self._font_word(self.pos)
            assert font_word is not None  # _atom_class calls a font a function only before a word
            word, after = font_word
            self.pos = after
            name = ALIASES.get("\\" + word, "\\" + word)
            tok = (tok[0], tok[1], tok[2], self.toks[after - 1][3])
        else:
            self.pos += 1
            name = self._operator_name(v) if kind == "F" else ("\\" + v.strip() if kind == "T" else v)
        if name in SCRIPTED_BIG_OPERATORS and self._peek()[1] == "_":
            return self._big_operator(SCRIPTED_BIG_OPERATORS[name], name, tok)
        head = self._scripts(self._leaf("FUNC", name, tok))
        assert head is not None  # scripts on a leaf
        nxt = self._peek()
        nv = nxt[1]
        found: list[Node] | list[Node | None]
        if nv == "(" or (nv == "\\left" and self.pos + 1 < self.n and self.toks[self.pos + 1][1] == "("):
            found = self._paren_args()
        elif nv == "{" and nxt[0] == "c":
            found = [self._brace()]
        elif nxt is not _END and self._atom_class(nxt, False) == "atom":
            found = [self._implicit(True)]
        else:
            found = []
        args = [a for a in found if a is not None]
        if not args:
            return head
        return self._scripts(_apply(head, args))

    @staticmethod
    def _operator_name(text: str) -> str:
        name = re.sub(r"\\[,;:! ]|\s|\*", "", text)
        name = "\\" + name.lstrip("\\")
        return ALIASES.get(name, name)

    def _big_operator(self, token: str, symbol: str, tok: Token) -> Node:
        """`\\sum_{i=1}^n body` → SUM(rank1 body, SUB, SUP); the body extends over the product."""
        sub = sup = None
        while self.pos < self.n:
            v = self.toks[self.pos][1]
            if v == "_" and sub is None:
                self.pos += 1
                sub = self._script_arg()
            elif v == "^" and sup is None:
                self.pos += 1
                sup = self._script_arg()
            elif v == "'":
                self.pos += 1
            else:
                break
        body = None
        nxt = self._peek()
        if nxt is not _END and (nxt[1] in PREFIX_OPS or self._atom_class(nxt, False) is not None):
            body = self._binary(MULTIPLICATIVE)
        children = []
        if body is not None:
            children.append(Node("rank1", "", [body]))
        if sub is not None:
            children.append(Node("SUB", "", [sub]))
        if sup is not None:
            children.append(Node("SUP", "", [sup]))
        return Node(token, symbol, children) if children else self._leaf("FUNC", symbol, tok)

    # --- scripts --------------------------------------------------------------------------------
    def _scripts(self, base: Node | None) -> Node | None:
        """Sub/superscripts in any order (`x_i^2` == `x^2_i`), primes and factorials after an atom."""
        sub = sup = primes = None
        toks = self.toks
        while self.pos < self.n:
            tok = toks[self.pos]
            if tok[0] != "c":
                break
            v = tok[1]
            if v == "_":
                if sub is not None:
                    base, sup, primes = _subsup(base, sub, sup, primes), None, None
                self.pos += 1
                at = self.pos
                sub = self._script_arg()
                if sub is None and self.pos == at:  # an empty group `x^{}` is fine
                    self._error("missing subscript")
            elif v == "^":
                if sup is not None:
                    base, sub, primes = _subsup(base, sub, sup, primes), None, None
                self.pos += 1
                at = self.pos
                sup = self._script_arg()
                if sup is None and self.pos == at:  # an empty group `x^{}` is fine
                    self._error("missing superscript")
            elif v == "'":
                if sup is not None or primes is not None:
                    base, sub, sup = _subsup(base, sub, sup, primes), None, None
                primes = self._primes()
            elif v == "!":
                base = _subsup(base, sub, sup, primes)
                sub = sup = primes = None
                self.pos += 1
                base = Node("FACT", "!", [base]) if base is not None else self._leaf("SYM", "!", tok)
            else:
                break
        return _subsup(base, sub, sup, primes)

    def _primes(self) -> Node:
        first = self._peek()
        count = 0
        while self.pos < self.n and self.toks[self.pos][1] == "'":
            self.pos += 1
            count += 1
        return Node("PRIME", "'" * count, [], False, False, first[2], self.toks[self.pos - 1][3])

    def _script_arg(self) -> Node | None:
        """One script argument: a group, a single digit/letter, a command atom, or an operator symbol."""
        tok = self._peek()
        kind, v = tok[0], tok[1]
        if kind == "n":
            return self._first_digit()
        if kind == "l":
            self.pos += 1
            return self._leaf("VAR", v, tok)
        if kind == "c":
            if v == "{":
                return self._brace()
            if v == "'":
                return self._primes()
            if v == "-" or v == "+":  # tolerate `x^-1` as x^{-1}
                self.pos += 1
                nxt = self._peek()
                if nxt[0] in ("l", "n") or (nxt[0] == "c" and _CLASS.get(nxt[1]) == "atom" and nxt[1] not in "^_'"):
                    arg = self._script_arg()
                    return Node("NEG", "-", [arg]) if v == "-" and arg is not None else arg
                return self._leaf("SYM", v, tok)
            if (v in _OPS and v not in _NOT_SYMBOL_OPS) or v == "!":  # x^*, A^\perp, 90^\circ
                self.pos += 1
                return self._leaf("SYM", v, tok)
        if tok is _END or self._atom_class(tok, False) is None or v in ("^", "_"):
            return None
        return self._atom()

    def _first_digit(self) -> Node:
        """A command argument or script takes one digit: `x^23` is x^2·3, `\\frac12` is 1/2."""
        kind, v, start, end = self.toks[self.pos]
        if len(v) == 1:
            self.pos += 1
            return Node("NUM", v, [], False, False, start, end)
        self.toks[self.pos] = (kind, v[1:], start + 1, end)
        return Node("NUM", v[0], [], False, False, start, start + 1)

    # --- atoms ----------------------------------------------------------------------------------
    def _atom(self) -> Node | None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.depth -= 1
            return self._collapse()
        node = self._atom_inner()
        self.depth -= 1
        return node

    def _atom_inner(self) -> Node | None:
        tok = self._peek()
        kind, v = tok[0], tok[1]
        if kind == "l":
            self.pos += 1
            return self._leaf("VAR", v, tok)
        if kind == "n":
            self.pos += 1
            return self._leaf("NUM", v, tok)
        if kind == "Q":
            self.pos += 1
            return self._leaf("QVAR", v.strip(), tok, wildcard=True)
        if kind == "T":
            self.pos += 1
            return self._text(tok)
        if kind == "F":
            self.pos += 1
            return self._leaf("FUNC", self._operator_name(v), tok)
        if kind == "B":
            return self._environment()
        if kind != "c":
            return None
        if v == "{":
            return self._brace()
        if v in OPENERS:
            return self._delimited()
        if v == "\\left":
            return self._left()
        if v == "'":
            return self._primes()
        if v == "^" or v == "_" or v in ALL_CLOSERS or v == "\\right":
            return None
        self.pos += 1
        if v in TWO_ARG_OPERATORS:
            first, second = self._arg(v), self._arg(v)
            return _ranked(TWO_ARG_OPERATORS[v], v, [first, second])
        if v == "\\sqrt":
            index = self._option() if self._peek()[1] == "[" else None
            radicand = self._arg(v)
            if index is not None:
                return _ranked("ROOT", v, [radicand, index])
            return Node("SQRT", v, [radicand]) if radicand is not None else None
        if v in ACCENTS:
            return self._accent(v, tok)
        if v in FONTS:
            return self._font(v, tok)
        if v in TRANSPARENT:
            return self._arg(v)
        if v in SCRIPTED_BASES:  # \overset{a}{b} → b^a, \underset{a}{b} → b_a
            annotation, base = self._arg(v), self._arg(v)
            if annotation is None:
                return base
            label = "SUB" if v == "\\underset" else "SUP"
            children = ([Node("BASE", "", [base])] if base is not None else []) + [Node(label, "", [annotation])]
            return Node("SUBSUP", "", children)
        if v == "\\pmod":
            arg = self._arg(v)
            return Node("PMOD", v, [arg]) if arg is not None else None
        if v[0] == "\\" and v not in _CLASS:  # unknown macro: a symbol, or a function of its {…} arguments
            args: list[Node | None] = []
            while len(args) < 3 and self._peek()[1] == "{":
                args.append(self._brace())
            kept = [a for a in args if a is not None]
            if kept:
                return _apply(self._leaf("FUNC", v, tok), kept)
            return self._leaf("VAR", v, tok)
        return self._leaf(leaf_token(v), v, tok)

    def _arg(self, command: str) -> Node | None:
        """A command argument: a `{…}` group or a single token (`\\frac12`, `\\sqrt x`)."""
        tok = self._peek()
        if tok is _END or tok[0] == "E":
            self._error(f"missing argument of {command}")
            return None
        if tok[0] == "n":
            return self._first_digit()
        if tok[0] == "c":
            if tok[1] == "{":
                return self._brace()
            if _CLASS.get(tok[1], "atom") is None or tok[1] in "^_":
                self._error(f"missing argument of {command}")
                return None
        return self._atom()

    def _brace(self) -> Node | None:
        self.pos += 1
        self.ctx.append("brace")
        node = self._expr()
        self.ctx.pop()
        tok = self._peek()
        if tok[0] == "c" and tok[1] == "}":
            self.pos += 1
        else:
            self._error("unbalanced {")
        return node

    def _option(self) -> Node | None:
        """The `[n]` of `\\sqrt[n]{x}`."""
        self.pos += 1
        self.ctx.append("option")
        node = self._expr()
        self.ctx.pop()
        if self._peek()[1] == "]":
            self.pos += 1
        else:
            self._error("unclosed [ in \\sqrt")
        return node

    def _delimited(self) -> Node | None:
        """(…), […], \\{…\\}, |…|, \\|…\\|, \\langle…\\rangle, floors and ceilings."""
        open_tok = self._peek()
        opener = open_tok[1]
        group = OPENERS[opener]
        if group == "bar":
            group = self._bar_group(opener) or group
        self.pos += 1
        self.ctx.append(group)
        content = self._expr()
        self.ctx.pop()
        tok = self._peek()
        closer = ""
        if tok[0] == "c" and (tok[1] in CLOSERS[group] or (group == "angle" and tok[1] == "|")):
            self.pos += 1
            closer = tok[1]
        else:
            self._error(f"unclosed {opener}")
        return self._wrap(opener, closer, content, group)

    def _wrap(self, opener: str, closer: str, content: Node | None, group: str | None = None) -> Node | None:
        group = group or OPENERS.get(opener)
        if content is None:
            return Node("CONST", "\\emptyset") if group == "set" else None
        if group is None or group == "paren":
            if group == "paren" and content.token == "COMMA" and id(content) not in self.grouped:
                content.token = "TUPLE" if opener == "(" and closer == ")" else "INTERVAL"
                content.symbol = opener + closer
            self.grouped[id(content)] = content
            return content
        token = "BRA" if group == "angle" and closer == "|" else DELIMITED_TOKENS[group]
        if content.token == "COMMA" and id(content) not in self.grouped:
            if group == "set":  # sets are unordered
                return Node(token, opener, [rank.children[0] for rank in content.children], True)
            if group == "angle":  # ⟨a, b⟩
                content.token, content.symbol = token, opener
                return content
        return Node(token, opener, [content], group == "set")

    def _left(self) -> Node | None:
        """`\\left( … \\right)` with any delimiters (`\\left.`, mismatched pairs)."""
        self.pos += 1
        tok = self._peek()
        if tok is _END:
            self._error("\\left without delimiter")
            return None
        self.pos += 1
        opener = DELIMITER_ALIASES.get(tok[1], tok[1])
        self.ctx.append("left")
        content = self._expr()
        self.ctx.pop()
        closer = ""
        if self._peek()[1] == "\\right":
            self.pos += 1
            if self._peek() is not _END:
                closer = DELIMITER_ALIASES.get(self._peek()[1], self._peek()[1])
                self.pos += 1
        else:
            self._error("\\left without \\right")
        if opener == "\\{" and closer in (".", "") and content is not None and content.token == "MATRIX":
            content.token = "CASES"
            return content
        if opener == "." or opener not in OPENERS:
            if content is not None:
                self.grouped[id(content)] = content
            return content
        if OPENERS[opener] in ("bar", "norm") and closer not in (opener, "."):
            closer = opener
        return self._wrap(opener, closer, content)

    def _environment(self) -> Node | None:
        """Matrices and cases → MATRIX/CASES of ROWs (ranked cells); alignments → their lines."""
        name = self._peek()[1].rstrip("*")
        self.pos += 1
        if name in ENVIRONMENTS_WITH_SPEC:
            if self._peek()[1] == "[":
                self._skip_group("[", "]")
            if self._peek()[1] == "{":
                self._skip_group("{", "}")
        self.ctx.append("env")
        rows = self._rows()
        self.ctx.pop()
        if self._peek()[0] == "E":
            self.pos += 1
        else:
            self._error(f"\\begin{{{name}}} without \\end")
        token = MATRIX_ENVIRONMENTS.get(name)
        if token is None:
            return _lines([self._join(row) for row in rows])
        row_nodes = [_ranked("ROW", "", row) for row in rows if any(c is not None for c in row)]
        return _ranked(token, name, row_nodes)

    def _skip_group(self, opener: str, closer: str) -> None:
        depth = 0
        while self.pos < self.n:
            v = self.toks[self.pos][1]
            self.pos += 1
            if v == opener:
                depth += 1
            elif v == closer:
                depth -= 1
                if depth <= 0:
                    return

    def _text(self, tok: Token) -> Node | None:
        """`\\text{…}` as an operand: a one-letter text is a variable, otherwise a TEXT leaf."""
        content = tok[1]
        if "\\qvar" in content:
            leaves = [self._leaf("QVAR", name.strip(), tok, wildcard=True) for name in _QVAR_IN_TEXT.findall(content)]
            rest = " ".join(_QVAR_IN_TEXT.sub(" ", content).split()).lower()
            if rest:
                leaves.insert(0, self._leaf("TEXT", rest[:64], tok))
            return leaves[0] if len(leaves) == 1 else Node("MUL", "\\cdot", leaves, True)
        words = " ".join(content.split())
        if not words:
            return None
        if len(words) == 1 and words.isalpha():
            return self._leaf("VAR", words, tok)
        if words.replace(".", "", 1).isdigit():
            return self._leaf("NUM", words, tok)
        return self._leaf("TEXT", words.lower()[:64], tok)

    def _accent(self, accent: str, tok: Token) -> Node | None:
        """`\\hat{x}` is a decorated leaf; `\\overline{a+b}` a BAR node over its argument."""
        arg = self._arg(accent)
        if arg is None:
            return None
        if arg.is_leaf and arg.token in ("VAR", "NUM", "CONST", "SYM"):
            arg.symbol = f"{accent}{{{arg.symbol}}}"
            arg.start, arg.end = tok[2], self.toks[self.pos - 1][3]
            return arg
        return Node(accent[1:].upper(), accent, [arg])

    def _font_word(self, at: int) -> tuple[str, int] | None:
        """If `{word}` (≥ 2 letters) follows the font command at `at`: (word, position after `}`)."""
        i = at + 1
        toks, n = self.toks, self.n
        if i >= n or toks[i][1] != "{":
            return None
        j = i + 1
        while j < n and j < i + 40 and toks[j][0] == "l" and len(toks[j][1]) == 1:
            j += 1
        if j < n and toks[j][1] == "}" and j - i > 2:
            return "".join(t[1] for t in toks[i + 1 : j]), j + 1
        return None

    def _font(self, font: str, tok: Token) -> Node | None:
        """`\\mathbb{R}` → VAR `\\mathbb{R}`; `\\mathrm{x}` → VAR x (plain fonts are dropped)."""
        prefix = FONTS[font]
        if prefix == "":
            word = self._font_word(self.pos - 1)
            if word is not None:
                self.pos = word[1]
                name = ALIASES.get("\\" + word[0], "\\" + word[0])
                return Node("FUNC", name, [], False, False, tok[2], self.toks[self.pos - 1][3])
        arg = self._arg(font)
        if arg is None:
            return None
        if arg.is_leaf:  # the leaf spans the whole `\mathbb{R}`
            arg.start, arg.end = tok[2], self.toks[self.pos - 1][3]
        if not prefix:
            return arg
        stack = [arg]
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children)
            elif node.token in ("VAR", "NUM") and len(node.symbol) == 1:
                node.symbol = f"{prefix}{{{node.symbol}}}"
        return arg

    def _collapse(self) -> Node | None:
        """Flatten a too-deeply nested group: its operands (up to its closing token) become one MUL."""
        self._error(f"nesting deeper than {MAX_DEPTH} collapsed")
        balance = 0
        leaves: list[Node] = []
        toks = self.toks
        while self.pos < self.n:
            tok = toks[self.pos]
            kind, v = tok[0], tok[1]
            if kind == "B" or (kind == "c" and (v in _GROUP_OPEN or v == "\\left")):
                if v == "\\left":
                    self.pos += 1
                balance += 1
            elif kind == "E" or (kind == "c" and (v in _GROUP_CLOSE or v == "\\right")):
                if balance == 0:
                    break
                if v == "\\right":
                    self.pos += 1
                balance -= 1
            elif balance == 0 and kind == "c" and v in ("&", "\\\\", "|", "\\|") and self._is_closer(tok):
                break
            elif kind in ("l", "n") or (kind == "c" and (v in GREEK or v in CONSTANTS)):
                leaves.append(self._leaf(leaf_token(v) if kind == "c" else ("VAR" if kind == "l" else "NUM"), v, tok))
            self.pos += 1
        if len(leaves) <= 1:
            return leaves[0] if leaves else None
        return Node("MUL", "\\cdot", leaves, True)


def _subsup(base: Node | None, sub: Node | None, sup: Node | None, primes: Node | None) -> Node | None:
    """SUBSUP(BASE, SUB, SUP) (Zhong 2023 thesis, Fig. 3.1); primes are a superscript (`f'` → SUP PRIME)."""
    if primes is not None:
        sup = primes if sup is None else Node("MUL", "\\cdot", [primes, sup], True)
    if sub is None and sup is None:
        return base
    children = []
    if base is not None:
        children.append(Node("BASE", "", [base]))
    if sub is not None:
        children.append(Node("SUB", "", [sub]))
    if sup is not None:
        children.append(Node("SUP", "", [sup]))
    return Node("SUBSUP", "", children)
