"""Shared Z3 encoding for the safety (seed 001 §2) and reuse (§5) checkers.

`Encoder` turns sqlglot expressions over internal attribute names into Z3 terms. Sorts follow the
Spark type: integers, dates (days since epoch) and timestamps (microseconds) are Int; decimals and
floating point are Real (rounding is ignored); strings are Z3 String with equality only and order
through one uninterpreted predicate `str_lt`; booleans are Bool. Anything else (LIKE, functions,
casts of columns, IS NULL, ...) becomes an uninterpreted function of its column arguments, keyed by
the expression's SQL with the columns abstracted, so equal arguments give equal results.

NULLs are not modelled (seed §10): every value is treated as non-null and `IS NULL` is an opaque
predicate. Integer overflow and floating-point rounding are ignored as well.

`build_conds` computes pred/expr of every subquery (§2.3) on one side (a variable tag), and
`valid` decides `hyps -> goal` with a timeout; `unknown` counts as not proven.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import re
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Callable, Mapping, Optional

import z3
from sqlglot import exp

from advisor.plan import ir

TIMEOUT_MS = 2000
EPOCH_D = dt.date(1970, 1, 1)
EPOCH_TS = dt.datetime(1970, 1, 1)
DAY_US = 86_400_000_000
NUMERIC = ("int", "real")
ORDERED = ("int", "real", "date", "ts")
_PRED_CLASSES = (exp.Predicate, exp.Connector, exp.Not, exp.Between, exp.In, exp.Is, exp.Like,
                 exp.ILike, exp.Boolean, exp.Xor)


class _Fallback(Exception):
    """Native encoding impossible here; the caller abstracts the expression instead."""


_DTYPE_KINDS = ((("tinyint", "smallint", "int", "integer", "bigint", "long", "short", "byte"), "int", True),
                (("decimal", "double", "float", "real", "numeric"), "real", False), (("date",), "date", True),
                (("timestamp",), "ts", False), (("string", "varchar", "char", "text"), "str", False),
                (("boolean", "bool"), "bool", True))


def kind_of_dtype(dtype: str) -> str:
    """Spark simpleString -> kind: int, real, date, ts, str, bool or other:<type>."""
    t = (dtype or "").strip().lower()
    for names, kind, exact in _DTYPE_KINDS:
        if (t in names) if exact else t.startswith(names):
            return kind
    return "other:" + re.sub(r"[^a-z0-9]", "_", t)


def _kind_of_datatype(d: exp.DataType) -> Optional[str]:
    T = exp.DataType
    for types, kind in ((T.INTEGER_TYPES, "int"), (T.REAL_TYPES, "real"), ({T.Type.DATE}, "date"),
                        (T.TEMPORAL_TYPES, "ts"), (T.TEXT_TYPES, "str"), ({T.Type.BOOLEAN}, "bool")):
        if d.is_type(*types):
            return kind
    return None


def sort_of(kind: str) -> z3.SortRef:
    fixed = {"int": z3.IntSort, "date": z3.IntSort, "ts": z3.IntSort, "real": z3.RealSort,
             "str": z3.StringSort, "bool": z3.BoolSort}
    return fixed[kind]() if kind in fixed else z3.DeclareSort(kind.replace(":", "_"))


def _frac(v) -> z3.ExprRef:
    f = Fraction(v)
    return z3.RealVal(f"{f.numerator}/{f.denominator}")


def py_value(v: object, kind: str) -> Optional[z3.ExprRef]:
    """A Python statistic value as a Z3 constant of `kind` (None if not representable)."""
    if v is None or isinstance(v, bool):
        return None
    if kind == "date":
        if isinstance(v, dt.datetime):
            v = v.date()
        return z3.IntVal((v - EPOCH_D).days) if isinstance(v, dt.date) else None
    if kind == "ts":
        if isinstance(v, dt.datetime):
            if v.tzinfo is not None:
                v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
            d = v - EPOCH_TS
            return z3.IntVal((d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds)
        if isinstance(v, dt.date):
            return z3.IntVal((v - EPOCH_D).days * DAY_US)
        return None
    if kind in NUMERIC and isinstance(v, int):
        return z3.IntVal(v) if kind == "int" else z3.RealVal(v)
    if kind in NUMERIC and isinstance(v, (float, Decimal)) and v == v and abs(v) != float("inf"):
        return _frac(v)
    return None


def stats_bounds(term: z3.ExprRef, dtype: str, lo: object, hi: object) -> list[z3.BoolRef]:
    """`term >= lo ∧ term <= hi` for numeric/date/timestamp columns; strings and others skipped."""
    kind = kind_of_dtype(dtype)
    if kind not in ORDERED:
        return []
    lv, hv = py_value(lo, kind), py_value(hi, kind)
    return ([term >= lv] if lv is not None else []) + ([term <= hv] if hv is not None else [])


def _literal(e: exp.Literal) -> tuple[z3.ExprRef, str]:
    if e.is_string:
        return z3.StringVal(e.this), "str"
    try:
        return z3.IntVal(int(e.this)), "int"
    except ValueError:
        return _frac(Decimal(e.this)), "real"


def _temporal_literal(text: str, kind: str) -> z3.ExprRef:
    try:
        if kind == "date":
            v: object = dt.date.fromisoformat(text.strip()[:10])
        else:
            v = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise _Fallback(text) from None
    out = py_value(v, kind)
    if out is None or getattr(v, "tzinfo", None) is not None:  # explicit offsets: not comparable to stats
        raise _Fallback(text)
    return out


class Encoder:
    """sqlglot -> Z3 with one registry of uninterpreted functions shared by all sides of a check."""

    def __init__(self, dtypes: Mapping[str, str]):
        self.dtypes = dict(dtypes)
        self._funcs: dict[tuple, z3.FuncDeclRef] = {}
        self._vars: dict[str, str] = {}  # z3 variable name -> attribute name
        self.str_lt = z3.Function("str_lt", z3.StringSort(), z3.StringSort(), z3.BoolSort())

    # ---------- variables ----------
    def kind(self, name: str) -> str:
        return kind_of_dtype(self.dtypes.get(name, "string"))

    def var(self, name: str, tag: str = "") -> z3.ExprRef:
        """The Z3 variable of attribute `name` on side `tag` ("" = D, "__ps", "__new", ...)."""
        self._vars[name + tag] = name
        return z3.Const(name + tag, sort_of(self.kind(name)))

    def side(self, tag: str) -> Callable[[str], z3.ExprRef]:
        return lambda n: self.var(n, tag)

    def attrs_in(self, f: z3.ExprRef) -> set[str]:
        """Attribute names whose variables occur in formula f."""
        out, seen, todo = set(), set(), [f]
        while todo:
            t = todo.pop()
            if t.get_id() in seen:
                continue
            seen.add(t.get_id())
            if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
                a = self._vars.get(t.decl().name())
                if a is not None:
                    out.add(a)
            todo.extend(t.children())
        return out

    # ---------- expressions ----------
    def encode(self, e: exp.Expression, var: Callable[[str], z3.ExprRef], want: Optional[str] = None) -> z3.ExprRef:
        """Z3 term for e; `want` is the kind expected by the context (used for opaque parts)."""
        return self._enc(e, var, want)[0]

    def encode_bool(self, e: exp.Expression, var: Callable[[str], z3.ExprRef]) -> z3.BoolRef:
        t, k = self._enc(e, var, "bool")
        if k != "bool":
            return self._opaque(e, var, "bool")[0]
        return t

    def static_kind(self, e: exp.Expression) -> Optional[str]:
        """The kind of e if it is evident without encoding, else None."""
        if isinstance(e, exp.Paren):
            return self.static_kind(e.this)
        if isinstance(e, exp.Column):
            return self.kind(e.name)
        if isinstance(e, exp.Literal):
            return _literal(e)[1]
        if isinstance(e, exp.Cast):
            return _kind_of_datatype(e.to)
        if isinstance(e, _PRED_CLASSES):
            return "bool"
        if isinstance(e, exp.Div):
            return "real"
        if isinstance(e, (exp.Add, exp.Sub, exp.Mul)):
            a, b = self.static_kind(e.left), self.static_kind(e.right)
            return "int" if a == b == "int" else ("real" if a in NUMERIC and b in NUMERIC else None)
        if isinstance(e, (exp.Neg, exp.Abs)):
            return self.static_kind(e.this)
        if isinstance(e, (exp.Upper, exp.Lower, exp.Substring, exp.Concat, exp.Trim)):
            return "str"
        if isinstance(e, (exp.Length, exp.Year, exp.Month, exp.Day)):
            return "int"
        if isinstance(e, (exp.Coalesce, exp.Case, exp.If)):  # the common kind of all values, if any
            if isinstance(e, exp.Coalesce):
                vals = [e.this, *e.expressions]
            elif isinstance(e, exp.If):
                vals = [e.args.get("true"), e.args.get("false")]
            else:
                vals = [i.args["true"] for i in e.args.get("ifs") or []] + [e.args.get("default")]
            kinds = {self.static_kind(v) for v in vals if v is not None and not isinstance(v, exp.Null)}
            if len(kinds) == 1:
                return kinds.pop()
            return "real" if kinds and kinds <= set(NUMERIC) else None
        return None

    def _enc(self, e, var, want) -> tuple[z3.ExprRef, str]:
        try:
            return self._native(e, var, want)
        except (_Fallback, z3.Z3Exception):
            return self._opaque(e, var, want)

    def _native(self, e, var, want) -> tuple[z3.ExprRef, str]:
        if isinstance(e, exp.Paren):
            return self._enc(e.this, var, want)
        if isinstance(e, exp.Column):
            return var(e.name), self.kind(e.name)
        if isinstance(e, exp.Literal):
            return _literal(e)
        if isinstance(e, exp.Boolean):
            return z3.BoolVal(bool(e.this)), "bool"
        if isinstance(e, exp.Null):
            k = want or "real"
            return z3.Const(f"NULL_{k}", sort_of(k)), k
        if isinstance(e, exp.Cast):
            return self._cast(e, var)
        if isinstance(e, exp.Neg):
            t, k = self._enc(e.this, var, "real")
            if k not in NUMERIC:
                raise _Fallback()
            return -t, k
        if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
            (a, ka), (b, kb) = self._enc(e.left, var, "real"), self._enc(e.right, var, "real")
            if ka not in NUMERIC or kb not in NUMERIC:
                raise _Fallback()
            if isinstance(e, exp.Div):
                return z3.ToReal(a) / z3.ToReal(b) if ka == kb == "int" else a / b, "real"
            r = a + b if isinstance(e, exp.Add) else a - b if isinstance(e, exp.Sub) else a * b
            return r, "int" if ka == kb == "int" else "real"
        if isinstance(e, (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)):
            return self._compare(type(e), e.left, e.right, var), "bool"
        if isinstance(e, (exp.And, exp.Or)):
            a, b = self.encode_bool(e.left, var), self.encode_bool(e.right, var)
            return (z3.And(a, b) if isinstance(e, exp.And) else z3.Or(a, b)), "bool"
        if isinstance(e, exp.Not):
            return z3.Not(self.encode_bool(e.this, var)), "bool"
        if isinstance(e, exp.Between):
            lo = self._compare(exp.GTE, e.this, e.args["low"], var)
            hi = self._compare(exp.LTE, e.this, e.args["high"], var)
            return z3.And(lo, hi), "bool"
        if isinstance(e, exp.In) and e.expressions and not e.args.get("query"):
            return z3.Or(*[self._compare(exp.EQ, e.this, v, var) for v in e.expressions]), "bool"
        if isinstance(e, exp.Is) and isinstance(e.expression, exp.Null):
            t, k = self._enc(e.this, var, self.static_kind(e.this))
            f = self._func(("isnull", k), [t.sort()], z3.BoolSort())
            return f(t), "bool"
        if isinstance(e, (exp.Case, exp.If)):
            return self._case(e, var, want)
        if isinstance(e, exp.Rand) or (isinstance(e, exp.Anonymous) and e.name.lower() in ("rand", "random", "uuid")):
            k = want or "real"
            return z3.FreshConst(sort_of(k), "nondet"), k  # a fresh value: nothing is known about it
        raise _Fallback()

    def _cast(self, e: exp.Cast, var) -> tuple[z3.ExprRef, str]:
        to, inner = _kind_of_datatype(e.to), e.this
        if isinstance(inner, exp.Literal):
            if inner.is_string and to in ("date", "ts"):
                return _temporal_literal(inner.this, to), to
            try:
                t, k = _literal(exp.Literal.number(inner.this) if inner.is_string and to in NUMERIC else inner)
            except (ValueError, ArithmeticError):
                raise _Fallback() from None
            if to == k or (to == "real" and k == "int"):
                return (t if to == k else z3.ToReal(t)), to
            raise _Fallback()
        sk = self.static_kind(inner)
        if to == "real" and sk in NUMERIC:   # widening to decimal/double keeps the value
            t, k = self._enc(inner, var, sk)
            return (z3.ToReal(t) if k == "int" else t), "real"
        if to is not None and to == sk and to in ("str", "bool", "date"):
            return self._enc(inner, var, to)
        raise _Fallback()

    def _case(self, e, var, want) -> tuple[z3.ExprRef, str]:
        if isinstance(e, exp.If):
            branches = [(e.this, e.args["true"])]
            default = e.args.get("false")
        else:
            if e.this is not None:  # CASE x WHEN v ...: compare x = v
                branches = [(exp.EQ(this=e.this.copy(), expression=i.this.copy()), i.args["true"])
                            for i in e.args["ifs"]]
            else:
                branches = [(i.this, i.args["true"]) for i in e.args["ifs"]]
            default = e.args.get("default")
        k = want or self.static_kind(branches[0][1]) or "real"
        vals = [self._enc(v, var, k) for _, v in branches]
        out = self._enc(default, var, k) if default is not None else self._native(exp.Null(), var, k)
        kinds = {vk for _, vk in vals} | {out[1]}
        res_kind = "real" if kinds <= set(NUMERIC) and len(kinds) > 1 else out[1]
        if len(kinds) > 1 and res_kind != "real":
            raise _Fallback()
        acc = out[0]
        for (c, _), (v, _) in reversed(list(zip(branches, vals))):
            acc = z3.If(self.encode_bool(c, var), v, acc)
        return acc, res_kind

    def _compare(self, op, l, r, var) -> z3.BoolRef:
        want = self.static_kind(l) or self.static_kind(r)
        (a, ka) = self._enc(l, var, want)
        (b, kb) = self._enc(r, var, ka if self.static_kind(r) is None else None)
        a, ka, b, kb = self._coerce(a, ka, b, kb, l, r)
        if op in (exp.EQ, exp.NEQ):
            return a == b if op is exp.EQ else a != b
        if ka == "str":
            return {exp.LT: self.str_lt(a, b), exp.GT: self.str_lt(b, a), exp.LTE: z3.Or(a == b, self.str_lt(a, b)),
                    exp.GTE: z3.Or(a == b, self.str_lt(b, a))}[op]
        if ka not in ORDERED:
            raise _Fallback()
        return {exp.LT: a < b, exp.LTE: a <= b, exp.GT: a > b, exp.GTE: a >= b}[op]

    def _coerce(self, a, ka, b, kb, l, r):
        """Spark-like implicit casts between the two sides of a comparison."""
        if ka == kb or (ka in NUMERIC and kb in NUMERIC):
            return a, ka, b, kb
        for (x, kx, ex), (y, ky, ey), flip in (((a, ka, l), (b, kb, r), False), ((b, kb, r), (a, ka, l), True)):
            if kx in ("date", "ts") and ky == "str" and isinstance(_strip(ey), exp.Literal):
                y2 = _temporal_literal(_strip(ey).this, kx)
                return (y2, kx, x, kx) if flip else (x, kx, y2, kx)
            if kx == "date" and ky == "ts":
                x2 = x * DAY_US
                return (y, "ts", x2, "ts") if flip else (x2, "ts", y, "ts")
        raise _Fallback()

    def _opaque(self, e, var, want) -> tuple[z3.ExprRef, str]:
        """Uninterpreted function of the columns of e, keyed by e's SQL with columns abstracted."""
        names: list[str] = []
        for c in e.find_all(exp.Column):
            if c.name not in names:
                names.append(c.name)
        pos = {n: i for i, n in enumerate(names)}
        shape = e.copy().transform(
            lambda n: exp.column(f"_c{pos[n.name]}") if isinstance(n, exp.Column) else n)
        # an unknown numeric/temporal result is Real: claiming integrality could prove false things
        k = "bool" if isinstance(e, _PRED_CLASSES) else (
            self.static_kind(e) or ("real" if want in (None, "int", "date", "ts") else want))
        args = [var(n) for n in names]
        text = shape.sql(dialect="spark")
        f = self._func(("uf", text, k), [a.sort() for a in args], sort_of(k))
        return (f(*args) if args else f()), k

    def _func(self, key: tuple, arg_sorts: list, rsort) -> z3.FuncDeclRef:
        full = key + tuple(str(s) for s in arg_sorts)
        if full not in self._funcs:
            self._funcs[full] = z3.Function(f"uf{len(self._funcs)}", *arg_sorts, rsort)
        return self._funcs[full]


def _strip(e):
    while isinstance(e, exp.Paren):
        e = e.this
    return e


def le(a: z3.ExprRef, b: z3.ExprRef, enc: Encoder) -> z3.BoolRef:
    """a <= b for ordered sorts, via str_lt for strings, equality otherwise."""
    if a.sort() in (z3.IntSort(), z3.RealSort()) or b.sort() in (z3.IntSort(), z3.RealSort()):
        return a <= b
    if a.sort() == z3.StringSort():
        return z3.Or(a == b, enc.str_lt(a, b))
    return a == b


def eq(a: z3.ExprRef, b: z3.ExprRef) -> Optional[z3.BoolRef]:
    """a = b, or None when the sorts cannot be compared."""
    try:
        return a == b
    except z3.Z3Exception:
        return None


@contextlib.contextmanager
def z3_section():
    """Automatic garbage collection off while Z3 works.  Z3 is not thread-safe within a context and
    ctypes releases the GIL during every call, so a collection triggered by another Python thread
    (py4j's, rich's refresh thread) could free Z3 objects (``Z3_dec_ref``) while this thread is inside
    the solver: a replay died once with a segfault in libz3.  Nested sections are fine."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def valid(hyps: list, goal: z3.BoolRef, timeout_ms: int = TIMEOUT_MS) -> bool:
    """True iff hyps -> goal is proven valid (hyps ∧ ¬goal unsat); unknown/timeout -> False."""
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    s.add(*hyps)
    s.add(z3.Not(goal))
    return s.check() == z3.unsat


def tree_dtypes(root: ir.Node) -> dict[str, str]:
    """Every attribute name in the tree -> its dtype."""
    out: dict[str, str] = {}
    for n in root.walk():
        for c in n.cols:
            out.setdefault(c.name, c.dtype)
        if isinstance(n, ir.Aggregate):
            for a in n.aggs:
                out.setdefault(a.out.name, a.out.dtype)
    return out


@dataclass
class Conj:
    """One conjunct of pred(Q): the formula, a display label and whether it is a statistic."""

    f: z3.BoolRef
    label: str
    stat: bool = False


@dataclass
class Conds:
    """pred(Q) (conjuncts) and expr(Q) (formulas) of one subquery on one side."""

    pred: list[Conj] = field(default_factory=list)
    expr: list[z3.BoolRef] = field(default_factory=list)

    def all(self) -> list[z3.BoolRef]:
        return [c.f for c in self.pred] + self.expr


def build_conds(root: ir.Node, enc: Encoder, tag: str, stats: Mapping[tuple[str, str], tuple],
                label: Callable[[exp.Expression], str] = lambda e: e.sql()) -> dict[int, Conds]:
    """pred/expr (§2.3) of every node under root on side `tag`, keyed by id(node)."""
    var = enc.side(tag)
    memo: dict[int, Conds] = {}

    def go(n: ir.Node) -> Conds:
        kids = [go(c) for c in n.children]
        if isinstance(n, ir.Scan):
            out = Conds()
            for c in n.cols:
                lo_hi = stats.get((c.table or n.table, c.source or c.name))
                if lo_hi is not None:
                    for f in stats_bounds(var(c.name), c.dtype, *lo_hi):
                        out.pred.append(Conj(f, f"stats({c.source or c.name})", True))
        elif isinstance(n, (ir.Select, ir.Join)):
            out = Conds([p for k in kids for p in k.pred], [x for k in kids for x in k.expr])
            if n.cond is not None:
                out.pred.append(Conj(enc.encode_bool(n.cond, var), label(n.cond)))
        elif isinstance(n, ir.SemiJoin):  # a witness on the inner side meets θ (its attributes are
            # existential: they occur in no goal about the output)
            out = Conds([p for k in kids for p in k.pred], [x for k in kids for x in k.expr])
            out.pred.append(Conj(enc.encode_bool(n.cond, var), label(n.cond)))
        elif isinstance(n, ir.Project):
            out = Conds(list(kids[0].pred), list(kids[0].expr))
            for e, c in n.items:
                t = enc.encode(e, var, kind_of_dtype(c.dtype))
                f = eq(var(c.name), t)
                if f is not None and not (isinstance(e, exp.Column) and e.name == c.name):
                    out.expr.append(f)
        elif isinstance(n, ir.Union):
            sides = []
            for k, child in zip(kids, n.children):
                links = [eq(var(u.name), var(a.name)) for u, a in zip(n.cols, child.cols)]
                sides.append((k, [f for f in links if f is not None]))
            out = Conds([Conj(z3.Or(*[z3.And(*(k.all() + ln)) for k, ln in sides]), "UNION")],
                        [z3.Or(*[z3.And(*(k.expr + ln)) for k, ln in sides])])
        else:  # Aggregate, Distinct, TopK; AntiJoin and LeftJoin: the outer side's facts only
            out = Conds(list(kids[0].pred), list(kids[0].expr))
        memo[id(n)] = out
        return out

    go(root)
    return memo
