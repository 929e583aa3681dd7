"""The relational algebra the advisor reasons about (seed 001 §1.1 / §11.1).

Every attribute has a globally unique internal name (`Col.name`), so rules can refer to
attributes without qualification. Expressions are sqlglot expression trees whose column
references are unqualified `exp.Column`s naming internal attributes. Bag semantics throughout.

Nodes: Scan, Select, Project, Join (inner, theta), SemiJoin and AntiJoin (left semi / anti, from
EXISTS / IN / NOT EXISTS / NOT IN), LeftJoin (left outer), Aggregate, Distinct, TopK, Union (ALL).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Optional

from sqlglot import exp

AGG_FUNCS = ("count", "sum", "avg", "min", "max")


@dataclass(frozen=True)
class Col:
    """An attribute: unique internal name, Spark type string, and the base column it comes from."""

    name: str
    dtype: str
    table: Optional[str] = None   # base table name if this is a scanned column
    source: Optional[str] = None  # base column name if this is a scanned column


class Node:
    """Base class; `cols` is the output schema, `children` the inputs."""

    cols: list[Col]

    @property
    def children(self) -> list["Node"]:
        return []

    def walk(self) -> Iterator["Node"]:
        yield self
        for c in self.children:
            yield from c.walk()

    def col(self, name: str) -> Col:
        for c in self.cols:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.cols]


@dataclass(eq=False)
class Scan(Node):
    """Access of base table `table` under `alias`; `cols` map 1:1 to the table's columns."""

    table: str
    alias: str
    cols: list[Col]
    scan_id: int = 0  # distinct per access of a table in one query


@dataclass(eq=False)
class Select(Node):
    child: Node
    cond: exp.Expression

    @property
    def cols(self) -> list[Col]:  # type: ignore[override]
        return self.child.cols

    @property
    def children(self):
        return [self.child]


@dataclass(eq=False)
class Project(Node):
    """Generalised projection: each item is (expression over child attributes, output Col)."""

    child: Node
    items: list[tuple[exp.Expression, Col]]

    @property
    def cols(self) -> list[Col]:  # type: ignore[override]
        return [c for _, c in self.items]

    @property
    def children(self):
        return [self.child]


@dataclass(eq=False)
class Join(Node):
    """Inner join; cond None means cross product."""

    left: Node
    right: Node
    cond: Optional[exp.Expression]

    @property
    def cols(self) -> list[Col]:  # type: ignore[override]
        return self.left.cols + self.right.cols

    @property
    def children(self):
        return [self.left, self.right]


@dataclass(eq=False)
class SemiJoin(Node):
    """Left semi-join: the rows of ``left`` with at least one row of ``right`` meeting ``cond``
    (each once); the output is ``left``'s columns."""

    left: Node
    right: Node
    cond: exp.Expression

    @property
    def cols(self) -> list[Col]:  # type: ignore[override]
        return self.left.cols

    @property
    def children(self):
        return [self.left, self.right]


@dataclass(eq=False)
class AntiJoin(Node):
    """Left anti-join: the rows of ``left`` with no row of ``right`` meeting ``cond`` (TRUE); the
    output is ``left``'s columns."""

    left: Node
    right: Node
    cond: exp.Expression

    @property
    def cols(self) -> list[Col]:  # type: ignore[override]
        return self.left.cols

    @property
    def children(self):
        return [self.left, self.right]


@dataclass(eq=False)
class LeftJoin(Node):
    """Left outer join: the inner join plus every ``left`` row without a partner, padded with NULLs
    on ``right``'s columns."""

    left: Node
    right: Node
    cond: exp.Expression

    @property
    def cols(self) -> list[Col]:  # type: ignore[override]
        return self.left.cols + self.right.cols

    @property
    def children(self):
        return [self.left, self.right]


PARTIAL_JOINS = (SemiJoin, AntiJoin, LeftJoin)


@dataclass(frozen=True)
class AggCall:
    """func in AGG_FUNCS; arg None means count(*); distinct for count(DISTINCT x) etc."""

    func: str
    arg: Optional[exp.Expression]
    distinct: bool
    out: Col


@dataclass(eq=False)
class Aggregate(Node):
    """gamma_{aggs; keys}: keys are names of child attributes (expressions are projected first)."""

    child: Node
    keys: list[str]
    aggs: list[AggCall]

    @property
    def cols(self) -> list[Col]:  # type: ignore[override]
        return [self.child.col(k) for k in self.keys] + [a.out for a in self.aggs]

    @property
    def children(self):
        return [self.child]


@dataclass(eq=False)
class Distinct(Node):
    child: Node

    @property
    def cols(self) -> list[Col]:  # type: ignore[override]
        return self.child.cols

    @property
    def children(self):
        return [self.child]


@dataclass(eq=False)
class TopK(Node):
    """The k first rows by `order` [(attr name, ascending)], ties broken by all other attributes
    ascending, so the result is a deterministic function of the input bag."""

    child: Node
    order: list[tuple[str, bool]]
    k: int

    @property
    def cols(self) -> list[Col]:  # type: ignore[override]
        return self.child.cols

    @property
    def children(self):
        return [self.child]


@dataclass(eq=False)
class Union(Node):
    """UNION ALL; output attributes `cols` are fresh, positionally matched to both inputs."""

    left: Node
    right: Node
    cols: list[Col] = field(default_factory=list)

    @property
    def children(self):
        return [self.left, self.right]


@dataclass
class Query:
    """A parsed query: the algebra tree plus presentation details that do not change the bag."""

    root: Node
    output_names: list[str]           # user-visible names of the first root.cols, in order (the
                                      # root may carry ORDER BY keys the answer does not show after them)
    order: list[tuple[str, bool]]     # final ORDER BY for display (already applied if TopK at root)
    sql: str
    template: str = ""                # SQL with constants replaced by placeholders
    bindings: tuple = ()              # the constants, in template order
    unsupported: Optional[str] = None  # why no sketch may be used (query still runs plainly)

    def scans(self) -> list[Scan]:
        return [n for n in self.root.walk() if isinstance(n, Scan)]


def col_ref(name: str) -> exp.Column:
    """An unqualified column reference to internal attribute `name`."""
    return exp.column(name, quoted=True)


def referenced(e: Optional[exp.Expression]) -> set[str]:
    """Internal attribute names an expression refers to."""
    if e is None:
        return set()
    return {c.name for c in e.find_all(exp.Column)}
