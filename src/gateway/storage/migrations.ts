/**
 * One ordered list of schema migrations for SQLite and PostgreSQL. The SQL is kept to the subset both accept:
 * TEXT, BIGINT, INTEGER, DOUBLE PRECISION, no serial ids, no booleans (0/1), JSON as TEXT, times as epoch
 * milliseconds. A migration is applied once, in a transaction, and recorded in schema_migrations.
 */
export interface Migration {
  version: number;
  name: string;
  statements: string[];
  /** Applied (its statements run) only on this database; elsewhere it is just recorded. */
  onlyOn?: 'postgres';
  /** Run after `statements`, on PostgreSQL only (its PL/pgSQL functions). */
  postgresStatements?: string[];
}

export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'users, virtual keys, budgets, pricing, usage',
    statements: [
      `CREATE TABLE budgets (
        budget_id TEXT PRIMARY KEY,
        max_budget_nanos BIGINT NOT NULL,
        reset_every_seconds BIGINT,
        period_started_at BIGINT NOT NULL,
        spend_nanos BIGINT NOT NULL DEFAULT 0,
        reserved_nanos BIGINT NOT NULL DEFAULT 0,
        metadata TEXT NOT NULL DEFAULT '{}',
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
      )`,
      `CREATE TABLE users (
        user_id TEXT PRIMARY KEY,
        alias TEXT NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        budget_id TEXT REFERENCES budgets (budget_id),
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
      )`,
      `CREATE TABLE virtual_keys (
        id TEXT PRIMARY KEY,
        key_hash TEXT NOT NULL UNIQUE,
        key_prefix TEXT NOT NULL,
        key_name TEXT NOT NULL,
        user_id TEXT REFERENCES users (user_id),
        budget_id TEXT REFERENCES budgets (budget_id),
        metadata TEXT NOT NULL DEFAULT '{}',
        is_active INTEGER NOT NULL DEFAULT 1,
        expires_at BIGINT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
      )`,
      `CREATE INDEX virtual_keys_user ON virtual_keys (user_id)`,
      `CREATE TABLE model_pricing (
        model TEXT PRIMARY KEY,
        input_cost_per_million DOUBLE PRECISION NOT NULL,
        output_cost_per_million DOUBLE PRECISION NOT NULL,
        updated_at BIGINT NOT NULL
      )`,
      `CREATE TABLE usage (
        id TEXT PRIMARY KEY,
        request_id TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        user_id TEXT,
        key_id TEXT,
        endpoint TEXT NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        cost_nanos BIGINT NOT NULL,
        status TEXT NOT NULL,
        status_code INTEGER NOT NULL,
        duration_ms DOUBLE PRECISION NOT NULL
      )`,
      `CREATE INDEX usage_user ON usage (user_id, created_at)`,
      `CREATE INDEX usage_key ON usage (key_id, created_at)`,
    ],
  },
  {
    version: 2,
    name: 'gateway instances and their budget reservations (PostgreSQL: reclaiming the holds of dead instances)',
    statements: [
      `CREATE TABLE gateway_instances (
        instance_id TEXT PRIMARY KEY,
        started_at BIGINT NOT NULL,
        heartbeat_at BIGINT NOT NULL
      )`,
      `CREATE TABLE budget_reservations (
        instance_id TEXT NOT NULL,
        budget_id TEXT NOT NULL,
        reserved_nanos BIGINT NOT NULL,
        PRIMARY KEY (instance_id, budget_id)
      )`,
    ],
  },
  {
    version: 3,
    name: 'usage by time: analytics over a range and the CSV export read it in (created_at, id) order',
    statements: [`CREATE INDEX usage_created ON usage (created_at, id)`],
  },
  {
    version: 4,
    name: 'key rotation: the previous secret of a rotated key, valid until its grace period ends',
    statements: [
      'ALTER TABLE virtual_keys ADD COLUMN previous_key_hash TEXT',
      'ALTER TABLE virtual_keys ADD COLUMN previous_key_expires_at BIGINT',
      'CREATE INDEX virtual_keys_previous_hash ON virtual_keys (previous_key_hash)',
    ],
  },
  {
    version: 5,
    name: 'rate limit windows shared by the instances on one database',
    statements: [
      `CREATE TABLE rate_limit_windows (
        subject TEXT NOT NULL,
        window_start BIGINT NOT NULL,
        requests BIGINT NOT NULL,
        tokens BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (subject, window_start)
      )`,
    ],
  },
  {
    version: 6,
    name: 'PostgreSQL: every budget hold belongs to a registered gateway instance',
    onlyOn: 'postgres',
    statements: [
      // Holds left without an instance by the race this closes get one that looks long dead: the next reap gives
      // them back (or, if their instance still runs an older version, its next heartbeat keeps them).
      `INSERT INTO gateway_instances (instance_id, started_at, heartbeat_at)
       SELECT DISTINCT r.instance_id, 0, 0 FROM budget_reservations r
       WHERE NOT EXISTS (SELECT 1 FROM gateway_instances i WHERE i.instance_id = r.instance_id)`,
      `ALTER TABLE budget_reservations ADD CONSTRAINT budget_reservations_instance
       FOREIGN KEY (instance_id) REFERENCES gateway_instances (instance_id)`,
      // Settling holds (a JSON array of {budget_id, holder, reserved, actual}). The budget rows are locked first, in
      // budget_id order like every writer of reserved_nanos; each share is read after that lock (in a VOLATILE
      // function every statement takes a fresh snapshot), so a hold a reap gave back meanwhile is not given back
      // again. In the database, so the locks are never held across a round trip to the gateway.
      `CREATE FUNCTION gateway_settle_holds(settlements TEXT) RETURNS VOID LANGUAGE plpgsql VOLATILE AS $$
       DECLARE
         s RECORD;
         given BIGINT;
       BEGIN
         PERFORM 1 FROM budgets WHERE budget_id IN (SELECT x.budget_id FROM json_to_recordset(settlements::json) AS x (budget_id TEXT))
           ORDER BY budget_id FOR NO KEY UPDATE;
         FOR s IN SELECT * FROM json_to_recordset(settlements::json) AS x (budget_id TEXT, holder TEXT, reserved BIGINT, actual BIGINT) LOOP
           SELECT LEAST(s.reserved, r.reserved_nanos) INTO given FROM budget_reservations r WHERE r.instance_id = s.holder AND r.budget_id = s.budget_id;
           given := COALESCE(given, 0);
           UPDATE budget_reservations SET reserved_nanos = reserved_nanos - given WHERE instance_id = s.holder AND budget_id = s.budget_id;
           UPDATE budgets SET reserved_nanos = reserved_nanos - given, spend_nanos = spend_nanos + s.actual WHERE budget_id = s.budget_id;
         END LOOP;
       END
       $$`,
    ],
  },
  {
    version: 7,
    name: 'allowed models of keys and users (JSON lists; NULL: every model)',
    statements: ['ALTER TABLE virtual_keys ADD COLUMN allowed_models TEXT', 'ALTER TABLE users ADD COLUMN allowed_models TEXT'],
  },
  {
    version: 8,
    name: 'rerank: a price per thousand search units, and the search units a call was billed',
    statements: [
      'ALTER TABLE model_pricing ADD COLUMN search_unit_cost_per_thousand DOUBLE PRECISION NOT NULL DEFAULT 0',
      'ALTER TABLE usage ADD COLUMN search_units INTEGER NOT NULL DEFAULT 0',
    ],
  },
  {
    version: 9,
    name: 'model routes: the public name a usage row was called by, and the targets it tried',
    statements: ['ALTER TABLE usage ADD COLUMN route TEXT', 'ALTER TABLE usage ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1'],
  },
  {
    version: 10,
    name: 'write-ahead usage: a pending row (its holds, its instance) before the provider is called; refusal reasons',
    statements: [
      'ALTER TABLE usage ADD COLUMN instance_id TEXT',
      // JSON [{budget_id, reserved_nanos, holder}]: what an interrupted call's charge goes to
      'ALTER TABLE usage ADD COLUMN holds TEXT',
      'ALTER TABLE usage ADD COLUMN reason TEXT',
      "CREATE INDEX usage_pending ON usage (instance_id, id) WHERE status = 'pending'",
    ],
    postgresStatements: [
      // Finishing calls (a JSON array of usage rows, each with its holds): the usage rows locked first, in id order (as a
      // reap locks them, before any budget), then the rows are written — updated while pending, corrected if a reap
      // interrupted one meanwhile (charged the difference), inserted if never written (refusals) — and only then
      // the holds are settled by gateway_settle_holds (migration 6, which locks the budget rows in budget_id order),
      // summed per budget and holder: the budget rows, which every reservation needs, are locked for the settlement
      // alone (locked first, they were held through the row writes and reservations queued behind them).
      // (overshoot_nanos comes with migration 11; PL/pgSQL resolves columns when the function runs, after every migration.)
      `CREATE FUNCTION gateway_complete_calls(calls TEXT) RETURNS VOID LANGUAGE plpgsql VOLATILE AS $$
       DECLARE
         settled TEXT;
       BEGIN
         -- = ANY (ARRAY(...)): an index scan whatever the planner guesses of a JSON function's rows (IN (SELECT …) read
         -- the whole usage table). Set-based: a statement per row cost the server as much again as the writes.
         WITH input AS (
           SELECT * FROM json_to_recordset(calls::json) AS x (
             id TEXT, request_id TEXT, created_at BIGINT, user_id TEXT, key_id TEXT, endpoint TEXT, provider TEXT, model TEXT, route TEXT,
             attempts INTEGER, prompt_tokens INTEGER, completion_tokens INTEGER, search_units INTEGER, cost_nanos BIGINT, overshoot_nanos BIGINT,
             status TEXT, status_code INTEGER, duration_ms DOUBLE PRECISION, reason TEXT, instance_id TEXT, holds JSON)),
         prior AS (SELECT u.id, u.status, u.cost_nanos FROM usage u WHERE u.id = ANY (ARRAY(SELECT id FROM input)) ORDER BY u.id FOR UPDATE),
         updated AS (
           UPDATE usage u SET provider = i.provider, model = i.model, attempts = COALESCE(i.attempts, 1), prompt_tokens = i.prompt_tokens,
               completion_tokens = i.completion_tokens, search_units = i.search_units, cost_nanos = i.cost_nanos,
               overshoot_nanos = COALESCE(i.overshoot_nanos, 0), status = i.status, status_code = i.status_code, duration_ms = i.duration_ms,
               reason = i.reason
             FROM input i JOIN prior p ON p.id = i.id
             -- the ANY: an index scan of usage, not a join the planner may turn into a scan of the whole table
             WHERE u.id = ANY (ARRAY(SELECT id FROM input)) AND u.id = i.id AND p.status IN ('pending', 'interrupted')),
         inserted AS (
           INSERT INTO usage (id, request_id, created_at, user_id, key_id, endpoint, provider, model, route, attempts, prompt_tokens,
               completion_tokens, search_units, cost_nanos, overshoot_nanos, status, status_code, duration_ms, reason, instance_id, holds)
             SELECT i.id, i.request_id, i.created_at, i.user_id, i.key_id, i.endpoint, i.provider, i.model, i.route, COALESCE(i.attempts, 1),
               i.prompt_tokens, i.completion_tokens, i.search_units, i.cost_nanos, COALESCE(i.overshoot_nanos, 0), i.status, i.status_code,
               i.duration_ms, i.reason, i.instance_id, i.holds::text
             FROM input i WHERE NOT EXISTS (SELECT 1 FROM prior p WHERE p.id = i.id)),
         -- what each call adds to spend: its cost, less the charge a reap already settled it at
         charged AS (
           SELECT i.holds, i.cost_nanos - CASE WHEN p.status = 'interrupted' THEN p.cost_nanos ELSE 0 END AS extra
             FROM input i LEFT JOIN prior p ON p.id = i.id WHERE p.id IS NULL OR p.status IN ('pending', 'interrupted'))
         SELECT json_agg(sums)::text INTO settled FROM (
           SELECT hs.budget_id, hs.holder, SUM(hs.reserved_nanos) AS reserved, SUM(c.extra) AS actual
             FROM charged c, json_to_recordset(COALESCE(c.holds, '[]'::json)) AS hs (budget_id TEXT, holder TEXT, reserved_nanos BIGINT)
             GROUP BY 1, 2) AS sums;
         IF settled IS NOT NULL THEN PERFORM gateway_settle_holds(settled); END IF;
       END
       $$`,
    ],
  },
  {
    version: 11,
    name: 'budget holds: what a call cost beyond its hold; keys that may name another user',
    statements: [
      'ALTER TABLE usage ADD COLUMN overshoot_nanos BIGINT NOT NULL DEFAULT 0',
      'ALTER TABLE virtual_keys ADD COLUMN allow_user_override INTEGER NOT NULL DEFAULT 0',
    ],
  },
  {
    version: 12,
    name: 'write-ahead usage: calls in flight in their own small table (pending_calls); the usage row is written once, when a call ends',
    statements: [
      // Updating a pending usage row to its outcome changed an indexed column (status, in usage_pending's predicate),
      // so PostgreSQL could not update it in place (HOT): every call wrote the wide row and its four index entries
      // twice (docs/benchmarks.md). A call in flight is now a narrow row here, inserted with its hold and deleted
      // when the call's usage row is inserted; its progress updates are HOT (only the primary key is indexed). No
      // index on instance_id: the table holds only the calls in flight, and only a reap or a start reads by it.
      `CREATE TABLE pending_calls (
        id TEXT PRIMARY KEY,
        request_id TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        user_id TEXT,
        key_id TEXT,
        endpoint TEXT NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        route TEXT,
        prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        search_units INTEGER NOT NULL,
        cost_nanos BIGINT NOT NULL,
        duration_ms DOUBLE PRECISION NOT NULL,
        instance_id TEXT,
        holds TEXT
      )`,
      // The calls a gateway of the previous version left pending move over, to be settled like the others.
      `INSERT INTO pending_calls (id, request_id, created_at, user_id, key_id, endpoint, provider, model, route, prompt_tokens,
         completion_tokens, search_units, cost_nanos, duration_ms, instance_id, holds)
       SELECT id, request_id, created_at, user_id, key_id, endpoint, provider, model, route, prompt_tokens,
         completion_tokens, search_units, cost_nanos, duration_ms, instance_id, holds FROM usage WHERE status = 'pending'`,
      "DELETE FROM usage WHERE status = 'pending'",
      'DROP INDEX usage_pending',
    ],
    postgresStatements: [
      // Finishing calls (a JSON array of usage rows, each with its holds), in three statements, each of which sees
      // what committed before it began (a VOLATILE function): first the calls' pending rows are deleted, locked in
      // id order (as a reap locks them); a call whose pending row this deleted has its usage row inserted and its
      // holds settled. A call without one was either never opened (a refusal: inserted) or settled as `interrupted`
      // by a reap that deleted its pending row first (the reap's usage row is visible to the second statement, which
      // began after the first waited for the reap's lock): that row gets the true outcome and only the difference to
      // the charge it was settled at. Any other row (a call finished twice) is left alone. Then the holds are settled
      // by gateway_settle_holds (migration 6, which locks the budget rows in budget_id order), summed per budget and
      // holder (a share a reap gave back is not given back again).
      `CREATE OR REPLACE FUNCTION gateway_complete_calls(calls TEXT) RETURNS VOID LANGUAGE plpgsql VOLATILE AS $$
       DECLARE
         opened TEXT[];
         settled TEXT;
       BEGIN
         -- = ANY (ARRAY(...)): an index scan whatever the planner guesses of a JSON function's rows
         WITH locked AS (
           SELECT p.id FROM pending_calls p
             WHERE p.id = ANY (ARRAY(SELECT x.id FROM json_to_recordset(calls::json) AS x (id TEXT))) ORDER BY p.id FOR UPDATE),
         gone AS (DELETE FROM pending_calls p USING locked l WHERE p.id = l.id RETURNING p.id)
         SELECT COALESCE(array_agg(id), '{}') INTO opened FROM gone;
         WITH input AS (
           SELECT * FROM json_to_recordset(calls::json) AS x (
             id TEXT, request_id TEXT, created_at BIGINT, user_id TEXT, key_id TEXT, endpoint TEXT, provider TEXT, model TEXT, route TEXT,
             attempts INTEGER, prompt_tokens INTEGER, completion_tokens INTEGER, search_units INTEGER, cost_nanos BIGINT, overshoot_nanos BIGINT,
             status TEXT, status_code INTEGER, duration_ms DOUBLE PRECISION, reason TEXT, instance_id TEXT, holds JSON)),
         -- usage rows of the calls this did not open: written by a reap (interrupted) or by an earlier finish
         prior AS (
           SELECT u.id, u.status, u.cost_nanos FROM usage u
             WHERE u.id = ANY (ARRAY(SELECT id FROM input WHERE NOT (id = ANY (opened)))) ORDER BY u.id FOR UPDATE),
         updated AS (
           UPDATE usage u SET provider = i.provider, model = i.model, attempts = COALESCE(i.attempts, 1), prompt_tokens = i.prompt_tokens,
               completion_tokens = i.completion_tokens, search_units = i.search_units, cost_nanos = i.cost_nanos,
               overshoot_nanos = COALESCE(i.overshoot_nanos, 0), status = i.status, status_code = i.status_code, duration_ms = i.duration_ms,
               reason = i.reason
             FROM input i JOIN prior p ON p.id = i.id
             WHERE u.id = ANY (ARRAY(SELECT id FROM prior WHERE status = 'interrupted')) AND u.id = i.id AND p.status = 'interrupted'),
         inserted AS (
           INSERT INTO usage (id, request_id, created_at, user_id, key_id, endpoint, provider, model, route, attempts, prompt_tokens,
               completion_tokens, search_units, cost_nanos, overshoot_nanos, status, status_code, duration_ms, reason, instance_id, holds)
             SELECT i.id, i.request_id, i.created_at, i.user_id, i.key_id, i.endpoint, i.provider, i.model, i.route, COALESCE(i.attempts, 1),
               i.prompt_tokens, i.completion_tokens, i.search_units, i.cost_nanos, COALESCE(i.overshoot_nanos, 0), i.status, i.status_code,
               i.duration_ms, i.reason, i.instance_id, i.holds::text
             FROM input i WHERE NOT EXISTS (SELECT 1 FROM prior p WHERE p.id = i.id)),
         -- what each call adds to spend: its cost, less the charge a reap already settled it at
         charged AS (
           SELECT i.holds, i.cost_nanos - CASE WHEN p.status = 'interrupted' THEN p.cost_nanos ELSE 0 END AS extra
             FROM input i LEFT JOIN prior p ON p.id = i.id WHERE p.id IS NULL OR p.status = 'interrupted')
         SELECT json_agg(sums)::text INTO settled FROM (
           SELECT hs.budget_id, hs.holder, SUM(hs.reserved_nanos) AS reserved, SUM(c.extra) AS actual
             FROM charged c, json_to_recordset(COALESCE(c.holds, '[]'::json)) AS hs (budget_id TEXT, holder TEXT, reserved_nanos BIGINT)
             GROUP BY 1, 2) AS sums;
         IF settled IS NOT NULL THEN PERFORM gateway_settle_holds(settled); END IF;
       END
       $$`,
      // The common case of finishing calls, one statement (UsageLog.complete): the pending rows deleted, the usage
      // rows inserted and the holds settled by this, which first checks that every opened call of the batch still had
      // its pending row; if not (a reap settled one meanwhile) it fails with GW001, the statement is undone and the
      // batch goes through gateway_complete_calls. gateway_complete_calls alone cost the server half as much again
      // per call (its locking reads and second pass).
      `CREATE FUNCTION gateway_settle_opened(settlements TEXT, deleted BIGINT, opened BIGINT) RETURNS VOID LANGUAGE plpgsql VOLATILE AS $$
       BEGIN
         IF deleted <> opened THEN
           RAISE EXCEPTION 'a pending call of the batch was settled meanwhile (% of % found)', deleted, opened USING ERRCODE = 'GW001';
         END IF;
         IF settlements <> '[]' THEN PERFORM gateway_settle_holds(settlements); END IF;
       END
       $$`,
    ],
  },
  {
    version: 13,
    name: 'budgets: names, calendar resets (the end of the current period, stored), soft budgets',
    statements: [
      'ALTER TABLE budgets ADD COLUMN name TEXT',
      // daily | weekly | monthly (NULL: none), and the IANA zone whose calendar it follows
      'ALTER TABLE budgets ADD COLUMN reset_alignment TEXT',
      'ALTER TABLE budgets ADD COLUMN reset_time_zone TEXT',
      // When the current period ends (NULL: never): a reservation at or after it starts the next period first.
      'ALTER TABLE budgets ADD COLUMN period_ends_at BIGINT',
      'UPDATE budgets SET period_ends_at = period_started_at + reset_every_seconds * 1000 WHERE reset_every_seconds IS NOT NULL',
      'ALTER TABLE budgets ADD COLUMN soft_budget_nanos BIGINT',
    ],
  },
  {
    version: 14,
    name: 'runtime configuration: providers and model routes in the database, where each entry came from, the file entries seeded, an audit of changes, a change counter',
    statements: [
      // 'config': written from the configuration file; 'api': written (or last edited) through the API
      "ALTER TABLE model_pricing ADD COLUMN source TEXT NOT NULL DEFAULT 'api'",
      `CREATE TABLE gateway_providers (
        name TEXT PRIMARY KEY,
        api_key TEXT,
        api_base TEXT,
        source TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
      )`,
      // definition: JSON {targets: [{model, weight?, priority?, api_key?, api_base?, timeout_seconds?}], timeout_seconds?}
      `CREATE TABLE model_routes (
        name TEXT PRIMARY KEY,
        definition TEXT NOT NULL,
        source TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
      )`,
      // What the configuration file said of each entry when it was last written from it (a SHA-256 of the entry)
      `CREATE TABLE config_seeds (
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        digest TEXT NOT NULL,
        PRIMARY KEY (kind, name)
      )`,
      // before_value, after_value: JSON of the entry without its secrets (api_key: only whether one is set)
      `CREATE TABLE config_audit (
        id TEXT PRIMARY KEY,
        created_at BIGINT NOT NULL,
        actor TEXT NOT NULL,
        client TEXT,
        request_id TEXT,
        action TEXT NOT NULL,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        before_value TEXT,
        after_value TEXT
      )`,
      'CREATE INDEX config_audit_created ON config_audit (created_at, id)',
      // One row, raised by every change of providers, routes or pricing: what instances poll to reload
      'CREATE TABLE config_version (id INTEGER PRIMARY KEY, version BIGINT NOT NULL)',
      'INSERT INTO config_version (id, version) VALUES (1, 0)',
    ],
  },
  {
    version: 15,
    name: 'PostgreSQL: the budget holds of concurrent calls taken in one statement (group commit), their pending rows with them',
    onlyOn: 'postgres',
    statements: [
      // Holds (a JSON array of {i, budget_id, amount, at_ms, pending}: `pending` a pending_calls row as JSON, or null), in
      // the order given, all under the instance registration `holder`; one row per request: whether it was held and
      // what its budget's spend and limits were. The instance row is locked first, then the budget rows in budget_id
      // order (the order a reap takes them), each read after its lock (in a VOLATILE function every statement takes a
      // fresh snapshot). A request is held when its budget's period has not ended at its `at_ms` and the budget can hold
      // it together with every earlier request of the batch on that budget, held or not (a running sum): so what is
      // held never exceeds what one statement per request would have held; a request refused after an earlier refusal
      // on its budget may have been refused for that one's amount, and the caller asks again alone if it asked for less
      // (Budgets).
      `CREATE FUNCTION gateway_hold_calls(holder TEXT, requests TEXT)
         RETURNS TABLE (i INTEGER, held BOOLEAN, spend_nanos BIGINT, soft_budget_nanos BIGINT, max_budget_nanos BIGINT)
         LANGUAGE plpgsql VOLATILE AS $$
       #variable_conflict use_column
       BEGIN
         PERFORM 1 FROM gateway_instances g WHERE g.instance_id = holder FOR KEY SHARE;
         PERFORM 1 FROM budgets b WHERE b.budget_id = ANY (ARRAY(SELECT x.budget_id FROM json_to_recordset(requests::json) AS x (budget_id TEXT)))
           ORDER BY b.budget_id FOR NO KEY UPDATE;
         RETURN QUERY
         WITH req AS (SELECT * FROM json_to_recordset(requests::json) AS x (i INTEGER, budget_id TEXT, amount BIGINT, at_ms BIGINT, pending JSON)),
         running AS (SELECT r.*, SUM(r.amount) OVER (PARTITION BY r.budget_id ORDER BY r.i) AS upto FROM req r),
         decided AS (
           SELECT r.i, r.budget_id, r.amount, r.pending, b.spend_nanos, b.soft_budget_nanos, b.max_budget_nanos,
               COALESCE((b.period_ends_at IS NULL OR r.at_ms < b.period_ends_at)
                 AND b.spend_nanos + b.reserved_nanos + r.upto - r.amount < b.max_budget_nanos
                 AND b.spend_nanos + b.reserved_nanos + r.upto <= b.max_budget_nanos, FALSE) AS held
             FROM running r LEFT JOIN budgets b ON b.budget_id = r.budget_id),
         sums AS (SELECT d.budget_id, SUM(d.amount) AS amount FROM decided d WHERE d.held GROUP BY d.budget_id),
         taken AS (UPDATE budgets b SET reserved_nanos = b.reserved_nanos + s.amount FROM sums s WHERE b.budget_id = s.budget_id),
         shared AS (
           INSERT INTO budget_reservations (instance_id, budget_id, reserved_nanos) SELECT holder, s.budget_id, s.amount FROM sums s
             ON CONFLICT (instance_id, budget_id) DO UPDATE SET reserved_nanos = budget_reservations.reserved_nanos + excluded.reserved_nanos),
         opened AS (INSERT INTO pending_calls SELECT p.* FROM decided d, json_populate_record(NULL::pending_calls, d.pending) AS p WHERE d.held AND d.pending IS NOT NULL)
         SELECT d.i, d.held, d.spend_nanos, d.soft_budget_nanos, d.max_budget_nanos FROM decided d ORDER BY d.i;
       END
       $$`,
    ],
  },
  {
    version: 16,
    name: 'PostgreSQL: one call settling one budget, its settlement bound as parameters',
    onlyOn: 'postgres',
    statements: [
      // gateway_settle_opened for the common case (UsageLog.complete): one call, one hold. The same steps as
      // gateway_settle_holds (the budget row locked first, the share read after that lock), without a JSON array to
      // read twice, which was half of what settling cost the server per call at concurrency 1.
      `CREATE FUNCTION gateway_settle_one(deleted BIGINT, opened BIGINT, budget TEXT, holder TEXT, reserved BIGINT, actual BIGINT)
         RETURNS VOID LANGUAGE plpgsql VOLATILE AS $$
       DECLARE
         given BIGINT;
       BEGIN
         IF deleted <> opened THEN
           RAISE EXCEPTION 'a pending call of the batch was settled meanwhile (% of % found)', deleted, opened USING ERRCODE = 'GW001';
         END IF;
         PERFORM 1 FROM budgets WHERE budget_id = budget FOR NO KEY UPDATE;
         SELECT LEAST(reserved, r.reserved_nanos) INTO given FROM budget_reservations r WHERE r.instance_id = holder AND r.budget_id = budget;
         given := COALESCE(given, 0);
         UPDATE budget_reservations SET reserved_nanos = reserved_nanos - given WHERE instance_id = holder AND budget_id = budget;
         UPDATE budgets SET reserved_nanos = reserved_nanos - given, spend_nanos = spend_nanos + actual WHERE budget_id = budget;
       END
       $$`,
    ],
  },
];

export const SCHEMA_MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS schema_migrations (
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at BIGINT NOT NULL
)`;
