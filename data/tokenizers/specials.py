"""Special tokens written in a text: found whole, longest first, and kept whole.

    pattern = specials.pattern(["<s>", "</s>", "<mask>"])
    parts = pattern.split(text)         # text, token, text, token, ..., text
    tokens = specials.tokens_of(parts, tokenize_text)

Between the split and `tokens_of` a tokenizer may trim the texts around a
token (HF's `lstrip` / `rstrip` of added tokens).
"""

import re

__all__ = ["pattern", "tokens_of"]


def pattern(tokens):
    """A compiled `(token|...)` matching any of `tokens` (the longest first, so that a
    token containing another wins); None for no tokens. Its one group makes `split`
    keep the tokens: text, token, text, ..., text."""
    tokens = sorted(tokens, key=len, reverse=True)
    if not tokens:
        return None
    return re.compile("(%s)" % "|".join(re.escape(token) for token in tokens))


def tokens_of(parts, tokenize):
    """The tokens of `parts` (a `pattern`'s split): every special token (odd index)
    whole, `tokenize(text)` of every non-empty text between them."""
    tokens = []
    for i, part in enumerate(parts):
        if i % 2:
            tokens.append(part)
        elif part:
            tokens.extend(tokenize(part))
    return tokens
