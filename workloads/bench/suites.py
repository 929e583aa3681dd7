"""Fixed query suites with the attributes to sketch: TPC-H (Q3/Q10/Q18 shapes and friends, as
HAVING or top-k) and flights. Shared by the differential tests, the demo and the benchmarks."""

TPCH = [
    ("q18", "SELECT c.c_name, c.c_custkey, o.o_orderkey, o.o_totalprice, big.qty FROM customer c "
            "JOIN orders o ON c.c_custkey = o.o_custkey JOIN (SELECT l_orderkey, sum(l_quantity) AS qty "
            "FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 250) big ON o.o_orderkey = big.l_orderkey",
     {"lineitem": "l_orderkey", "orders": "o_orderkey"}),
    ("q3", "SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate, o_shippriority "
           "FROM customer, orders, lineitem WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey "
           "AND l_orderkey = o_orderkey AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15' "
           "GROUP BY l_orderkey, o_orderdate, o_shippriority ORDER BY revenue DESC, o_orderdate LIMIT 10",
     {"lineitem": "l_orderkey", "orders": "o_orderkey"}),
    ("q10", "SELECT c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM customer, orders, "
            "lineitem, nation WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND o_orderdate >= "
            "DATE '1993-10-01' AND o_orderdate < DATE '1994-01-01' AND l_returnflag = 'R' AND "
            "c_nationkey = n_nationkey GROUP BY c_custkey, c_name ORDER BY revenue DESC LIMIT 20",
     {"customer": "c_custkey", "orders": "o_custkey", "lineitem": "l_orderkey"}),
    ("q15", "SELECT l_suppkey, sum(l_extendedprice * (1 - l_discount)) AS rev FROM lineitem WHERE l_shipdate >= "
            "DATE '1996-01-01' AND l_shipdate < DATE '1996-04-01' GROUP BY l_suppkey ORDER BY rev DESC LIMIT 1",
     {"lineitem": "l_suppkey"}),
    ("ps_having", "SELECT ps_partkey, count(*) AS n, sum(ps_availqty) AS q FROM partsupp GROUP BY ps_partkey "
                  "HAVING sum(ps_availqty) > 25000", {"partsupp": "ps_partkey"}),
    ("cust_count", "SELECT o_custkey, count(*) AS n FROM orders GROUP BY o_custkey HAVING count(*) > 25",
     {"orders": "o_orderkey"}),
    ("nested", "SELECT count(*) AS big FROM (SELECT l_orderkey, sum(l_quantity) AS q FROM lineitem "
               "GROUP BY l_orderkey HAVING sum(l_quantity) > 200) x", {"lineitem": "l_orderkey"}),
    ("brand_topk", "SELECT p_brand, sum(l_quantity) AS q FROM lineitem JOIN part ON l_partkey = p_partkey "
                   "GROUP BY p_brand ORDER BY q DESC LIMIT 3", {"lineitem": "l_partkey"}),
    ("max_price", "SELECT o_orderpriority, max(o_totalprice) AS m FROM orders GROUP BY o_orderpriority "
                  "HAVING max(o_totalprice) > 400000", {"orders": "o_orderkey"}),
    ("min_disc", "SELECT l_returnflag, l_linestatus, min(l_extendedprice) AS m FROM lineitem "
                 "GROUP BY l_returnflag, l_linestatus HAVING min(l_extendedprice) < 1000", {"lineitem": "l_orderkey"}),
]

FLIGHTS = [
    ("routes", "SELECT origin, dest, count(*) AS n FROM flights GROUP BY origin, dest ORDER BY n DESC LIMIT 5",
     {"flights": "dest"}),
    ("delay_days", "SELECT month, day, sum(arr_delay) AS total FROM flights WHERE arr_delay > 0 GROUP BY month, day "
                   "HAVING sum(arr_delay) > 60000", {"flights": "day"}),
    ("cancelled", "SELECT carrier, count(*) AS n FROM flights WHERE dep_time IS NULL GROUP BY carrier "
                  "HAVING count(*) > 500", {"flights": "carrier"}),
    ("carrier_avg", "SELECT f.carrier, a.name, avg(f.arr_delay) AS d FROM flights f JOIN airlines a "
                    "ON f.carrier = a.carrier GROUP BY f.carrier, a.name ORDER BY d DESC LIMIT 3",
     {"flights": "carrier"}),
    ("tailnum_nulls", "SELECT tailnum, count(*) AS n FROM flights GROUP BY tailnum ORDER BY n DESC LIMIT 10",
     {"flights": "tailnum"}),
    ("windy", "SELECT origin, month, max(wind_speed) AS w FROM weather GROUP BY origin, month "
              "HAVING max(wind_speed) > 30", {"weather": "month"}),
    ("busy_hours", "SELECT time_hour, count(*) AS n FROM flights GROUP BY time_hour ORDER BY n DESC LIMIT 5",
     {"flights": "time_hour"}),
    ("long_routes", "SELECT DISTINCT origin, dest FROM flights WHERE distance > 2500", {"flights": "distance"}),
]


def _sf1(name: str, sql: str) -> str:
    """Standard TPC-H constants for SF1 (the SF0.01 ones above are chosen to return rows there)."""
    swaps = {"q18": ("> 250", "> 300"), "cust_count": ("> 25", "> 35"),
             "ps_having": ("> 25000", "> 33000"), "nested": ("> 200", "> 300"),
             "max_price": ("> 400000", "> 550000")}
    if name in swaps:
        a, b = swaps[name]
        sql = sql.replace(a, b)
    return sql


TPCH_SF1 = [(n, _sf1(n, s), on) for n, s, on in TPCH]
