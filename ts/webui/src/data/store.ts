// The client's copy of an experiment: loaded by a full `changes` answer, then kept up to date by
// incremental `changes` (from the websocket or a catch-up call). Applying is idempotent and
// tolerates duplicate and out-of-order messages: trials are merged by id (a stale trial view
// never moves a trial back), metrics are keyed by (trial, type, metricSequence).
//
// Views read `version` numbers to memoize: `trialsVersion` changes when any trial record changes,
// `metricsVersion` when any intermediate result arrives, `experimentVersion` for the profile and
// statistics. Trial records are immutable: a changed trial is a new object.
import { FINISHED_STATES, parseTrial, serverNumber } from './parse';
import type {
  ChangesMessage, CompactMetric, ExperimentView, JobStatistic, Json, Series, Trial, TrialJobView,
} from './types';

const SEEN_CURSORS = 64;

export class ExperimentData {
  experiment: ExperimentView | null = null;
  /** When `experiment` arrived (ms), so a running experiment's duration can tick. */
  experimentReceivedAt = 0;
  statistics: JobStatistic[] = [];
  /** Ordered by sequence id. */
  trials: Trial[] = [];
  cursor: string | null = null;
  readOnly: boolean | null = null;
  /** While the server cannot write its store: why (launching is paused); null otherwise. */
  storeUnwritable: string | null = null;
  /** True once a full snapshot has been applied. */
  loaded = false;

  version = 0;
  trialsVersion = 0;
  metricsVersion = 0;
  experimentVersion = 0;

  private byId = new Map<string, Trial>();
  private series = new Map<string, Series>();
  private seriesRev = new Map<string, number>();
  /** FINAL metrics of trials not seen yet: applied when the trial arrives. */
  private pendingFinal = new Map<string, number | null>();
  private seenCursors: string[] = [];
  private experimentText = '';
  private statisticsText = '';
  private listeners = new Set<() => void>();
  private paramKeysCache: { key: string; value: string[] } | null = null;

  constructor(private now: () => number = () => Date.now()) {}

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(): void {
    for (const listener of [...this.listeners]) listener();
  }

  trial(id: string): Trial | undefined {
    return this.byId.get(id);
  }

  /** A trial's intermediate results (empty series if none). */
  seriesOf(id: string): Series {
    return this.series.get(id) ?? { seq: [], value: [], time: [] };
  }

  /** Changes whenever `seriesOf(id)` does. */
  seriesRevision(id: string): number {
    return this.seriesRev.get(id) ?? 0;
  }

  /** The last intermediate result of a trial, if any. */
  latest(id: string): number | undefined {
    const s = this.series.get(id);
    return s && s.value.length ? s.value[s.value.length - 1] : undefined;
  }

  setReadOnly(readOnly: boolean): void {
    if (this.readOnly === readOnly) return;
    this.readOnly = readOnly;
    this.experimentVersion++;
    this.version++;
    this.emit();
  }

  setStoreUnwritable(notice: string | null): void {
    if (this.storeUnwritable === notice) return;
    this.storeUnwritable = notice;
    this.experimentVersion++;
    this.version++;
    this.emit();
  }

  /**
   * Applies one `changes` answer or message. Returns false when it was a duplicate (a cursor
   * already applied, and not a full snapshot), true otherwise.
   */
  apply(msg: ChangesMessage): boolean {
    if (!msg.full && msg.cursor !== undefined && this.seenCursors.includes(msg.cursor)) {
      // Nothing new in the store; but the server turns read-only when the search ends, which
      // is no store change: its next message repeats the cursor with readOnly set.
      if (typeof msg.experiment?.readOnly === 'boolean') this.setReadOnly(msg.experiment.readOnly);
      return false;
    }
    if (msg.full) this.clear();
    let trialsChanged = !!msg.full;
    let metricsChanged = false;
    let experimentChanged = !!msg.full;

    if (msg.experiment) {
      // every answer holds the profile: views keyed on experimentVersion rebuild only if it changed
      const text = JSON.stringify(msg.experiment);
      if (text !== this.experimentText) {
        this.experiment = msg.experiment;
        this.experimentText = text;
        experimentChanged = true;
      }
      this.experimentReceivedAt = this.now();
      if (typeof msg.experiment.readOnly === 'boolean' && msg.experiment.readOnly !== this.readOnly) {
        this.readOnly = msg.experiment.readOnly;
        experimentChanged = true;
      }
    }
    if (Array.isArray(msg.statistics)) {
      const text = JSON.stringify(msg.statistics);
      if (text !== this.statisticsText) {
        this.statistics = msg.statistics;
        this.statisticsText = text;
        experimentChanged = true;
      }
    }
    if (Array.isArray(msg.trials)) {
      for (const view of msg.trials) trialsChanged = this.upsertTrial(view) || trialsChanged;
    }
    if (Array.isArray(msg.metrics) && msg.metrics.length) {
      const result = this.addMetrics(msg.metrics);
      metricsChanged = result.periodical;
      trialsChanged = result.final || trialsChanged;
    }

    if (msg.cursor !== undefined) {
      this.cursor = msg.cursor;
      this.seenCursors.push(msg.cursor);
      if (this.seenCursors.length > SEEN_CURSORS) this.seenCursors.shift();
    }
    if (msg.full) this.loaded = true;
    if (trialsChanged) this.trialsVersion++;
    if (metricsChanged) this.metricsVersion++;
    if (experimentChanged) this.experimentVersion++;
    this.version++;
    this.emit();
    return true;
  }

  private clear(): void {
    this.trials = [];
    this.byId.clear();
    this.series.clear();
    this.seriesRev.clear();
    this.pendingFinal.clear();
    this.seenCursors = [];
    this.paramKeysCache = null;
    this.experimentText = '';
    this.statisticsText = '';
  }

  /** Whether `incoming` is older than `current` (and so must not replace it). */
  static isStale(current: Trial, incoming: Trial): boolean {
    if (incoming.attempts < current.attempts) return true;
    if (incoming.attempts > current.attempts) return false;
    // Within one attempt a finished state is never left (a resume starts a new server, whose
    // first answer is a full snapshot), and an ended attempt does not start again.
    if (FINISHED_STATES.has(current.status) && !FINISHED_STATES.has(incoming.status)) return true;
    if (current.endTime !== undefined && incoming.endTime === undefined && incoming.status === 'RUNNING') return true;
    if (current.startTime !== undefined && incoming.startTime === undefined && incoming.status === 'WAITING' &&
        current.status === 'RUNNING') return true;
    return false;
  }

  private upsertTrial(view: TrialJobView): boolean {
    if (!view || typeof view.trialJobId !== 'string') return false;
    const incoming = parseTrial(view);
    const current = this.byId.get(incoming.id);
    if (!current) {
      const pending = this.pendingFinal.get(incoming.id);
      if (pending !== undefined && incoming.final === undefined) {
        incoming.finalRaw = pending;
        incoming.final = serverNumber(pending);
      }
      this.pendingFinal.delete(incoming.id);
      this.insert(incoming);
      return true;
    }
    if (ExperimentData.isStale(current, incoming)) return false;
    if (incoming.finalRaw === undefined && current.finalRaw !== undefined) {
      incoming.finalRaw = current.finalRaw;
      incoming.final = current.final;
    }
    if (!incoming.attemptDetails && current.attemptDetails && incoming.attempts === current.attempts) {
      incoming.attemptDetails = current.attemptDetails;
    }
    if (sameTrial(current, incoming)) return false;
    incoming.rev = current.rev + 1;
    this.replace(current, incoming);
    return true;
  }

  private indexOf(trial: Trial): number {
    // binary search by sequence id, then look around for the same id (sequence ids are unique)
    let lo = 0;
    let hi = this.trials.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.trials[mid].seq < trial.seq) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < this.trials.length && this.trials[i].seq === trial.seq; i++) {
      if (this.trials[i].id === trial.id) return i;
    }
    return this.trials.indexOf(trial);
  }

  private insert(trial: Trial): void {
    this.byId.set(trial.id, trial);
    const n = this.trials.length;
    if (n === 0 || this.trials[n - 1].seq <= trial.seq) {
      this.trials.push(trial);
    } else {
      let lo = 0;
      let hi = n;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (this.trials[mid].seq <= trial.seq) lo = mid + 1;
        else hi = mid;
      }
      this.trials.splice(lo, 0, trial);
    }
  }

  private replace(current: Trial, next: Trial): void {
    const index = this.indexOf(current);
    this.byId.set(next.id, next);
    if (index >= 0 && current.seq === next.seq) {
      this.trials[index] = next;
    } else {
      if (index >= 0) this.trials.splice(index, 1);
      this.byId.delete(current.id);
      this.insert(next);
    }
  }

  private addMetrics(metrics: CompactMetric[]): { periodical: boolean; final: boolean } {
    let periodical = false;
    let final = false;
    const touched = new Set<string>();
    for (const m of metrics) {
      if (!Array.isArray(m) || m.length < 5) continue;
      const [trialId, , type, metricSeq, rawValue, time, attempt] = m;
      if (type === 'FINAL') {
        final = this.setFinal(trialId, rawValue) || final;
        continue;
      }
      const value = serverNumber(rawValue);
      if (value === undefined) continue;
      let s = this.series.get(trialId);
      if (s && attempt !== undefined && s.attempt !== undefined && attempt !== s.attempt) {
        if (attempt < s.attempt) continue; // an earlier attempt's result: the curve shows the last one
        s = undefined; // a new attempt starts its curve over
      }
      if (!s) {
        s = { seq: [], value: [], time: [], attempt };
        this.series.set(trialId, s);
        touched.add(trialId);
      }
      if (insertPoint(s, metricSeq, value, time ?? 0)) {
        touched.add(trialId);
        periodical = true;
      }
    }
    for (const id of touched) this.seriesRev.set(id, (this.seriesRev.get(id) ?? 0) + 1);
    return { periodical, final };
  }

  private setFinal(trialId: string, raw: number | null): boolean {
    const current = this.byId.get(trialId);
    if (!current) {
      this.pendingFinal.set(trialId, raw);
      return false;
    }
    if (current.finalRaw === raw) return false;
    this.replace(current, { ...current, finalRaw: raw as Json, final: serverNumber(raw), rev: current.rev + 1 });
    return true;
  }

  /** The direction results are compared in: the server's word (it knows each tuner's default). */
  optimizeMode(): 'maximize' | 'minimize' {
    return this.experiment?.optimizeMode === 'minimize' ? 'minimize' : 'maximize';
  }

  /** The trial with the best final result, as the server decided it. */
  bestTrial(): Trial | undefined {
    const id = this.experiment?.bestTrialId;
    return typeof id === 'string' ? this.byId.get(id) : undefined;
  }

  /** Whether the trials table shows each trial's node: the server's word (they ran on more than one host). */
  multiHost(): boolean {
    return this.experiment?.multiHost === true;
  }

  /** NNI's update type of config field `field`, if the server lets it change while running. */
  updateType(field: string): string | undefined {
    return this.experiment?.updatableFields?.find((f) => f.field === field)?.updateType;
  }

  /** Parameter names: the search space's first (in its order), then any other seen in trials. */
  paramKeys(): string[] {
    const key = `${this.trialsVersion}/${this.experimentVersion}`;
    if (this.paramKeysCache?.key === key) return this.paramKeysCache.value;
    const keys: string[] = [];
    const seen = new Set<string>();
    const space = this.experiment?.params?.searchSpace;
    if (space && typeof space === 'object') {
      for (const name of Object.keys(space)) {
        seen.add(name);
        keys.push(name);
      }
    }
    for (const trial of this.trials) {
      for (const name in trial.params) {
        if (!seen.has(name)) {
          seen.add(name);
          keys.push(name);
        }
      }
    }
    // the same array while the names are the same: views memoize their columns on it
    const previous = this.paramKeysCache?.value;
    const value = previous && previous.length === keys.length && previous.every((k, i) => k === keys[i]) ? previous : keys;
    this.paramKeysCache = { key, value };
    return value;
  }

  /** Trial counts by state: the server's statistics, or counted here if it sent none. */
  counts(): Record<string, number> {
    const counts: Record<string, number> = {};
    if (this.statistics.length) {
      for (const s of this.statistics) counts[s.trialJobStatus] = s.trialJobNumber;
      return counts;
    }
    for (const t of this.trials) counts[t.status] = (counts[t.status] ?? 0) + 1;
    return counts;
  }
}

function sameTrial(a: Trial, b: Trial): boolean {
  return a.status === b.status && a.attempts === b.attempts && a.startTime === b.startTime &&
    a.endTime === b.endTime && a.submitTime === b.submitTime && a.finalRaw === b.finalRaw &&
    a.seq === b.seq && a.canKill === b.canKill && a.host === b.host &&
    a.waitingReason === b.waitingReason &&
    a.duration === b.duration && a.runningSince === b.runningSince &&
    JSON.stringify(a.params) === JSON.stringify(b.params) &&
    JSON.stringify(a.attemptDetails) === JSON.stringify(b.attemptDetails);
}

/** Inserts or replaces the point of `metricSeq`; false if the same point was already there. */
function insertPoint(s: Series, metricSeq: number, value: number, time: number): boolean {
  const n = s.seq.length;
  if (n === 0 || s.seq[n - 1] < metricSeq) {
    s.seq.push(metricSeq);
    s.value.push(value);
    s.time.push(time);
    return true;
  }
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (s.seq[mid] < metricSeq) lo = mid + 1;
    else hi = mid;
  }
  if (lo < n && s.seq[lo] === metricSeq) {
    if (s.value[lo] === value) return false;
    s.value[lo] = value;
    s.time[lo] = time;
    return true;
  }
  s.seq.splice(lo, 0, metricSeq);
  s.value.splice(lo, 0, value);
  s.time.splice(lo, 0, time);
  return true;
}
