"""Seed lists as users write them on the command line.

>>> parse_seeds("0-2,7,1")
[0, 1, 2, 7]
>>> parse_seeds("3")
[3]
"""

from __future__ import annotations


def parse_seeds(text: str) -> list[int]:
    """``"0-19"``, ``"0,3,5"`` or a mix, as ascending ints without repeats. Raises ValueError for a
    malformed part, a descending range or an empty list (argparse reports it as an invalid value)."""
    out: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a, b = (int(lo), int(hi)) if sep else (int(part), int(part))
        except ValueError:
            raise ValueError(f"bad seed {part!r}: use e.g. 0-19 or 1,3,5") from None
        if b < a:
            raise ValueError(f"bad seed range {part!r}: it runs backwards")
        out.update(range(a, b + 1))
    if not out:
        raise ValueError(f"no seeds in {text!r}")
    return sorted(out)
