// Internal account + payment orders (by id and inline account), cancel, the sandbox bank and
// events, through the official Node SDK.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { accountInput, client, collect, inAnHour, tag, waitFor } from './helpers.mjs';

let internal;
let counterparty;

before(async () => {
  internal = await client.internalAccounts.create({ currency: 'USD', name: `Node originating ${tag()}`, party_name: 'Node Inc.' });
  counterparty = await client.counterparties.create({ name: `Node payee ${tag()}`, accounts: [accountInput()] });
});

test('payment order by receiving_account_id: create and retrieve', async () => {
  const t = tag();
  const created = await client.paymentOrders.create({
    type: 'ach',
    amount: 12345,
    direction: 'credit',
    originating_account_id: internal.id,
    receiving_account_id: counterparty.accounts[0].id,
    metadata: { tag: t },
    process_after: inAnHour(),
  });
  assert.equal(created.object, 'payment_order');
  assert.equal(created.amount, 12345);
  assert.equal(created.currency, 'USD');
  assert.equal(created.counterparty_id, counterparty.id);
  assert.equal(created.receiving_account_type, 'external_account');
  const fetched = await client.paymentOrders.retrieve(created.id);
  assert.equal(fetched.id, created.id);
  assert.equal(fetched.receiving_account_id, counterparty.accounts[0].id);
  assert.deepEqual((await collect(client.paymentOrders.list({ metadata: { tag: t } }))).map((p) => p.id), [created.id]);
});

test('payment order with an inline receiving_account', async () => {
  const created = await client.paymentOrders.create({
    type: 'ach',
    amount: 500,
    direction: 'credit',
    originating_account_id: internal.id,
    receiving_account: accountInput({ partyName: 'Node Inline', accountNumber: '444455556666' }),
    process_after: inAnHour(),
  });
  const account = await client.externalAccounts.retrieve(created.receiving_account_id);
  assert.equal(account.party_name, 'Node Inline');
});

test('cancel a payment order', async () => {
  const created = await client.paymentOrders.create({
    type: 'ach',
    amount: 777,
    direction: 'credit',
    originating_account_id: internal.id,
    receiving_account_id: counterparty.accounts[0].id,
    process_after: inAnHour(),
  });
  const cancelled = await client.paymentOrders.update(created.id, { status: 'cancelled' });
  assert.equal(cancelled.status, 'cancelled');
  assert.equal((await client.paymentOrders.retrieve(created.id)).status, 'cancelled');
});

test('the sandbox bank completes an order, with events', async () => {
  const created = await client.paymentOrders.create({
    type: 'ach',
    amount: 2500,
    direction: 'credit',
    originating_account_id: internal.id,
    receiving_account_id: counterparty.accounts[0].id,
  });
  const done = await waitFor(
    () => client.paymentOrders.retrieve(created.id),
    (po) => ['completed', 'failed', 'returned', 'cancelled'].includes(po.status),
    { what: 'completion' },
  );
  assert.equal(done.status, 'completed');
  const events = await collect(client.events.list({ entity_id: created.id, per_page: 2 }));
  const names = events.map((e) => e.event_name);
  assert.ok(names.includes('created') && names.includes('completed'), names.join(','));
  assert.ok(events.every((e) => e.data.id === created.id && e.resource === 'payment_order'));
});
