// The trials table: every trial, sortable and filterable, virtually scrolled.
import { Fragment, type VNode } from 'preact';
import { useMemo } from 'preact/hooks';
import { FINISHED_STATES, TRIAL_STATES, trialDuration } from '../data/parse';
import {
  EMPTY_QUERY, formatNumber, formatParam, makeRowSelector, type SortKey, type TrialQuery,
} from '../data/query';
import { firstSortDirection, isTextParam } from '../data/columns';
import { parseTrialsView, trialsHref, type TrialsView } from '../data/trials-url';
import type { Trial } from '../data/types';
import { tid } from '../testids';
import { useApp } from './app-context';
import { formatDuration } from './format';
import { memo, parseRoute, replaceRoute, trialHref, useNow, useSubscribed } from './hooks';
import { StateBadge } from './StateBadge';
import { AddTrialButton } from './TrialForm';
import { useUnreachableSince } from './Unreachable';
import { VirtualList, slotKey } from './VirtualList';
import { KeyChooser, useResultKey } from './ResultKey';
import { SELECT_COLUMN, SelectBox, SelectionBar, useSelection } from './TrialSelection';
import { useBestTrialId } from './server-answers';
import { hashWithKey, keyFromHash, trialsUnderKey } from '../data/analysis';

const ROW_HEIGHT = 30;
const HEADER_HEIGHT = 64;

interface Column {
  key: SortKey;
  label: string;
  width: number;
  /** Numbers: tabular figures. */
  numeric?: boolean;
  param?: string;
  /** A parameter with values other than numbers (its filter takes text, not ranges). */
  text?: boolean;
}

const FIXED_BEFORE: Column[] = [
  { key: 'seq', label: '#', width: 64, numeric: true },
  { key: 'id', label: 'Trial', width: 110 },
  { key: 'status', label: 'State', width: 140 },
];

/** Shown only when the server says the trials ran on more than one host (`multiHost`). */
const NODE: Column = { key: 'host', label: 'Node', width: 150 };

const FIXED_AFTER: Column[] = [
  { key: 'final', label: 'Result', width: 120, numeric: true },
  { key: 'duration', label: 'Duration', width: 110, numeric: true },
  { key: 'attempts', label: 'Attempts', width: 84, numeric: true },
];

interface RowProps {
  trial: Trial;
  index: number;
  top: number;
  columns: Column[];
  width: number;
  latest: number | undefined;
  /** Only running trials' durations tick. */
  now: number;
  /** The best trial under the chosen key (the server's word). */
  best: boolean;
}

const Row = memo(({ trial, index, top, columns, width, latest, now, best }: RowProps) => {
  const cells = columns.map((c) => {
    let content: string | VNode;
    let testid: string | undefined;
    switch (c.key) {
      case 'seq':
        content = best ? <>{trial.seq} <span class="best-mark" data-testid="best-mark" title="the best trial">★</span></>
          : String(trial.seq);
        break;
      case 'id': content = trial.id; break;
      case 'status':
        content = trial.waitingReason === undefined ? <StateBadge state={trial.status} testid={tid.trialState(trial.id)} />
          : <><StateBadge state={trial.status} testid={tid.trialState(trial.id)} />
              <span class="waiting-mark" role="img" data-testid={tid.trialWaiting(trial.id)}
                    title={trial.waitingReason} aria-label={trial.waitingReason}>?</span></>;
        break;
      case 'host': testid = tid.trialHost(trial.id); content = trial.host ?? ''; break;
      case 'final':
        testid = tid.trialFinal(trial.id);
        content = trial.final !== undefined ? formatNumber(trial.final)
          : latest === undefined ? ''
          : FINISHED_STATES.has(trial.status)
            ? <span class="latest-ended" title="last intermediate result; the trial ended without a final result">
                {formatNumber(latest)}<sup aria-hidden="true">†</sup></span>
            : <span class="latest" title="latest intermediate result">{formatNumber(latest)}</span>;
        break;
      case 'duration': testid = tid.trialDuration(trial.id); content = formatDuration(trialDuration(trial, now)); break;
      case 'attempts': content = String(trial.attempts); break;
      default: content = formatParam(trial.params[c.param!]);
    }
    return (
      <span class={c.numeric ? 'cell num' : 'cell'} style={{ width: `${c.width}px` }} data-testid={testid}
            title={typeof content === 'string' ? content : undefined}>{content}</span>
    );
  });
  return (
    <a class={best ? 'row best' : 'row'} href={trialHref(trial.id)} style={{ top: `${top}px`, width: `${width}px` }}
       data-testid={tid.trialRow(trial.id)} data-index={index}>
      {cells}
    </a>
  );
});

export function TrialsPage({ search }: { search: string }) {
  const { store } = useApp();
  const trialsVersion = useSubscribed(store, () => store.trialsVersion);
  const multiHost = useSubscribed(store, () => store.multiHost());
  const metricsVersion = useSubscribed(store, () => store.metricsVersion);
  // the sort and filters live in the address (#/trials?sort=final&state=FAILED...): Back and links restore them
  const view = useMemo(() => parseTrialsView(search), [search]);
  const { query, sort } = view;
  // read at the event, not from this render: two inputs before the next render must both count
  const current = (): TrialsView => {
    const route = parseRoute(location.hash);
    return route.page === 'trials' ? parseTrialsView(route.search) : view;
  };
  const show = (patch: (shown: TrialsView) => Partial<TrialsView>) => {
    const shown = current();
    replaceRoute(hashWithKey(trialsHref({ ...shown, ...patch(shown) }), keyFromHash(location.hash)));
  };
  const selectRows = useMemo(() => makeRowSelector(), []);
  const [resultKey, setResultKey] = useResultKey();
  const bestId = useBestTrialId(resultKey);
  const selection = useSelection();
  const hasRunning = store.trials.some((t) => t.status === 'RUNNING');
  const unreachableSince = useUnreachableSince();
  const now = Math.min(useNow(1000, hasRunning && unreachableSince === null), unreachableSince ?? Infinity);

  const paramKeys = store.paramKeys();
  // the parameters holding text, as one string: the columns (and so every row) change only when it does
  const textParams = useMemo(() => paramKeys.filter((p) => isTextParam(store.trials, p)).join('\n'),
    [paramKeys, trialsVersion]);
  const columns = useMemo<Column[]>(() => [
    SELECT_COLUMN,
    ...FIXED_BEFORE,
    ...(multiHost ? [NODE] : []),
    ...paramKeys.map((p) => ({ key: `param:${p}` as SortKey, label: p, width: 130, numeric: true, param: p,
                               text: textParams.split('\n').includes(p) })),
    ...FIXED_AFTER,
  ], [paramKeys, multiHost, textParams]);
  const width = columns.reduce((sum, c) => sum + c.width, 0);

  // the Result column, its sorting and filter follow the chosen key
  const trials = useMemo(() => trialsUnderKey(store.trials, resultKey), [trialsVersion, resultKey]);
  const rows = selectRows(trials, trialsVersion, query, sort);

  const optimize = store.optimizeMode();
  const toggleSort = (key: SortKey) => {
    show(({ sort: s }) => ({
      sort: s.key === key ? { key, dir: s.dir === 'asc' ? 'desc' : 'asc' } : { key, dir: firstSortDirection(key, optimize) },
    }));
  };
  const update = (patch: (q: TrialQuery) => Partial<TrialQuery>) => show(({ query: q }) => ({ query: { ...q, ...patch(q) } }));
  const toggleState = (state: string) => update((q) => ({
    states: q.states.includes(state) ? q.states.filter((s) => s !== state) : [...q.states, state],
  }));
  const counts = store.counts();

  const header = (
    <div class="thead" style={{ width: `${width}px`, height: `${HEADER_HEIGHT}px` }}>
      <div class="thead-row">
        {columns.map((c) => c === SELECT_COLUMN ? <span class="th" style={{ width: `${c.width}px` }}>{c.label}</span> : (
          <button type="button" class={`th ${sort.key === c.key ? 'sorted' : ''}`} style={{ width: `${c.width}px` }}
                  onClick={() => toggleSort(c.key)} data-testid={tid.sort(c.key)} title={`Sort by ${c.label}`}>
            {c.label}{sort.key === c.key ? (sort.dir === 'asc' ? ' ▲' : ' ▼') : ''}
          </button>
        ))}
      </div>
      <div class="thead-row filters">
        {columns.map((c) => {
          if (c.key === 'id') {
            return <input class="tf" style={{ width: `${c.width}px` }} placeholder="filter" value={query.id} aria-label="Filter by trial id"
                          data-testid="filter-id" onInput={(e) => { const id = e.currentTarget.value; update(() => ({ id })); }} />;
          }
          if (c.key === 'host') {
            return <input class="tf" style={{ width: `${c.width}px` }} placeholder="filter" value={query.host} aria-label="Filter by node"
                          data-testid="filter-host" onInput={(e) => { const host = e.currentTarget.value; update(() => ({ host })); }} />;
          }
          if (c.param) {
            const value = query.params[c.param] ?? '';
            return <input class="tf" style={{ width: `${c.width}px` }} value={value} data-testid={tid.filterParam(c.param)}
                          aria-label={`Filter by ${c.label}`}
                          placeholder={c.text ? 'filter: text, a|b' : 'filter: >0.1, a..b'}
                          title={c.text ? 'text (contains)  a|b (any of)  =x  !text' : 'x..y  >x  <=x  =x  a|b (any of)  text  !text'}
                          onInput={(e) => {
                            const expr = e.currentTarget.value;
                            update((q) => ({ params: { ...q.params, [c.param!]: expr } }));
                          }} />;
          }
          return <span class="tf-empty" style={{ width: `${c.width}px` }} />;
        })}
      </div>
    </div>
  );

  void metricsVersion; // rows show the latest intermediate result of running trials
  return (
    <section class="page trials-page">
      <div class="filterbar">
        <div class="state-filters">
          {TRIAL_STATES.filter((s) => counts[s] || query.states.includes(s)).map((s) => (
            <label class="chip">
              <input type="checkbox" checked={query.states.includes(s)} onChange={() => toggleState(s)}
                     data-testid={tid.filterState(s)} />
              {s} <span class="muted">{counts[s] ?? 0}</span>
            </label>
          ))}
        </div>
        <label>Result from <input class="small" value={view.resultMinText} data-testid="filter-result-min" inputMode="decimal"
          onInput={(e) => { const text = e.currentTarget.value; show(() => ({ resultMinText: text })); }} /></label>
        <label>to <input class="small" value={view.resultMaxText} data-testid="filter-result-max" inputMode="decimal"
          onInput={(e) => { const text = e.currentTarget.value; show(() => ({ resultMaxText: text })); }} /></label>
        <button type="button" data-testid="filter-clear"
                onClick={() => show(() => ({ query: EMPTY_QUERY, resultMinText: '', resultMaxText: '' }))}>
          Clear filters
        </button>
        <AddTrialButton label="Add trial" testid="add-trial" title="Add a trial" />
        <KeyChooser value={resultKey} onChange={setResultKey} />
        <span class="muted">
          <span data-testid="trials-shown">{rows.length}</span> of <span data-testid="trials-count">{store.trials.length}</span> trials
        </span>
      </div>
      <SelectionBar selection={selection} resultKey={resultKey} />
      <VirtualList
        class="table"
        testid="trials-table"
        attrs={{ rows: rows.length, total: store.trials.length }}
        count={rows.length}
        rowHeight={ROW_HEIGHT}
        header={header}
        headerHeight={HEADER_HEIGHT}
        width={width}
        renderRow={(i, top) => {
          const t = rows[i];
          return (
            <Fragment key={slotKey(i)}>
              <Row trial={t} index={i} top={top} columns={columns} width={width}
                   latest={t.final === undefined ? store.latest(t.id) : undefined}
                   now={t.status === 'RUNNING' ? now : 0} best={t.id === bestId} />
              <SelectBox id={t.id} top={top} selection={selection} />
            </Fragment>
          );
        }}
      />
      {rows.length === 0 && <p class="empty">{store.loaded ? 'No trial matches.' : 'Loading…'}</p>}
    </section>
  );
}
