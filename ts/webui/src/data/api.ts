// The REST calls the UI makes. Paths are relative to the page (served at `/`), so the UI also
// works behind a reverse proxy that adds a prefix.
import type { ChangesMessage, ImportanceAnswer, Json, LogFile, TailChunk, TopTrialsAnswer, TrialJobView } from './types';

export class ApiError extends Error {
  constructor(message: string, readonly status: number) {
    super(message);
  }
}

export type Fetch = (input: string, init?: RequestInit) => Promise<Response>;

export class Api {
  constructor(private base = '', private fetchImpl: Fetch = (input, init) => fetch(input, init)) {}

  url(path: string): string {
    return this.base + path;
  }

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const init: RequestInit = { method, cache: 'no-store' };
    // The server refuses a request that changes something unless it is JSON (docs/security.md),
    // a DELETE without a body included.
    if (method !== 'GET') init.headers = { 'Content-Type': 'application/json' };
    if (body !== undefined) init.body = JSON.stringify(body);
    const response = await this.fetchImpl(this.url(path), init);
    const text = await response.text();
    let data: unknown = undefined;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = text;
      }
    }
    if (!response.ok) {
      const message = data && typeof data === 'object' && 'error' in data ? String((data as { error: unknown }).error)
        : `${method} ${path}: HTTP ${response.status}`;
      throw new ApiError(message, response.status);
    }
    return data as T;
  }

  changes(since: string | null, limit?: number): Promise<ChangesMessage> {
    const q = new URLSearchParams();
    if (since !== null) q.set('since', since);
    if (limit) q.set('limit', String(limit));
    const qs = q.toString();
    return this.request('GET', `api/v1/expmgr/changes${qs ? `?${qs}` : ''}`);
  }

  /** Bytes of a log from `offset` in its file `at.inode` (the current file without one). */
  tail(file: LogFile, offset: number, trial: string | null,
       at: { inode: number | null; base: number | null } | null = null): Promise<TailChunk> {
    const q = new URLSearchParams({ file, offset: String(offset) });
    if (trial !== null) q.set('trial', trial);
    if (at?.inode != null) q.set('inode', String(at.inode));
    if (at?.base != null) q.set('base', String(at.base));
    return this.request('GET', `api/v1/expmgr/tail?${q}`);
  }

  /** expmgr's view of one trial, as in the changes, with its attempts listed (`attemptDetails`);
   *  NNI's trial-jobs routes answer NNI's keys alone. */
  trial(id: string): Promise<TrialJobView> {
    return this.request('GET', `api/v1/expmgr/trials/${encodeURIComponent(id)}`);
  }

  /** The `count` best trials under result key `key`, by the server's rule for the best. */
  topTrials(key: string, count: number): Promise<TopTrialsAnswer> {
    return this.request('GET', `api/v1/expmgr/top?${new URLSearchParams({ key, k: String(count) })}`);
  }

  /** Hyperparameter importance (PED-ANOVA) under result key `key`, computed by the server. */
  importance(key: string): Promise<ImportanceAnswer> {
    return this.request('GET', `api/v1/expmgr/importance?${new URLSearchParams({ key })}`);
  }

  killTrial(id: string): Promise<unknown> {
    return this.request('DELETE', `api/v1/nni/trial-jobs/${encodeURIComponent(id)}`);
  }

  stopExperiment(): Promise<unknown> {
    return this.request('DELETE', 'api/v1/nni/experiment');
  }

  /** NNI's customized trial: a trial with these parameters (the server checks them against the search space
   *  and counts it against maxTrialNumber). */
  addTrial(parameters: Record<string, Json>): Promise<{ sequenceId: number; trialJobId: string }> {
    return this.request('POST', 'api/v1/nni/trial-jobs', parameters);
  }

  /** A new search space, sent with the server's update type for it; answered once the tuner took it or refused it. */
  updateSearchSpace(updateType: string, space: Json): Promise<unknown> {
    return this.request('PUT', `api/v1/nni/experiment?update_type=${updateType}`, { params: { searchSpace: space } });
  }

  /** NNI's update: `field` is the config key (`trialConcurrency`, ...), `updateType` the server's for it
   *  (ExperimentData.updateType). */
  updateExperiment(updateType: string, field: string, value: number | string): Promise<unknown> {
    return this.request('PUT', `api/v1/nni/experiment?update_type=${updateType}`, { params: { [field]: value } });
  }
}
