/*
 * data-testid hooks for browser tests. Stable: rename one only together with the tests.
 * `<id>` is a trial id, `<STATE>` a trial state (RUNNING, SUCCEEDED, ...).
 *
 * Everywhere
 *   app                    the root, once the first data arrived (data-loaded="true")
 *   status                 the experiment's state (text: RUNNING, DONE, ERROR, ...)
 *   experiment-name        its name; experiment-id: its id
 *   offline-badge          shown only while the websocket is disconnected
 *   live-badge             shown while connected
 *   readonly-badge         shown in view mode (readOnly: no controls)
 *   nav-overview, nav-trials, nav-charts, nav-logs    the tabs (links to #/overview, ...)
 *
 * Overview (#/overview)
 *   overview, experiment-error (the error with its traceback, when ERROR), start-time, duration,
 *   budget-trials, budget-time (text "used / max"), count-<STATE> (trial counts), best-result,
 *   best-trial (link), best-params, concurrency, max-trials, max-duration, search-space, config
 *
 * Controls (only when readOnly is false; on the overview)
 *   controls               the panel
 *   stop-experiment        asks to stop the experiment
 *   concurrency-input, concurrency-apply
 *   max-trials-input, max-trials-apply
 *   max-duration-input, max-duration-apply   (30s, 10m, 1.5h, 2d or seconds)
 *   confirm-dialog, confirm, cancel          the confirmation of any control (also kill-trial)
 *   control-message        the result of the last control (data-kind="ok" | "error")
 *
 * Trials (#/trials)
 *   trials-table           the scrolling table (data-rows = rows after filtering, data-total)
 *   trials-count           "N of M trials"
 *   trial-row-<id>         a row (rendered only while visible: virtual scrolling); a click opens it
 *   trial-state-<id>, trial-final-<id>   cells of that row
 *   sort-<key>             column headers; key: seq, id, status, final, duration, attempts, param:<name>
 *   filter-state-<STATE>   state checkboxes; filter-clear
 *   filter-result-min, filter-result-max, filter-id, filter-param-<name>
 *
 * Trial detail (#/trials/<id>)
 *   trial-detail, trial-detail-id, trial-detail-state, trial-final, trial-duration, trial-params,
 *   trial-attempts (table when the server lists attempts, else the count),
 *   kill-trial (not in view mode; while WAITING/RUNNING/PAUSED), chart-trial-intermediate,
 *   tab-stdout, tab-stderr, tab-trial-log; stdout, stderr, trial-log (the tailed text; only the
 *   visible lines are in the page; data-lines = line count, data-next = bytes read)
 *
 * Charts (#/charts): each chart has data-rendered="true" once drawn, data-points = points drawn
 *   chart-final, chart-intermediate, chart-parallel, chart-durations,
 *   curves-mode (select: best, latest, running, selected, all), curves-count, curves-trials
 *
 * Logs (#/logs)
 *   tab-experiment-log, tab-dispatcher-log, log-level (select of the lowest level shown;
 *   values ALL, INFO, WARNING, ERROR),
 *   log-search, experiment-log, dispatcher-log (the tailed text, like stdout)
 */

/** Builds a `data-testid` with an id in it, e.g. `tid.trialRow("abc")`. */
export const tid = {
  trialRow: (id: string) => `trial-row-${id}`,
  trialState: (id: string) => `trial-state-${id}`,
  trialFinal: (id: string) => `trial-final-${id}`,
  count: (state: string) => `count-${state}`,
  filterState: (state: string) => `filter-state-${state}`,
  filterParam: (name: string) => `filter-param-${name}`,
  sort: (key: string) => `sort-${key}`,
  logFile: (file: string) => file.replace('.', '-'),
  logTab: (file: string) => `tab-${file.replace('.', '-')}`,
};
