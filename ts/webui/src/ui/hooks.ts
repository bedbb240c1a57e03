// Small hooks: subscribing to the store, ticking clocks, hash routes, throttled versions.
import { Component, type ComponentType, type FunctionComponent } from 'preact';
import { useEffect, useReducer, useRef, useState } from 'preact/hooks';

interface Subscribable {
  subscribe(listener: () => void): () => void;
}

/** Re-renders when `read()` changes after the source emits (coalesced to one render a frame). */
export function useSubscribed<T>(source: Subscribable, read: () => T): T {
  const [, force] = useReducer((n: number) => n + 1, 0);
  const readRef = useRef(read);
  readRef.current = read;
  const last = useRef<T>(read());
  last.current = read();
  useEffect(() => {
    let frame = 0;
    const check = () => {
      frame = 0;
      if (!Object.is(readRef.current(), last.current)) force(0);
    };
    const unsubscribe = source.subscribe(() => {
      if (!frame) frame = requestAnimationFrame(check);
    });
    check();
    return () => {
      unsubscribe();
      if (frame) cancelAnimationFrame(frame);
    };
  }, [source]);
  return last.current;
}

/** The time (ms), updated every `intervalMs` while `active`. */
export function useNow(intervalMs = 1000, active = true): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!active) return undefined;
    const timer = setInterval(() => setNow(Date.now()), intervalMs);
    return () => clearInterval(timer);
  }, [intervalMs, active]);
  return now;
}

/** `value`, but changing at most once per `ms` (the latest value always arrives). */
export function useThrottled<T>(value: T, ms: number): T {
  const [shown, setShown] = useState(value);
  const lastAt = useRef(0);
  useEffect(() => {
    if (Object.is(value, shown)) return undefined;
    const wait = lastAt.current + ms - Date.now();
    if (wait <= 0) {
      lastAt.current = Date.now();
      setShown(value);
      return undefined;
    }
    const timer = setTimeout(() => {
      lastAt.current = Date.now();
      setShown(value);
    }, wait);
    return () => clearTimeout(timer);
  }, [value, shown, ms]);
  return shown;
}

export type Route =
  | { page: 'overview' }
  | { page: 'trials'; search: string }
  | { page: 'trial'; trialId: string }
  | { page: 'charts' }
  | { page: 'logs' }
  | { page: 'compare'; ids: string }
  | { page: 'experiments' };

export function parseRoute(hash: string): Route {
  // after `?`: the page's settings (the result key: analysis.ts; the table's sort and filters: trials-url.ts)
  const [path, search = ''] = hash.replace(/^#\/?/, '').split(/\?(.*)/s);
  const [head, ...rest] = path.split('/');
  switch (head) {
    case 'trials':
      return rest.length && rest[0] ? { page: 'trial', trialId: decodeURIComponent(rest[0]) } : { page: 'trials', search };
    case 'charts':
      return { page: 'charts' };
    case 'logs':
      return { page: 'logs' };
    case 'compare':
      return { page: 'compare', ids: rest.join('/') };
    case 'experiments':
      return { page: 'experiments' };
    default:
      return { page: 'overview' };
  }
}

const ROUTE_REPLACED = 'expmgr:route-replaced';

export function useRoute(): Route {
  const [hash, setHash] = useState(() => location.hash);
  useEffect(() => {
    const onChange = () => setHash(location.hash);
    addEventListener('hashchange', onChange);
    addEventListener(ROUTE_REPLACED, onChange);
    return () => {
      removeEventListener('hashchange', onChange);
      removeEventListener(ROUTE_REPLACED, onChange);
    };
  }, []);
  return parseRoute(hash);
}

/** Shows `hash` in the address without a new history entry (a filter typed is not a page to go back to). */
export function replaceRoute(hash: string): void {
  if (hash === location.hash || (hash === '#/trials' && location.hash === '#/trials?')) return;
  history.replaceState(history.state, '', hash);
  dispatchEvent(new Event(ROUTE_REPLACED));
}

export function trialHref(id: string): string {
  return `#/trials/${encodeURIComponent(id)}`;
}

function shallowEqual(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  for (const key in a) if (!Object.is(a[key], b[key])) return false;
  for (const key in b) if (!(key in a)) return false;
  return true;
}

/** A component that re-renders only when a prop changes (Preact's `memo` without preact/compat). */
export function memo<P extends object>(render: FunctionComponent<P>): ComponentType<P> {
  class Memo extends Component<P> {
    shouldComponentUpdate(next: P): boolean {
      return !shallowEqual(this.props as Record<string, unknown>, next as Record<string, unknown>);
    }

    render(props: P) {
      return render(props);
    }
  }
  return Memo as unknown as ComponentType<P>;
}
