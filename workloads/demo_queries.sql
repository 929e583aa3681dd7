-- The demo workload's 24 queries (workloads/demo.yaml, its drawn bindings), in order, for
-- `advisor run --file workloads/demo_queries.sql` on a warehouse holding TPC-H SF 0.1 and the
-- flights tables (`advisor data load tpch` and `advisor data load flights`).

-- busy_days
SELECT o_orderdate, sum(l_quantity) AS qty FROM lineitem JOIN orders ON l_orderkey = o_orderkey GROUP BY o_orderdate HAVING sum(l_quantity) > 8148.62890106;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 302;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 310;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 299;

-- busiest_routes
SELECT origin, dest, count(*) AS n FROM flights GROUP BY origin, dest ORDER BY n DESC LIMIT 10;

-- top_revenue
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE l_shipdate > DATE '1994-09-18' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 10;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 292;

-- busiest_routes
SELECT origin, dest, count(*) AS n FROM flights GROUP BY origin, dest ORDER BY n DESC LIMIT 10;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 315;

-- busy_days
SELECT o_orderdate, sum(l_quantity) AS qty FROM lineitem JOIN orders ON l_orderkey = o_orderkey GROUP BY o_orderdate HAVING sum(l_quantity) > 8341.36274525;

-- busiest_routes
SELECT origin, dest, count(*) AS n FROM flights GROUP BY origin, dest ORDER BY n DESC LIMIT 5;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 312;

-- delay_days
SELECT month, day, sum(arr_delay) AS total_delay FROM flights WHERE arr_delay > 0 GROUP BY month, day HAVING sum(arr_delay) > 59702;

-- busiest_routes
SELECT origin, dest, count(*) AS n FROM flights GROUP BY origin, dest ORDER BY n DESC LIMIT 5;

-- busy_days
SELECT o_orderdate, sum(l_quantity) AS qty FROM lineitem JOIN orders ON l_orderkey = o_orderkey GROUP BY o_orderdate HAVING sum(l_quantity) > 8273.07384503;

-- busy_days
SELECT o_orderdate, sum(l_quantity) AS qty FROM lineitem JOIN orders ON l_orderkey = o_orderkey GROUP BY o_orderdate HAVING sum(l_quantity) > 8336.94506906;

-- delay_days
SELECT month, day, sum(arr_delay) AS total_delay FROM flights WHERE arr_delay > 0 GROUP BY month, day HAVING sum(arr_delay) > 55079;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 294;

-- busiest_routes
SELECT origin, dest, count(*) AS n FROM flights GROUP BY origin, dest ORDER BY n DESC LIMIT 10;

-- delay_days
SELECT month, day, sum(arr_delay) AS total_delay FROM flights WHERE arr_delay > 0 GROUP BY month, day HAVING sum(arr_delay) > 61355;

-- top_revenue
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE l_shipdate > DATE '1995-04-08' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 10;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 299;

-- busiest_routes
SELECT origin, dest, count(*) AS n FROM flights GROUP BY origin, dest ORDER BY n DESC LIMIT 10;

-- busiest_routes
SELECT origin, dest, count(*) AS n FROM flights GROUP BY origin, dest ORDER BY n DESC LIMIT 5;
