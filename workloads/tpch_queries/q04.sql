-- TPC-H query 04 with the specification's validation parameters (text after the public copies
-- in duckdb/duckdb extension/tpch/dbgen/queries and JanKaul/spark-integration-test tpch/queries),
-- adapted to Spark SQL.
-- Edit: date '1993-07-01' + interval '3' month written as the date it denotes.
select
    o_orderpriority,
    count(*) as order_count
from
    orders
where
    o_orderdate >= date '1993-07-01'
    and o_orderdate < date '1993-10-01'
    and exists (
        select
            *
        from
            lineitem
        where
            l_orderkey = o_orderkey
            and l_commitdate < l_receiptdate
    )
group by
    o_orderpriority
order by
    o_orderpriority
