// The SDK's error classes for 401, 404, 409 and 422, and idempotencyKey replay.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { ModernTreasury, ROUTING_NUMBER, client, collect, makeClient, slowUpload, tag } from './helpers.mjs';

test('a bad key raises AuthenticationError (401)', async () => {
  const bad = makeClient({ apiKey: 'pr_sandbox_' + 'x'.repeat(43) });
  await assert.rejects(bad.ping(), (err) => {
    assert.ok(err instanceof ModernTreasury.AuthenticationError, String(err));
    assert.equal(err.status, 401);
    assert.equal(err.error?.errors?.code, 'invalid_key');
    return true;
  });
});

test('an unknown id raises NotFoundError (404)', async () => {
  await assert.rejects(client.counterparties.retrieve(randomUUID()), ModernTreasury.NotFoundError);
  await assert.rejects(client.paymentOrders.retrieve(randomUUID()), ModernTreasury.NotFoundError);
});

test('a bad routing number raises UnprocessableEntityError (422)', async () => {
  const owner = await client.counterparties.create({ name: `Node bad routing ${tag()}` });
  await assert.rejects(
    client.externalAccounts.create({
      counterparty_id: owner.id,
      party_name: 'Nobody',
      account_details: [{ account_number: '123456789' }],
      routing_details: [{ routing_number: '021000022', routing_number_type: 'aba' }],
    }),
    (err) => {
      assert.ok(err instanceof ModernTreasury.UnprocessableEntityError, String(err));
      assert.equal(err.status, 422);
      assert.match(err.error?.errors?.parameter ?? '', /routing_number/);
      return true;
    },
  );
});

test('idempotencyKey replays the first result', async () => {
  const key = `node-${randomUUID()}`;
  const t = tag();
  const first = await client.counterparties.create({ name: `Node once ${t}`, metadata: { tag: t } }, { idempotencyKey: key });
  const { data: second, response } = await client.counterparties
    .create({ name: `Node once ${t}`, metadata: { tag: t } }, { idempotencyKey: key })
    .withResponse();
  assert.equal(second.id, first.id);
  assert.equal(response.headers.get('idempotent-replayed'), 'true');
  assert.equal((await collect(client.counterparties.list({ metadata: { tag: t } }))).length, 1);
});

test('a request with the same key in flight raises ConflictError (409)', async () => {
  const key = `node-inflight-${randomUUID()}`;
  const name = `Node in flight ${tag()}`;
  const upload = await slowUpload('/api/counterparties', JSON.stringify({ name }), key);
  try {
    await assert.rejects(client.counterparties.create({ name }, { idempotencyKey: key, maxRetries: 0 }), (err) => {
      assert.ok(err instanceof ModernTreasury.ConflictError, String(err));
      assert.equal(err.status, 409);
      assert.equal(err.error?.errors?.parameter, 'Idempotency-Key');
      return true;
    });
    const { status, body } = await upload.finish();
    assert.equal(status, 201, body);
    const replay = await client.counterparties.create({ name: 'ignored' }, { idempotencyKey: key });
    assert.equal(replay.id, JSON.parse(body).id);
  } finally {
    upload.close();
  }
});
