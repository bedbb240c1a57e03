// Turns NNI's REST shapes into the UI's records.
import type { AttemptView, Json, MetricView, Trial, TrialJobView } from './types';

export const FINISHED_STATES: ReadonlySet<string> = new Set([
  'SUCCEEDED', 'FAILED', 'EARLY_STOPPED', 'USER_CANCELED', 'SYS_CANCELED', 'CRASHED',
]);

export const TRIAL_STATES = [
  'WAITING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'EARLY_STOPPED', 'USER_CANCELED', 'SYS_CANCELED',
  'PREEMPTED', 'CRASHED', 'PAUSED',
] as const;

export const EXPERIMENT_FINISHED: ReadonlySet<string> = new Set(['DONE', 'STOPPED', 'ERROR']);

/** A metric's `data` (a JSON string of a JSON string, or once encoded) as its value. */
export function parseMetricData(data: unknown): Json {
  let value: unknown = data;
  for (let i = 0; i < 2 && typeof value === 'string'; i++) {
    try {
      value = JSON.parse(value);
    } catch {
      break;
    }
  }
  return value as Json;
}

/** A number the server resolved (a result's number, null when not finite) as the UI keeps it. */
export function serverNumber(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

/** The parameters in a trial's `hyperParameters` (a list of JSON strings). */
export function parseParameters(hyperParameters: unknown): Record<string, Json> {
  if (!Array.isArray(hyperParameters) || hyperParameters.length === 0) return {};
  let item: unknown = hyperParameters[0];
  if (typeof item === 'string') {
    try {
      item = JSON.parse(item);
    } catch {
      return {};
    }
  }
  if (item !== null && typeof item === 'object' && 'parameters' in item) {
    const params = (item as { parameters: unknown }).parameters;
    if (params !== null && typeof params === 'object' && !Array.isArray(params)) {
      return params as Record<string, Json>;
    }
  }
  return {};
}

function attemptList(view: TrialJobView): AttemptView[] | undefined {
  if (Array.isArray(view.attemptDetails)) return view.attemptDetails;
  if (Array.isArray(view.attempts)) return view.attempts;
  return undefined;
}

/** A trial view as a Trial (rev 0; the store numbers revisions). */
export function parseTrial(view: TrialJobView): Trial {
  const details = attemptList(view);
  const attempts = typeof view.attempts === 'number' ? view.attempts : details ? details.length : 0;
  const trial: Trial = {
    id: view.trialJobId,
    seq: view.sequenceId,
    status: view.status,
    params: parseParameters(view.hyperParameters),
    submitTime: view.submitTime,
    startTime: view.startTime,
    endTime: view.endTime,
    attempts,
    canKill: view.canKill === true,
    rev: 0,
  };
  if (typeof view.host === 'string') trial.host = view.host;
  if (typeof view.waitingReason === 'string') trial.waitingReason = view.waitingReason;
  if (typeof view.duration === 'number') trial.duration = view.duration;
  if (typeof view.runningSince === 'number') trial.runningSince = view.runningSince;
  if (details) trial.attemptDetails = details;
  const final = lastFinal(view.finalMetricData);
  if (final !== undefined) {
    trial.finalRaw = final;
    trial.final = serverNumber(view.finalNumber);
    if (view.finalNumbers && typeof view.finalNumbers === 'object') {
      const finals: Record<string, number> = {};
      for (const [key, value] of Object.entries(view.finalNumbers)) {
        const number = serverNumber(value);
        if (number !== undefined) finals[key] = number;
      }
      trial.finals = finals;
    }
  }
  return trial;
}

function lastFinal(metrics: MetricView[] | undefined): Json | undefined {
  if (!Array.isArray(metrics) || metrics.length === 0) return undefined;
  return parseMetricData(metrics[metrics.length - 1].data);
}

/**
 * A trial's duration in seconds, as the server defines it (docs/webui.md): the time its attempts'
 * processes ran, all together (not the wait before a retry, nor a manager's downtime). The server
 * sends the ended attempts' sum; a running attempt adds the time since it started.
 */
export function trialDuration(trial: Trial, now: number): number | undefined {
  if (trial.duration === undefined) return undefined;
  if (trial.runningSince === undefined || FINISHED_STATES.has(trial.status)) return trial.duration;
  return trial.duration + Math.max(0, (now - trial.runningSince) / 1000);
}

/** A duration as NNI writes it (`30s`, `10m`, `1.5h`, `2d` or seconds) in seconds; NaN if unreadable. */
export function parseDuration(value: unknown): number {
  if (typeof value === 'number') return value > 0 ? value : NaN;
  if (typeof value !== 'string') return NaN;
  const match = /^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)\s*$/i.exec(value);
  if (!match) return NaN;
  const units: Record<string, number> = { '': 1, s: 1, m: 60, h: 3600, d: 86400 };
  const seconds = Number(match[1]) * units[match[2].toLowerCase()];
  return seconds > 0 ? seconds : NaN;
}
