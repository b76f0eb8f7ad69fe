-- The least a posting, a create and a cut-off must write, in typed tables with no search
-- terms, run inside PostgreSQL itself (PL/pgSQL, one round trip a transaction): no HTTP, no TLS,
-- no JSON handling, no Payrail. What these reach is an upper bound for any server on the same
-- machine and cluster; see README.md.
DROP SCHEMA IF EXISTS bounds CASCADE;
CREATE SCHEMA bounds;
SET search_path = bounds;

CREATE TABLE ceiling (id bigserial PRIMARY KEY, v int);
CREATE TABLE docs (k text PRIMARY KEY, d jsonb NOT NULL);
-- Document sizes close to Payrail's replies (a ledger transaction, its event, a counterparty,
-- a payment order).
INSERT INTO docs VALUES
  ('tx', jsonb_build_object('object', 'ledger_transaction', 'status', 'posted', 'description', 'bench', 'metadata', '{}'::jsonb,
     'ledger_id', '9b1b9bd0-4fd2-4e8c-9b2b-d9c9e3bd0e2b', 'effective_at', '2026-11-27T22:00:00.000000Z', 'pad', repeat('t', 600))),
  ('ev', jsonb_build_object('object', 'event', 'event_name', 'created', 'pad', repeat('e', 900))),
  ('counterparty', jsonb_build_object('object', 'counterparty', 'name', 'Acme Widgets', 'metadata', jsonb_build_object('customer', '42'), 'pad', repeat('c', 500))),
  ('payment_order', jsonb_build_object('object', 'payment_order', 'type', 'ach', 'amount', 1000, 'status', 'approved', 'pad', repeat('p', 1500)));

CREATE TABLE claims (api_key_id text, key text, nonce bigint, PRIMARY KEY (api_key_id, key));
CREATE TABLE replies (api_key_id text, key text, status int, body bytea, PRIMARY KEY (api_key_id, key));
CREATE TABLE events (seq bigserial PRIMARY KEY, id text UNIQUE NOT NULL, resource text NOT NULL, event_name text NOT NULL,
  entity_id text NOT NULL, created_at bigint NOT NULL, doc jsonb NOT NULL);
CREATE INDEX ON events (entity_id);
CREATE INDEX ON events (event_name, seq);

-- Ledger: an account row with its sums, a transaction, its entries (by account and time, by
-- transaction), no time buckets (so as-of reads would not be flat: the bound is generous).
CREATE TABLE accounts (id bigint PRIMARY KEY, debits bigint NOT NULL DEFAULT 0, credits bigint NOT NULL DEFAULT 0,
  lock_version bigint NOT NULL DEFAULT 0);
INSERT INTO accounts (id) SELECT g FROM generate_series(0, 10000) g;
CREATE TABLE txs (seq bigserial PRIMARY KEY, id text UNIQUE NOT NULL, ledger_id text NOT NULL, status smallint NOT NULL,
  effective_at bigint NOT NULL, doc jsonb NOT NULL);
CREATE INDEX ON txs (ledger_id, seq);
CREATE TABLE entries (seq bigserial PRIMARY KEY, id text UNIQUE NOT NULL, tx_seq bigint NOT NULL, account_id bigint NOT NULL,
  debit bool NOT NULL, amount bigint NOT NULL, effective_at bigint NOT NULL, version bigint NOT NULL);
CREATE INDEX ON entries (account_id, effective_at);
CREATE INDEX ON entries (tx_seq);

-- Creates: the object with its filters as columns.
CREATE TABLE counterparties (seq bigserial PRIMARY KEY, id text UNIQUE NOT NULL, org_id text NOT NULL, name text NOT NULL,
  doc jsonb NOT NULL);
CREATE INDEX ON counterparties (org_id, seq);
CREATE TABLE orders (seq bigserial PRIMARY KEY, id text UNIQUE NOT NULL, org_id text NOT NULL, status text NOT NULL,
  counterparty_id text, file_id text, version int NOT NULL DEFAULT 1, doc jsonb NOT NULL) WITH (fillfactor = 45);
CREATE INDEX ON orders (org_id, seq);
CREATE INDEX ON orders (counterparty_id);

-- A posting's rows: its idempotency claim taken and released, the transaction, two entries,
-- its event, the stored reply. Generous: the entries' account versions are left out (they would
-- need the account's lock first).
CREATE FUNCTION post_rows(a bigint, b bigint, n text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE s bigint;
BEGIN
  INSERT INTO claims VALUES ('key', 'lt' || n, 1);
  INSERT INTO txs (id, ledger_id, status, effective_at, doc)
    VALUES ('lt' || n, 'ledger', 1, 1, (SELECT d FROM docs WHERE k = 'tx')) RETURNING seq INTO s;
  INSERT INTO entries (id, tx_seq, account_id, debit, amount, effective_at, version)
    VALUES ('le' || n || 'd', s, a, true, 100, 1, 0), ('le' || n || 'c', s, b, false, 100, 1, 0);
  INSERT INTO events (id, resource, event_name, entity_id, created_at, doc)
    VALUES ('evlt' || n, 'ledger_transaction', 'ledger_transaction.created', 'lt' || n, 1, (SELECT d FROM docs WHERE k = 'ev'));
  DELETE FROM claims WHERE api_key_id = 'key' AND key = 'lt' || n;
  INSERT INTO replies VALUES ('key', 'lt' || n, 200, convert_to(repeat('r', 1500), 'UTF8'));
END $$;

-- One posting in its own commit (pgledger's way): its rows, then both accounts' sums, whose
-- row locks are held to the commit.
CREATE FUNCTION post_one(a bigint, b bigint, n text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM post_rows(a, b, n);
  UPDATE accounts SET debits = debits + 100, lock_version = lock_version + 1 WHERE id = a;
  UPDATE accounts SET credits = credits + 100, lock_version = lock_version + 1 WHERE id = b;
END $$;

-- g postings in one commit, as Payrail's group commit makes them: every row written first, then
-- each account's row locked once, in id order, and its sums moved by the group's total, so the
-- hot account is held only for that update and the COMMIT. From the hot account 0 (hot) or from
-- 1..5000 (spread), to 5001..10000.
CREATE FUNCTION post_group(g int, hot bool, n text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE src bigint[]; dst bigint[]; i int;
BEGIN
  SELECT array_agg(CASE WHEN hot THEN 0 ELSE 1 + floor(random() * 5000)::bigint END),
         array_agg(5001 + floor(random() * 5000)::bigint) INTO src, dst FROM generate_series(1, g);
  FOR i IN 1..g LOOP PERFORM post_rows(src[i], dst[i], n || '.' || i); END LOOP;
  PERFORM 1 FROM accounts WHERE id = ANY(src || dst) ORDER BY id FOR UPDATE;
  UPDATE accounts a SET debits = a.debits + d.debits, credits = a.credits + d.credits, lock_version = a.lock_version + d.n
    FROM (SELECT id, sum(CASE WHEN debit THEN 100 ELSE 0 END) AS debits, sum(CASE WHEN debit THEN 0 ELSE 100 END) AS credits,
            count(*) AS n
          FROM (SELECT unnest(src) AS id, true AS debit UNION ALL SELECT unnest(dst), false) x GROUP BY id) d
    WHERE a.id = d.id;
END $$;

-- A create of `kind` (counterparty or payment_order): its claim taken, the object (an order
-- also checks that its account exists), its event, the claim released, the reply.
CREATE FUNCTION create_one(kind text, n text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO claims VALUES ('key', kind || n, 1);
  IF kind = 'counterparty' THEN
    INSERT INTO counterparties (id, org_id, name, doc) VALUES (kind || n, 'org', 'Acme ' || n, (SELECT d FROM docs WHERE k = kind));
  ELSE
    PERFORM 1 FROM accounts WHERE id = 1 FOR KEY SHARE;
    INSERT INTO orders (id, org_id, status, counterparty_id, doc) VALUES (kind || n, 'org', 'approved', 'cp1', (SELECT d FROM docs WHERE k = kind));
  END IF;
  INSERT INTO events (id, resource, event_name, entity_id, created_at, doc)
    VALUES ('ev' || kind || n, kind, kind || '.created', kind || n, 1, (SELECT d FROM docs WHERE k = kind));
  DELETE FROM claims WHERE api_key_id = 'key' AND key = kind || n;
  INSERT INTO replies VALUES ('key', kind || n, 200, convert_to(repeat('r', CASE WHEN kind = 'counterparty' THEN 900 ELSE 1900 END), 'UTF8'));
END $$;

CREATE FUNCTION create_group(kind text, g int, n text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE i int;
BEGIN
  FOR i IN 1..g LOOP
    PERFORM create_one(kind, n || '.' || i);
  END LOOP;
END $$;

-- A cut-off's database work on 500 orders from seq lo: moved to `to_status` (heap-only rewrites
-- of the document, fillfactor 45), one event each.
CREATE FUNCTION cutoff_chunk(lo bigint, from_status text, to_status text, f text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE n int;
BEGIN
  WITH c AS (SELECT seq FROM orders WHERE seq >= lo AND seq < lo + 500 AND status = from_status ORDER BY seq FOR UPDATE),
       u AS (UPDATE orders o SET status = to_status, file_id = f, version = version + 1,
               doc = jsonb_set(o.doc, '{status}', to_jsonb(to_status)) FROM c WHERE o.seq = c.seq RETURNING o.id, o.doc),
       e AS (INSERT INTO events (id, resource, event_name, entity_id, created_at, doc)
               SELECT 'ev' || to_status || u.id, 'payment_order', 'payment_order.updated', u.id, 1, u.doc FROM u RETURNING 1)
  SELECT count(*) INTO n FROM e;
  RETURN n;
END $$;
