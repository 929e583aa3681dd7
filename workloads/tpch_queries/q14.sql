-- TPC-H query 14 with the specification's validation parameters (text after the public copies
-- in duckdb/duckdb extension/tpch/dbgen/queries and JanKaul/spark-integration-test tpch/queries),
-- adapted to Spark SQL.
-- Edit: date '1995-09-01' + interval '1' month written as the date it denotes.
select
    100.00 * sum(case
        when p_type like 'PROMO%'
            then l_extendedprice * (1 - l_discount)
        else 0
    end) / sum(l_extendedprice * (1 - l_discount)) as promo_revenue
from
    lineitem,
    part
where
    l_partkey = p_partkey
    and l_shipdate >= date '1995-09-01'
    and l_shipdate < date '1995-10-01'
