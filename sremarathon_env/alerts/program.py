"""A plan's node graph lowered to one flat program, run by the compiled evaluator in one call per segment.

``plan.PackPlan`` evaluates its nodes one numpy call (or a few) at a time: ~150-200 node computes per alert
call whose cost is mostly numpy's per-call overhead. After each rebuild, ``lower`` turns the nodes the
rules' roots reach into instruction rows (an operation, its row count, where its inputs and output lie in one
arena of values and one of presence, each ``(rows, times)``, its index arrays in one integer pool, its
constants in one float pool) that ``compiled``'s ``program`` kernel runs. Lowered node types:

* ``_Const`` (a constant row), ``_Sel`` (a gather of store rows at the instant columns), kernel ``_Range`` (its
  rows of the kernel group's output), ``_Agg`` (sum, count, group, max, min: singletons, one group, groups),
  ``_VecScalar`` and ``_VecVec`` (+ - * / % and the six comparisons, filters and ``bool``), ``_SetAndUnless``,
  ``_HistQuantile`` of a constant quantile in [0, 1] over distinct bucket bounds ending at +Inf;
* ``_Pass`` costs nothing (its child's arena rows), nor do filters' values and arithmetic's presence (the
  child's rows, as the numpy nodes return the child's arrays);
* anything else (``_Generic``, ranges of a ``_RangeGroup``, ``^`` and ``atan2``, other ``histogram_quantile``
  layouts) is a numpy step: its own ``value`` runs between compiled runs, its lowered children's arena rows given
  to it as their values (``_stamp`` / ``_out``), and its result is copied into the arena.

Each instruction follows its node's numpy ``compute`` operation by operation (the same float operations in the
same order: a sum from -0.0 row after row in input order, a one-group sum as ``add.accumulate``, max / min in
group order, the quantile's cumulative ``fmax`` and interpolation), so the results are the numpy path's bits
(tests/alerts/test_program.py). Where numpy itself is not one definition - ``fmax`` / ``fmin`` of 0.0 and -0.0 -
or where the numpy node takes a per-cell path (a partly present histogram group), the program stops and the call
is evaluated by the numpy nodes; so it is where a numpy step raises (the plan's per-rule fallback then applies).

Lowering keeps, per node object, its arena rows, pool entries and packed rows while its fields and children's
lowerings are unchanged, and per rule its root's lowering while the rebuild kept the rule (``_Lowerer``); a new
aggregation under a kept parent takes the arena rows of the one it replaces where it has as many groups, so the
parent's row is kept too.

>>> import numpy as np
>>> from sremarathon_env.telemetry.store import MetricStore
>>> from sremarathon_env.alerts import PromQLEngine, load_rule_pack
>>> from sremarathon_env.alerts.plan import PackPlan
>>> store = MetricStore(step_s=15.0)
>>> fam = store.family("kube_node_status_condition", ("node", "condition", "status"))
>>> rows = fam.rows([("n1", "Ready", "true"), ("n2", "Ready", "false")])
>>> for k in range(8):
...     store.write(fam, rows, k, np.array([1.0, 0.0]))
>>> plan = PackPlan(PromQLEngine(store), load_rule_pack().rules)
>>> times = np.arange(8, dtype=np.int64) * 15000
>>> ref = plan.evaluate(times)           # (builds the plan; numpy nodes)
>>> prog = lower(plan)
>>> prog is not None and prog.n_ins > 0
True
"""

from __future__ import annotations

import struct
import threading
from itertools import compress, repeat
from operator import is_, is_not, or_

import numpy as np

from . import plan as PL
from .compiled import PROGRAM_FIELDS

#: operation codes of ``compiled.program``
OP_CONST, OP_SEL, OP_AGG, OP_VS, OP_VV, OP_SET, OP_KCOPY, OP_STEP, OP_HQ = 0, 1, 2, 3, 4, 5, 6, 7, 8
#: binary operator codes of ``compiled.binop`` (absent: not lowered, ``^`` and ``atan2``)
BINOPS = {"+": 0, "-": 1, "*": 2, "/": 3, "%": 4, "==": 10, "!=": 11, ">": 12, "<": 13, ">=": 14, "<=": 15}
AGGS = {"sum": 0, "count": 1, "group": 2, "max": 3, "min": 4}
_NOPOOL = -1
_EMPTY_I = np.zeros(0, dtype=np.int64)


class _Families:
    """The store families a plan's selectors read, numbered once for the plan's life (what a lowered ``_Sel``
    names), with their arrays' addresses kept while the same arrays serve."""

    __slots__ = ("fams", "at", "datas", "addrs", "shapes")

    def __init__(self):
        self.fams: list = []
        self.at: dict[int, int] = {}
        self.datas: list = []
        self.addrs = np.zeros(0, dtype=np.intp)
        self.shapes = np.zeros((0, 2), dtype=np.intp)

    def index(self, fam) -> int:
        k = self.at.get(id(fam))
        if k is None or self.fams[k] is not fam:
            k = self.at[id(fam)] = len(self.fams)
            self.fams.append(fam)
        return k

    def arrays(self):
        """(addresses, shapes) of every family's current store array (C-contiguous float64), or None where one is
        not (the numpy path then runs). The arrays are held here while their addresses are used."""
        fams = self.fams
        datas = self.datas
        if len(datas) == len(fams) and all(f._data is d for f, d in zip(fams, datas)):
            return self.addrs, self.shapes
        datas = [f._data for f in fams]
        for d in datas:
            if d.dtype != np.float64 or d.ndim != 2 or not d.flags.c_contiguous:
                return None
        self.datas = datas
        self.addrs = np.array([d.ctypes.data for d in datas], dtype=np.intp)
        self.shapes = np.array([d.shape for d in datas], dtype=np.intp).reshape(len(datas), 2)
        return self.addrs, self.shapes


class _Cant(Exception):
    """A node the program cannot take (an unknown node type): the plan stays on the numpy path."""


# What a node's instruction depends on: its type's fields below (plan.py; compared by identity) and its children's
# arena entries. A node keeps its last lowering in ``_lw`` = (generation, fields, its children's lowerings, its
# lowering, its packed row), a lowering being (entry, packed rows of the subgraph in post-order) and an entry
# (value rows offset, presence rows offset, rows, level, lowered): ints and bytes only (a record holding the node
# itself would be cyclic garbage once the node is dropped). Where the fields and the children's lowerings are the
# same objects at the next lowering, the node's lowering is taken as it is; where only the children's entries are
# equal, its row is. Fields read (a change of any of them must make a new node or be one of these fields):
# _Sel.flat / perm / sel (at_ms, offset_ms); _Agg.op / G / gid / singletons / one_group / perm / order / starts /
# child; _VecScalar.op / rb / left / const / vec / sc; _VecVec.op / rb / swap / mi / oi / lhs / rhs / labels;
# _SetAndUnless.op / r_order / r_starts / lmap / r_ident / lhs / rhs; _Range.kernel / group / a / b; _Pass.child;
# _Const.val; _HistQuantile.q / child / batches (ubs, gs, R, m, inf_top) / slow; _Generic.children; any node's
# labels (length) and kind.

def _fields(node, cls) -> tuple:
    """A node's fields (the definition: ``visit`` takes them with the children from ``_KIDS_FIELDS``)."""
    if cls is PL._Agg:
        return (node.op, node.gid, node.perm, node.order, node.starts)
    if cls is PL._Sel:
        return (node.flat, node.perm, node.sel)
    if cls is PL._VecScalar:
        # (a constant by its node: ``const`` is made afresh at each rebind, of the same node's value)
        return (node.op, node.rb, node.left, node.sc if node.const is not None else None)
    if cls is PL._VecVec:
        return (node.op, node.rb, node.swap, node.mi, node.oi, node.labels)
    if cls is PL._SetAndUnless:
        return (node.op, node.r_order, node.r_starts, node.lmap)
    if cls is PL._Const:
        return (node.val,)
    if cls is PL._Range:
        return (node.kernel,)   # (a kernel range node's rows in the kernel output: checked apart, ``visit``)
    if cls is PL._HistQuantile:
        return (node.q, node.batches, node.slow, node.labels)
    return (node.labels, node.kind)


def _hq_lowered(node) -> bool:
    """Whether a ``_HistQuantile`` is an instruction: a constant quantile in [0, 1], every bucket group in a batch
    (distinct upper bounds) whose last bound is +Inf with at least two buckets (else a numpy step)."""
    q = node.q
    if type(q) is not PL._Const or not 0 <= q.val <= 1 or node.slow:
        return False
    return all(bt.inf_top and bt.m >= 2 for bt in node.batches) and \
        sum(len(bt.gs) for bt in node.batches) == len(node.labels)


def _real(node):
    """The node whose value a ``_Pass`` chain gives (what a numpy step's child is given as)."""
    while type(node) is PL._Pass:
        node = node.child
    return node


_EMPTY_ENTRY = (0, 0, 0, -1, True)
_EMPTY_L = (_EMPTY_ENTRY, b"")


#: the buffers of released arenas (`Arena.release`: a marathon's plan is done), for the next plans' arenas: their pages
#: are in memory already (a fresh arena faults in every page it writes, and grows a few times over a marathon as
#: lowerings add rows: ~300 faults per OB, ~1400 per TT no-op env marathon). At most `ARENA_POOL_MAX` buffers of
#: each kind; the cells are uninitialised by contract (see `Arena`), so what an earlier plan left is never read.
_ARENA_POOL: dict[str, list] = {"v": [], "p": [], "kv": [], "kp": []}
_ARENA_LOCK = threading.Lock()
ARENA_POOL_MAX = 1


class Arena:
    """Value and presence buffers that `Program.run` takes again at every call of a plan (held by the plan).

    The kernel group's window output (`kernel_out`) is taken again likewise: the program copies its rows into the
    arena (the kernel group keeps it for the call that stamped it only).

    A fresh arena per call is fresh memory: above glibc's mmap threshold (the CLI's and the bench's
    ``tune_malloc``: 256 KiB) every call maps it afresh and faults in each page it writes (a Train Ticket env call
    ~210 pages, ~0.3 ms). The program writes every arena cell it reads before it reads it (``np.empty`` gives no
    other guarantee), so the previous call's contents are never read; the rules' results are copied out of it
    (`Program.run`), and the numpy steps' stamped children (arena views) are read only in the call that stamped
    them (``_stamp is E``). A call the program stopped may have handed arena views to the numpy nodes' results: the
    plan then drops the buffers (`drop`). Bounded: twice the largest arena asked for.

    >>> a = Arena()
    >>> V, P = a.take(3, 2, 4)
    >>> V.shape, P.shape, V.flags.c_contiguous
    ((3, 4), (2, 4), True)
    >>> W, _ = a.take(2, 2, 5)
    >>> W.base is V.base                       # the same buffer again
    True
    """

    __slots__ = ("v", "p", "kv", "kp")

    def __init__(self):
        self.v = self.p = self.kv = self.kp = None

    def take(self, nv: int, np_: int, T: int):
        """(values (nv, T) float64, presence (np_, T) bool), C-contiguous views of the buffers (uninitialised)."""
        return self._pair("v", "p", nv, np_, T)

    def kernel_out(self, R: int, T: int):
        """(values, presence) (R, T) buffers for the kernel group's window kernel (``tape.window_kernel``'s
        ``out``), uninitialised: the kernel writes every cell."""
        return self._pair("kv", "kp", R, R, T)

    def _pair(self, kv: str, kp: str, nv: int, np_: int, T: int):
        """The (nv, T) float64 and (np_, T) bool views of the buffers in slots ``kv`` and ``kp``, each grown
        (``_grown``) where it is too small."""
        v, p = getattr(self, kv), getattr(self, kp)
        if v is None or v.size < nv * T:
            v = _grown(kv, v, nv * T, np.float64)
            setattr(self, kv, v)
        if p is None or p.size < np_ * T:
            p = _grown(kp, p, np_ * T, np.bool_)
            setattr(self, kp, p)
        return v[:nv * T].reshape(nv, T), p[:np_ * T].reshape(np_, T)

    def drop(self) -> None:
        self.v = self.p = self.kv = self.kp = None

    def release(self) -> None:
        """The owner is done (its marathon ended): the buffers go to the next plans' arenas (`_ARENA_POOL`); this
        arena stays usable (it takes buffers again)."""
        bufs = (("v", self.v), ("p", self.p), ("kv", self.kv), ("kp", self.kp))
        self.drop()
        with _ARENA_LOCK:
            for kind, b in bufs:
                pool = _ARENA_POOL[kind]
                if b is not None and len(pool) < ARENA_POOL_MAX and not any(b is x for x in pool):
                    pool.append(b)


def _grown(kind: str, old, n: int, dtype) -> np.ndarray:
    """A 1-D buffer of at least ``n`` items for an arena whose buffer ``old`` (None: none yet) is too small: a pooled
    one that fits (`_ARENA_POOL`; the smallest), else a fresh one of ``max(n, 2 * old.size)`` (doubling)."""
    with _ARENA_LOCK:
        pool = _ARENA_POOL[kind]
        best = None
        for i, b in enumerate(pool):
            if b.size >= n and (best is None or b.size < pool[best].size):
                best = i
        if best is not None:
            return pool.pop(best)
    return np.empty(max(n, 2 * old.size if old is not None else 0), dtype=dtype)


class Program:
    """One lowering of a plan: instruction rows, pools, arena sizes, the numpy steps between segments, and where
    each rule's root lies in the arena."""

    __slots__ = ("roots", "kernel", "ins", "ipool", "fpool", "nv", "np_", "schedule", "outs", "inst_keys",
                 "fams", "has_kernel", "n_ins", "_gather")

    def __init__(self):
        self._gather = None

    def run(self, E, nb, arena: Arena | None = None):
        """Every rule's (values, presence) (None for a rule without a lowered root) at the call ``E``, or None
        where the program stopped (the caller evaluates the call by the numpy nodes). Without ``arena`` the
        results are views of a fresh arena; with one, the arena is ``arena``'s buffers and the results are copies
        of the roots' rows (one gather for all rules, `_root_rows`), so that the next call can take the buffers
        again."""
        T = E.T
        if arena is None:
            V = np.empty((self.nv, T))
            P = np.empty((self.np_, T), dtype=bool)
        else:
            V, P = arena.take(self.nv, self.np_, T)
        arr = self.fams.arrays()
        if arr is None:
            return None
        addrs, shapes = arr
        keys = self.inst_keys
        if keys:
            g = self.kernel.grid
            jc = np.empty((len(keys), T), dtype=np.int64)
            ok = np.empty((len(keys), T), dtype=bool)
            for k, (at_ms, offset_ms) in enumerate(keys):
                _, j, okk, _, _ = PL._instant_cols(g, E, at_ms, offset_ms)
                jc[k] = j
                ok[k] = okk
        else:
            jc = np.zeros((0, T), dtype=np.int64)
            ok = np.zeros((0, T), dtype=bool)
        if self.has_kernel:
            kg = self.kernel
            kv, kp = kg.value(E, None if arena is None else arena.kernel_out(kg.n, T))
            kv, kp = np.ascontiguousarray(kv, dtype=np.float64), np.ascontiguousarray(kp, dtype=bool)
        else:
            kv, kp = np.zeros((0, T)), np.zeros((0, T), dtype=bool)
        ins, ipool, fpool = self.ins, self.ipool, self.fpool
        for i0, i1, step in self.schedule:
            if step is None:
                if nb.program(ins, ipool, fpool, i0, i1, V, P, addrs, shapes, jc, ok, kv, kp) >= 0:
                    return None
                continue
            node, vo, po, n, scalar, stamps = step
            for child, cvo, cpo, cn, cs in stamps:
                child._stamp = E
                child._out = V[cvo] if cs else (V[cvo:cvo + cn], P[cpo:cpo + cn])
            try:
                out = node.value(E)
            except Exception:  # noqa: BLE001 - the numpy path repeats it (and its rule takes the generic path)
                return None
            if scalar:
                V[vo] = out
            else:
                V[vo:vo + n] = out[0]
                P[po:po + n] = out[1]
        if arena is None:
            return [None if o is None else (V[o[0]:o[0] + o[2]], P[o[1]:o[1] + o[2]]) for o in self.outs]
        vi, pi, spans = self._root_rows()
        RV = V.take(vi, axis=0)
        RP = P.take(pi, axis=0)
        return [None if sp is None else (RV[sp[0]:sp[1]], RP[sp[0]:sp[1]]) for sp in spans]

    def _root_rows(self) -> tuple:
        """(arena value rows, arena presence rows, per rule (start, end) in them or None) of the rules' roots, in
        rule order (made once per program: each root's rows ``o .. o + n`` as one ``repeat`` of the starts' offsets
        plus a running index).

        >>> p = Program()
        >>> p.outs = [(10, 3, 2), None, (4, 0, 3)]
        >>> vi, pi, spans = p._root_rows()
        >>> vi.tolist(), pi.tolist(), spans
        ([10, 11, 4, 5, 6], [3, 4, 0, 1, 2], [(0, 2), None, (2, 5)])
        """
        g = self._gather
        if g is None:
            spans = []
            vo, po, ns = [], [], []
            a = 0
            for o in self.outs:
                if o is None:
                    spans.append(None)
                    continue
                vo.append(o[0])
                po.append(o[1])
                ns.append(o[2])
                spans.append((a, a + o[2]))
                a += o[2]
            n = np.asarray(ns, dtype=np.intp)
            first = np.zeros(len(ns), dtype=np.intp)   # (each root's first position in the gathered rows)
            if len(ns) > 1:
                np.cumsum(n[:-1], out=first[1:])
            run = np.arange(a, dtype=np.intp)
            vi = np.repeat(np.asarray(vo, dtype=np.intp) - first, n) + run
            pi = np.repeat(np.asarray(po, dtype=np.intp) - first, n) + run
            g = self._gather = (vi, pi, spans)
        return g


#: a lowerer starts again (every node lowered afresh, arena and pools compacted) once its arena or integer pool
#: holds more than this many times what the last program used (rows of replaced nodes are never reused)
COMPACT_FACTOR = 4
COMPACT_MIN = 4096


def lower(plan) -> Program | None:
    """The program of ``plan``'s current build (None: a node type it cannot take; the numpy path serves)."""
    lw = getattr(plan, "_lowerer", None)
    if lw is None:
        lw = plan._lowerer = _Lowerer()
    return lw.lower(plan)


class _Lowerer:
    """A plan's lowering state across its builds: the arena rows, pool arrays, constants, kernel range and numpy step
    slots handed out so far (each node keeps its own, ``_lw``), the families and instant-column keys its selectors
    name, and per rule its root's lowering. Started again when it holds several times what the current program uses
    (``COMPACT_FACTOR``).

    A node's lowering is its entry and the packed instruction rows of its subgraph in post-order (``bytes``: a
    subgraph taken again costs no Python per node). A rule whose plan record (``PackPlan._records[i]``) is the same
    object as at the last lowering was kept by the rebuild: its nodes are the same objects with the same fields (a
    rebuild makes new nodes or rebinds nodes of rebuilt rules only), so its root's rows are taken again without a
    walk. Other rules are walked once per node; a node whose fields and children's lowerings are unchanged gives its
    kept lowering. The kernel group is reassembled at each build: kernel range rows read their start afresh
    (``_Range.a``) once the program is assembled; rows of shared nodes are deduplicated then."""

    def __init__(self):
        self.fams = _Families()
        self._reset()

    def _reset(self) -> None:
        self.gen = object()             # (records of an earlier generation, or of another plan, never match)
        self.nv = self.npp = 0          # arena rows handed out (values, presence)
        self.pool_arr = np.zeros(1024, dtype=np.int64)   # index arrays, one after the other (grown by doubling)
        self.plen = 0
        self.fpool_arr = np.zeros(64)   # constants
        self.flen = 0
        self.inst_keys: dict = {}       # (at, offset) of the selectors -> index
        self.kslots: list = []          # kernel range nodes by slot
        self.sslots: list = []          # numpy steps by slot: (node, vo, po, rows, scalar, stamps)
        self.last = None                # (roots, records, generation, packed rows, outs) of the last lowering
        self.was = None                 # (the entry ``make``'s node replaces, ``visit``)

    def lower(self, plan) -> Program | None:
        self.kernel = plan._kernel
        gen = self.gen
        roots, records = plan._roots, plan._records
        last = self.last
        n = len(roots)
        if last is not None and last[2] is gen and len(last[0]) == n:
            # only the rules whose root or record is another object than at the last lowering, or whose record is
            # None (not kept: walked at every build), are walked (picked in C: most rules are kept by a rebuild)
            redo = compress(range(n), map(or_, map(or_, map(is_not, roots, last[0]), map(is_not, records, last[1])),
                                          map(is_, records, repeat(None))))
            parts, outs = list(last[3]), list(last[4])
        else:
            redo = range(n)
            parts, outs = [b""] * n, [None] * n
        self.loc = {}
        try:
            for i in redo:
                root = roots[i]
                if root is None or not root.labels:
                    parts[i] = b""
                    outs[i] = None
                    continue
                L = self.visit(root)
                parts[i] = L[1]       # (its packed rows)
                outs[i] = L[0][:3]    # (its arena rows)
        except _Cant:
            self.last = None
            return None
        finally:
            self.loc = None   # (this walk's: not kept)
        # (per rule, as roots: the lists compared at the next lowering (copies: the plan edits its records in place),
        # the generation, each rule's packed rows (b"": none) and arena rows (None: none))
        self.last = (list(roots), list(records), gen, parts, outs)
        buf = b"".join(parts)
        ins = np.frombuffer(buf, dtype=np.int64).reshape(-1, PROGRAM_FIELDS).copy()
        prog = self._program(plan, ins, outs)
        if prog is None:   # (a kept rule's kernel range node changed: never expected; lowered afresh)
            self._reset()
            return self.lower(plan)
        live = int(prog.ins[:, 2].sum())
        live_pool = int(prog.ins[:, 7].sum()) + 2 * live
        if (max(self.nv, self.npp) > COMPACT_FACTOR * max(live, COMPACT_MIN)
                or self.plen > COMPACT_FACTOR * max(live_pool, COMPACT_MIN)):
            self._reset()
            return self.lower(plan)
        return prog

    # ------------------------------------------------------------------ allocation
    def put(self, a) -> int:
        if a is None:
            return _NOPOOL
        at = self.plen
        end = at + len(a)
        if end > len(self.pool_arr):
            # a new array (programs made before keep theirs: nothing they read is ever written again)
            grown = np.zeros(max(2 * len(self.pool_arr), end), dtype=np.int64)
            grown[:at] = self.pool_arr[:at]
            self.pool_arr = grown
        self.pool_arr[at:end] = a
        self.plen = end
        return at

    def const(self, val: float) -> int:
        at = self.flen
        if at == len(self.fpool_arr):
            grown = np.zeros(2 * at)
            grown[:at] = self.fpool_arr
            self.fpool_arr = grown
        self.fpool_arr[at] = float(val)
        self.flen = at + 1
        return at

    def fput(self, a) -> int:
        at = self.flen
        for x in a.tolist():
            self.const(x)
        return at

    def alloc(self, nv: int, npp: int) -> tuple:
        vo, po = self.nv, self.npp
        self.nv += nv
        self.npp += npp
        return vo, po

    # ------------------------------------------------------------------ the walk
    def visit(self, node, was=None) -> tuple:
        """A node's lowering: (entry, packed rows of its subgraph). ``was``: the entry its parent's child at this place
        had at the parent's last lowering (``make``: a new aggregation takes its predecessor's arena rows)."""
        loc = self.loc
        L = loc.get(id(node))
        if L is not None:
            return L
        cls = type(node)
        if cls is PL._Pass:
            L = loc[id(node)] = self.visit(node.child, was)
            return L
        if cls is PL._Empty:
            loc[id(node)] = _EMPTY_L
            return _EMPTY_L
        kf = _KIDS_FIELDS.get(cls)
        if kf is None:
            raise _Cant(cls.__name__)
        kn, fields = kf(self, node)
        rec = node._lw   # (a class attribute None until lowered: no instance dict is made for it)
        same = (rec is not None and rec[0] is self.gen and len(rec[1]) == len(fields) and all(map(is_, rec[1], fields))
                and (cls is not PL._Range or not node.kernel or rec[3][0][2] == node.b - node.a))
        # (with the same fields, the same children's places: their entries at its last lowering)
        kw = rec[2] if same and len(rec[2]) == len(kn) else None
        if not kn:
            kl = ()
        elif len(kn) == 1:
            kl = (self.visit(kn[0], None if kw is None else kw[0][0]),)
        elif kw is None:
            kl = tuple([self.visit(k) for k in kn])
        else:
            kl = tuple([self.visit(k, w[0]) for k, w in zip(kn, kw)])
        if same:
            if len(rec[2]) == len(kl) and all(map(is_, rec[2], kl)):
                L = rec[3]
            elif len(rec[2]) == len(kl) and all(x[0] == y[0] for x, y in zip(rec[2], kl)):
                # the same children's entries, other subgraphs below: the same row, its subgraph packed again
                L = (rec[3][0], b"".join([k[1] for k in kl] + [rec[4]]))
                node._lw = (self.gen, fields, kl, L, rec[4])
            else:
                rec = None
        else:
            rec = None
        if rec is None:
            self.was = was
            e, row = self.make(node, cls, tuple([k[0] for k in kl]))
            rowb = _PACK(*row)
            L = (e, b"".join([k[1] for k in kl] + [rowb]) if kl else rowb)
            node._lw = (self.gen, fields, kl, L, rowb)
        if not L[0][4]:
            # a numpy step: its children given as their arena rows (those now: a child may be another object)
            e = L[0]
            stamps = [(_real(k), c[0][0], c[0][1], c[0][2], _real(k).kind == "s") for k, c in zip(kn, kl) if c[0][4]]
            self.sslots[_unpack_slot(rec[4] if rec is not None else node._lw[4])] = (
                node, e[0], e[1], e[2], node.kind == "s", stamps)
        loc[id(node)] = L
        return L

    def kid_nodes(self, node, cls) -> tuple:
        """The children a node's instruction (or numpy step) reads, in the order its instruction takes them (the
        definition: ``visit`` takes them with the fields from the type's ``_KIDS_FIELDS`` entry, one call)."""
        if cls is PL._Agg:
            return (node.child,)
        if cls is PL._VecScalar:
            if node.op in BINOPS and node.const is not None:
                return (node.vec,)
            return (node.vec, node.sc)
        if cls is PL._VecVec:
            return (node.rhs, node.lhs) if node.swap else (node.lhs, node.rhs)   # (the many side first)
        if cls is PL._SetAndUnless:
            if node.r_starts is None:   # (no right rows: the right side is not read, as in the numpy node)
                return (node.lhs,)
            return (node.lhs, node.rhs)
        if cls is PL._Sel or cls is PL._Const:
            return ()
        if cls is PL._Range:
            if node.kernel and node.group is not self.kernel:
                raise _Cant("_Range of another kernel group")
            return ()
        if cls is PL._HistQuantile:
            if _hq_lowered(node):
                return (node.child,)
            return (node.q, node.child)
        if cls is PL._Generic:
            return tuple(c for _, c in node.children)
        raise _Cant(cls.__name__)

    @staticmethod
    def level(kids) -> int:
        """An instruction's level: its lowered children's, or one past a numpy child's (whose step runs after the
        instructions of its own level)."""
        lvl = 0
        for c in kids:
            cl = c[3] if c[4] else c[3] + 1
            if cl > lvl:
                lvl = cl
        return lvl

    def make(self, node, cls, kids) -> tuple:  # noqa: C901 - one branch per node type
        """(entry, instruction row) of a node whose fields or children changed. The row's last field is its sort
        key: 2 (level + 1) for an instruction, one more for a numpy step (after the instructions of its level)."""
        if node.kind == "v" and not node.labels:
            raise _Cant("a node without rows")   # (never expected: the plan makes an _Empty; rows own arena rows)
        if not kids:
            a = b = _EMPTY_ENTRY
            lvl = 0
        else:
            a = kids[0]
            # (``level``, inline)
            lvl = a[3] if a[4] else a[3] + 1
            if len(kids) > 1:
                b = kids[1]
                lb = b[3] if b[4] else b[3] + 1
                if lb > lvl:
                    lvl = lb
                if len(kids) > 2:
                    lvl = self.level(kids)
            else:
                b = _EMPTY_ENTRY
            if lvl < 0:
                lvl = 0
        key = 2 * lvl + 2
        if cls is PL._Const:
            vo, _ = self.alloc(1, 0)
            return (vo, 0, 1, 0, True), (OP_CONST, 0, 1, vo, 0, 0, 0, 0, 0, 0, 0, self.const(node.val), 0, 0, 0, 2)
        if cls is PL._Sel:
            key_ = (node.sel.at_ms, node.sel.offset_ms)
            k = self.inst_keys.setdefault(key_, len(self.inst_keys))
            if len(node.flat) == 1 and node.perm is None:   # one family: its rows (sub 1, the family in x2)
                fam, rows = node.flat[0]
                n = len(rows)
                vo, po = self.alloc(n, n)
                return (vo, po, n, 0, True), (OP_SEL, 1, n, vo, po, 0, 0, 0, 0, 0, 0, self.put(rows), k,
                                              self.fams.index(fam), 0, 2)
            f = np.concatenate([np.full(len(rows), self.fams.index(fam), dtype=np.int64) for fam, rows in node.flat])
            r = np.concatenate([np.asarray(rows, dtype=np.int64) for _, rows in node.flat])
            if node.perm is not None:
                f, r = f[node.perm], r[node.perm]
            pairs = np.empty(2 * len(r), dtype=np.int64)
            pairs[0::2] = f
            pairs[1::2] = r
            n = len(r)
            vo, po = self.alloc(n, n)
            return (vo, po, n, 0, True), (OP_SEL, 0, n, vo, po, 0, 0, 0, 0, 0, 0, self.put(pairs), k, 0, 0, 2)
        if cls is PL._Range and node.kernel:
            n = node.b - node.a
            vo, po = self.alloc(n, n)
            self.kslots.append(node)
            # (x0: the node's kernel slot; av: its start in the kernel output, set when a program is assembled)
            return (vo, po, n, 0, True), (OP_KCOPY, 0, n, vo, po, 0, 0, 0, 0, 0, 0, len(self.kslots) - 1, 0, 0, 0, 2)
        if cls is PL._Agg:
            agg = AGGS[node.op]
            n = node.G
            was = self.was
            if was is not None and was[2] == n and was[4] and was[0] < self.nv and was[1] < self.npp:
                # the arena rows of the aggregation it replaces (the same syntax node under the same parent: a rebuild
                # made it anew, so nothing else of this program reads them): its parents' rows stay valid
                vo, po = was[0], was[1]
            else:
                vo, po = self.alloc(n, n)
            x0 = x1 = x2 = 0
            if node.singletons:
                sub = agg
                x0 = _NOPOOL if node.perm is None else self.put(node.perm)
            elif node.one_group:
                sub = agg + 8
            elif agg <= 2:
                sub = agg + 16
                x0 = self.put(node.gid)
            else:
                sub = agg + 16
                x1 = self.put(node.order)
                x2 = self.put(node.starts)
            return (vo, po, n, lvl, True), (OP_AGG, sub, n, vo, po, a[0], a[1], a[2], 0, 0, 0, x0, x1, x2, 0, key)
        if cls is PL._VecScalar and node.op in BINOPS:
            code = BINOPS[node.op]
            n = a[2]
            if code < 10 or node.rb:    # new values, the vector's presence
                vo, _ = self.alloc(n, 0)
                po = a[1]
            else:                       # the vector's values, new presence
                _, po = self.alloc(0, n)
                vo = a[0]
            fl = (1 if node.left else 0) | (2 if node.rb else 0)
            x0 = 0
            if node.const is not None:
                x0 = self.const(node.const)
                fl |= 4
            return (vo, po, n, lvl, True), (OP_VS, code, n, vo, po, a[0], a[1], a[2], b[0], b[1], b[2], x0, 0, 0, fl,
                                            key)
        if cls is PL._VecVec and node.op in BINOPS:
            n = len(node.labels)
            vo, po = self.alloc(n, n)
            return (vo, po, n, lvl, True), (OP_VV, BINOPS[node.op], n, vo, po, a[0], a[1], a[2], b[0], b[1], b[2],
                                            self.put(node.mi), self.put(node.oi), 0,
                                            (1 if node.swap else 0) | (2 if node.rb else 0), key)
        if cls is PL._SetAndUnless:
            n = a[2]
            _, po = self.alloc(0, n)
            sub = 0 if node.op == "and" else 1
            if node.r_starts is None:
                row = (OP_SET, sub, n, a[0], po, a[0], a[1], a[2], 0, 0, 0, 0, 0, 0, -1, key)
            else:
                row = (OP_SET, sub, n, a[0], po, a[0], a[1], a[2], b[0], b[1], len(node.r_order),
                       self.put(None if node.r_ident else node.r_order), self.put(node.r_starts),
                       self.put(node.lmap), len(node.r_starts), key)
            return (a[0], po, n, lvl, True), row
        if cls is PL._HistQuantile and _hq_lowered(node):
            n = len(node.labels)
            vo, po = self.alloc(n, n)
            table = np.empty((n, 3), dtype=np.int64)
            for bt in node.batches:
                uo = self.fput(bt.ubs)
                m = bt.R.shape[1]
                for j, g in enumerate(bt.gs.tolist()):
                    table[g] = (self.put(bt.R[j]), m, uo)
            return (vo, po, n, lvl, True), (OP_HQ, 0, n, vo, po, a[0], a[1], a[2], 0, 0, 0, self.put(table.ravel()),
                                            self.const(node.q.val), 0, 0, key)
        # a numpy step: after the instructions of its latest child's level (numpy steps of a level run in order),
        # its result copied into the arena
        lvl = -1
        for c in kids:
            if c[3] > lvl:
                lvl = c[3]
        scalar = node.kind == "s"
        n = 1 if scalar else len(node.labels)
        vo, po = self.alloc(n, 0 if scalar else n)
        self.sslots.append(None)   # (the step itself: ``visit``)
        return (vo, po, n, lvl, False), (OP_STEP, 0, n, vo, po, 0, 0, 0, 0, 0, 0, len(self.sslots) - 1, 0, 0, 0,
                                         2 * lvl + 3)

    def _program(self, plan, ins, outs) -> Program | None:
        prog = Program()
        prog.roots, prog.kernel = plan._roots, self.kernel
        if len(ins):
            # one row per node (a node shared by rules, or within a rule, is in each subgraph's rows): the first of
            # rows with the same arena rows (every instruction owns at least one value or presence row: ``make``),
            # which keeps the post-order
            _, first = np.unique(ins[:, 3] * (self.npp + 1) + ins[:, 4], return_index=True)
            if len(first) < len(ins):
                first.sort()
                ins = ins[first]
            key = ins[:, PROGRAM_FIELDS - 1]
            if (key[1:] < key[:-1]).any():
                ins = ins[np.argsort(key, kind="stable")]
            kc = np.flatnonzero(ins[:, 0] == OP_KCOPY)
            if len(kc):
                nodes = [self.kslots[k] for k in ins[kc, 11].tolist()]
                kernel = self.kernel
                if any(nd.group is not kernel for nd in nodes):
                    return None
                ins[kc, 5] = [nd.a for nd in nodes]
                if not np.array_equal(ins[kc, 2], [nd.b - nd.a for nd in nodes]):
                    return None
            prog.has_kernel = bool(len(kc))
            # runs of instructions between numpy steps: one compiled call each
            schedule = []
            i0 = 0
            for s in np.flatnonzero(ins[:, 0] == OP_STEP).tolist():
                if s > i0:
                    schedule.append((i0, s, None))
                schedule.append((s, s + 1, self.sslots[int(ins[s, 11])]))
                i0 = s + 1
            if i0 < len(ins):
                schedule.append((i0, len(ins), None))
            prog.ins = np.ascontiguousarray(ins)
        else:
            prog.ins = np.zeros((0, PROGRAM_FIELDS), dtype=np.int64)
            prog.has_kernel = False
            schedule = []
        prog.schedule = schedule
        prog.ipool, prog.fpool = self.pool_arr, self.fpool_arr
        prog.nv, prog.np_ = self.nv, self.npp
        prog.outs = outs
        prog.inst_keys = list(self.inst_keys)
        prog.fams = self.fams
        prog.n_ins = len(prog.ins)
        return prog


def _kf_agg(lw, node):
    return (node.child,), (node.op, node.gid, node.perm, node.order, node.starts)


def _kf_sel(lw, node):
    return (), (node.flat, node.perm, node.sel)


def _kf_vs(lw, node):
    const = node.const
    kn = (node.vec,) if const is not None and node.op in BINOPS else (node.vec, node.sc)
    return kn, (node.op, node.rb, node.left, node.sc if const is not None else None)


def _kf_vv(lw, node):
    kn = (node.rhs, node.lhs) if node.swap else (node.lhs, node.rhs)   # (the many side first)
    return kn, (node.op, node.rb, node.swap, node.mi, node.oi, node.labels)


def _kf_set(lw, node):
    kn = (node.lhs,) if node.r_starts is None else (node.lhs, node.rhs)
    return kn, (node.op, node.r_order, node.r_starts, node.lmap)


def _kf_const(lw, node):
    return (), (node.val,)


def _kf_range(lw, node):
    if node.kernel and node.group is not lw.kernel:
        raise _Cant("_Range of another kernel group")
    return (), (node.kernel,)


def _kf_hq(lw, node):
    kn = (node.child,) if _hq_lowered(node) else (node.q, node.child)
    return kn, (node.q, node.batches, node.slow, node.labels)


def _kf_generic(lw, node):
    return tuple(c for _, c in node.children), (node.labels, node.kind)


#: per node type: (its children as ``kid_nodes`` gives them, its fields as ``_fields`` gives them) in one call; a
#: type without an entry is one the program cannot take (``_Cant``)
_KIDS_FIELDS = {PL._Agg: _kf_agg, PL._Sel: _kf_sel, PL._VecScalar: _kf_vs, PL._VecVec: _kf_vv,
                PL._SetAndUnless: _kf_set, PL._Const: _kf_const, PL._Range: _kf_range, PL._HistQuantile: _kf_hq,
                PL._Generic: _kf_generic}

_PACK = struct.Struct(f"<{PROGRAM_FIELDS}q").pack
_SLOT = struct.Struct(f"<{PROGRAM_FIELDS}q")


def _unpack_slot(rowb: bytes) -> int:
    """The slot (x0) of a packed numpy step row."""
    return _SLOT.unpack(rowb)[11]
