/*
 * data-testid hooks for browser tests. Stable: rename one only together with the tests.
 * `testids` below maps a name to each value (`name: 'value'`, one a line, so tests can read
 * this file); a value ending in `-` is a prefix followed by a trial id or a trial state.
 * test/testids.test.ts checks that every data-testid in src/ is listed here.
 *
 * Everywhere
 *   app                    the root; data-loaded="true" once the first full data arrived
 *   status                 the experiment's state in the header (text: RUNNING, DONE, ERROR, ...)
 *   experiment-name, experiment-id
 *   offline-badge          shown only while the websocket is disconnected ("unreachable since <time>" while
 *                          the server of an experiment that had not ended gives no answer at all; "status" then reads UNKNOWN)
 *   unreachable-notice     then: since when, the last known state, and `expctl resume <id>` / `expctl view <id>`
 *   live-badge             shown while it is connected
 *   readonly-badge         shown in view mode (readOnly: no controls anywhere)
 *   store-badge            shown while the store cannot be written (launching paused; title: why)
 *   nav-overview, nav-trials, nav-charts, nav-logs    the tabs (links to #/overview, ...)
 *   theme-select           the colour theme (values system, light, dark); <html data-theme> is the one in force
 *
 * Overview (#/overview, the default)
 *   overview, experiment-error (the error with its traceback, when ERROR), start-time, duration,
 *   budget-trials, budget-time (text "used / max"), count-<STATE> (trial counts by state), count-link-<STATE>
 *   (the link around it, to the table of the trials in that state),
 *   optimize-mode, best-result, best-trial (link), best-params (the server's optimize mode and
 *   best trial: the tuner's default direction when the config names none), concurrency,
 *   max-trials, max-duration (current values, updated live), search-space, config,
 *   manager-away (only when the server says no manager ran it for a while between runs: "3m 12s (2 times)",
 *   a summary that opens manager-away-gaps, the list of each time's start and end)
 *
 * Controls (only when readOnly is false; on the overview)
 *   controls               the panel
 *   stop-experiment        asks to stop the experiment
 *   concurrency-input, concurrency-apply
 *   max-trials-input, max-trials-apply
 *   max-duration-input, max-duration-apply   (30s, 10m, 1.5h, 2d or seconds)
 *   concurrency-error, max-trials-error, max-duration-error   a value the field could not read (until the next action)
 *   controls-off-reason    why the controls are disabled (the server does not answer)
 *   controls-more-trials   after DONE, while served: raising max trials or max duration runs more trials
 *   confirm-dialog, confirm, cancel          the confirmation of any control (also kill-trial)
 *   control-message        the outcome of the last control (data-kind="ok" | "error")
 *
 * Trials (#/trials)
 *   trials-table           the table; it is also the element that scrolls (data-rows = rows after
 *                          filtering, data-total = trials loaded)
 *   trials-count           the number of trials loaded (digits only); trials-shown: rows after filtering
 *   trial-row-<id>         a row, a link that opens the trial; rendered only while in view (virtual
 *                          scrolling); data-index = its position in the sorted, filtered rows
 *   trial-state-<id>, trial-final-<id>   cells of that row (a trial without a final result: its latest
 *                          intermediate result, in .latest while it may still report, else in .latest-ended)
 *   trial-duration-<id>    its Duration cell (formatDuration: 0.65s, 42s, 1m 05s, ...)
 *   trial-waiting-<id>     in its State cell, only while the server says why the WAITING trial is not started
 *                          yet (no free GPU): a "?" mark whose title (and accessible name) is that reason
 *   trial-host-<id>        its Node cell: the host of its latest attempt; the column is there only when the
 *                          server says the trials ran on more than one host (the experiment's multiHost)
 *   sort-<key>             column headers; key: seq, id, status, host, final, duration, attempts, param:<name>
 *   filter-state-<STATE>   state checkboxes (only states some trial is in); filter-clear
 *   filter-result-min, filter-result-max, filter-id, filter-host (with the Node column), filter-param-<name>
 *                          (x..y  >x  <=x  =x  a|b  !text  text)
 *
 * Trial detail (#/trials/<id>)
 *   trial-detail, trial-detail-id, trial-detail-state, trial-final, trial-latest, trial-duration, trial-params,
 *   trial-host (the node of its latest attempt, "—" before it started or when not known),
 *   trial-waiting-reason (only while the server says why the WAITING trial is not started yet: that reason),
 *   trial-attempts (a table with nodes, exit codes and signals, else "N attempts"), attempt-host-<n> (the
 *   node of attempt n in that table),
 *   kill-trial (not in view mode; when the server says it can kill the trial: RUNNING), chart-trial-intermediate,
 *   tab-stdout, tab-stderr, tab-trial-log; stdout, stderr, trial-log: the tailed file, one row a
 *   line, only the rows in view are in the page (it follows the end); data-lines = line count,
 *   data-next = bytes read
 *   log-rotated (beside any tailed file, when its log was rotated: the server's facts; data-rotated =
 *   rotated files kept, data-dropped = bytes deleted), log-skipped (when the server skipped bytes to keep
 *   up: how many; the place is a note line in the file, "… 812 MiB skipped to keep up …"), log-empty (inside an
 *   empty view: "Loading…", "Nothing written to stderr yet.", "No line matches.")
 *
 * Charts (#/charts): a chart has data-rendered="true" once drawn and data-points = points drawn
 *   chart-final, chart-intermediate, chart-parallel (data-summary: its axes, `batch: category 8|16|32|64; lr: value; ...`),
 *   chart-durations,
 *   curves-mode (select: best, latest, running, selected, all), curves-count, curves-trials,
 *   curves-others, curves-summary ("N highlighted, M in grey"; "loading trials…" while loading)
 *   chart-loading          over each chart while the experiment's trials are still loading
 *   a chart's data-theme   the colour theme it was drawn in (light, dark)
 *
 * Analysis (docs/webui.md: Compare, Importance, Result key, Top trials)
 *   key-chooser            select of the result key shown and charted (only when results are dicts of
 *                          more than one key); kept in the address as ?key=<key>
 *   select-trial-<id>      the trials table's checkbox selecting a trial to compare; selection-count,
 *                          compare-selected (the link to the compare view; disabled outside 2-10),
 *                          selection-clear, selection-note (why Compare is disabled)
 *   best-mark              the marker of the best trial (under the chosen key) in the trials table;
 *                          trial-best-badge on the best trial's page; chart-final has data-best=<id>
 *   top-trials, top-k (the K input), top-trial-<rank> (1-based; data-trial = its id), top-trials-status
 *   compare-page, compare-table, compare-error (the refusal: fewer than 2 or more than 10, unknown ids),
 *   compare-param-<name> (a parameter's row; data-differs="true" when its values differ),
 *   compare-final-<id> (its result under the chosen key), chart-compare (the curves overlaid)
 *   importance-panel, chart-importance (the bars), importance-status (the loading hint, or why there
 *   is no importance), importance-param-<name> (a row of the table beside the chart, most important
 *   first: its importance)
 *
 * All experiments (#/experiments; the whole page under `expctl ui`)
 *   nav-experiments        the tab (an experiment's own server)
 *   experiments-page, experiments-table, experiments-count (rows listed), experiments-error (the list
 *   could not be read), experiments-message (the outcome of a resume; data-kind="ok" | "error")
 *   experiment-row-<id>    a row (data-state = its state as the server says: RUNNING, DONE, CRASHED, ...)
 *   experiment-state-<id>, experiment-open-<id> (a link; data-kind = live | read-only),
 *   experiment-stop-<id>, experiment-resume-<id>, experiment-delete-<id> (stop and delete ask first),
 *   experiment-crashed-<id> (the note on a crashed one, with the command that resumes it),
 *   experiment-problem-<id> (why its store could not be read), experiment-open-hint-<id> (an ended one
 *   listed by an experiment's own server, which does not open it: `expctl ui` does)
 *
 * Logs (#/logs)
 *   tab-experiment-log, tab-dispatcher-log, log-level (select of the lowest level shown: values
 *   ALL, INFO, WARNING, ERROR), log-search, experiment-log, dispatcher-log (like stdout)
 *
 * Actions and downloads
 *   add-trial (trials page), clone-trial (trial page): open trial-form (a dialog; only while the experiment
 *   takes trials and not in view mode): trial-form-param-<name> (one input or select per parameter),
 *   trial-form-submit, trial-form-cancel, trial-form-error (the server's refusal, verbatim); trial-added (a link
 *   to the new trial, shown after it was added)
 *   search-space (the card), search-space-table (parameter, type, values), space-row-<name> (its rows);
 *   edit-search-space (only while running, not in view mode), search-space-input (the JSON), search-space-save,
 *   search-space-cancel, search-space-error (the server's message), search-space-saved
 *   download-results-csv, download-results-json, download-config-yml, download-config-json (overview),
 *   download-log (trial page and logs page: the file shown)
 */
export const testids = {
  app: 'app',
  status: 'status',
  experimentName: 'experiment-name',
  experimentId: 'experiment-id',
  offlineBadge: 'offline-badge',
  liveBadge: 'live-badge',
  readonlyBadge: 'readonly-badge',
  storeBadge: 'store-badge',
  navOverview: 'nav-overview',
  navTrials: 'nav-trials',
  navCharts: 'nav-charts',
  navLogs: 'nav-logs',
  themeSelect: 'theme-select',

  overview: 'overview',
  experimentError: 'experiment-error',
  startTime: 'start-time',
  duration: 'duration',
  budgetTrials: 'budget-trials',
  budgetTime: 'budget-time',
  countPrefix: 'count-',
  countLinkPrefix: 'count-link-',
  optimizeMode: 'optimize-mode',
  bestResult: 'best-result',
  bestTrial: 'best-trial',
  bestParams: 'best-params',
  concurrency: 'concurrency',
  maxTrials: 'max-trials',
  maxDuration: 'max-duration',
  searchSpace: 'search-space',
  config: 'config',
  managerAway: 'manager-away',
  managerAwayGaps: 'manager-away-gaps',

  controls: 'controls',
  stopExperiment: 'stop-experiment',
  concurrencyInput: 'concurrency-input',
  concurrencyApply: 'concurrency-apply',
  maxTrialsInput: 'max-trials-input',
  maxTrialsApply: 'max-trials-apply',
  maxDurationInput: 'max-duration-input',
  maxDurationApply: 'max-duration-apply',
  confirmDialog: 'confirm-dialog',
  confirm: 'confirm',
  cancel: 'cancel',
  controlMessage: 'control-message',

  trialsTable: 'trials-table',
  trialsScroll: 'trials-table',
  trialsCount: 'trials-count',
  trialsShown: 'trials-shown',
  trialRowPrefix: 'trial-row-',
  trialStatePrefix: 'trial-state-',
  trialFinalPrefix: 'trial-final-',
  trialHostPrefix: 'trial-host-',
  trialWaitingPrefix: 'trial-waiting-',
  trialDurationPrefix: 'trial-duration-',
  sortPrefix: 'sort-',
  filterStatePrefix: 'filter-state-',
  filterParamPrefix: 'filter-param-',
  filterClear: 'filter-clear',
  filterResultMin: 'filter-result-min',
  filterResultMax: 'filter-result-max',
  filterId: 'filter-id',
  filterHost: 'filter-host',

  trialDetail: 'trial-detail',
  trialDetailId: 'trial-detail-id',
  trialDetailState: 'trial-detail-state',
  trialFinal: 'trial-final',
  trialLatest: 'trial-latest',
  trialDuration: 'trial-duration',
  trialParams: 'trial-params',
  trialHost: 'trial-host',
  trialWaitingReason: 'trial-waiting-reason',
  attemptHostPrefix: 'attempt-host-',
  trialAttempts: 'trial-attempts',
  killTrial: 'kill-trial',
  chartTrialIntermediate: 'chart-trial-intermediate',
  tabStdout: 'tab-stdout',
  tabStderr: 'tab-stderr',
  tabTrialLog: 'tab-trial-log',
  stdout: 'stdout',
  stderr: 'stderr',
  trialLog: 'trial-log',

  chart: 'chart-final',
  chartFinal: 'chart-final',
  chartIntermediate: 'chart-intermediate',
  chartParallel: 'chart-parallel',
  chartDurations: 'chart-durations',
  curvesMode: 'curves-mode',
  curvesCount: 'curves-count',
  curvesTrials: 'curves-trials',
  curvesOthers: 'curves-others',
  curvesSummary: 'curves-summary',
  chartLoading: 'chart-loading',

  keyChooser: 'key-chooser',
  selectTrialPrefix: 'select-trial-',
  selectionCount: 'selection-count',
  compareSelected: 'compare-selected',
  selectionClear: 'selection-clear',
  selectionNote: 'selection-note',
  bestMark: 'best-mark',
  trialBestBadge: 'trial-best-badge',
  topTrials: 'top-trials',
  topK: 'top-k',
  topTrialPrefix: 'top-trial-',
  topTrialsStatus: 'top-trials-status',
  comparePage: 'compare-page',
  compareTable: 'compare-table',
  compareError: 'compare-error',
  compareParamPrefix: 'compare-param-',
  compareFinalPrefix: 'compare-final-',
  chartCompare: 'chart-compare',
  importancePanel: 'importance-panel',
  chartImportance: 'chart-importance',
  importanceStatus: 'importance-status',
  importanceParamPrefix: 'importance-param-',

  tabExperimentLog: 'tab-experiment-log',
  tabDispatcherLog: 'tab-dispatcher-log',
  logLevel: 'log-level',
  logSearch: 'log-search',
  experimentLog: 'experiment-log',
  dispatcherLog: 'dispatcher-log',
  logRotated: 'log-rotated',
  logSkipped: 'log-skipped',

  // actions and downloads (TrialForm.tsx, SearchSpaceEditor.tsx, Downloads.tsx, ConfigView.tsx)
  addTrial: 'add-trial',
  cloneTrial: 'clone-trial',
  trialForm: 'trial-form',
  trialFormParamPrefix: 'trial-form-param-',
  trialFormSubmit: 'trial-form-submit',
  trialFormCancel: 'trial-form-cancel',
  trialFormError: 'trial-form-error',
  trialAdded: 'trial-added',
  searchSpaceTable: 'search-space-table',
  spaceRowPrefix: 'space-row-',
  editSearchSpace: 'edit-search-space',
  searchSpaceInput: 'search-space-input',
  searchSpaceSave: 'search-space-save',
  searchSpaceCancel: 'search-space-cancel',
  searchSpaceError: 'search-space-error',
  searchSpaceSaved: 'search-space-saved',
  downloadResultsCsv: 'download-results-csv',
  downloadResultsJson: 'download-results-json',
  downloadConfigYml: 'download-config-yml',
  downloadConfigJson: 'download-config-json',
  downloadLog: 'download-log',
  logEmpty: 'log-empty',
  unreachableNotice: 'unreachable-notice',
  controlsOffReason: 'controls-off-reason',
  controlsMoreTrials: 'controls-more-trials',
  concurrencyError: 'concurrency-error',
  maxTrialsError: 'max-trials-error',
  maxDurationError: 'max-duration-error',
  navExperiments: 'nav-experiments',
  experimentsPage: 'experiments-page',
  experimentsTable: 'experiments-table',
  experimentsCount: 'experiments-count',
  experimentsError: 'experiments-error',
  experimentsMessage: 'experiments-message',
  experimentRowPrefix: 'experiment-row-',
  experimentStatePrefix: 'experiment-state-',
  experimentOpenPrefix: 'experiment-open-',
  experimentStopPrefix: 'experiment-stop-',
  experimentResumePrefix: 'experiment-resume-',
  experimentDeletePrefix: 'experiment-delete-',
  experimentCrashedPrefix: 'experiment-crashed-',
  experimentProblemPrefix: 'experiment-problem-',
  experimentOpenHintPrefix: 'experiment-open-hint-',
} as const;

/** The test ids that name a trial, a state, a column or a file. */
export const tid = {
  trialRow: (id: string) => testids.trialRowPrefix + id,
  trialState: (id: string) => testids.trialStatePrefix + id,
  trialFinal: (id: string) => testids.trialFinalPrefix + id,
  trialHost: (id: string) => testids.trialHostPrefix + id,
  trialWaiting: (id: string) => testids.trialWaitingPrefix + id,
  trialDuration: (id: string) => testids.trialDurationPrefix + id,
  attemptHost: (attempt: number) => testids.attemptHostPrefix + attempt,
  count: (state: string) => testids.countPrefix + state,
  countLink: (state: string) => testids.countLinkPrefix + state,
  filterState: (state: string) => testids.filterStatePrefix + state,
  filterParam: (name: string) => testids.filterParamPrefix + name,
  sort: (key: string) => testids.sortPrefix + key,
  logFile: (file: string) => file.replace('.', '-'),
  logTab: (file: string) => `tab-${file.replace('.', '-')}`,
  trialFormParam: (name: string) => testids.trialFormParamPrefix + name,
  spaceRow: (name: string) => testids.spaceRowPrefix + name,
  selectTrial: (id: string) => testids.selectTrialPrefix + id,
  topTrial: (rank: number) => testids.topTrialPrefix + rank,
  compareParam: (name: string) => testids.compareParamPrefix + name,
  compareFinal: (id: string) => testids.compareFinalPrefix + id,
  importanceParam: (name: string) => testids.importanceParamPrefix + name,
};
