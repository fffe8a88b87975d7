"""A plan's node graph lowered to one flat program, run by the compiled evaluator in one call per segment.

``plan.PackPlan`` evaluates its nodes one numpy call (or a few) at a time: ~150-200 node computes per alert
call whose cost is mostly numpy's per-call overhead. After each rebuild, ``lower`` turns the nodes the
rules' roots reach into instruction rows (an operation, its row count, where its inputs and output lie in one
arena of values and one of presence, each ``(rows, times)``, and its index arrays in one integer pool) that
``compiled``'s ``program`` kernel runs. The common node types are lowered:

* ``_Const`` (a constant row), ``_Sel`` (a gather of store rows at the instant columns), ``_Agg`` (sum, count,
  group, max, min: singletons, one group, groups), ``_VecScalar`` and ``_VecVec`` (+ - * / % and the six
  comparisons, filters and ``bool``), ``_SetAndUnless``;
* ``_Pass`` and kernel ``_Range`` nodes cost nothing: a ``_Pass`` is its child's arena rows, a kernel range node
  rows of the kernel group's output, copied into the arena once per call;
* anything else (``_HistQuantile``, ``_Generic``, ranges of a ``_RangeGroup``, ``^`` and ``atan2``) is computed
  by its own numpy ``value`` between segments, its lowered children's arena rows given to it as their values
  (``_stamp`` / ``_out``), and its result copied into the arena.

Each instruction follows its node's numpy ``compute`` operation by operation (the same float operations in the
same order: a sum from -0.0 row after row in input order, a one-group sum as ``add.accumulate``, max / min in
group order), so the results are the numpy path's bits (tests/alerts/test_program.py). Where numpy itself is
not one definition - ``fmax`` / ``fmin`` of 0.0 and -0.0 - the program stops and the call is evaluated by the
numpy path; so it does where a numpy node raises (the plan's per-rule fallback then applies as before).

Lowering reuses, per node object, what does not depend on the program (index arrays, operation codes); per
rebuild it walks the reached nodes once and concatenates their arrays.

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

import numpy as np

from . import plan as PL
from .compiled import PROGRAM_FIELDS

#: operation codes of ``compiled.program``
OP_CONST, OP_SEL, OP_AGG, OP_VS, OP_VV, OP_SET, OP_KCOPY = 0, 1, 2, 3, 4, 5, 6
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


def _same(xs: tuple, ys: tuple) -> bool:
    """Whether two tuples hold the same objects, position by position (arrays by identity)."""
    if len(xs) != len(ys):
        return False
    for x, y in zip(xs, ys):
        if x is not y:
            return False
    return True


# What a node's instruction depends on: its type's fields below (plan.py; arrays by identity) and its children's arena
# entries. A node keeps its last lowering in ``_lw`` = (generation, fields, children's entries, its entry, its
# instruction row or None); where fields and children's entries are the same at the next lowering, the entry and the
# row are taken as they are (a rebuild replaces only some nodes: the others keep their arena rows and pool arrays).
# Fields read: _Sel.flat / perm / sel (at_ms, offset_ms); _Agg.op / G / gid / singletons / one_group / perm / order /
# starts / child; _VecScalar.op / rb / left / const / vec / sc; _VecVec.op / rb / swap / mi / oi / lhs / rhs / labels;
# _SetAndUnless.op / r_order / r_starts / lmap / r_ident / lhs / rhs; _Range.kernel / group / a / b; _Pass.child;
# _Const.val; _HistQuantile.q / child; _Generic.children; any node's labels (length) and kind. An entry is
# (value rows offset, presence rows offset, rows, level, lowered): ints only (a node's record holding the node
# itself would be cyclic garbage once the node is dropped).

def _fields(node, cls) -> tuple:
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
    return (node.labels, node.kind)


def _real(node):
    """The node whose value a ``_Pass`` chain gives (what a numpy step's child is given as)."""
    while type(node) is PL._Pass:
        node = node.child
    return node


_EMPTY_ENTRY = (0, 0, 0, -1, True)
_ROW = np.dtype((np.void, 8 * PROGRAM_FIELDS))   # an instruction row as one value (deduplication)


class Program:
    """One lowering of a plan: instruction rows, pools, arena sizes, the numpy steps between segments, and where
    each rule's root lies in the arena."""

    __slots__ = ("roots", "kernel", "ins", "ipool", "fpool", "nv", "np_", "segs", "steps", "outs", "inst_keys",
                 "fams", "has_kernel", "n_ins")

    def run(self, E, nb):
        """Every rule's (values, presence) (None for a rule without a lowered root) at the call ``E``, or None
        where the program stopped (the caller evaluates the call by the numpy nodes)."""
        T = E.T
        V = np.empty((self.nv, T))
        P = np.empty((self.np_, T), dtype=bool)
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
            kv, kp = self.kernel.value(E)
            kv, kp = np.ascontiguousarray(kv, dtype=np.float64), np.ascontiguousarray(kp, dtype=bool)
        else:
            kv, kp = np.zeros((0, T)), np.zeros((0, T), dtype=bool)
        ins, ipool, fpool = self.ins, self.ipool, self.fpool
        for lvl, (i0, i1) in enumerate(self.segs):
            if lvl > 0 and i1 > i0:
                if nb.program(ins, ipool, fpool, i0, i1, V, P, addrs, shapes, jc, ok, kv, kp) >= 0:
                    return None
            for node, vo, po, n, scalar, stamps in self.steps[lvl]:
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
        return [None if o is None else (V[o[0]:o[0] + o[2]], P[o[1]:o[1] + o[2]]) for o in self.outs]


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
    """A plan's lowering state across its builds: the arena rows, pool arrays and constants handed out so far (each
    node keeps its own, ``_lw``), the families and instant-column keys its selectors name, and per rule the lowering
    of its root's subgraph (instruction rows in post-order, numpy steps, kernel range rows). Started again when it
    holds several times what the current program uses (``COMPACT_FACTOR``).

    A rule whose plan record (``PackPlan._records[i]``) is the same object as at the last lowering was kept by the
    rebuild: its nodes are the same objects with the same fields (a rebuild makes new nodes or rebinds nodes of
    rebuilt rules only), so its root's lowering is taken again without a walk; only its kernel range rows are read
    afresh (the kernel group is reassembled at every build: ``_Range.a``). Other rules are walked (each from its
    root, shared nodes included: the rows are deduplicated by their arena rows when the program is assembled)."""

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
        self.per_root: dict = {}        # id(root) -> (root, record, generation, rows, levels, steps, kernel rows, entry)

    def lower(self, plan) -> Program | None:
        kernel = self.kernel = plan._kernel
        gen = self.gen
        roots, records = plan._roots, plan._records
        old, new = self.per_root, {}
        arrs: list = []         # per root: its instruction rows (an array), their levels
        lvs: list = []
        k_at: list = []         # kernel range rows to read afresh: (row in the concatenation, node)
        base = 0
        steps: list = []
        seen_steps: set = set()
        outs: list = []
        try:
            for i, root in enumerate(roots):
                if root is None or not root.labels:
                    outs.append(None)
                    continue
                rec = records[i] if i < len(records) else None
                c = old.get(id(root))
                if c is None or c[0] is not root or c[1] is not rec or rec is None or c[2] is not gen:
                    self.loc, self.rows, self.levels, self.steps, self.kern = {}, [], [], [], []
                    e = self.visit(root)
                    arr = (np.asarray(self.rows, dtype=np.int64) if self.rows
                           else np.zeros((0, PROGRAM_FIELDS), dtype=np.int64))
                    c = (root, rec, gen, arr, np.asarray(self.levels, dtype=np.int64), self.steps, self.kern, e)
                new[id(root)] = c
                _, _, _, arr, lv, r_steps, r_kern, e = c
                for k, node in r_kern:
                    k_at.append((base + k, node))
                arrs.append(arr)
                lvs.append(lv)
                base += len(arr)
                for st in r_steps:
                    if id(st[0]) not in seen_steps:
                        seen_steps.add(id(st[0]))
                        steps.append(st)
                outs.append((e[0], e[1], e[2]))
        except _Cant:
            self.per_root = {}
            return None
        finally:
            self.loc = self.rows = self.levels = self.steps = self.kern = None   # (this walk's: not kept)
        self.per_root = new
        ins = np.concatenate(arrs) if arrs else np.zeros((0, PROGRAM_FIELDS), dtype=np.int64)
        if k_at:
            # the kernel group is reassembled at each build: its range nodes' rows in its output are read afresh
            idx = [k for k, _ in k_at]
            a = np.fromiter((node.a for _, node in k_at), dtype=np.int64, count=len(k_at))
            n = np.fromiter((node.b - node.a for _, node in k_at), dtype=np.int64, count=len(k_at))
            if not all(node.group is kernel for _, node in k_at) or not np.array_equal(ins[idx, 2], n):
                self.per_root = {}
                return None
            ins[idx, 5] = a
        prog = self._program(plan, ins, np.concatenate(lvs) if lvs else _EMPTY_I, steps, outs)
        live = int(prog.ins[:, 2].sum()) + sum(st[3] for st in steps)
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

    def alloc(self, nv: int, npp: int) -> tuple:
        vo, po = self.nv, self.npp
        self.nv += nv
        self.npp += npp
        return vo, po

    # ------------------------------------------------------------------ the walk of one root
    def visit(self, node) -> tuple:
        loc = self.loc
        e = loc.get(id(node))
        if e is not None:
            return e
        cls = type(node)
        if cls is PL._Pass:
            e = loc[id(node)] = self.visit(node.child)
            return e
        if cls is PL._Empty:
            loc[id(node)] = _EMPTY_ENTRY
            return _EMPTY_ENTRY
        kn = self.kid_nodes(node, cls)
        if not kn:
            ke = ()
        elif len(kn) == 1:
            ke = (self.visit(kn[0]),)
        else:
            ke = tuple([self.visit(k) for k in kn])
        fields = _fields(node, cls)
        kernel_range = cls is PL._Range and node.kernel
        rec = node.__dict__.get("_lw")
        if (rec is not None and rec[0] is self.gen and rec[2] == ke and _same(rec[1], fields)
                and (not kernel_range or rec[3][2] == node.b - node.a)):
            e, row = rec[3], rec[4]
            if kernel_range and row[5] != node.a:
                row = row[:5] + (node.a,) + row[6:]
                node._lw = rec[:4] + (row,)
        else:
            e, row = self.make(node, cls, ke)
            node._lw = (self.gen, fields, ke, e, row)
        if row is not None:
            if kernel_range:
                self.kern.append((len(self.rows), node))
            self.rows.append(row)
            self.levels.append(e[3])
        else:
            stamps = [(_real(k), c[0], c[1], c[2], c[2] == 1 and _real(k).kind == "s")
                      for k, c in zip(kn, ke) if c[4]]
            self.steps.append((node, e[0], e[1], e[2], node.kind == "s", stamps, e[3]))
        loc[id(node)] = e
        return e

    def kid_nodes(self, node, cls) -> tuple:
        """The children a node's instruction (or numpy step) reads, in the order its instruction takes them."""
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
            return (node.q, node.child)
        if cls is PL._Generic:
            return tuple(c for _, c in node.children)
        raise _Cant(cls.__name__)

    @staticmethod
    def level(kids) -> int:
        """An instruction's level: its lowered children's, or one past a numpy child's (whose step runs after the
        segment of its own level)."""
        lvl = 0
        for c in kids:
            cl = c[3] if c[4] else c[3] + 1
            if cl > lvl:
                lvl = cl
        return lvl

    def make(self, node, cls, kids) -> tuple:  # noqa: C901 - one branch per node type
        """(entry, instruction row or None for a numpy step) of a node whose fields or children changed."""
        a = kids[0] if kids else _EMPTY_ENTRY
        b = kids[1] if len(kids) > 1 else _EMPTY_ENTRY
        lvl = self.level(kids)
        if cls is PL._Const:
            vo, _ = self.alloc(1, 0)
            return (vo, 0, 1, 0, True), (OP_CONST, 0, 1, vo, 0, 0, 0, 0, 0, 0, 0, self.const(node.val), 0, 0, 0, 0)
        if cls is PL._Sel:
            f = np.concatenate([np.full(len(rows), self.fams.index(fam), dtype=np.int64) for fam, rows in node.flat])
            r = np.concatenate([np.asarray(rows, dtype=np.int64) for _, rows in node.flat])
            if node.perm is not None:
                f, r = f[node.perm], r[node.perm]
            pairs = np.empty(2 * len(r), dtype=np.int64)
            pairs[0::2] = f
            pairs[1::2] = r
            key = (node.sel.at_ms, node.sel.offset_ms)
            k = self.inst_keys.setdefault(key, len(self.inst_keys))
            n = len(r)
            vo, po = self.alloc(n, n)
            return (vo, po, n, 0, True), (OP_SEL, 0, n, vo, po, 0, 0, 0, 0, 0, 0, self.put(pairs), k, 0, 0, 0)
        if cls is PL._Range and node.kernel:
            n = node.b - node.a
            vo, po = self.alloc(n, n)
            return (vo, po, n, 0, True), (OP_KCOPY, 0, n, vo, po, node.a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        if cls is PL._Agg:
            agg = AGGS[node.op]
            n = node.G
            vo, po = self.alloc(n, n)
            x0 = x1 = x2 = 0
            if node.singletons:
                sub = agg
                x0 = _NOPOOL if node.perm is None else self.put(np.asarray(node.perm, dtype=np.int64))
            elif node.one_group:
                sub = agg + 8
            elif agg <= 2:
                sub = agg + 16
                x0 = self.put(np.asarray(node.gid, dtype=np.int64))
            else:
                sub = agg + 16
                x1 = _NOPOOL if node.order is None else self.put(np.asarray(node.order, dtype=np.int64))
                x2 = self.put(np.asarray(node.starts, dtype=np.int64))
            return (vo, po, n, lvl, True), (OP_AGG, sub, n, vo, po, a[0], a[1], a[2], 0, 0, 0, x0, x1, x2, 0, 0)
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
                                            0)
        if cls is PL._VecVec and node.op in BINOPS:
            n = len(node.labels)
            vo, po = self.alloc(n, n)
            mi = None if node.mi is None else np.asarray(node.mi, dtype=np.int64)
            oi = None if node.oi is None else np.asarray(node.oi, dtype=np.int64)
            return (vo, po, n, lvl, True), (OP_VV, BINOPS[node.op], n, vo, po, a[0], a[1], a[2], b[0], b[1], b[2],
                                            self.put(mi), self.put(oi), 0, (1 if node.swap else 0) | (2 if node.rb else 0),
                                            0)
        if cls is PL._SetAndUnless:
            n = a[2]
            _, po = self.alloc(0, n)
            sub = 0 if node.op == "and" else 1
            if node.r_starts is None:
                row = (OP_SET, sub, n, a[0], po, a[0], a[1], a[2], 0, 0, 0, 0, 0, 0, -1, 0)
            else:
                ro = None if node.r_ident else np.asarray(node.r_order, dtype=np.int64)
                row = (OP_SET, sub, n, a[0], po, a[0], a[1], a[2], b[0], b[1], len(node.r_order), self.put(ro),
                       self.put(np.asarray(node.r_starts, dtype=np.int64)),
                       self.put(np.asarray(node.lmap, dtype=np.int64)), len(node.r_starts), 0)
            return (a[0], po, n, lvl, True), row
        # a numpy step: after the segment of its latest child (lowered or numpy), its result copied into the arena
        lvl = -1
        for c in kids:
            if c[3] > lvl:
                lvl = c[3]
        scalar = node.kind == "s"
        n = 1 if scalar else len(node.labels)
        vo, po = self.alloc(n, 0 if scalar else n)
        return (vo, po, n, lvl, False), None

    def _program(self, plan, ins, lv, steps, outs) -> Program:
        prog = Program()
        prog.roots, prog.kernel = plan._roots, self.kernel
        top = max(int(lv.max()) if len(lv) else 0, max((st[6] for st in steps), default=-1) + 1)
        if len(ins):
            # one row per node (a node shared by rules is in each one's rows): the first of equal rows (a node's row
            # is the same in each; distinct nodes own distinct arena rows), which keeps the post-order
            _, first = np.unique(ins.view(_ROW), return_index=True)
            if len(first) < len(ins):
                first.sort()
                ins, lv = ins[first], lv[first]
            if lv.any():
                order = np.argsort(lv, kind="stable")
                ins, lv = ins[order], lv[order]
            prog.ins = np.ascontiguousarray(ins)
            bounds = np.searchsorted(lv, np.arange(top + 2))
        else:
            prog.ins = np.zeros((0, PROGRAM_FIELDS), dtype=np.int64)
            bounds = np.zeros(top + 2, dtype=np.int64)
        # segment k + 1 runs the instructions of level k, then the numpy steps of level k; "segment" 0 only the
        # numpy steps of level -1 (those that read no lowered node)
        prog.segs = [(0, 0)] + [(int(bounds[k]), int(bounds[k + 1])) for k in range(top + 1)]
        by_level: list = [[] for _ in range(top + 2)]
        for st in steps:
            by_level[st[6] + 1].append(st[:6])
        prog.steps = by_level
        prog.ipool, prog.fpool = self.pool_arr, self.fpool_arr
        prog.nv, prog.np_ = self.nv, self.npp
        prog.outs = outs
        prog.inst_keys = list(self.inst_keys)
        prog.fams = self.fams
        prog.has_kernel = bool(len(prog.ins)) and bool((prog.ins[:, 0] == OP_KCOPY).any())
        prog.n_ins = len(prog.ins)
        return prog
