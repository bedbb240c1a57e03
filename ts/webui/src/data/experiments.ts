// The experiments of a registry, as the server lists them (expmgr/server/home.py): every rule
// (state, crashed, best, duration, where to open it, which actions apply) is the server's.
import type { Api } from './api';

export interface ExperimentRecord {
  id: string;
  name: string | null;
  /** RUNNING, DONE, STOPPED, ERROR, ... or CRASHED: its process died without recording its end. */
  state: string;
  platform: string | null;
  best: { trialId: string; value: number } | null;
  /** Trial counts by state (only states some trial is in). */
  trials: Record<string, number>;
  trialCount: number;
  startTime: number | null;
  endTime: number | null;
  /** Seconds it ran (running: until now). */
  duration: number | null;
  /** Where to open it (an absolute path on this server), null when this server cannot open it. */
  open: string | null;
  openKind: 'live' | 'read-only';
  actions: { stop: boolean; resume: boolean; delete: boolean };
  /** The command that continues it (stopped, failed, crashed). */
  resumeCommand: string | null;
  /** Why its store could not be read, when it could not. */
  problem: string | null;
}

export interface ExperimentsAnswer {
  experiments: ExperimentRecord[];
  registry: string;
}

export const EXPERIMENTS_ROUTE = 'api/v1/expmgr/experiments';

export function listExperiments(api: Api): Promise<ExperimentsAnswer> {
  return api.request('GET', EXPERIMENTS_ROUTE);
}

export type ExperimentAction = 'stop' | 'resume' | 'delete';

/** Does what `expctl stop`, `expctl resume`, `expctl experiment delete` do; the answer's message. */
export async function actOnExperiment(api: Api, id: string, action: ExperimentAction): Promise<string> {
  const path = `${EXPERIMENTS_ROUTE}/${encodeURIComponent(id)}`;
  const answer = action === 'delete' ? await api.request<{ message: string }>('DELETE', path)
    : await api.request<{ message: string }>('POST', `${path}/${action}`, {});
  return answer.message;
}

/** Whether the page was served by `expctl ui` (the experiments page alone, no single experiment). */
export function isHomeMode(doc: Document = document): boolean {
  return doc.querySelector('meta[name="expmgr-mode"]')?.getAttribute('content') === 'home';
}
