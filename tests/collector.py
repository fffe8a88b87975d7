"""The cyclic garbage collector off for a block of a test, for checks that what is dropped is freed by reference
counting alone.

>>> import gc
>>> from tests.collector import collector_off
>>> with collector_off():
...     gc.isenabled()
False
>>> gc.isenabled()
True
"""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def collector_off():
    """The collector off (after one collection of what came before, so that earlier garbage is not counted), then
    on again if it was on."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
