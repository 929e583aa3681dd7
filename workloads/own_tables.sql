-- The query log of workloads/own_tables.yaml: one statement per line, replayed in this order.
-- busiest origins, slowest origins (top-k), and the routes with many delayed flights
SELECT origin, count(*) AS n FROM flights3m GROUP BY origin HAVING count(*) > 20000
SELECT origin, avg(delay) AS d FROM flights3m GROUP BY origin ORDER BY d DESC LIMIT 5
SELECT weather, avg(temp_max) AS t, count(*) AS n FROM weather GROUP BY weather
SELECT origin, destination, count(*) AS n FROM flights3m WHERE delay > 15 GROUP BY origin, destination HAVING count(*) > 1000
SELECT weather, sum(precipitation) AS p FROM weather GROUP BY weather HAVING sum(precipitation) > 100
SELECT origin, avg(delay) AS d FROM flights3m GROUP BY origin ORDER BY d DESC LIMIT 3
SELECT origin, sum(distance) AS km FROM flights3m GROUP BY origin HAVING sum(distance) > 50000000
SELECT origin, avg(delay) AS d FROM flights3m GROUP BY origin ORDER BY d DESC LIMIT 5
