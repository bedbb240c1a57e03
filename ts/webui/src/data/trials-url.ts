// The trials table's sort and filters as the query of its address (`#/trials?sort=final&dir=asc&state=FAILED&p.lr=0.1..0.5`),
// so that Back from a trial restores them and a link shares them.
import { EMPTY_QUERY, type SortKey, type SortSpec, type TrialQuery } from './query';

/** The table's view as the address holds it: the query, the sort, and the result bounds as typed. */
export interface TrialsView {
  query: TrialQuery;
  sort: SortSpec;
  /** The result bounds as typed (the query holds them as numbers). */
  resultMinText: string;
  resultMaxText: string;
}

export const DEFAULT_SORT: SortSpec = { key: 'seq', dir: 'asc' };

const PARAM_PREFIX = 'p.';
const SORT_KEYS = new Set(['seq', 'id', 'status', 'host', 'final', 'duration', 'attempts']);

function numberOrNull(text: string): number | null {
  if (text.trim() === '') return null;
  const n = Number(text);
  return Number.isNaN(n) ? null : n;
}

/** The view in `search` (the part of the hash after `?`); what is missing or unreadable is the default. */
export function parseTrialsView(search: string): TrialsView {
  const args = new URLSearchParams(search);
  const key = args.get('sort') ?? '';
  const sortKey = SORT_KEYS.has(key) || (key.startsWith('param:') && key.length > 'param:'.length) ? key as SortKey : null;
  const dir = args.get('dir') === 'desc' ? 'desc' : 'asc';
  const params: Record<string, string> = {};
  for (const [name, value] of args) {
    if (name.startsWith(PARAM_PREFIX) && name.length > PARAM_PREFIX.length) params[name.slice(PARAM_PREFIX.length)] = value;
  }
  const resultMinText = args.get('min') ?? '';
  const resultMaxText = args.get('max') ?? '';
  return {
    query: {
      ...EMPTY_QUERY,
      states: (args.get('state') ?? '').split(',').map((s) => s.trim()).filter(Boolean),
      resultMin: numberOrNull(resultMinText),
      resultMax: numberOrNull(resultMaxText),
      params,
      id: args.get('id') ?? '',
      host: args.get('host') ?? '',
    },
    sort: sortKey ? { key: sortKey, dir } : DEFAULT_SORT,
    resultMinText,
    resultMaxText,
  };
}

/** `view` as the part after `?` (empty for the default view): only what differs from the default. */
export function trialsViewSearch(view: TrialsView): string {
  const args = new URLSearchParams();
  const { query, sort } = view;
  if (sort.key !== DEFAULT_SORT.key || sort.dir !== DEFAULT_SORT.dir) {
    args.set('sort', sort.key);
    args.set('dir', sort.dir);
  }
  if (query.states.length) args.set('state', query.states.join(','));
  if (view.resultMinText.trim()) args.set('min', view.resultMinText);
  if (view.resultMaxText.trim()) args.set('max', view.resultMaxText);
  if (query.id) args.set('id', query.id);
  if (query.host) args.set('host', query.host);
  for (const [name, expr] of Object.entries(query.params)) {
    if (expr) args.set(PARAM_PREFIX + name, expr);
  }
  // `|`, `,`, `:` and `..` read better unescaped and are safe in a fragment
  return args.toString().replace(/%7C/gi, '|').replace(/%2C/gi, ',').replace(/%3A/gi, ':');
}

/** The address of the trials table in `view`. */
export function trialsHref(view: TrialsView): string {
  const search = trialsViewSearch(view);
  return search ? `#/trials?${search}` : '#/trials';
}

/** The address of the trials table showing only the trials in `state`. */
export function trialsInStateHref(state: string): string {
  return trialsHref({ ...parseTrialsView(''), query: { ...EMPTY_QUERY, states: [state] } });
}
