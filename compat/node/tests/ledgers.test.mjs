// Ledgers through the official Node SDK (issue 19, SPEC G1 to G5): ledgers, ledger accounts
// (balances as of an instant, a date, a window and a lock_version), ledger transactions
// (pending and posted, lock_version and available_balance_amount on entries, post, archive,
// reversal, versions, list filters), ledger entries (show_balances, metadata), auto-paging, and
// the SDK's error classes for an unbalanced transaction (422) and a stale lock_version (409).
//
// The Node SDK does not validate replies, so every object is checked against the fields its
// own type declarations (the .d.ts files it ships) require: the SDK's types, not a copy of them.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { ModernTreasury, client, collect, tag } from './helpers.mjs';

const sdkRoot = new URL('./', import.meta.resolve('modern-treasury'));
const declaredCache = new Map();

/** The required (not `?:`) fields of `interface name` in the SDK's resources/<file>.d.ts; a
 * dotted name (`LedgerAccount.Balances`) looks inside that namespace. */
function declared(file, name) {
  const cacheKey = `${file}:${name}`;
  if (declaredCache.has(cacheKey)) return declaredCache.get(cacheKey);
  const text = readFileSync(new URL(`resources/${file}.d.ts`, sdkRoot), 'utf8');
  const [outer, inner] = name.split('.');
  let body = text;
  let indent = '';
  if (inner) {
    const start = text.indexOf(`export declare namespace ${outer} {`);
    assert.ok(start >= 0, `namespace ${outer} in ${file}.d.ts`);
    body = text.slice(start, text.indexOf('\n}', start));
    indent = '    ';
  }
  const iface = inner ?? outer;
  const open = body.search(new RegExp(`^${indent}(export )?interface ${iface} \\{`, 'm'));
  assert.ok(open >= 0, `interface ${name} in ${file}.d.ts`);
  const block = body.slice(open, body.indexOf(`\n${indent}}`, open));
  const fields = [...block.matchAll(new RegExp(`^${indent}    ([a-z_]+):`, 'gm'))].map((m) => m[1]);
  assert.ok(fields.length >= 3, `fields of ${name} found in ${file}.d.ts`);
  declaredCache.set(cacheKey, fields);
  return fields;
}

function assertFields(value, file, name) {
  assert.ok(value && typeof value === 'object', `${name}: an object, got ${JSON.stringify(value)}`);
  const missing = declared(file, name).filter((field) => !(field in value));
  assert.deepEqual(missing, [], `${name} is missing fields its SDK type requires`);
}

function assertBalances(balances, windowed) {
  if (windowed) assertFields(balances, 'ledger-accounts', 'LedgerAccount.Balances');
  else assertFields(balances, 'shared', 'LedgerBalances');
  for (const kind of ['pending_balance', 'posted_balance', 'available_balance']) assertFields(balances[kind], 'shared', 'LedgerBalance');
}

const checkLedger = (l) => (assertFields(l, 'ledgers', 'Ledger'), l);
const checkAccount = (a) => (assertFields(a, 'ledger-accounts', 'LedgerAccount'), assertBalances(a.balances, true), a);
function checkEntry(e) {
  assertFields(e, 'ledger-entries', 'LedgerEntry');
  if (e.resulting_ledger_account_balances !== null) assertBalances(e.resulting_ledger_account_balances, false);
  return e;
}
function checkTransaction(t) {
  assertFields(t, 'ledger-transactions/ledger-transactions', 'LedgerTransaction');
  t.ledger_entries.forEach(checkEntry);
  return t;
}
function checkVersion(v) {
  assertFields(v, 'ledger-transactions/versions', 'LedgerTransactionVersion');
  v.ledger_entries.forEach((e) => assertFields(e, 'ledger-transactions/versions', 'LedgerTransactionVersion.LedgerEntry'));
  return v;
}

const amounts = (balances) => [balances.pending_balance.amount, balances.posted_balance.amount, balances.available_balance.amount];
const entry = (account, direction, amount, extra = {}) => ({ ledger_account_id: account, direction, amount, ...extra });
const daysAgo = (n) => new Date(Date.now() - n * 86_400_000);
const dateOf = (d) => d.toISOString().slice(0, 10);

async function books() {
  const t = tag();
  const ledger = checkLedger(await client.ledgers.create({ name: `Node books ${t}`, metadata: { tag: t } }));
  const account = async (name, normal, extra = {}) =>
    checkAccount(await client.ledgerAccounts.create({ name: `${name} ${t}`, ledger_id: ledger.id, normal_balance: normal, currency: 'USD', ...extra }));
  return { t, ledger, cash: await account('Cash', 'debit'), wallet: await account('Wallet', 'credit', { metadata: { tag: t } }), account };
}

const post = async (entries, extra = {}) => checkTransaction(await client.ledgerTransactions.create({ status: 'posted', ledger_entries: entries, ...extra }));

test('ledgers: create, retrieve, list with auto-paging and filters, update, delete', async () => {
  const t = tag();
  const made = [];
  for (let i = 0; i < 3; i++) made.push(checkLedger(await client.ledgers.create({ name: `Node ledger ${t} ${i}`, metadata: { tag: t } })));
  assert.equal(made[0].object, 'ledger');
  assert.equal((await client.ledgers.retrieve(made[0].id)).id, made[0].id);
  const seen = (await collect(client.ledgers.list({ per_page: 2, metadata: { tag: t } }))).map(checkLedger);
  assert.deepEqual(seen.map((l) => l.id), made.map((l) => l.id).reverse(), 'every ledger once, newest first, across pages');
  const byId = await collect(client.ledgers.list({ id: [made[0].id, made[2].id] }));
  assert.deepEqual(byId.map((l) => l.id).sort(), [made[0].id, made[2].id].sort());
  const updated = checkLedger(await client.ledgers.update(made[0].id, { name: `Renamed ${t}`, metadata: { stage: 'two' } }));
  assert.equal(updated.name, `Renamed ${t}`);
  assert.deepEqual(updated.metadata, { tag: t, stage: 'two' });
  const deleted = checkLedger(await client.ledgers.delete(made[1].id));
  assert.ok(deleted.discarded_at);
  await assert.rejects(client.ledgers.retrieve(made[1].id), ModernTreasury.NotFoundError);
});

test('ledger accounts: create, retrieve, list filters and paging, update, delete', async () => {
  const { t, ledger, cash, wallet, account } = await books();
  assert.equal(wallet.object, 'ledger_account');
  assert.equal(wallet.lock_version, 0);
  assert.deepEqual(amounts(wallet.balances), [0, 0, 0]);
  const points = await account('Points', 'credit', { currency: 'POINTS', currency_exponent: 0, external_id: `pts-${t}` });
  assert.equal(points.balances.posted_balance.currency_exponent, 0);
  assert.equal((await client.ledgerAccounts.retrieve(wallet.id)).name, wallet.name);

  const ids = async (query) => (await collect(client.ledgerAccounts.list(query))).map(checkAccount).map((a) => a.id);
  assert.deepEqual(await ids({ ledger_id: ledger.id, per_page: 1 }), [points.id, wallet.id, cash.id], 'auto-paging across pages');
  assert.deepEqual(await ids({ ledger_id: ledger.id, normal_balance: 'debit' }), [cash.id]);
  assert.deepEqual(await ids({ ledger_id: ledger.id, currency: 'POINTS' }), [points.id]);
  assert.deepEqual(await ids({ metadata: { tag: t } }), [wallet.id]);
  assert.deepEqual(await ids({ external_id: `pts-${t}` }), [points.id]);
  assert.deepEqual((await ids({ id: [cash.id, wallet.id] })).sort(), [cash.id, wallet.id].sort());
  assert.deepEqual((await ids({ ledger_id: ledger.id, name: [cash.name, points.name] })).sort(), [cash.id, points.id].sort());

  const updated = checkAccount(await client.ledgerAccounts.update(wallet.id, { description: 'customer', metadata: { kind: 'wallet' } }));
  assert.equal(updated.description, 'customer');
  assert.deepEqual(updated.metadata, { tag: t, kind: 'wallet' });
  const deleted = checkAccount(await client.ledgerAccounts.delete(points.id));
  assert.ok(deleted.discarded_at);
  await assert.rejects(client.ledgerAccounts.retrieve(points.id), ModernTreasury.NotFoundError);
});

test('balances as of an instant, a date, a window and a lock_version (G3, G5)', async () => {
  const { ledger, cash, wallet } = await books();
  const tenDaysAgo = daysAgo(10);
  const old = await post([entry(cash.id, 'debit', 1000), entry(wallet.id, 'credit', 1000)], { effective_at: tenDaysAgo.toISOString() });
  assert.equal(old.effective_date, dateOf(tenDaysAgo));
  await post([entry(cash.id, 'debit', 250), entry(wallet.id, 'credit', 250)]);
  checkTransaction(
    await client.ledgerTransactions.create({ status: 'pending', ledger_entries: [entry(wallet.id, 'debit', 100), entry(cash.id, 'credit', 100)] }),
  );
  const now = checkAccount(await client.ledgerAccounts.retrieve(wallet.id));
  assert.deepEqual(amounts(now.balances), [1150, 1250, 1150]);
  assert.equal(now.lock_version, 3);

  const retrieve = async (balances) => amounts(checkAccount(await client.ledgerAccounts.retrieve(wallet.id, { balances })).balances);
  assert.deepEqual(await retrieve({ effective_at: daysAgo(5).toISOString() }), [1000, 1000, 1000]);
  assert.deepEqual(await retrieve({ as_of_date: dateOf(daysAgo(5)) }), [1000, 1000, 1000]);
  assert.deepEqual(await retrieve({ as_of_date: dateOf(daysAgo(11)) }), [0, 0, 0]);
  assert.deepEqual(
    await retrieve({ effective_at_lower_bound: daysAgo(5).toISOString(), effective_at_upper_bound: daysAgo(-1).toISOString() }),
    [150, 250, 150],
  );
  assert.deepEqual(await retrieve({ as_of_lock_version: 1 }), [1000, 1000, 1000]);
  const listed = (await collect(client.ledgerAccounts.list({ ledger_id: ledger.id, balances: { as_of_date: dateOf(daysAgo(5)) } }))).map(checkAccount);
  assert.deepEqual(listed.map((a) => amounts(a.balances)), [[1000, 1000, 1000], [1000, 1000, 1000]]);
});

test('transactions: pending with lock_version and available_balance_amount, post, archive, update', async () => {
  const { t, ledger, cash, wallet } = await books();
  const funded = await post([entry(cash.id, 'debit', 500), entry(wallet.id, 'credit', 500, { lock_version: 0 })], {
    description: 'top up',
    metadata: { tag: t },
    external_id: `top-${t}`,
  });
  assert.equal(funded.object, 'ledger_transaction');
  assert.equal(funded.ledger_id, ledger.id);
  assert.equal(funded.external_id, `top-${t}`);
  assert.ok(funded.posted_at);
  const spend = checkTransaction(
    await client.ledgerTransactions.create({
      status: 'pending',
      ledger_entries: [entry(wallet.id, 'debit', 200, { lock_version: 1, available_balance_amount: { gte: 0 } }), entry(cash.id, 'credit', 200)],
    }),
  );
  assert.equal(spend.status, 'pending');
  assert.equal(spend.posted_at, null);
  const posted = checkTransaction(await client.ledgerTransactions.update(spend.id, { status: 'posted' }));
  assert.equal(posted.status, 'posted');
  assert.ok(posted.ledger_entries.every((e) => e.status === 'posted'));
  assert.equal(checkTransaction(await client.ledgerTransactions.retrieve(spend.id)).status, 'posted');

  const held = checkTransaction(
    await client.ledgerTransactions.create({ status: 'pending', ledger_entries: [entry(wallet.id, 'debit', 50), entry(cash.id, 'credit', 50)] }),
  );
  const archived = checkTransaction(await client.ledgerTransactions.update(held.id, { status: 'archived' }));
  assert.equal(archived.status, 'archived');
  assert.deepEqual(amounts(checkAccount(await client.ledgerAccounts.retrieve(wallet.id)).balances), [300, 300, 300]);
  const described = checkTransaction(await client.ledgerTransactions.update(funded.id, { description: 'checked', metadata: { seen: 'yes' } }));
  assert.deepEqual(described.metadata, { tag: t, seen: 'yes' });
  await assert.rejects(client.ledgerTransactions.update(funded.id, { status: 'archived' }), ModernTreasury.UnprocessableEntityError);
});

test('transactions: list filters as the SDK sends them, auto-paging', async () => {
  const { t, ledger, cash, wallet } = await books();
  const make = async (at, status, metadata = {}) =>
    checkTransaction(
      await client.ledgerTransactions.create({
        status,
        effective_at: at.toISOString(),
        metadata,
        ledger_entries: [entry(cash.id, 'debit', 10), entry(wallet.id, 'credit', 10)],
      }),
    );
  const old = await make(daysAgo(10), 'posted', { batch: t, kind: 'old' });
  const middle = await make(daysAgo(5), 'pending', { batch: t });
  const recent = await make(new Date(), 'posted', { batch: t });
  const ids = async (query) => (await collect(client.ledgerTransactions.list({ ledger_id: ledger.id, ...query }))).map(checkTransaction).map((x) => x.id);
  assert.deepEqual(await ids({ per_page: 2 }), [recent.id, middle.id, old.id], 'auto-paging across pages');
  assert.deepEqual(await ids({ ledger_account_id: wallet.id }), [recent.id, middle.id, old.id]);
  assert.deepEqual(await ids({ status: 'pending' }), [middle.id]);
  assert.deepEqual(await ids({ status: ['posted', 'archived'] }), [recent.id, old.id]);
  assert.deepEqual(await ids({ metadata: { batch: t, kind: 'old' } }), [old.id]);
  assert.deepEqual(await ids({ effective_at: { lt: daysAgo(7).toISOString() } }), [old.id]);
  assert.deepEqual(await ids({ effective_at: { gte: daysAgo(7).toISOString(), lte: new Date().toISOString() } }), [recent.id, middle.id]);
  assert.deepEqual(await ids({ effective_date: { eq: dateOf(daysAgo(5)) } }), [middle.id]);
  assert.deepEqual((await ids({ id: [old.id, recent.id] })).sort(), [old.id, recent.id].sort());
  await assert.rejects(client.ledgerTransactions.list({ ledger_id: ledger.id, order_by: { effective_at: 'asc' } }), (err) => {
    assert.ok(err instanceof ModernTreasury.UnprocessableEntityError, String(err));
    assert.equal(err.error?.errors?.parameter, 'order_by[effective_at]');
    return true;
  });
});

test('reversal and versions (G1, G2)', async () => {
  const { cash, wallet } = await books();
  const original = await post([entry(cash.id, 'debit', 700), entry(wallet.id, 'credit', 700)]);
  const reversal = checkTransaction(await client.ledgerTransactions.createReversal(original.id, { description: 'undo' }));
  assert.equal(reversal.reverses_ledger_transaction_id, original.id);
  assert.equal(reversal.status, 'posted');
  assert.equal((await client.ledgerTransactions.retrieve(original.id)).reversed_by_ledger_transaction_id, reversal.id);
  assert.deepEqual(amounts(checkAccount(await client.ledgerAccounts.retrieve(wallet.id)).balances), [0, 0, 0]);

  const pending = checkTransaction(
    await client.ledgerTransactions.create({ status: 'pending', ledger_entries: [entry(cash.id, 'debit', 5), entry(wallet.id, 'credit', 5)] }),
  );
  await client.ledgerTransactions.update(pending.id, { metadata: { step: 'one' } });
  await client.ledgerTransactions.update(pending.id, { status: 'posted' });
  const versions = async (query) =>
    (await collect(client.ledgerTransactions.versions.list({ ledger_transaction_id: pending.id, ...query }))).map(checkVersion);
  const all = await versions({ per_page: 2 });
  assert.deepEqual(all.map((v) => v.version), [3, 2, 1], 'newest first, across pages');
  assert.deepEqual(all.map((v) => v.status), ['posted', 'pending', 'pending']);
  assert.deepEqual((await versions({ version: { gte: 2 } })).map((v) => v.version), [3, 2]);
  assert.deepEqual((await versions({ version: { lt: 2 } })).map((v) => v.version), [1]);
});

test('entries: retrieve with show_balances, list filters, update metadata', async () => {
  const { cash, wallet } = await books();
  const first = await post([entry(cash.id, 'debit', 300), entry(wallet.id, 'credit', 300)], { effective_at: daysAgo(10).toISOString() });
  const second = checkTransaction(
    await client.ledgerTransactions.create({ status: 'pending', ledger_entries: [entry(wallet.id, 'debit', 120), entry(cash.id, 'credit', 120)] }),
  );
  const firstWallet = first.ledger_entries.find((e) => e.ledger_account_id === wallet.id);
  const secondWallet = second.ledger_entries.find((e) => e.ledger_account_id === wallet.id);
  assert.equal(checkEntry(await client.ledgerEntries.retrieve(firstWallet.id)).resulting_ledger_account_balances, null);
  const shown = checkEntry(await client.ledgerEntries.retrieve(secondWallet.id, { show_balances: true }));
  assert.deepEqual(amounts(shown.resulting_ledger_account_balances), [180, 300, 180]);

  const ids = async (query) => (await collect(client.ledgerEntries.list({ ledger_account_id: wallet.id, ...query }))).map(checkEntry).map((e) => e.id);
  assert.deepEqual(await ids({ per_page: 1 }), [secondWallet.id, firstWallet.id], 'auto-paging across pages');
  assert.deepEqual(await ids({ status: 'pending' }), [secondWallet.id]);
  assert.deepEqual(await ids({ direction: 'credit' }), [firstWallet.id]);
  assert.deepEqual(await ids({ effective_date: { lt: dateOf(daysAgo(5)) } }), [firstWallet.id]);
  const withBalances = (await collect(client.ledgerEntries.list({ ledger_account_id: wallet.id, show_balances: true }))).map(checkEntry);
  assert.deepEqual(withBalances.map((e) => e.resulting_ledger_account_balances.pending_balance.amount), [180, 300]);

  const updated = checkEntry(await client.ledgerEntries.update(firstWallet.id, { metadata: { note: 'hello' } }));
  assert.deepEqual(updated.metadata, { note: 'hello' });
  assert.deepEqual(await ids({ metadata: { note: 'hello' } }), [firstWallet.id]);
});

test('errors: unbalanced is UnprocessableEntityError, stale lock_version is ConflictError, nothing changes', async () => {
  const { ledger, cash, wallet } = await books();
  await post([entry(cash.id, 'debit', 100), entry(wallet.id, 'credit', 100)]);
  await assert.rejects(
    client.ledgerTransactions.create({ ledger_entries: [entry(cash.id, 'debit', 100), entry(wallet.id, 'credit', 99)] }),
    (err) => {
      assert.ok(err instanceof ModernTreasury.UnprocessableEntityError, String(err));
      assert.equal(err.status, 422);
      assert.equal(err.error?.errors?.parameter, 'ledger_entries');
      return true;
    },
  );
  await assert.rejects(
    client.ledgerTransactions.create({ status: 'posted', ledger_entries: [entry(wallet.id, 'debit', 10, { lock_version: 0 }), entry(cash.id, 'credit', 10)] }),
    (err) => {
      assert.ok(err instanceof ModernTreasury.ConflictError, String(err));
      assert.equal(err.status, 409);
      return true;
    },
  );
  await assert.rejects(
    client.ledgerTransactions.create({
      status: 'posted',
      ledger_entries: [entry(wallet.id, 'debit', 101, { available_balance_amount: { gte: 0 } }), entry(cash.id, 'credit', 101)],
    }),
    ModernTreasury.UnprocessableEntityError,
  );
  await assert.rejects(client.ledgerTransactions.retrieve(randomUUID()), ModernTreasury.NotFoundError);
  const after = checkAccount(await client.ledgerAccounts.retrieve(wallet.id));
  assert.deepEqual([amounts(after.balances), after.lock_version], [[100, 100, 100], 1], 'refused transactions change nothing');
  assert.equal((await collect(client.ledgerTransactions.list({ ledger_id: ledger.id }))).length, 1);
});
