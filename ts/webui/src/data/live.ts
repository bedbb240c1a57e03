// Keeps an ExperimentData current: the websocket's `changes` messages are applied as they come;
// on every (re)connect the `hello` is followed by a catch-up `changes?since=<cursor>` (paged),
// during which socket messages are held back and applied after it. A dropped socket is reopened
// with exponential backoff, and meanwhile the REST routes are polled so the page stays fresh; when
// they do not answer at all (no HTTP answer: the server's process is gone, or the network), the
// server is unreachable (`unreachableSince`) until it answers again.
// Files are tailed with `follow`: the last bytes are read by REST, then the socket pushes more,
// across the log's rotations; the server's facts about the log (rotated files kept, bytes
// deleted, bytes it skipped to keep up) are kept for the view to show.
import { ApiError, type Api } from './api';
import { LogLines, TailState, type TailResult } from './logs';
import { formatBytes } from '../ui/format';
import type { ExperimentData } from './store';
import type { ChangesMessage, LogFile, ServerMessage, TailChunk } from './types';

export type ConnectionState = 'connecting' | 'online' | 'offline';

/** What the UI needs of a WebSocket (a fake one in tests). */
export interface SocketLike {
  send(data: string): void;
  close(): void;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: unknown) => void) | null;
  onerror: ((ev: unknown) => void) | null;
}

export interface LiveOptions {
  api: Api;
  store: ExperimentData;
  wsUrl: string;
  createSocket?: (url: string) => SocketLike;
  /** Trials + metrics in the first answer of a catch-up; each next page asks for twice as many. */
  firstPageLimit?: number;
  /** The most trials + metrics asked for in one answer (a smaller answer parses in less than a frame). */
  pageLimit?: number;
  /** Trials + metrics applied at once; a larger answer is applied in slices, letting the page draw between. */
  sliceSize?: number;
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  /** How often followed files are polled by REST while the socket is down. */
  offlinePollMs?: number;
  random?: () => number;
}

/** Bytes of a file shown when it is first opened. */
export const INITIAL_TAIL_BYTES = 256 * 1024;

export class Follower {
  readonly lines = new LogLines();
  readonly tail = new TailState();
  /** True when the start of the file was not read (only its last bytes). */
  truncatedHead = false;
  /** The server's facts about the log, from its latest chunk: rotated files kept, bytes rotation deleted. */
  rotated = 0;
  droppedBytes = 0;
  /** Bytes the server skipped to keep up (its jumps to the end), in all; and whether some amount was unknown. */
  skippedBytes = 0;
  skippedUnknown = false;
  error: string | null = null;
  version = 0;
  refs = 0;
  listeners = new Set<() => void>();
  private syncing: Promise<void> | null = null;
  private pending: TailChunk[] = [];

  constructor(readonly file: LogFile, readonly trial: string | null, private live: Live) {}

  get key(): string {
    return followKey(this.file, this.trial);
  }

  private changed(): void {
    this.version++;
    for (const listener of [...this.listeners]) listener();
  }

  private place(result: TailResult): boolean {
    switch (result.kind) {
      case 'reset':
        this.lines.reset();
        this.lines.append(result.text);
        return true;
      case 'append':
        if (result.skipped === null) {
          this.skippedUnknown = true;
          this.lines.note('… output rotated away before it could be shown …');
        } else if (result.skipped) {
          this.skippedBytes += result.skipped;
          this.lines.note(`… ${formatBytes(result.skipped)} skipped to keep up …`);
        }
        this.lines.append(result.text);
        return true;
      default:
        return false;
    }
  }

  /** The server could not follow the file. */
  failed(error: string): void {
    this.error = error;
    this.changed();
  }

  /** The server's facts about the log, as of `chunk`. */
  private facts(chunk: TailChunk): boolean {
    const rotated = chunk.rotated ?? this.rotated;
    const dropped = chunk.dropped ?? this.droppedBytes;
    if (rotated === this.rotated && dropped === this.droppedBytes) return false;
    this.rotated = rotated;
    this.droppedBytes = dropped;
    return true;
  }

  /** A chunk pushed by the socket. */
  pushed(chunk: TailChunk): void {
    if (this.syncing || this.tail.next === null) {
      this.pending.push(chunk);
      return;
    }
    const newFacts = this.facts(chunk);
    const result = this.tail.accept(chunk);
    if (result.kind === 'gap') {
      void this.sync();
      return;
    }
    if (this.place(result) || newFacts) this.changed();
  }

  /** Reads by REST: the last bytes first, then from where it stopped until the end of the file. */
  sync(): Promise<void> {
    if (this.syncing) return this.syncing;
    this.syncing = (async () => {
      try {
        let first = this.tail.next === null;
        for (let i = 0; i < 64; i++) {
          const requested = first ? -INITIAL_TAIL_BYTES : this.tail.next!;
          const chunk = await this.live.api.tail(this.file, requested, this.trial,
            first ? null : { inode: this.tail.inode, base: this.tail.base });
          if (first) this.truncatedHead = chunk.offset > 0;
          const newFacts = this.facts(chunk);
          const result = this.tail.accept(chunk, first ? undefined : requested);
          first = false;
          this.error = null;
          if (this.place(result) || newFacts) this.changed();
          if (result.kind === 'gap' || !chunk.text || chunk.size === undefined || chunk.next >= chunk.size) break;
        }
      } catch (err) {
        this.error = String((err as Error).message ?? err);
        this.changed();
      } finally {
        this.syncing = null;
      }
      const pending = this.pending;
      this.pending = [];
      for (const chunk of pending) this.pushed(chunk);
    })();
    return this.syncing;
  }

  isSyncing(): boolean {
    return this.syncing !== null;
  }
}

export function followKey(file: LogFile, trial: string | null): string {
  return `${file}\u0000${trial ?? ''}`;
}

export class Live {
  state: ConnectionState = 'connecting';
  /** When the server stopped answering (ms; the socket's drop), while neither the socket nor REST gets an answer; else null. */
  unreachableSince: number | null = null;
  private lostAt: number | null = null;
  readonly api: Api;
  private store: ExperimentData;
  private socket: SocketLike | null = null;
  private attempt = 0;
  private stopped = true;
  private reconnectTimer: ReturnType<typeof setTimeout> | null = null;
  private pollTimer: ReturnType<typeof setInterval> | null = null;
  private catchUpRun: Promise<void> | null = null;
  private catchUpAgain = false;
  /** Socket `changes` held back during a catch-up, and how many of them came before its last request. */
  private held: ChangesMessage[] = [];
  private heldBeforeRequest = 0;
  private followers = new Map<string, Follower>();
  private listeners = new Set<() => void>();
  private opts: Required<Omit<LiveOptions, 'api' | 'store' | 'wsUrl' | 'createSocket'>> & Pick<LiveOptions, 'createSocket'>;

  constructor(private options: LiveOptions) {
    this.api = options.api;
    this.store = options.store;
    this.opts = {
      firstPageLimit: options.firstPageLimit ?? 2_000,
      pageLimit: options.pageLimit ?? 10_000,
      sliceSize: options.sliceSize ?? 2_500,
      backoffInitialMs: options.backoffInitialMs ?? 500,
      backoffMaxMs: options.backoffMaxMs ?? 10_000,
      offlinePollMs: options.offlinePollMs ?? 2_000,
      random: options.random ?? Math.random,
      createSocket: options.createSocket,
    };
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private setState(state: ConnectionState): void {
    if (this.state === state) return;
    this.state = state;
    this.notify();
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }

  /** Loads the experiment and opens the socket. */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    void this.catchUp().catch(() => undefined);
    this.connect();
  }

  stop(): void {
    this.stopped = true;
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer);
    if (this.pollTimer !== null) clearInterval(this.pollTimer);
    this.reconnectTimer = null;
    this.pollTimer = null;
    const socket = this.socket;
    this.socket = null;
    if (socket) {
      socket.onclose = null;
      socket.close();
    }
  }

  private connect(): void {
    if (this.stopped) return;
    let socket: SocketLike;
    try {
      socket = this.opts.createSocket ? this.opts.createSocket(this.options.wsUrl)
        : (new WebSocket(this.options.wsUrl) as unknown as SocketLike);
    } catch {
      this.disconnected();
      return;
    }
    this.socket = socket;
    socket.onmessage = (ev) => {
      if (this.socket !== socket) return;
      let msg: ServerMessage;
      try {
        msg = JSON.parse(String(ev.data)) as ServerMessage;
      } catch {
        return;
      }
      this.received(msg);
    };
    socket.onclose = () => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.disconnected();
    };
    socket.onerror = () => undefined; // a close follows
  }

  private disconnected(): void {
    if (this.stopped) return;
    const wasOffline = this.state === 'offline';
    if (this.state === 'online') this.lostAt = Date.now();
    this.setState('offline');
    this.startOfflinePolling();
    if (!wasOffline) this.probe();
    const delay = Math.min(this.opts.backoffMaxMs, this.opts.backoffInitialMs * 2 ** this.attempt);
    this.attempt = Math.min(this.attempt + 1, 20);
    const jittered = delay * (0.75 + 0.5 * this.opts.random());
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      this.connect();
    }, jittered);
  }

  private startOfflinePolling(): void {
    if (this.pollTimer !== null) return;
    this.pollTimer = setInterval(() => {
      if (this.state === 'online') return;
      this.probe();
      for (const f of this.followers.values()) void f.sync();
    }, this.opts.offlinePollMs);
  }

  private stopOfflinePolling(): void {
    if (this.pollTimer !== null) clearInterval(this.pollTimer);
    this.pollTimer = null;
  }

  /** A catch-up by REST while offline, which tells whether the server answers at all. */
  private probe(): void {
    void this.catchUp().then(() => this.setReachable(true), (err) => {
      // an HTTP answer, even a refusal, comes from a live server; a failed fetch does not
      this.setReachable(err instanceof ApiError);
    });
  }

  private setReachable(reachable: boolean): void {
    const since = reachable ? null : this.unreachableSince ?? this.lostAt ?? Date.now();
    if (since === this.unreachableSince) return;
    this.unreachableSince = since;
    this.notify();
  }

  /** Handles one server message (exposed for tests). */
  received(msg: ServerMessage): void {
    switch (msg.type) {
      case 'hello':
        this.attempt = 0;
        this.lostAt = null;
        this.setReachable(true);
        this.store.setReadOnly(!!msg.readOnly);
        this.store.setStoreUnwritable(msg.storeUnwritable ?? null);
        this.stopOfflinePolling();
        this.setState('online');
        void this.catchUp().catch(() => {
          // the server answers the socket but not REST: try again from scratch
          this.socket?.close();
        });
        for (const f of this.followers.values()) this.sendFollow(f);
        break;
      case 'changes':
        if (this.catchUpRun) this.held.push(msg);
        else this.store.apply(msg);
        break;
      case 'tail': {
        const f = this.followers.get(followKey(msg.file, msg.trial ?? null));
        if (f) f.pushed(msg);
        break;
      }
      case 'store':
        this.store.setStoreUnwritable(msg.unwritable ?? null);
        break;
      case 'error': {
        const f = msg.file ? this.followers.get(followKey(msg.file, msg.trial ?? null)) : undefined;
        if (f) f.failed(msg.error);
        break;
      }
      default:
        break;
    }
  }

  /** True while a catch-up is reading pages (the first load of a large experiment takes a few). */
  get busy(): boolean {
    return this.catchUpRun !== null;
  }

  /** Brings the store up to date by REST (`changes?since=<cursor>`, all pages). Single-flight. */
  catchUp(): Promise<void> {
    if (this.catchUpRun) {
      this.catchUpAgain = true;
      return this.catchUpRun;
    }
    const run = (async () => {
      try {
        do {
          this.catchUpAgain = false;
          // A small first page shows the first rows soon; larger ones then load the rest fast.
          // The next page is asked for as soon as a page arrives, so that the server builds it
          // while this one is applied.
          let limit = Math.min(this.opts.firstPageLimit, this.opts.pageLimit);
          const ask = (since: string | null) => {
            this.heldBeforeRequest = this.held.length;
            const answer = this.api.changes(since, limit);
            limit = Math.min(limit * 4, this.opts.pageLimit);
            return answer;
          };
          let next: Promise<ChangesMessage> | null = ask(this.store.cursor);
          for (let page = 0; next && page < 10_000; page++) {
            const msg: ChangesMessage = await next;
            next = msg.more && msg.cursor !== undefined ? ask(msg.cursor) : null;
            next?.catch(() => undefined); // awaited in the next turn; an early failure is not unhandled
            await applyInSlices(this.store, msg, this.opts.sliceSize);
          }
        } while (this.catchUpAgain);
      } finally {
        // messages that arrived before the last request are contained in its answer
        const held = this.held.slice(this.heldBeforeRequest);
        this.held = [];
        this.heldBeforeRequest = 0;
        this.catchUpRun = null;
        for (const msg of held) this.store.apply(msg);
        this.notify();
      }
    })();
    this.catchUpRun = run;
    this.notify();
    return run;
  }

  private send(data: unknown): void {
    if (this.state !== 'online' || !this.socket) return;
    try {
      this.socket.send(JSON.stringify(data));
    } catch {
      // closed meanwhile: the reconnect follows again
    }
  }

  private sendFollow(f: Follower): void {
    if (f.tail.next === null) return; // sent once its first REST read is done
    const { next, inode, base } = f.tail;
    this.send({ type: 'follow', file: f.file, trial: f.trial, offset: next,
                ...(inode !== null && { inode }), ...(base !== null && { base }) });
  }

  /** Tails a file while the returned function is not called. */
  follow(file: LogFile, trial: string | null): { follower: Follower; release: () => void } {
    const key = followKey(file, trial);
    let f = this.followers.get(key);
    if (!f) {
      const created = new Follower(file, trial, this);
      f = created;
      this.followers.set(key, created);
      void created.sync().then(() => {
        if (this.followers.get(key) === created) this.sendFollow(created);
      });
    }
    const follower = f;
    follower.refs++;
    let released = false;
    return {
      follower,
      release: () => {
        if (released) return;
        released = true;
        follower.refs--;
        if (follower.refs <= 0 && this.followers.get(key) === follower) {
          this.followers.delete(key);
          this.send({ type: 'unfollow', file, trial });
        }
      },
    };
  }
}

/** A macrotask later: the browser may draw a frame and handle input meanwhile. */
function nextTask(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * Applies a large answer in slices of about `size` trials + metrics: the first slice clears (when
 * full) and sets the experiment, the last one carries the cursor, so a slice never looks applied
 * twice and the cursor moves only once all of it is in.
 */
export async function applyInSlices(store: ExperimentData, msg: ChangesMessage, size: number): Promise<void> {
  const trials = msg.trials ?? [];
  const metrics = msg.metrics ?? [];
  if (trials.length + metrics.length <= size) {
    store.apply(msg);
    return;
  }
  const slices: ChangesMessage[] = [];
  for (let i = 0; i < trials.length; i += size) slices.push({ trials: trials.slice(i, i + size) });
  for (let i = 0; i < metrics.length; i += size) slices.push({ metrics: metrics.slice(i, i + size) });
  slices[0] = { ...slices[0], full: msg.full, experiment: msg.experiment, statistics: msg.statistics };
  slices[slices.length - 1] = { ...slices[slices.length - 1], cursor: msg.cursor, more: msg.more };
  for (let i = 0; i < slices.length; i++) {
    if (i > 0) await nextTask();
    store.apply(slices[i]);
  }
}
