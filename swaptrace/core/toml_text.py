"""TOML written by hand (device files, runtime profiles): strings and comments that stay valid whatever they hold."""

from __future__ import annotations

#: TOML's short escapes (toml.io, v1.0.0, "String"); any other control character is written \uXXXX
_TOML_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def toml_string(s: str) -> str:
    """``s`` as a TOML basic string: quotes and backslashes escaped, and every control character (U+0000 to
    U+001F and U+007F, which TOML does not allow as they are) escaped."""
    out = []
    for ch in s:
        if ch in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_comment(text: str) -> str:
    """``text`` as a TOML comment line: a control character (a newline would end the comment) becomes a space."""
    return "# " + "".join(" " if (ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7F else ch for ch in text)
