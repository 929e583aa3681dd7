"""Result types of SQL expressions over typed attributes (coarse: enough for Z3 sorts and Spark casts)."""

from __future__ import annotations

from sqlglot import exp

INT_TYPES = {"tinyint", "smallint", "int", "bigint"}
NUMERIC_PREFIX = ("decimal", "double", "float")


def is_numeric(t: str) -> bool:
    return t in INT_TYPES or t.startswith(NUMERIC_PREFIX)


def _arith(a: str, b: str) -> str:
    if a in INT_TYPES and b in INT_TYPES:
        return "bigint"
    if a.startswith("decimal") and (b.startswith("decimal") or b in INT_TYPES):
        return "decimal(38,6)"
    if b.startswith("decimal") and a in INT_TYPES:
        return "decimal(38,6)"
    return "double"


def infer(e: exp.Expression, types: dict[str, str]) -> str:
    """Spark simpleString-like type of expression e; 'string' when unknown."""
    if isinstance(e, exp.Column):
        return types.get(e.name, "string")
    if isinstance(e, exp.Paren):
        return infer(e.this, types)
    if isinstance(e, exp.Literal):
        if e.is_string:
            return "string"
        return "bigint" if e.this.lstrip("-").isdigit() else "decimal(38,6)"
    if isinstance(e, exp.Boolean):
        return "boolean"
    if isinstance(e, exp.Cast):
        return e.to.sql(dialect="spark").lower()
    if isinstance(e, (exp.Predicate, exp.Connector, exp.Not, exp.Between, exp.In, exp.Is)):
        return "boolean"
    if isinstance(e, exp.Neg):
        return infer(e.this, types)
    if isinstance(e, exp.Div):
        return "double"
    if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Mod)):
        return _arith(infer(e.left, types), infer(e.right, types))
    if isinstance(e, exp.Count):
        return "bigint"
    if isinstance(e, exp.Avg):
        return "double"
    if isinstance(e, exp.Sum):
        t = infer(e.this, types)
        return "bigint" if t in INT_TYPES else ("decimal(38,6)" if t.startswith("decimal") else "double")
    if isinstance(e, (exp.Min, exp.Max)):
        return infer(e.this, types)
    if isinstance(e, (exp.Year, exp.Month, exp.Day)):
        return "int"
    if isinstance(e, exp.Case):
        for i in e.args.get("ifs") or []:
            return infer(i.args["true"], types)
    if isinstance(e, exp.Coalesce):
        return infer(e.this, types)
    return "string"
