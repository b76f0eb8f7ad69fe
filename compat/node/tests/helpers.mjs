// Shared set-up for the Node SDK suite: the server under test comes from the environment
// (compat/run.sh sets PAYRAIL_BASE_URL, PAYRAIL_API_KEY, PAYRAIL_CA_CERT; NODE_EXTRA_CA_CERTS
// must name the same certificate so the SDK's fetch trusts it).
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import ModernTreasury from 'modern-treasury';

function env(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run compat/run.sh, or set PAYRAIL_BASE_URL, PAYRAIL_API_KEY, PAYRAIL_CA_CERT`);
  }
  return value;
}

export const BASE_URL = env('PAYRAIL_BASE_URL').replace(/\/+$/, '');
export const API_KEY = env('PAYRAIL_API_KEY');
export const CA_CERT = env('PAYRAIL_CA_CERT');
export const ROUTING_NUMBER = '021000021';

export { ModernTreasury };

export function makeClient({ apiKey = API_KEY, organizationID = 'x-api-key', maxRetries = 0 } = {}) {
  return new ModernTreasury({ apiKey, organizationID, baseURL: BASE_URL, maxRetries, timeout: 20_000 });
}

export const client = makeClient();

export function tag() {
  return randomUUID().replace(/-/g, '').slice(0, 16);
}

export function accountInput({ partyName = 'Jane Doe', accountNumber = '123456789', ...extra } = {}) {
  return {
    account_type: 'checking',
    party_name: partyName,
    party_type: 'individual',
    account_details: [{ account_number: accountNumber, account_number_type: 'other' }],
    routing_details: [{ routing_number: ROUTING_NUMBER, routing_number_type: 'aba' }],
    ...extra,
  };
}

export function inAnHour() {
  return new Date(Date.now() + 3_600_000).toISOString();
}

export async function collect(iterable) {
  const out = [];
  for await (const item of iterable) out.push(item);
  return out;
}

export async function waitFor(fetch, done, { timeoutMs = 10_000, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  let value = await fetch();
  while (!done(value)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    value = await fetch();
  }
  return value;
}

/**
 * A POST on a raw TLS socket holding an Idempotency-Key: it sends its headers with
 * `Expect: 100-continue`, waits for the server's `100 Continue` (the key is claimed by then),
 * then sends half the body and stops. `finish()` sends the rest and resolves to {status, body}.
 */
export async function slowUpload(path, body, idempotencyKey) {
  const url = new URL(BASE_URL);
  const socket = tls.connect({
    host: url.hostname,
    port: Number(url.port || 443),
    ca: readFileSync(CA_CERT),
    servername: url.hostname === '127.0.0.1' || url.hostname === '::1' ? undefined : url.hostname,
  });
  await new Promise((resolve, reject) => {
    socket.once('secureConnect', resolve);
    socket.once('error', reject);
  });
  let received = Buffer.alloc(0);
  let ended = false;
  const waiters = [];
  const wake = () => waiters.splice(0).forEach((w) => w());
  socket.on('data', (chunk) => {
    received = Buffer.concat([received, chunk]);
    wake();
  });
  socket.on('end', () => {
    ended = true;
    wake();
  });
  socket.on('close', () => {
    ended = true;
    wake();
  });
  const until = (cond, ms) =>
    new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      const check = () => {
        if (cond()) {
          clearTimeout(timer);
          resolve();
        } else waiters.push(check);
      };
      check();
    });
  const bytes = Buffer.from(body);
  const auth = Buffer.from(`x-api-key:${API_KEY}`).toString('base64');
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Basic ${auth}\r\n` +
      `Content-Type: application/json\r\nAccept: application/json\r\nContent-Length: ${bytes.length}\r\n` +
      `Idempotency-Key: ${idempotencyKey}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
  );
  await until(() => received.includes('\r\n\r\n'), 2_000);
  if (received.length && !received.toString('latin1').startsWith('HTTP/1.1 100')) {
    throw new Error(`server answered before the body: ${received.toString('latin1').slice(0, 300)}`);
  }
  const half = Math.floor(bytes.length / 2);
  socket.write(bytes.subarray(0, half));
  return {
    async finish() {
      socket.write(bytes.subarray(half));
      await until(() => ended, 15_000);
      let text = received.toString('latin1');
      while (text.startsWith('HTTP/1.1 100')) text = text.slice(text.indexOf('\r\n\r\n') + 4);
      const [head, ...rest] = text.split('\r\n\r\n');
      const status = Number(head.split(' ')[1]);
      let payload = rest.join('\r\n\r\n');
      if (/transfer-encoding:\s*chunked/i.test(head)) {
        let out = '';
        while (payload.length) {
          const eol = payload.indexOf('\r\n');
          const size = parseInt(payload.slice(0, eol), 16);
          if (!size) break;
          out += payload.slice(eol + 2, eol + 2 + size);
          payload = payload.slice(eol + 2 + size + 2);
        }
        payload = out;
      }
      return { status, body: Buffer.from(payload, 'latin1').toString('utf8') };
    },
    close() {
      socket.destroy();
    },
  };
}
