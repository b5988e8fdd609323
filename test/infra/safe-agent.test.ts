import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BlockedAddressError,
  createSafeAgent,
  isPublicAddress,
  webhookUrlProblem,
} from '../../src/infra/http/safe-agent.ts';
import { type Endpoint, NON_PUBLIC_URLS, type Receiver, startReceiver } from '../support/receiver.ts';

describe('isPublicAddress', () => {
  it.each([
    '127.0.0.1',
    '127.255.255.254',
    '::1',
    '0.0.0.0',
    '::',
    '10.0.0.1',
    '10.255.255.255',
    '172.16.0.1',
    '172.31.255.254',
    '192.168.1.1',
    '169.254.169.254',
    'fe80::1',
    'fd00::1',
    'fc00::1',
    '100.64.0.1',
    '100.127.255.254',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    '::ffff:169.254.169.254',
    '224.0.0.1',
    'ff02::1',
    '255.255.255.255',
    '192.0.2.1',
    '2001:db8::1',
    'not an address',
    '',
  ])('refuses %s', (ip) => {
    expect(isPublicAddress(ip)).toBe(false);
  });

  it.each([
    '93.184.215.14',
    '8.8.8.8',
    '1.1.1.1',
    '172.32.0.1',
    '100.128.0.1',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
  ])('accepts %s', (ip) => {
    expect(isPublicAddress(ip)).toBe(true);
  });
});

describe('webhookUrlProblem', () => {
  it.each([
    ['http://93.184.215.14/hook', /https/],
    ['ftp://93.184.215.14/hook', /https/],
    ['not a url', /valid URL/],
    ['https://', /valid URL/],
    ['', /valid URL/],
    ['https://user:pass@93.184.215.14/hook', /credentials/],
    [`https://93.184.215.14/${'a'.repeat(2028)}`, /at most 2048 characters/],
    ['https://93.184.215.14/hook\r\n', /control characters/],
    [' https://93.184.215.14/hook', /control characters/],
    ['https://93.184.215.14/a\u0085b', /control characters/],
  ])('refuses %s even when private networks are allowed', async (url, reason) => {
    expect(await webhookUrlProblem(url, true)).toMatch(reason);
    expect(await webhookUrlProblem(url, false)).toMatch(reason);
  });

  it.each(NON_PUBLIC_URLS)('refuses the non-public %s unless private networks are allowed', async (url) => {
    expect(await webhookUrlProblem(url, false)).toMatch(/non-public address/);
    expect(await webhookUrlProblem(url, true)).toBeUndefined();
  });

  it.each(['https://93.184.215.14/hook', 'https://[2606:4700:4700::1111]:8443/hooks?x=1'])(
    'accepts the public %s',
    async (url) => {
      expect(await webhookUrlProblem(url, false)).toBeUndefined();
    },
  );
});

describe('webhookUrlProblem lookups', () => {
  it('accepts a URL of exactly 2048 characters', async () => {
    const url = 'https://93.184.215.14/';
    expect(await webhookUrlProblem(url + 'a'.repeat(2048 - url.length), false)).toBeUndefined();
  });

  it('does not wait on a lookup that does not answer in time: the name is judged at each connection', async () => {
    let answered = false;
    const slow = webhookUrlProblem('https://hooks.example.com/x', false, {
      lookup: () => new Promise(() => {}),
      timeoutMs: 50,
    }).then((problem) => {
      answered = true;
      return problem;
    });
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(answered).toBe(true);
    expect(await slow).toBeUndefined();
  });

  it('judges a name by the addresses its lookup gives', async () => {
    const to = (address: string) => async () => [{ address, family: 4 }];
    const url = 'https://hooks.example.com/x';
    expect(await webhookUrlProblem(url, false, { lookup: to('93.184.215.14') })).toBeUndefined();
    expect(await webhookUrlProblem(url, false, { lookup: to('10.0.0.1') })).toMatch(/non-public address/);
    expect(await webhookUrlProblem(url, false, { lookup: to('127.0.0.1') })).toMatch(/non-public address/);
    expect(await webhookUrlProblem(url, false, { lookup: to('::1') })).toMatch(/non-public address/);
    // One non-public address among public ones is enough to refuse the name.
    const mixed = async () => [
      { address: '93.184.215.14', family: 4 },
      { address: '::1', family: 6 },
    ];
    expect(await webhookUrlProblem(url, false, { lookup: mixed })).toBe(
      'url resolves to the non-public address ::1',
    );
  });

  it.each([
    'localhost',
    'localhost.',
    'LOCALHOST.',
    'localhost.localdomain',
    'localhost.localdomain.',
    'ip6-localhost',
    'ip6-loopback',
    'ip6-loopback.',
    'hooks.localhost',
    'a.b.localhost.',
  ])('refuses the loopback name %s even where DNS gives a public address', async (host) => {
    let asked = false;
    const lookup = async () => {
      asked = true;
      return [{ address: '93.184.215.14', family: 4 }];
    };
    expect(await webhookUrlProblem(`https://${host}/x`, false, { lookup })).toMatch(
      /names a non-public address \(loopback\)/,
    );
    expect(asked).toBe(false);
    expect(await webhookUrlProblem(`https://${host}/x`, true, { lookup })).toBeUndefined();
  });

  it.each(['localhost.example.com', 'notlocalhost', 'localhostx.example'])(
    'looks up %s, which only looks like a loopback name',
    async (host) => {
      const lookup = async () => [{ address: '93.184.215.14', family: 4 }];
      expect(await webhookUrlProblem(`https://${host}/x`, false, { lookup })).toBeUndefined();
    },
  );
});

describe('createSafeAgent against a local HTTPS receiver', () => {
  let receiver: Receiver;
  let ok: Endpoint;
  beforeAll(async () => {
    receiver = await startReceiver();
    ok = receiver.endpoint({ fallback: { status: 200, body: 'ok' } });
  });
  afterAll(() => receiver.close());

  async function post(url: string, options: Parameters<typeof createSafeAgent>[0]) {
    const agent = createSafeAgent(options);
    try {
      const response = await request(url, { method: 'POST', body: '{}', dispatcher: agent });
      const text = await response.body.text();
      return { status: response.statusCode, text };
    } finally {
      await agent.close();
    }
  }

  it('reaches the receiver by IP literal and by localhost when private networks are allowed', async () => {
    const before = ok.requests.length;
    const options = { allowPrivateNetworks: true, timeoutMs: 2000, ca: receiver.ca };
    expect(await post(ok.url, options)).toEqual({ status: 200, text: 'ok' });
    expect(await post(`https://localhost:${receiver.port}${ok.path}`, options)).toEqual({
      status: 200,
      text: 'ok',
    });
    expect(ok.requests.length).toBe(before + 2);
  });

  it('refuses the loopback IP literal at connect time', async () => {
    const before = ok.requests.length;
    const error = await post(ok.url, { allowPrivateNetworks: false, timeoutMs: 2000, ca: receiver.ca }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(BlockedAddressError);
    expect((error as BlockedAddressError).code).toBe('EBLOCKEDADDRESS');
    expect(ok.requests.length).toBe(before);
  });

  it('refuses a name that resolves to loopback at connect time (DNS rebinding)', async () => {
    const before = ok.requests.length;
    const error = await post(`https://localhost:${receiver.port}${ok.path}`, {
      allowPrivateNetworks: false,
      timeoutMs: 2000,
      ca: receiver.ca,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BlockedAddressError);
    expect((error as Error).message).toMatch(/localhost resolves to the non-public address/);
    expect(ok.requests.length).toBe(before);
  });

  it('refuses IPv4-mapped IPv6 literals at connect time', async () => {
    const error = await post(`https://[::ffff:127.0.0.1]:${receiver.port}${ok.path}`, {
      allowPrivateNetworks: false,
      timeoutMs: 2000,
      ca: receiver.ca,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BlockedAddressError);
  });

  it('does not trust the self-signed receiver without the extra CA', async () => {
    const error = await post(ok.url, { allowPrivateNetworks: true, timeoutMs: 2000 }).catch(
      (e: unknown) => e,
    );
    expect((error as { code?: string }).code).toMatch(/SELF_SIGNED|UNABLE_TO_VERIFY/);
  });

  it('gives up on an endpoint that never answers after timeoutMs', async () => {
    const hang = receiver.endpoint({ fallback: 'hang' });
    const started = Date.now();
    const error = await post(hang.url, { allowPrivateNetworks: true, timeoutMs: 300, ca: receiver.ca }).catch(
      (e: unknown) => e,
    );
    const elapsed = Date.now() - started;
    expect((error as { code?: string }).code).toBe('UND_ERR_HEADERS_TIMEOUT');
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(2000);
    expect(hang.requests.length).toBe(1);
  });
});
