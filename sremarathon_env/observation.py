"""The core observation's JSON texts: a deterministic encoder, lists and texts cut to a size, and the alert
history kept as entries in history order with what its bounded list needs (`AlertRows`).

>>> rows = AlertRows.of([("firing", dumps({"alertname": "A"})), ("resolved", dumps({"alertname": "B"}))])
>>> rows.alerts_json(1000)
'[{"alertname":"A"},{"alertname":"B"}]'
>>> bounded_text("x" * 100, 40)
'xxxxxxxxxxxxxx..."[truncated 100 chars]"'
"""

from __future__ import annotations

import json
from bisect import bisect_right
from itertools import accumulate, compress
from typing import Any

#: ``json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)`` without building an
#: encoder per call (``json.dumps`` with these arguments is exactly ``JSONEncoder(...).encode``)
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def dumps(x: Any) -> str:
    """Deterministic compact ASCII JSON (sorted keys); anything non-JSON becomes a string.

    >>> print(dumps({"b": float("nan"), "a": [1, None], "c": {1}}))
    {"a":[1,null],"b":NaN,"c":"{1}"}
    """
    return _ENCODER.encode(x)


def bounded_json_list(items: list[str], cap: int) -> str:
    """Join already-serialised JSON items into a list of at most ``cap`` characters, dropping the
    oldest (first) items and putting ``{"omitted_oldest": n}`` first when some were dropped.

    >>> bounded_json_list(['1', '2', '3'], 100)
    '[1,2,3]'
    >>> items = ['"%s"' % (c * 30) for c in "abc"]
    >>> bounded_json_list(items, 90) == '[{"omitted_oldest":1},' + ",".join(items[1:]) + "]"
    True
    """
    total = 2 + sum(map(len, items)) + max(len(items) - 1, 0)
    if total <= cap:
        return "[" + ",".join(items) + "]"
    kept: list[str] = []
    size = 2
    for k in range(len(items) - 1, -1, -1):
        marker = len('{"omitted_oldest":') + len(str(k)) + 2
        if size + len(items[k]) + 1 + marker > cap:
            break
        kept.append(items[k])
        size += len(items[k]) + 1
    omitted = len(items) - len(kept)
    kept.reverse()
    return "[" + ",".join([dumps({"omitted_oldest": omitted})] + kept) + "]"


def bounded_text(text: str, cap: int) -> str:
    """``text`` cut to ``cap`` characters with a marker at the end when it was longer."""
    if len(text) <= cap:
        return text
    marker = f'..."[truncated {len(text)} chars]"'
    return text[: max(cap - len(marker), 0)] + marker


def _is_active(state: Any) -> bool:
    return state == "pending" or state == "firing"


def alerts_json_of(entries: list[tuple[Any, str]], cap: int) -> str:
    """The observation's alert list from (state, JSON text) entries in history order, at most ``cap`` characters:
    every pending or firing alert is kept; then resolved ones, newest first, while they fit in ``cap - 40``; the
    first that does not fit and every older resolved one are left out, counted in a leading
    ``{"omitted_resolved": n}`` (the definition `AlertRows.alerts_json` keeps up incrementally).

    >>> e = [("resolved", '"' + "a" * 30 + '"'), ("firing", '"f"'), ("resolved", '"' + "b" * 30 + '"')]
    >>> alerts_json_of(e, 1000) == "[" + ",".join(t for _, t in e) + "]"
    True
    >>> alerts_json_of(e, 80)
    '[{"omitted_resolved":1},"f","bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"]'
    """
    texts = [t for _, t in entries]
    lens = list(map(len, texts))
    room = cap - 40  # space for the marker
    if 2 + len(lens) + sum(lens) <= room:   # every alert fits (the loop below would keep each one)
        return "[" + ",".join(texts) + "]"
    keep = [_is_active(state) for state, _ in entries]
    size = 2 + sum(compress(lens, keep)) + sum(keep)   # every pending or firing alert
    omitted = 0
    for i in range(len(entries) - 1, -1, -1):   # then resolved ones, newest first, while room
        if keep[i]:
            continue
        n = lens[i] + 1
        if size + n <= room:
            keep[i] = True
            size += n
            continue
        omitted = (i + 1) - sum(keep[:i + 1])   # this one and every older resolved one
        break
    kept = list(compress(texts, keep))
    if omitted:
        kept.insert(0, dumps({"omitted_resolved": omitted}))
    return bounded_json_list(kept, cap)


class AlertRows:
    """The observation's alert entries, (state, JSON text) in history order, keyed by alert, with what
    `alerts_json_of` reads kept up to date as entries are put or appended: the texts, which are pending or firing,
    the room each resolved one takes, and the sums. `alerts_json` then needs no pass in Python over the entries:
    the cut among the resolved ones is a bisection of their running room, newest first (C passes).

    A resolved entry may come with its text unbuilt: ``(state, make)``, a callable that makes the text (the caller
    guarantees that ``make()`` gives the entry's text whenever the rows are read: it puts again every entry whose
    text changed before it reads). It stays unbuilt when it is at or before the last cut `alerts_json` found (it is
    likely left out again; any other is built at once: an active one is always shown). An unbuilt entry counts no
    room (its text and entry text are None); `alerts_json` builds only the unbuilt ones newer than the cut (those it
    shows or needs the room of: a resolved entry older than the cut is left out whatever its length), `filled` every
    one. Which entries stay unbuilt changes no text.

    >>> rows = AlertRows.of([("resolved", '"' + "a" * 30 + '"'), ("firing", '"f"'), ("resolved", '"' + "b" * 30 + '"')])
    >>> rows.alerts_json(80) == alerts_json_of(rows.entries, 80)
    True
    >>> rows.put(0, ("pending", '"p"')); rows.alerts_json(80), rows.alerts_json(80) == alerts_json_of(rows.entries, 80)
    ('[{"omitted_resolved":1},"p","f"]', True)
    >>> rows = AlertRows.of([("resolved", '"a"'), ("resolved", '"' + "b" * 30 + '"'), ("resolved", '"d"')])
    >>> rows.alerts_json(40 + 36), rows.cut
    ('[{"omitted_resolved":2},"d"]', 1)
    >>> rows.put(0, ("resolved", lambda: '"c"')); rows.alerts_json(40 + 36), sorted(rows.lazy)   # (left out: unbuilt)
    ('[{"omitted_resolved":2},"d"]', [0])
    >>> rows.filled().entries[0], rows.lazy, rows.alerts_json(10**4)
    (('resolved', '"c"'), {}, '["c","bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","d"]')
    """

    __slots__ = ("keys", "entries", "at", "texts", "active", "room", "total", "active_size", "lazy", "cut")

    def __init__(self) -> None:
        self.keys: list = []                          # alert keys in history order
        self.entries: list[tuple[Any, str]] = []      # their (state, text)
        self.at: dict = {}                            # key -> place
        self.texts: list[str] = []
        self.active: list[bool] = []                  # pending or firing
        self.room: list[int] = []                     # len(text) + 1 of a resolved entry, 0 of an active one
        self.total = 0                                # sum of len(text)
        self.active_size = 0                          # sum of len(text) + 1 over the active ones
        self.lazy: dict[int, Any] = {}                # place -> the callable that makes its text, while unbuilt
        self.cut = -1                                 # the last cut `alerts_json` found (-1: none)

    @classmethod
    def of(cls, entries: list[tuple[Any, str]]) -> "AlertRows":
        rows = cls()
        for i, e in enumerate(entries):
            rows.append(i, e)
        return rows

    def clear(self) -> None:
        self.__init__()

    def append(self, key: Any, entry: tuple[Any, str]) -> None:
        i = len(self.keys)
        self.at[key] = i
        self.keys.append(key)
        self.entries.append(None)   # (a place that counts nothing, then `put`)
        self.texts.append(None)
        self.active.append(False)
        self.room.append(0)
        self.put(i, entry)

    def put(self, i: int, entry: tuple[Any, str]) -> None:
        """Entry ``i`` is now ``entry``: (state, text), or (resolved state, the callable that makes the text)."""
        old = self.texts[i]
        if old is None:   # (unbuilt or new: it counted nothing)
            self.lazy.pop(i, None)
        else:
            self.total -= len(old)
            if self.active[i]:
                self.active_size -= len(old) + 1
        state, text = entry
        active = _is_active(state)
        if type(text) is not str:
            if active or i > self.cut:
                text = text()
                entry = (state, text)
            else:
                self.lazy[i] = text
                self.entries[i] = (state, None)
                self.texts[i] = None
                self.active[i] = False
                self.room[i] = 0
                return
        self.entries[i] = entry
        self.texts[i] = text
        n = len(text)
        self.total += n
        if active:
            self.active[i] = True
            self.room[i] = 0
            self.active_size += n + 1
        else:
            self.active[i] = False
            self.room[i] = n + 1

    def _build(self, i: int) -> None:
        self.put(i, (self.entries[i][0], self.lazy[i]()))

    def filled(self) -> "AlertRows":
        """These rows with every text built (``entries`` complete)."""
        for i in list(self.lazy):
            self._build(i)
        return self

    def _cut(self, room: int) -> int:
        """The place of the newest resolved entry that does not fit in ``room`` with the active ones and the newer
        resolved ones (the newest entry when even the active ones do not fit; -1 when everything fits; an unbuilt
        entry counts no room)."""
        return len(self.room) - 1 - bisect_right(list(accumulate(reversed(self.room))), room - 2 - self.active_size)

    def alerts_json(self, cap: int) -> str:
        """``alerts_json_of(self.filled().entries, cap)``, building only the unbuilt texts newer than the cut."""
        texts = self.texts
        n = len(texts)
        room = cap - 40
        lazy = self.lazy
        if not lazy and 2 + n + self.total <= room:
            self.cut = -1
            return "[" + ",".join(texts) + "]"
        # resolved ones newest first while their running room fits (active ones take none): the first that does
        # not is entry i0 (the newest entry when even the active ones do not fit); it and every older resolved one
        # are left out. Unbuilt entries count no room: a cut found so is at or before the true one, the unbuilt
        # entries after it are built and the cut found again, until none is after it (the cut then is the true
        # one: the rooms after it are all known, and it is not an unbuilt entry unless it is the newest, reached
        # with no room at all). Without a cut (-1) every entry is built and shown.
        i0 = self._cut(room)
        while lazy and max(lazy) > i0:   # (most stay unbuilt, before the cut: one pass in C to see none is after it)
            for i in [i for i in lazy if i > i0]:
                self._build(i)
            i0 = self._cut(room)
        self.cut = i0
        older_active = list(compress(texts[:i0 + 1], self.active[:i0 + 1]))
        omitted = i0 + 1 - len(older_active)
        kept = older_active + texts[i0 + 1:]
        if omitted:
            kept.insert(0, dumps({"omitted_resolved": omitted}))
        return bounded_json_list(kept, cap)
