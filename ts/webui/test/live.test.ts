import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Api } from '../src/data/api';
import { Live, type SocketLike } from '../src/data/live';
import { ExperimentData } from '../src/data/store';
import type { ChangesMessage } from '../src/data/types';
import { changes, metric, trialView } from './helpers';

class FakeSocket implements SocketLike {
  sent: unknown[] = [];
  closed = false;
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: unknown) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  send(data: string) { this.sent.push(JSON.parse(data)); }
  close() { this.closed = true; }
  message(msg: unknown) { this.onmessage?.({ data: JSON.stringify(msg) }); }
  drop() { this.closed = true; this.onclose?.({}); }
}

interface Call { url: string; method: string }

/** A fake server behind fetch: `changes` answers are queued per test. */
function fakeServer() {
  const calls: Call[] = [];
  const answers: ((url: string) => unknown)[] = [];
  let down = false;
  const fetchImpl = async (url: string, init?: RequestInit) => {
    calls.push({ url, method: init?.method ?? 'GET' });
    if (down) throw new TypeError('Failed to fetch');
    const answer = answers.shift();
    const body = answer ? answer(url) : { error: 'no answer queued' };
    return new Response(JSON.stringify(body), { status: answer ? 200 : 500 });
  };
  return {
    calls,
    queue: (fn: (url: string) => unknown) => answers.push(fn),
    setDown: (value: boolean) => { down = value; },
    api: new Api('', fetchImpl as never),
  };
}

async function settle() {
  for (let i = 0; i < 20; i++) await Promise.resolve();
  await vi.advanceTimersByTimeAsync(0);
}

describe('Live', () => {
  let sockets: FakeSocket[];
  beforeEach(() => {
    vi.useFakeTimers();
    sockets = [];
  });
  afterEach(() => vi.useRealTimers());

  function setup(server: ReturnType<typeof fakeServer>) {
    const store = new ExperimentData();
    const live = new Live({
      api: server.api, store, wsUrl: 'ws://x/api/v1/expmgr/ws', random: () => 0.5,
      createSocket: () => { const s = new FakeSocket(); sockets.push(s); return s; },
    });
    return { store, live };
  }

  it('loads by REST, then applies socket changes', async () => {
    const server = fakeServer();
    server.queue(() => changes('c1', { full: true, trials: [trialView('a', 0, 'RUNNING')] }));
    const { store, live } = setup(server);
    live.start();
    await settle();
    expect(store.trials.length).toBe(1);
    expect(server.calls[0].url).toContain('api/v1/expmgr/changes?limit=');
    server.queue(() => changes('c1'));
    sockets[0].message({ type: 'hello', cursor: 'c1', readOnly: false });
    await settle();
    expect(live.state).toBe('online');
    expect(store.readOnly).toBe(false);
    expect(server.calls[1].url).toContain('since=c1');
    sockets[0].message({ type: 'changes', ...changes('c2', { trials: [trialView('b', 1, 'WAITING')], metrics: [metric('a', 0, 1)] }) });
    expect(store.trials.map((t) => t.id)).toEqual(['a', 'b']);
    expect(store.seriesOf('a').value).toEqual([1]);
    live.stop();
  });

  it('keeps the store-unwritable notice of hello and store messages', async () => {
    const server = fakeServer();
    server.queue(() => changes('c1', { full: true }));
    const { store, live } = setup(server);
    live.start();
    await settle();
    server.queue(() => changes('c1'));
    sockets[0].message({ type: 'hello', cursor: 'c1', readOnly: false, storeUnwritable: 'paused: locked' });
    await settle();
    expect(store.storeUnwritable).toBe('paused: locked');
    sockets[0].message({ type: 'store', unwritable: null });
    expect(store.storeUnwritable).toBeNull();
    sockets[0].message({ type: 'store', unwritable: 'paused: disk full' });
    expect(store.storeUnwritable).toBe('paused: disk full');
    live.stop();
  });

  it('follows `more` pages until the last', async () => {
    const server = fakeServer();
    server.queue(() => changes('p1', { full: true, more: true, trials: [trialView('a', 0, 'RUNNING')] }));
    server.queue((url) => {
      expect(url).toContain('since=p1');
      return changes('p2', { trials: [trialView('b', 1, 'RUNNING')] });
    });
    const { store, live } = setup(server);
    live.start();
    await settle();
    expect(store.trials.map((t) => t.id)).toEqual(['a', 'b']);
    expect(store.cursor).toBe('p2');
    live.stop();
  });

  it('shows offline when the socket drops, reconnects with backoff and catches up since its cursor', async () => {
    const server = fakeServer();
    server.queue(() => changes('c1', { full: true, trials: [trialView('a', 0, 'RUNNING')] }));
    const { store, live } = setup(server);
    live.start();
    await settle();
    server.queue(() => changes('c1'));
    sockets[0].message({ type: 'hello', cursor: 'c1', readOnly: false });
    await settle();
    sockets[0].drop();
    expect(live.state).toBe('offline');
    expect(sockets.length).toBe(1);
    server.setDown(true);
    await vi.advanceTimersByTimeAsync(500); // first retry after ~500 ms
    expect(sockets.length).toBe(2);
    sockets[1].drop();
    await vi.advanceTimersByTimeAsync(600);
    expect(sockets.length).toBe(2); // the second waits ~1 s
    await vi.advanceTimersByTimeAsync(500);
    expect(sockets.length).toBe(3);
    server.setDown(false);
    server.queue((url) => {
      expect(url).toContain('since=c1');
      return changes('c5', { trials: [trialView('a', 0, 'SUCCEEDED', { endTime: 5 })] });
    });
    sockets[2].message({ type: 'hello', cursor: 'c5', readOnly: false });
    await settle();
    expect(live.state).toBe('online');
    expect(store.trial('a')!.status).toBe('SUCCEEDED');
    expect(store.cursor).toBe('c5');
    live.stop();
  });

  it('says since when the server does not answer at all, and forgets it when it answers again', async () => {
    vi.setSystemTime(1_000_000);
    const server = fakeServer();
    server.queue(() => changes('c1', { full: true, trials: [trialView('a', 0, 'RUNNING')] }));
    const { live } = setup(server);
    live.start();
    await settle();
    server.queue(() => changes('c1'));
    sockets[0].message({ type: 'hello', cursor: 'c1', readOnly: false });
    await settle();
    expect(live.unreachableSince).toBeNull();
    vi.setSystemTime(1_005_000);
    server.setDown(true);
    sockets[0].drop();
    await settle();
    expect(live.state).toBe('offline');
    expect(live.unreachableSince).toBe(1_005_000); // when the socket dropped
    await vi.advanceTimersByTimeAsync(4_100); // still down at the next polls: the time stays
    expect(live.unreachableSince).toBe(1_005_000);
    server.setDown(false);
    server.queue(() => changes('c2'));
    await vi.advanceTimersByTimeAsync(2_000);
    expect(live.unreachableSince).toBeNull(); // REST answers again
    live.stop();
  });

  it('a server that answers with a refusal is reachable', async () => {
    const server = fakeServer();
    server.queue(() => changes('c1', { full: true }));
    const { live } = setup(server);
    live.start();
    await settle();
    sockets[0].message({ type: 'hello', cursor: 'c1', readOnly: false });
    await settle();
    sockets[0].drop(); // the catch-up gets HTTP 500 (no answer queued)
    await settle();
    expect(live.state).toBe('offline');
    expect(live.unreachableSince).toBeNull();
    live.stop();
  });

  it('holds socket changes during a catch-up and applies those newer than its request after it', async () => {
    const server = fakeServer();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    const { store, live } = setup(server);
    server.queue(() => changes('c1', { full: true, trials: [trialView('a', 0, 'RUNNING')] }));
    live.start();
    await settle();
    // the catch-up after hello is slow; socket messages arrive meanwhile
    let answer: ChangesMessage | null = null;
    server.queue(() => answer);
    const originalChanges = server.api.changes.bind(server.api);
    server.api.changes = async (since, limit) => { await gate; return originalChanges(since, limit); };
    sockets[0].message({ type: 'hello', cursor: 'c1', readOnly: false });
    await settle();
    sockets[0].message({ type: 'changes', ...changes('c3', { trials: [trialView('b', 1, 'RUNNING')] }) });
    expect(store.trial('b')).toBeUndefined(); // held back
    answer = changes('c2', { trials: [trialView('a', 0, 'SUCCEEDED', { endTime: 3 })] });
    release();
    await settle();
    expect(store.trial('a')!.status).toBe('SUCCEEDED');
    expect(store.trial('b')!.status).toBe('RUNNING');
    expect(store.cursor).toBe('c3');
    live.stop();
  });

  it('tails a file: last bytes by REST, then follows on the socket and again after a reconnect', async () => {
    const server = fakeServer();
    server.queue(() => changes('c1', { full: true }));
    const { live } = setup(server);
    live.start();
    await settle();
    server.queue(() => changes('c1'));
    sockets[0].message({ type: 'hello', cursor: 'c1', readOnly: true });
    await settle();
    server.queue((url) => {
      expect(url).toContain('file=stdout');
      expect(url).toContain('offset=-262144');
      expect(url).toContain('trial=t1');
      return { offset: 0, next: 6, size: 6, text: 'hello\n' };
    });
    const { follower, release } = live.follow('stdout', 't1');
    await settle();
    expect(follower.lines.lines).toEqual(['hello']);
    expect(sockets[0].sent).toContainEqual({ type: 'follow', file: 'stdout', trial: 't1', offset: 6 });
    sockets[0].message({ type: 'tail', file: 'stdout', trial: 't1', offset: 6, next: 12, text: 'world\n' });
    sockets[0].message({ type: 'tail', file: 'stdout', trial: 't1', offset: 6, next: 12, text: 'world\n' });
    expect(follower.lines.lines).toEqual(['hello', 'world']);
    // reconnect: follow again from where it stopped
    sockets[0].drop();
    await vi.advanceTimersByTimeAsync(500);
    server.queue(() => changes('c1'));
    sockets[1].message({ type: 'hello', cursor: 'c1', readOnly: true });
    await settle();
    expect(sockets[1].sent).toContainEqual({ type: 'follow', file: 'stdout', trial: 't1', offset: 12 });
    release();
    expect(sockets[1].sent).toContainEqual({ type: 'unfollow', file: 'stdout', trial: 't1' });
    live.stop();
  });

  it('follows a log across rotations without clearing or repeating lines, and keeps the server\'s facts', async () => {
    const server = fakeServer();
    server.queue(() => changes('c1', { full: true }));
    const { live } = setup(server);
    live.start();
    await settle();
    server.queue(() => changes('c1'));
    sockets[0].message({ type: 'hello', cursor: 'c1', readOnly: false });
    await settle();
    server.queue(() => ({ offset: 0, next: 2, size: 2, text: 'a\n', inode: 7, base: 100, rotated: 2, dropped: 100, skipped: 0 }));
    const { follower } = live.follow('stdout', 't1');
    await settle();
    expect(sockets[0].sent).toContainEqual({ type: 'follow', file: 'stdout', trial: 't1', offset: 2, inode: 7, base: 100 });
    expect([follower.rotated, follower.droppedBytes]).toEqual([2, 100]);
    const push = (chunk: object) => sockets[0].message({ type: 'tail', file: 'stdout', trial: 't1', ...chunk });
    push({ offset: 2, next: 4, size: 4, text: 'b\n', inode: 7, base: 100, rotated: 2, dropped: 100, skipped: 0 });
    push({ offset: 0, next: 2, size: 2, text: 'c\n', inode: 8, base: 104, rotated: 3, dropped: 100, skipped: 0 });
    push({ offset: 0, next: 2, size: 2, text: 'c\n', inode: 8, base: 104, rotated: 3, dropped: 100, skipped: 0 });
    push({ offset: 2, next: 4, size: 4, text: 'b\n', inode: 7, base: 100, rotated: 3, dropped: 100, skipped: 0 });
    expect(follower.lines.lines).toEqual(['a', 'b', 'c']);
    expect(follower.rotated).toBe(3);
    // a jump to the end: marked in the text, counted for the view
    push({ offset: 3_000_000, next: 3_000_002, size: 3_000_002, text: 'z\n', inode: 8, base: 104, rotated: 3, dropped: 100,
           skipped: 2_999_998 });
    expect(follower.lines.lines).toEqual(['a', 'b', 'c', '… 2.9 MiB skipped to keep up …', 'z']);
    expect(follower.skippedBytes).toBe(2_999_998);
    // a gap is read by REST from the file it is in
    server.queue((url) => {
      expect(url).toContain('offset=3000002');
      expect(url).toContain('inode=8');
      expect(url).toContain('base=104');
      return { offset: 0, next: 2, size: 2, text: 'y\n', inode: 9, base: 3_000_106, rotated: 4, dropped: 100, skipped: 0 };
    });
    push({ offset: 5, next: 7, size: 7, text: 'x\n', inode: 9, base: 3_000_106, rotated: 4, dropped: 100, skipped: 0 });
    await settle();
    expect(follower.lines.lines).toEqual(['a', 'b', 'c', '… 2.9 MiB skipped to keep up …', 'z', 'y']);
    live.stop();
  });

  it('fills a gap in pushed chunks by REST', async () => {
    const server = fakeServer();
    server.queue(() => changes('c1', { full: true }));
    const { live } = setup(server);
    live.start();
    await settle();
    server.queue(() => changes('c1'));
    sockets[0].message({ type: 'hello', cursor: 'c1', readOnly: false });
    await settle();
    server.queue(() => ({ offset: 0, next: 2, size: 2, text: 'a\n' }));
    const { follower } = live.follow('experiment.log', null);
    await settle();
    server.queue((url) => {
      expect(url).toContain('offset=2');
      return { offset: 2, next: 6, size: 6, text: 'b\nc\n' };
    });
    sockets[0].message({ type: 'tail', file: 'experiment.log', trial: null, offset: 4, next: 6, text: 'c\n' });
    await settle();
    expect(follower.lines.lines).toEqual(['a', 'b', 'c']);
    live.stop();
  });
});

describe('applyInSlices', () => {
  it('applies a large answer in slices: the store is cleared once and the cursor set last', async () => {
    const { applyInSlices } = await import('../src/data/live');
    const store = new ExperimentData();
    store.apply(changes('old', { full: true, trials: [trialView('gone', 0, 'RUNNING')] }));
    const trials = Array.from({ length: 25 }, (_, i) => trialView(`t${i}`, i, 'SUCCEEDED'));
    const metrics = Array.from({ length: 30 }, (_, i) => metric(`t${i % 25}`, Math.floor(i / 25), i));
    const cursors: (string | null)[] = [];
    store.subscribe(() => cursors.push(store.cursor));
    await applyInSlices(store, changes('c9', { full: true, more: true, trials, metrics }), 10);
    expect(store.trial('gone')).toBeUndefined();
    expect(store.trials.length).toBe(25);
    expect(store.seriesOf('t0').value).toEqual([0, 25]);
    expect(cursors).toEqual(['old', 'old', 'old', 'old', 'old', 'c9']);
  });
});

describe('socket errors', () => {
  it('shows an error the server sends about a followed file', async () => {
    vi.useFakeTimers();
    const server = fakeServer();
    server.queue(() => changes('c1', { full: true }));
    const sockets: FakeSocket[] = [];
    const store = new ExperimentData();
    const live = new Live({ api: server.api, store, wsUrl: 'ws://x', createSocket: () => { const s = new FakeSocket(); sockets.push(s); return s; } });
    live.start();
    await settle();
    server.queue(() => ({ offset: 0, next: 0, size: 0, text: '' }));
    const { follower } = live.follow('stdout', 'nope');
    await settle();
    sockets[0].message({ type: 'error', error: "no trial 'nope'", file: 'stdout', trial: 'nope' });
    expect(follower.error).toBe("no trial 'nope'");
    live.stop();
    vi.useRealTimers();
  });
});
