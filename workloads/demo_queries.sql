-- The demo workload's 48 queries (workloads/demo.yaml, its drawn bindings), in order, for
-- `advisor run --file workloads/demo_queries.sql` on a warehouse holding TPC-H SF 1
-- (`advisor data load tpch --sf 1`).  The workload's update batches between them are not part
-- of the script.

-- top_revenue
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE l_shipdate > DATE '1995-03-15' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 20;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 307;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 312;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 306;

-- top_suppliers
SELECT l_suppkey, sum(l_extendedprice) AS sales FROM lineitem GROUP BY l_suppkey HAVING sum(l_extendedprice) > 29574091.9203;

-- top_revenue
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE l_shipdate > DATE '1995-03-15' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 20;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 302;

-- top_suppliers
SELECT l_suppkey, sum(l_extendedprice) AS sales FROM lineitem GROUP BY l_suppkey HAVING sum(l_extendedprice) > 28911676.395;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 301;

-- top_revenue
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE l_shipdate > DATE '1995-03-15' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 20;

-- top_suppliers
SELECT l_suppkey, sum(l_extendedprice) AS sales FROM lineitem GROUP BY l_suppkey HAVING sum(l_extendedprice) > 30027563.7273;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 308;

-- top_suppliers
SELECT l_suppkey, sum(l_extendedprice) AS sales FROM lineitem GROUP BY l_suppkey HAVING sum(l_extendedprice) > 29406116.0729;

-- top_revenue
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE l_shipdate > DATE '1995-03-15' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 20;

-- top_revenue
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE l_shipdate > DATE '1995-03-15' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 20;

-- top_revenue
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE l_shipdate > DATE '1995-03-15' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 20;

-- top_suppliers
SELECT l_suppkey, sum(l_extendedprice) AS sales FROM lineitem GROUP BY l_suppkey HAVING sum(l_extendedprice) > 29625131.9797;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 306;

-- top_suppliers
SELECT l_suppkey, sum(l_extendedprice) AS sales FROM lineitem GROUP BY l_suppkey HAVING sum(l_extendedprice) > 29715950.9583;

-- top_suppliers
SELECT l_suppkey, sum(l_extendedprice) AS sales FROM lineitem GROUP BY l_suppkey HAVING sum(l_extendedprice) > 29083070.22;

-- top_revenue
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE l_shipdate > DATE '1995-03-15' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 20;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 300;

-- top_suppliers
SELECT l_suppkey, sum(l_extendedprice) AS sales FROM lineitem GROUP BY l_suppkey HAVING sum(l_extendedprice) > 28716002.7071;

-- top_suppliers
SELECT l_suppkey, sum(l_extendedprice) AS sales FROM lineitem GROUP BY l_suppkey HAVING sum(l_extendedprice) > 29598786.87;

-- top_suppliers
SELECT l_suppkey, sum(l_extendedprice) AS sales FROM lineitem GROUP BY l_suppkey HAVING sum(l_extendedprice) > 29133936.5067;

-- top_suppliers
SELECT l_suppkey, sum(l_extendedprice) AS sales FROM lineitem GROUP BY l_suppkey HAVING sum(l_extendedprice) > 29657908.275;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 310;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 309;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 305;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 309;

-- top_suppliers
SELECT l_suppkey, sum(l_extendedprice) AS sales FROM lineitem GROUP BY l_suppkey HAVING sum(l_extendedprice) > 28553684.5496;

-- top_revenue
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE l_shipdate > DATE '1995-03-15' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 20;

-- top_suppliers
SELECT l_suppkey, sum(l_extendedprice) AS sales FROM lineitem GROUP BY l_suppkey HAVING sum(l_extendedprice) > 28459888.2212;

-- top_revenue
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE l_shipdate > DATE '1995-03-15' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 20;

-- top_revenue
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE l_shipdate > DATE '1995-03-15' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 20;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 312;

-- top_suppliers
SELECT l_suppkey, sum(l_extendedprice) AS sales FROM lineitem GROUP BY l_suppkey HAVING sum(l_extendedprice) > 28535296.2041;

-- top_suppliers
SELECT l_suppkey, sum(l_extendedprice) AS sales FROM lineitem GROUP BY l_suppkey HAVING sum(l_extendedprice) > 28530425.0331;

-- top_revenue
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE l_shipdate > DATE '1995-03-15' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 20;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 310;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 314;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 310;

-- top_revenue
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE l_shipdate > DATE '1995-03-15' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 20;

-- top_revenue
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE l_shipdate > DATE '1995-03-15' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 20;

-- top_revenue
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE l_shipdate > DATE '1995-03-15' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 20;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 309;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 301;

-- big_orders
SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 311;
