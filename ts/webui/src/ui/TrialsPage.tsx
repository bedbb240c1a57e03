// The trials table: every trial, sortable and filterable, virtually scrolled.
import type { VNode } from 'preact';
import { useMemo, useState } from 'preact/hooks';
import { TRIAL_STATES, trialDuration } from '../data/parse';
import {
  EMPTY_QUERY, formatNumber, formatParam, makeRowSelector, type SortKey, type SortSpec, type TrialQuery,
} from '../data/query';
import type { Trial } from '../data/types';
import { tid } from '../testids';
import { useApp } from './app-context';
import { formatDuration } from './format';
import { memo, trialHref, useNow, useSubscribed } from './hooks';
import { StateBadge } from './StateBadge';
import { VirtualList, slotKey } from './VirtualList';

const ROW_HEIGHT = 30;
const HEADER_HEIGHT = 64;

interface Column {
  key: SortKey;
  label: string;
  width: number;
  /** Numbers: tabular figures. */
  numeric?: boolean;
  param?: string;
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
}

const Row = memo(({ trial, index, top, columns, width, latest, now }: RowProps) => {
  const cells = columns.map((c) => {
    let content: string | VNode;
    let testid: string | undefined;
    switch (c.key) {
      case 'seq': content = String(trial.seq); break;
      case 'id': content = trial.id; break;
      case 'status':
        content = <StateBadge state={trial.status} testid={tid.trialState(trial.id)} />;
        break;
      case 'host': testid = tid.trialHost(trial.id); content = trial.host ?? ''; break;
      case 'final':
        testid = tid.trialFinal(trial.id);
        content = trial.final !== undefined ? formatNumber(trial.final)
          : latest !== undefined ? <span class="latest" title="latest intermediate result">{formatNumber(latest)}</span> : '';
        break;
      case 'duration': content = formatDuration(trialDuration(trial, now)); break;
      case 'attempts': content = String(trial.attempts); break;
      default: content = formatParam(trial.params[c.param!]);
    }
    return (
      <span class={c.numeric ? 'cell num' : 'cell'} style={{ width: `${c.width}px` }} data-testid={testid}
            title={typeof content === 'string' ? content : undefined}>{content}</span>
    );
  });
  return (
    <a class="row" href={trialHref(trial.id)} style={{ top: `${top}px`, width: `${width}px` }}
       data-testid={tid.trialRow(trial.id)} data-index={index}>
      {cells}
    </a>
  );
});

function numberOrNull(text: string): number | null {
  if (text.trim() === '') return null;
  const n = Number(text);
  return Number.isNaN(n) ? null : n;
}

export function TrialsPage() {
  const { store } = useApp();
  const trialsVersion = useSubscribed(store, () => store.trialsVersion);
  const multiHost = useSubscribed(store, () => store.multiHost());
  const metricsVersion = useSubscribed(store, () => store.metricsVersion);
  const [query, setQuery] = useState<TrialQuery>(EMPTY_QUERY);
  const [sort, setSort] = useState<SortSpec>({ key: 'seq', dir: 'asc' });
  const [minText, setMinText] = useState('');
  const [maxText, setMaxText] = useState('');
  const selectRows = useMemo(() => makeRowSelector(), []);
  const hasRunning = store.trials.some((t) => t.status === 'RUNNING');
  const now = useNow(1000, hasRunning);

  const paramKeys = store.paramKeys();
  const columns = useMemo<Column[]>(() => [
    ...FIXED_BEFORE,
    ...(multiHost ? [NODE] : []),
    ...paramKeys.map((p) => ({ key: `param:${p}` as SortKey, label: p, width: 130, numeric: true, param: p })),
    ...FIXED_AFTER,
  ], [paramKeys, multiHost]);
  const width = columns.reduce((sum, c) => sum + c.width, 0);

  const rows = selectRows(store.trials, trialsVersion, query, sort);

  const toggleSort = (key: SortKey) => {
    setSort((s) => (s.key === key ? { key, dir: s.dir === 'asc' ? 'desc' : 'asc' } : { key, dir: key === 'final' ? 'desc' : 'asc' }));
  };
  const update = (patch: Partial<TrialQuery>) => setQuery((q) => ({ ...q, ...patch }));
  const toggleState = (state: string) => {
    const states = query.states.includes(state) ? query.states.filter((s) => s !== state) : [...query.states, state];
    update({ states });
  };
  const counts = store.counts();

  const header = (
    <div class="thead" style={{ width: `${width}px`, height: `${HEADER_HEIGHT}px` }}>
      <div class="thead-row">
        {columns.map((c) => (
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
                          data-testid="filter-id" onInput={(e) => update({ id: e.currentTarget.value })} />;
          }
          if (c.key === 'host') {
            return <input class="tf" style={{ width: `${c.width}px` }} placeholder="filter" value={query.host} aria-label="Filter by node"
                          data-testid="filter-host" onInput={(e) => update({ host: e.currentTarget.value })} />;
          }
          if (c.param) {
            const value = query.params[c.param] ?? '';
            return <input class="tf" style={{ width: `${c.width}px` }} placeholder="filter: >0.1, a..b" value={value}
                          data-testid={tid.filterParam(c.param)} title="x..y  >x  <=x  =x  text  a|b  !text"
                          aria-label={`Filter by ${c.label}`}
                          onInput={(e) => update({ params: { ...query.params, [c.param!]: e.currentTarget.value } })} />;
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
        <label>Result from <input class="small" value={minText} data-testid="filter-result-min" inputMode="decimal"
          onInput={(e) => { setMinText(e.currentTarget.value); update({ resultMin: numberOrNull(e.currentTarget.value) }); }} /></label>
        <label>to <input class="small" value={maxText} data-testid="filter-result-max" inputMode="decimal"
          onInput={(e) => { setMaxText(e.currentTarget.value); update({ resultMax: numberOrNull(e.currentTarget.value) }); }} /></label>
        <button type="button" data-testid="filter-clear" onClick={() => { setQuery(EMPTY_QUERY); setMinText(''); setMaxText(''); }}>
          Clear filters
        </button>
        <span class="muted">
          <span data-testid="trials-shown">{rows.length}</span> of <span data-testid="trials-count">{store.trials.length}</span> trials
        </span>
      </div>
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
          return <Row key={slotKey(i)} trial={t} index={i} top={top} columns={columns} width={width}
                      latest={t.final === undefined ? store.latest(t.id) : undefined}
                      now={t.status === 'RUNNING' ? now : 0} />;
        }}
      />
      {rows.length === 0 && <p class="empty">{store.loaded ? 'No trial matches.' : 'Loading…'}</p>}
    </section>
  );
}
