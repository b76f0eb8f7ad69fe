// Ping, api_keys/current, counterparties (inline accounts, auto-paging, filters), internal and
// external accounts, through the official Node SDK.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { API_KEY, ROUTING_NUMBER, accountInput, client, collect, tag } from './helpers.mjs';

test('ping', async () => {
  assert.deepEqual(await client.ping(), { ping: 'pong' });
});

test('api_keys/current through the raw get', async () => {
  const current = await client.get('/api/api_keys/current');
  for (const field of ['id', 'object', 'name', 'live_mode', 'organization_id', 'created_at', 'updated_at', 'expires_at', 'decommissioned', 'decommissioned_at']) {
    assert.ok(field in current, `missing ${field}`);
  }
  assert.equal(current.object, 'api_key');
  assert.equal(current.live_mode, false);
  assert.ok(!JSON.stringify(current).includes(API_KEY), 'the key is never echoed');
});

test('counterparty create with inline accounts, retrieve', async () => {
  const t = tag();
  const created = await client.counterparties.create({
    name: `Node Acme ${t}`,
    email: `node-${t}@example.com`,
    metadata: { tag: t },
    accounts: [accountInput({ partyName: 'Node Acme Corp', party_type: 'business', accountNumber: '000123456789' })],
  });
  assert.equal(created.object, 'counterparty');
  assert.equal(created.name, `Node Acme ${t}`);
  assert.deepEqual(created.metadata, { tag: t });
  assert.equal(created.accounts.length, 1);
  const [account] = created.accounts;
  assert.equal(account.party_type, 'business');
  assert.equal(account.account_details[0].account_number_safe, '6789');
  assert.equal(account.routing_details[0].routing_number, ROUTING_NUMBER);

  const fetched = await client.counterparties.retrieve(created.id);
  assert.equal(fetched.id, created.id);
  assert.deepEqual(fetched.accounts.map((a) => a.id), [account.id]);
});

test('counterparty list: auto-paging with for await, metadata filters', async () => {
  const t = tag();
  const made = [];
  for (let i = 0; i < 5; i++) {
    const cp = await client.counterparties.create({ name: `Node paged ${t} ${i}`, metadata: { batch: t, parity: i % 2 ? 'odd' : 'even' } });
    made.push(cp.id);
  }
  const seen = [];
  for await (const cp of client.counterparties.list({ per_page: 2, metadata: { batch: t } })) {
    seen.push(cp.id);
  }
  assert.deepEqual(seen, [...made].reverse(), 'every item once, newest first');

  const first = await client.counterparties.list({ per_page: 2, metadata: { batch: t } });
  assert.equal(first.getPaginatedItems().length, 2);
  assert.ok(first.hasNextPage());
  let page = first;
  const sizes = [page.getPaginatedItems().length];
  while (page.hasNextPage()) {
    page = await page.getNextPage();
    sizes.push(page.getPaginatedItems().length);
  }
  assert.deepEqual(sizes, [2, 2, 1]);

  const even = await collect(client.counterparties.list({ metadata: { batch: t, parity: 'even' } }));
  assert.deepEqual(new Set(even.map((c) => c.id)), new Set([made[0], made[2], made[4]]));
});

test('counterparty update and delete', async () => {
  const t = tag();
  const cp = await client.counterparties.create({ name: `Node before ${t}`, metadata: { tag: t } });
  const updated = await client.counterparties.update(cp.id, { name: `Node after ${t}` });
  assert.equal(updated.name, `Node after ${t}`);
  await client.counterparties.delete(cp.id);
  assert.deepEqual(await collect(client.counterparties.list({ metadata: { tag: t } })), []);
});

test('internal and external accounts', async () => {
  const t = tag();
  const internal = await client.internalAccounts.create({ currency: 'USD', name: `Node ops ${t}`, party_name: 'Node Inc.', metadata: { tag: t } });
  assert.equal(internal.object, 'internal_account');
  assert.equal((await client.internalAccounts.retrieve(internal.id)).name, `Node ops ${t}`);
  assert.deepEqual((await collect(client.internalAccounts.list({ metadata: { tag: t } }))).map((a) => a.id), [internal.id]);
  assert.equal((await client.internalAccounts.update(internal.id, { name: `Node ops2 ${t}` })).name, `Node ops2 ${t}`);

  const owner = await client.counterparties.create({ name: `Node owner ${t}` });
  const external = await client.externalAccounts.create({
    counterparty_id: owner.id,
    party_name: 'Node Owner',
    account_details: [{ account_number: '5550001234' }],
    routing_details: [{ routing_number: ROUTING_NUMBER, routing_number_type: 'aba' }],
  });
  assert.equal(external.counterparty_id, owner.id);
  assert.equal((await client.externalAccounts.retrieve(external.id)).id, external.id);
  assert.deepEqual((await collect(client.externalAccounts.list({ counterparty_id: owner.id }))).map((a) => a.id), [external.id]);
  assert.equal((await client.externalAccounts.update(external.id, { party_name: 'Renamed' })).party_name, 'Renamed');
  await client.externalAccounts.delete(external.id);
  assert.deepEqual(await collect(client.externalAccounts.list({ counterparty_id: owner.id })), []);
});
