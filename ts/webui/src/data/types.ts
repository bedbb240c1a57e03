// The server's shapes (see /api/v1/nni/* and /api/v1/expmgr/*) and the UI's own records.
// NNI's quirks are the server's: times in ms, `hyperParameters` items are JSON strings,
// a metric's `data` is a JSON string of a JSON string.

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** GET /api/v1/nni/experiment */
export interface ExperimentView {
  id: string;
  revision?: number;
  execDuration: number; // seconds
  logDir?: string;
  nextSequenceId?: number;
  params: ExperimentConfig;
  startTime?: number; // ms
  endTime?: number; // ms
  status: string;
  preempted?: boolean;
  readOnly?: boolean;
  error?: string;
  /** The direction results are compared in, as the server resolved it (the tuner's default when none is given). */
  optimizeMode?: 'maximize' | 'minimize';
  /** The trial with the best final result, as the server decides it; null until one has a finite result. */
  bestTrialId?: string | null;
  /** The config fields the server takes a change of now, each with NNI's update type: every one while
   *  it runs; after DONE, while its manager serves it, maxTrialNumber and maxExperimentDuration (a raise
   *  runs more trials); none under `expctl view` or after ERROR. */
  updatableFields?: UpdatableField[];
  /** The trials ran on more than one host: the server's word that the trials table shows each one's node. */
  multiHost?: boolean;
  /** The keys of final results (`default` first, then those of dict results): the key chooser offers them. */
  resultKeys?: string[];
  /** When no manager ran the experiment, between one run's end and the next one's start (a stop or a
   *  death, then a resume), as the server found them, oldest first; empty when never. */
  managerAway?: AwayGap[];
  /** How long in all, seconds: the server's total of `managerAway`. */
  managerAwaySeconds?: number;
}

/** A time no manager ran the experiment: epoch seconds (not ms, unlike NNI's times). */
export interface AwayGap {
  from: number;
  to: number;
}

export interface UpdatableField {
  field: string;
  updateType: string;
}

export interface ExperimentConfig {
  experimentName?: string;
  trialConcurrency?: number;
  maxTrialNumber?: number;
  maxExperimentDuration?: number | string;
  searchSpace?: Record<string, Json>;
  tuner?: { name?: string; className?: string; classArgs?: Record<string, Json> };
  [key: string]: Json | undefined;
}

export interface JobStatistic {
  trialJobStatus: string;
  trialJobNumber: number;
}

export interface MetricView {
  timestamp: number;
  trialJobId: string;
  parameterId: string;
  type: string;
  sequence: number;
  data: string;
}

/** One attempt, when the server lists them (`attempts` as a list, or `attemptDetails`). */
export interface AttemptView {
  attempt?: number;
  status?: string;
  startTime?: number;
  endTime?: number;
  exitCode?: number | null;
  signal?: number | string | null;
  /** Where the attempt ran, as its training service named it; null when not known. */
  host?: string | null;
}

/** A trial as GET /api/v1/expmgr/trials/<id> and the changes give it: NNI's keys and expmgr's. */
export interface TrialJobView {
  trialJobId: string;
  sequenceId: number;
  status: string;
  hyperParameters?: string[];
  logPath?: string;
  stderrPath?: string;
  submitTime?: number;
  startTime?: number;
  endTime?: number;
  attempts?: number | AttemptView[];
  attemptDetails?: AttemptView[];
  finalMetricData?: MetricView[];
  /** The final result's number (`default` of a dict); null when it is not finite. */
  finalNumber?: number | null;
  /** A dict result's number under each of its keys (null when not finite). */
  finalNumbers?: Record<string, number | null>;
  /** Whether the server would kill this trial now (only a RUNNING one). */
  canKill?: boolean;
  /** Where its latest attempt ran (sent once known). */
  host?: string;
  /** Why a WAITING trial is not started yet (no free GPU), as the runner stored it; absent otherwise. */
  waitingReason?: string;
  /** Seconds its ended attempts ran, all together (the server's duration; sent once it started). */
  duration?: number;
  /** When its attempt still running started (ms): its duration grows from there. */
  runningSince?: number;
}

/** `[trialId, sequenceId, type, metricSequence, value, timestampMs, attempt?]` */
export type CompactMetric = [string, number, string, number, number | null, number, number?];

/** GET /api/v1/expmgr/changes and the websocket's `changes` message. */
export interface ChangesMessage {
  type?: 'changes';
  /** Always sent by the server; absent only in the slices the client cuts a large answer into. */
  cursor?: string;
  full?: boolean;
  more?: boolean;
  experiment?: ExperimentView;
  statistics?: JobStatistic[];
  trials?: TrialJobView[];
  metrics?: CompactMetric[];
}

export interface HelloMessage {
  type: 'hello';
  cursor: string;
  readOnly: boolean;
  /** As in StoreMessage; absent from older servers. */
  storeUnwritable?: string | null;
}

/** Launching is paused because the store cannot be written (the server's words), or goes on (null). */
export interface StoreMessage {
  type: 'store';
  unwritable: string | null;
}

export type LogFile = 'stdout' | 'stderr' | 'trial.log' | 'experiment.log' | 'dispatcher.log';

/** GET /api/v1/expmgr/tail and the websocket's `tail` message. */
export interface TailChunk {
  offset: number;
  next: number;
  size?: number;
  text: string;
  /** The file of the log the bytes are in (its inode; null while the log has no file). */
  inode?: number | null;
  /** The server's count of the log's bytes before that file (passed back when asking for more). */
  base?: number;
  /** How many rotated files of the log are kept (NAME.1 ...). */
  rotated?: number;
  /** Bytes of the log rotation deleted. */
  dropped?: number;
  /** Bytes of the log passed over before `offset` (a jump to the end); null: an unknown amount. */
  skipped?: number | null;
}

export interface TailMessage extends TailChunk {
  type: 'tail';
  file: LogFile;
  trial: string | null;
}

/** A message the server could not act on (e.g. `follow` of an unknown trial). */
export interface ErrorMessage {
  type: 'error';
  error: string;
  file?: LogFile;
  trial?: string | null;
}

export type ServerMessage =
  HelloMessage | (ChangesMessage & { type: 'changes' }) | TailMessage | ErrorMessage | StoreMessage;

/** A trial as the UI keeps it. */
export interface Trial {
  id: string;
  seq: number;
  status: string;
  params: Record<string, Json>;
  submitTime?: number;
  startTime?: number;
  endTime?: number;
  attempts: number;
  attemptDetails?: AttemptView[];
  /** The final result's number (`default` of a dict), if any. */
  final?: number;
  /** The final result as reported (number or dict). */
  finalRaw?: Json;
  /** A dict result's finite numbers by key, as the server resolved them (`resultOf` reads them). */
  finals?: Record<string, number>;
  /** The server's word: it would kill this trial now. */
  canKill: boolean;
  /** The host (node) its latest attempt ran on, once known. */
  host?: string;
  /** The server's word on why this WAITING trial is not started yet (no free GPU). */
  waitingReason?: string;
  /** The server's duration so far: seconds its ended attempts ran (see `trialDuration`). */
  duration?: number;
  /** When its attempt still running started (ms). */
  runningSince?: number;
  /** Bumped whenever this trial's record or its metrics change. */
  rev: number;
}

/** Intermediate (PERIODICAL) results of one trial, ordered by metricSequence. */
export interface Series {
  seq: number[];
  value: number[];
  time: number[];
  /** The attempt these results are from: a retried trial reports from its first step again. */
  attempt?: number;
}

/** GET /api/v1/expmgr/top?key=&k=: the best trials under a result key, best first. */
export interface TopTrialsAnswer {
  key: string;
  optimizeMode: 'maximize' | 'minimize';
  /** Trials with a finite result under the key. */
  scored: number;
  trials: { trialJobId: string; sequenceId: number; number: number }[];
}

/** GET /api/v1/expmgr/importance?key=: PED-ANOVA importance of each parameter. */
export interface ImportanceAnswer {
  key: string;
  method: string;
  /** The quantile of the best trials compared with all. */
  gamma: number;
  optimizeMode: 'maximize' | 'minimize';
  /** Trials with a finite result under the key; topTrials: how many of them are in the best γ. */
  trials: number;
  topTrials: number;
  /** Most important first; the importances sum to 1. */
  parameters: { name: string; importance: number }[];
  skipped: { name: string; reason: string }[];
  /** Why there are no importances (too few trials, nothing to score). */
  reason?: string;
}
