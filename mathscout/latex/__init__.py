"""LaTeX handling: math tokens for BM25 (tokens.py) and the unification tables behind them (commands.py)."""

from mathscout.latex.tokens import analyze, lex, math_tokens, query_terms

__all__ = ["analyze", "lex", "math_tokens", "query_terms"]
