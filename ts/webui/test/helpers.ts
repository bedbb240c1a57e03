// Builders of server messages for the tests.
import type { ChangesMessage, CompactMetric, TrialJobView } from '../src/data/types';

export function trialView(id: string, seq: number, status: string, extra: Partial<TrialJobView> = {},
                          params: Record<string, unknown> = { lr: 0.1 * (seq + 1) }): TrialJobView {
  return {
    trialJobId: id,
    sequenceId: seq,
    status,
    hyperParameters: [JSON.stringify({ parameter_id: seq, parameter_source: 'algorithm', parameters: params, parameter_index: 0 })],
    submitTime: 1000 + seq,
    attempts: status === 'WAITING' ? 0 : 1,
    ...extra,
  };
}

/** A trial view's final result as the server sends it: the metric, and its number (`finalNumber`). */
export function withFinal(id: string, value: number | { default: number; [key: string]: number }): Partial<TrialJobView> {
  const number = typeof value === 'number' ? value : value.default;
  return { finalMetricData: finalMetricData(id, value), finalNumber: Number.isFinite(number) ? number : null };
}

export function finalMetricData(id: string, value: unknown) {
  return [{ timestamp: 5, trialJobId: id, parameterId: '0', type: 'FINAL', sequence: 0, data: JSON.stringify(JSON.stringify(value)) }];
}

export function metric(id: string, step: number, value: number, type = 'PERIODICAL', seq = 0): CompactMetric {
  return [id, seq, type, step, value, 1000 + step];
}

export function changes(cursor: string, patch: Partial<ChangesMessage> = {}): ChangesMessage {
  return {
    cursor,
    experiment: { id: 'exp1', execDuration: 1, params: { trialConcurrency: 2 }, status: 'RUNNING', startTime: 0 },
    statistics: [],
    trials: [],
    metrics: [],
    ...patch,
  };
}
