// The analysis views' pure rules: a trial's result under the chosen key of dict results, the
// key and the compared trials as the page's address holds them, which parameters differ, and
// a curve's best point. Which key exists and which trial is best is the server's word
// (`resultKeys`, `api/v1/expmgr/top`); this only reads it.
import { formatParam } from './query';
import type { Json, Series, Trial } from './types';

export const DEFAULT_KEY = 'default';
export const COMPARE_MIN = 2;
export const COMPARE_MAX = 10;

/** A trial's finite final number under `key` (`default`: the number every view shows). */
export function resultOf(trial: Trial, key: string): number | undefined {
  return key === DEFAULT_KEY ? trial.final : trial.finals?.[key];
}

/**
 * The trials with `final` replaced by their number under `key`, so that the table's Result
 * column, its sorting and filter, and the charts follow the chosen key; the same array for
 * `default`. Trials are immutable: each changed one is a copy.
 */
export function trialsUnderKey(trials: Trial[], key: string): Trial[] {
  if (key === DEFAULT_KEY) return trials;
  return trials.map((t) => ({ ...t, final: resultOf(t, key) }));
}

/** The query part of a hash address (`#/trials?key=loss` -> key=loss). */
export function hashParams(hash: string): URLSearchParams {
  const at = hash.indexOf('?');
  return new URLSearchParams(at < 0 ? '' : hash.slice(at + 1));
}

/** The chosen result key in a hash address; `default` when none. */
export function keyFromHash(hash: string): string {
  return hashParams(hash).get('key') || DEFAULT_KEY;
}

/** `hash` with its `key` parameter set to `key` (removed for `default`), the rest kept. */
export function hashWithKey(hash: string, key: string): string {
  const at = hash.indexOf('?');
  const path = at < 0 ? hash : hash.slice(0, at);
  const params = hashParams(hash);
  if (key === DEFAULT_KEY) params.delete('key');
  else params.set('key', key);
  const query = params.toString();
  return `${path || '#/'}${query ? `?${query}` : ''}`;
}

/** The address of the compare view of `ids` (keeping the chosen key). */
export function compareHref(ids: string[], key: string = DEFAULT_KEY): string {
  return hashWithKey(`#/compare/${ids.map(encodeURIComponent).join(',')}`, key);
}

/** The trial ids of a compare address's list (`a,b,c`), without repeats, and what is wrong with them. */
export function parseCompareIds(text: string): { ids: string[]; error: string | null } {
  const ids: string[] = [];
  for (const part of text.split(',')) {
    let id = part.trim();
    try {
      id = decodeURIComponent(id);
    } catch {
      // not percent-encoded: the text as it is
    }
    if (id && !ids.includes(id)) ids.push(id);
  }
  let error: string | null = null;
  if (ids.length > COMPARE_MAX) {
    error = `Compare takes ${COMPARE_MIN} to ${COMPARE_MAX} trials; ${ids.length} were given. Select at most ${COMPARE_MAX}.`;
  } else if (ids.length < COMPARE_MIN) {
    error = `Compare takes ${COMPARE_MIN} to ${COMPARE_MAX} trials; ${ids.length === 0 ? 'none was' : 'only 1 was'} given.`;
  }
  return { ids, error };
}

/** The parameter names whose values are not all the same among `trials` (a missing one differs). */
export function differingParams(trials: Trial[], names: string[]): Set<string> {
  const differing = new Set<string>();
  for (const name of names) {
    const shown = new Set(trials.map((t) => (name in t.params ? formatParam(t.params[name] as Json) : '\u0000missing')));
    if (shown.size > 1) differing.add(name);
  }
  return differing;
}

/** The best intermediate result of a curve in the optimize mode; undefined when it has none. */
export function bestIntermediate(series: Series, mode: 'maximize' | 'minimize'): number | undefined {
  let best: number | undefined;
  for (const value of series.value) {
    if (!Number.isFinite(value)) continue;
    if (best === undefined || (mode === 'maximize' ? value > best : value < best)) best = value;
  }
  return best;
}
