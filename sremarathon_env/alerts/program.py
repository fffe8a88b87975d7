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
OP_CONST, OP_SEL, OP_AGG, OP_VS, OP_VV, OP_SET = 0, 1, 2, 3, 4, 5
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


# per node type: what does not depend on the program, kept on the node (``_lw``) with the fields it was made of
# (by identity: a node whose fields were replaced is lowered afresh). Depends on these node fields (plan.py):
# _Sel.flat / perm / sel; _Agg.op / G / gid / singletons / one_group / perm / order / starts; _VecScalar.op / rb /
# left / const; _VecVec.op / rb / swap / mi / oi; _SetAndUnless.op / r_order / r_starts / lmap / r_ident;
# _Range.kernel / group / a / b; _Pass.child; _HistQuantile.q / child; _Generic.children.

def _static(node, fams: _Families):
    cls = type(node)
    if cls is PL._Sel:
        key = (node.flat, node.perm)
        hit = getattr(node, "_lw", None)
        if hit is not None and hit[0][0] is key[0] and hit[0][1] is key[1]:
            return hit[1]
        f = np.concatenate([np.full(len(rows), fams.index(fam), dtype=np.int64) for fam, rows in node.flat])
        r = np.concatenate([np.asarray(rows, dtype=np.int64) for _, rows in node.flat])
        if node.perm is not None:
            f, r = f[node.perm], r[node.perm]
        pairs = np.empty(2 * len(r), dtype=np.int64)
        pairs[0::2] = f
        pairs[1::2] = r
        out = (pairs, (node.sel.at_ms, node.sel.offset_ms))
        node._lw = (key, out)
        return out
    if cls is PL._Agg:
        key = (node.gid, node.perm, node.order, node.starts)
        hit = getattr(node, "_lw", None)
        if hit is not None and all(a is b for a, b in zip(hit[0], key)) and hit[2] == node.op:
            return hit[1]
        agg = AGGS[node.op]
        if node.singletons:
            out = (agg, (None if node.perm is None else np.asarray(node.perm, dtype=np.int64),), None)
        elif node.one_group:
            out = (agg + 8, (), None)
        elif agg <= 2:
            out = (agg + 16, (np.asarray(node.gid, dtype=np.int64),), None)
        else:
            out = (agg + 16, (None, None, None),
                   (None if node.order is None else np.asarray(node.order, dtype=np.int64),
                    np.asarray(node.starts, dtype=np.int64)))
        node._lw = (key, out, node.op)
        return out
    if cls is PL._VecVec:
        key = (node.mi, node.oi)
        hit = getattr(node, "_lw", None)
        if hit is not None and hit[0][0] is key[0] and hit[0][1] is key[1]:
            return hit[1]
        out = (None if node.mi is None else np.asarray(node.mi, dtype=np.int64),
               None if node.oi is None else np.asarray(node.oi, dtype=np.int64))
        node._lw = (key, out)
        return out
    if cls is PL._SetAndUnless:
        key = (node.r_order, node.r_starts, node.lmap)
        hit = getattr(node, "_lw", None)
        if hit is not None and all(a is b for a, b in zip(hit[0], key)):
            return hit[1]
        if node.r_starts is None:
            out = None
        else:
            out = (None if node.r_ident else np.asarray(node.r_order, dtype=np.int64),
                   np.asarray(node.r_starts, dtype=np.int64), np.asarray(node.lmap, dtype=np.int64))
        node._lw = (key, out)
        return out
    raise AssertionError(cls)


class Program:
    """One lowering of a plan: instruction rows, pools, arena sizes, the numpy steps between segments, and where
    each rule's root lies in the arena."""

    __slots__ = ("roots", "kernel", "ins", "ipool", "fpool", "nv", "np_", "segs", "steps", "outs", "inst_keys",
                 "fams", "kg", "n_ins")

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
        g = self.kernel.grid
        keys = self.inst_keys
        if keys:
            jc = np.empty((len(keys), T), dtype=np.int64)
            ok = np.empty((len(keys), T), dtype=bool)
            for k, (at_ms, offset_ms) in enumerate(keys):
                _, j, okk, _, _ = PL._instant_cols(g, E, at_ms, offset_ms)
                jc[k] = j
                ok[k] = okk
        else:
            jc = np.zeros((0, T), dtype=np.int64)
            ok = np.zeros((0, T), dtype=bool)
        if self.kg is not None:
            kgroup, vo, po, n = self.kg
            kv, kp = kgroup.value(E)
            V[vo:vo + n] = kv
            P[po:po + n] = kp
        ins, ipool, fpool = self.ins, self.ipool, self.fpool
        for lvl, (i0, i1) in enumerate(self.segs):
            if lvl > 0 and i1 > i0:
                if nb.program(ins, ipool, fpool, i0, i1, V, P, addrs, shapes, jc, ok) >= 0:
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


def lower(plan) -> Program | None:
    """The program of ``plan``'s current build (None: a node type it cannot take; the numpy path serves)."""
    fams = getattr(plan, "_prog_fams", None)
    if fams is None:
        fams = plan._prog_fams = _Families()
    lw = _Lowering(fams, plan._kernel)
    outs: list = []
    try:
        for root in plan._roots:
            if root is None or not root.labels:
                outs.append(None)
                continue
            e = lw.visit(root)
            outs.append((e[0], e[1], e[2]))
    except _Cant:
        return None
    return lw.program(plan, outs)


class _Lowering:
    """One lowering's state (a class, not closures: nested recursive functions would be cyclic garbage)."""

    def __init__(self, fams: _Families, kernel):
        self.fams, self.kernel = fams, kernel
        self.rows: list = []        # instruction rows (tuples of PROGRAM_FIELDS ints)
        self.levels: list = []      # their levels
        self.pool: list = []        # index arrays, concatenated into the program's integer pool
        self.plen = 0
        self.fpool: list = []
        self.loc: dict = {}         # id(node) -> (vo, po, n, level, lowered, node)
        self.nv = self.npp = 0      # arena rows (values, presence)
        self.steps: dict = {}       # level -> numpy steps
        self.inst_keys: dict = {}   # (at, offset) of the selectors -> index
        self.kg = None              # (kernel group, vo, po, rows) once a kernel range node is met

    def put(self, a) -> int:
        if a is None:
            return _NOPOOL
        at = self.plen
        self.pool.append(a)
        self.plen += len(a)
        return at

    def alloc(self, nv: int, npp: int) -> tuple:
        vo, po = self.nv, self.npp
        self.nv += nv
        self.npp += npp
        return vo, po

    def visit(self, node):  # noqa: C901 - one branch per node type
        e = self.loc.get(id(node))
        if e is not None:
            return e
        cls = type(node)
        if cls is PL._Pass:
            e = self.visit(node.child)
        elif cls is PL._Empty:
            e = (0, 0, 0, -1, True, node)
        elif cls is PL._Range and node.kernel and node.group is self.kernel:
            if self.kg is None:
                n = self.kernel.n
                vo, po = self.alloc(n, n)
                self.kg = (self.kernel, vo, po, n)
            _, vo, po, _ = self.kg
            e = (vo + node.a, po + node.a, node.b - node.a, -1, True, node)
        elif cls is PL._Const:
            vo, _ = self.alloc(1, 0)
            self.fpool.append(float(node.val))
            self.ins(OP_CONST, 0, 1, vo, 0, (), x0=len(self.fpool) - 1)
            e = (vo, 0, 1, 0, True, node)
        elif cls is PL._Sel:
            pairs, key = _static(node, self.fams)
            k = self.inst_keys.setdefault(key, len(self.inst_keys))
            n = len(pairs) // 2
            vo, po = self.alloc(n, n)
            self.ins(OP_SEL, 0, n, vo, po, (), x0=self.put(pairs), x1=k)
            e = (vo, po, n, 0, True, node)
        elif cls is PL._Agg:
            c = self.visit(node.child)
            sub, arrs, mm = _static(node, self.fams)
            n = node.G
            vo, po = self.alloc(n, n)
            if mm is not None:
                x0, x1, x2 = _NOPOOL, self.put(mm[0]), self.put(mm[1])
            else:
                x0, x1, x2 = (self.put(arrs[0]) if arrs else _NOPOOL), 0, 0
            lvl = self.ins(OP_AGG, sub, n, vo, po, (c,), x0=x0, x1=x1, x2=x2)
            e = (vo, po, n, lvl, True, node)
        elif cls is PL._VecScalar and node.op in BINOPS:
            c = self.visit(node.vec)
            sc = None if node.const is not None else self.visit(node.sc)
            code = BINOPS[node.op]
            n = c[2]
            if code < 10 or node.rb:    # new values, the vector's presence
                vo, _ = self.alloc(n, 0)
                po = c[1]
            else:                       # the vector's values, new presence
                _, po = self.alloc(0, n)
                vo = c[0]
            fl = (1 if node.left else 0) | (2 if node.rb else 0)
            x0 = 0
            if sc is None:
                self.fpool.append(float(node.const))
                x0 = len(self.fpool) - 1
                fl |= 4
            lvl = self.ins(OP_VS, code, n, vo, po, (c,) if sc is None else (c, sc), x0=x0, fl=fl)
            e = (vo, po, n, lvl, True, node)
        elif cls is PL._VecVec and node.op in BINOPS:
            lhs, rhs = self.visit(node.lhs), self.visit(node.rhs)
            many, one = (rhs, lhs) if node.swap else (lhs, rhs)
            mi, oi = _static(node, self.fams)
            n = len(node.labels)
            vo, po = self.alloc(n, n)
            lvl = self.ins(OP_VV, BINOPS[node.op], n, vo, po, (many, one), x0=self.put(mi), x1=self.put(oi),
                           fl=(1 if node.swap else 0) | (2 if node.rb else 0))
            e = (vo, po, n, lvl, True, node)
        elif cls is PL._SetAndUnless:
            lhs = self.visit(node.lhs)
            st = _static(node, self.fams)
            n = lhs[2]
            _, po = self.alloc(0, n)
            sub = 0 if node.op == "and" else 1
            if st is None:   # (no right rows: the right side is not read, as in the numpy node)
                lvl = self.ins(OP_SET, sub, n, lhs[0], po, (lhs,), fl=-1)
            else:
                rhs = self.visit(node.rhs)
                lvl = self.ins(OP_SET, sub, n, lhs[0], po, (lhs, rhs), x0=self.put(st[0]), x1=self.put(st[1]),
                               x2=self.put(st[2]), fl=len(st[1]), bn=len(node.r_order))
            e = (lhs[0], po, n, lvl, True, node)
        else:
            e = self.numpy_step(node)
        self.loc[id(node)] = e
        return e

    def ins(self, op, sub, n, vo, po, children, x0=0, x1=0, x2=0, fl=0, bn=0) -> int:
        """Append an instruction; its level: its lowered children's, or one past a numpy child's."""
        lvl = 0
        for c in children:
            cl = c[3] if c[4] else c[3] + 1
            if cl > lvl:
                lvl = cl
        a = children[0] if children else (0, 0, 0)
        b = children[1] if len(children) > 1 else (0, 0, 0)
        self.rows.append((op, sub, n, vo, po, a[0], a[1], a[2], b[0], b[1], bn or b[2], x0, x1, x2, fl, 0))
        self.levels.append(lvl)
        return lvl

    def numpy_step(self, node):
        """A node the program does not take: its numpy ``value`` runs after the segment of its latest lowered
        child (given their arena rows as values), and its result is copied into the arena."""
        cls = type(node)
        if cls is PL._HistQuantile:
            kids = [node.q, node.child]
        elif cls is PL._Generic:
            kids = [c for _, c in node.children]
        elif cls is PL._Range and not node.kernel:
            kids = []
        elif cls is PL._VecScalar:
            kids = [node.vec, node.sc]
        elif cls is PL._VecVec:
            kids = [node.lhs, node.rhs]
        else:
            raise _Cant(cls.__name__)
        lvl = -1
        stamps = []
        for k in kids:
            c = self.visit(k)
            if c[3] > lvl:
                lvl = c[3]
            if c[4]:
                stamps.append((c[5], c[0], c[1], c[2], c[5].kind == "s"))
        scalar = node.kind == "s"
        n = 1 if scalar else len(node.labels)
        vo, po = self.alloc(n, 0 if scalar else n)
        self.steps.setdefault(lvl, []).append((node, vo, po, n, scalar, stamps))
        return (vo, po, n, lvl, False, node)

    def program(self, plan, outs) -> Program:
        prog = Program()
        prog.roots, prog.kernel = plan._roots, self.kernel
        levels, steps, rows = self.levels, self.steps, self.rows
        top = max(max(levels, default=0), max(steps, default=-1) + 1)
        if rows:
            lv = np.asarray(levels, dtype=np.int64)
            order = np.argsort(lv, kind="stable")
            prog.ins = np.ascontiguousarray(np.asarray(rows, dtype=np.int64)[order])
            bounds = np.searchsorted(lv[order], np.arange(top + 2))
        else:
            prog.ins = np.zeros((0, PROGRAM_FIELDS), dtype=np.int64)
            bounds = np.zeros(top + 2, dtype=np.int64)
        # segment k + 1 runs the instructions of level k, then the numpy steps of level k; "segment" 0 only the
        # numpy steps of level -1 (after the kernel group's copy)
        prog.segs = [(0, 0)] + [(int(bounds[k]), int(bounds[k + 1])) for k in range(top + 1)]
        prog.steps = [steps.get(k, ()) for k in range(-1, top + 1)]
        prog.ipool = np.concatenate(self.pool) if self.pool else _EMPTY_I
        prog.fpool = np.asarray(self.fpool, dtype=np.float64) if self.fpool else np.zeros(1)
        prog.nv, prog.np_ = self.nv, self.npp
        prog.outs = outs
        prog.inst_keys = list(self.inst_keys)
        prog.fams = self.fams
        prog.kg = self.kg
        prog.n_ins = len(rows)
        return prog
