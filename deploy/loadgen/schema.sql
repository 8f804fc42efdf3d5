-- The compose stack's demo schema, run once by PostgreSQL's entrypoint when
-- the pgdata volume is new (docker-entrypoint-initdb.d), in database shop.
-- deploy/loadgen/*.pgbench then write to it steadily.
CREATE TABLE customers (
    id         bigint PRIMARY KEY,
    name       text NOT NULL,
    country    text NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE TABLE orders (
    id          bigserial PRIMARY KEY,
    customer_id bigint NOT NULL REFERENCES customers,
    total       numeric(10,2) NOT NULL,
    status      text NOT NULL,
    created_at  timestamptz NOT NULL
);

INSERT INTO customers
SELECT i, 'Customer ' || i,
       (ARRAY['US','DE','GB','FR','JP','BR','IN','CA','NL','ES','IT','SE'])[1 + floor(12 * power(random(), 1.5))::int],
       now() - interval '3 years' * random()
FROM generate_series(1, 10000) AS i;

INSERT INTO orders (customer_id, total, status, created_at)
SELECT 1 + floor(random() * 10000)::bigint,
       round((5 + 495 * power(random(), 2))::numeric, 2),
       (ARRAY['delivered','delivered','delivered','delivered','shipped','paid','cancelled'])[1 + floor(random() * 7)::int],
       now() - interval '365 days' * (1 - i::float8 / 200000)
FROM generate_series(1, 200000) AS i;

ANALYZE customers, orders;
