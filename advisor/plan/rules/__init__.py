"""Rewrite rules over sqlglot trees that run before planning, one rule per module in the style of
sqlglot's optimizer (``advisor.plan.decorrelate`` chains them with sqlglot's own rules)."""
