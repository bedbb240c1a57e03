// @vitest-environment happy-dom
// The trials table with 10,000 trials: only the rows in view are in the page, scrolling renders
// the rows of the new position, filters and sorting apply.
import { render } from 'preact';
import { act } from 'preact/test-utils';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Api } from '../src/data/api';
import { Live } from '../src/data/live';
import { ExperimentData } from '../src/data/store';
import { AppCtx } from '../src/ui/app-context';
import { useRoute } from '../src/ui/hooks';
import { TrialsPage } from '../src/ui/TrialsPage';
import { visibleRange } from '../src/ui/VirtualList';
import { changes, withFinal, trialView } from './helpers';

function makeStore(n: number): ExperimentData {
  const store = new ExperimentData();
  const trials = [];
  for (let i = 0; i < n; i++) {
    trials.push(trialView(`t${i}`, i, i % 4 ? 'SUCCEEDED' : 'FAILED',
      i % 4 ? withFinal(`t${i}`, (i * 37) % 1000 / 1000) : {},
      { lr: (i % 100) / 100, opt: i % 2 ? 'adam' : 'sgd' }));
  }
  store.apply(changes('c1', { full: true, trials }));
  return store;
}

describe('visibleRange', () => {
  it('covers the rows in view plus the overscan, within bounds', () => {
    expect(visibleRange(0, 600, 30, 10_000, 10)).toEqual([0, 30]);
    expect(visibleRange(30_000, 600, 30, 10_000, 10)).toEqual([990, 1030]);
    expect(visibleRange(299_400, 600, 30, 10_000, 10)).toEqual([9970, 10_000]);
    expect(visibleRange(0, 600, 30, 5, 10)).toEqual([0, 5]);
  });
});

/** The table at the address's route, as App shows it (its sort and filters live in the address). */
function RoutedTrials() {
  const route = useRoute();
  return <TrialsPage search={route.page === 'trials' ? route.search : ''} />;
}

describe('TrialsPage', () => {
  let root: HTMLElement;
  beforeEach(() => {
    history.replaceState(null, '', '#/trials');
    root = document.createElement('div');
    document.body.appendChild(root);
  });
  afterEach(() => {
    render(null, root);
    root.remove();
  });

  function mount(store: ExperimentData) {
    const api = new Api('', async () => new Response('{}'));
    const live = new Live({ api, store, wsUrl: 'ws://unused' });
    act(() => {
      render(<AppCtx.Provider value={{ store, live, api }}><RoutedTrials /></AppCtx.Provider>, root);
    });
  }

  const rows = () => [...root.querySelectorAll('[data-testid^="trial-row-"]')];

  it('renders only the rows in view of 10,000 trials', () => {
    mount(makeStore(10_000));
    expect(root.querySelector('[data-testid="trials-count"]')!.textContent).toBe('10000');
    const shown = rows();
    expect(shown.length).toBeGreaterThan(10);
    expect(shown.length).toBeLessThan(100);
    expect(shown[0].getAttribute('data-testid')).toBe('trial-row-t0');
    expect(shown[0].getAttribute('href')).toBe('#/trials/t0');
  });

  it('renders the rows of the scroll position', async () => {
    mount(makeStore(10_000));
    const table = root.querySelector('[data-testid="trials-table"]') as HTMLElement;
    await act(async () => {
      table.scrollTop = 64 + 5000 * 30; // header, then 5,000 rows of 30 px
      table.dispatchEvent(new Event('scroll'));
    });
    // the page renders on a later frame: wait for it (a loaded machine's frame is no fixed time)
    await vi.waitFor(() => expect(rows().map((r) => r.getAttribute('data-testid'))).toContain('trial-row-t5000'),
      { timeout: 20_000 });
    const ids = rows().map((r) => r.getAttribute('data-testid'));
    expect(ids).not.toContain('trial-row-t0');
    expect(ids.length).toBeLessThan(100);
  });

  it("has a Node column only when the server says the trials ran on several hosts", async () => {
    const store = new ExperimentData();
    const experiment = { id: 'exp1', execDuration: 1, params: {}, status: 'DONE' };
    const trials = [trialView('a', 0, 'SUCCEEDED', { host: 'node-1' }), trialView('b', 1, 'SUCCEEDED', { host: 'node-2' })];
    store.apply(changes('c1', { full: true, experiment, trials }));
    mount(store);
    expect(root.querySelector('[data-testid="sort-host"]')).toBeNull();
    expect(root.querySelector('[data-testid="trial-host-a"]')).toBeNull();
    await act(async () => {
      store.apply(changes('c2', { experiment: { ...experiment, multiHost: true } }));
    });
    await vi.waitFor(() => expect(root.querySelector('[data-testid="sort-host"]')).not.toBeNull(), { timeout: 20_000 });
    expect(root.querySelector('[data-testid="sort-host"]')!.textContent).toBe('Node');
    expect(root.querySelector('[data-testid="trial-host-a"]')!.textContent).toBe('node-1');
    expect(root.querySelector('[data-testid="trial-host-b"]')!.textContent).toBe('node-2');
    await act(async () => {
      const filter = root.querySelector('[data-testid="filter-host"]') as HTMLInputElement;
      filter.value = 'node-2';
      filter.dispatchEvent(new Event('input'));
    });
    expect(rows().map((r) => r.getAttribute('data-testid'))).toEqual(['trial-row-b']);
  });

  it('filters by state and parameter and sorts by result', async () => {
    mount(makeStore(200));
    const input = (testid: string) => root.querySelector(`[data-testid="${testid}"]`) as HTMLInputElement;
    await act(async () => {
      input('filter-state-FAILED').click();
    });
    expect(root.querySelector('[data-testid="trials-shown"]')!.textContent).toBe('50');
    await act(async () => {
      input('filter-state-FAILED').click();
      input('filter-param-opt').value = 'adam';
      input('filter-param-opt').dispatchEvent(new Event('input'));
    });
    expect(root.querySelector('[data-testid="trials-shown"]')!.textContent).toBe('100');
    await act(async () => {
      (root.querySelector('[data-testid="sort-final"]') as HTMLElement).click(); // best first
    });
    const finals = rows().slice(0, 5).map((r) => Number(r.querySelector('[data-testid^="trial-final-"]')!.textContent));
    expect(finals).toEqual([...finals].sort((a, b) => b - a));
    // the sixth cell: after the Pick (select to compare) column's
    expect(rows()[0].querySelector('.cell:nth-child(6)')!.textContent).toBe('adam');
  });

  it('keeps its sort and filters in the address, and takes them from it', async () => {
    history.replaceState(null, '', '#/trials?sort=final&dir=asc&state=SUCCEEDED&p.opt=adam');
    mount(makeStore(200));
    expect(root.querySelector('[data-testid="trials-shown"]')!.textContent).toBe('100');
    expect((root.querySelector('[data-testid="filter-param-opt"]') as HTMLInputElement).value).toBe('adam');
    const finals = rows().slice(0, 5).map((r) => Number(r.querySelector('[data-testid^="trial-final-"]')!.textContent));
    expect(finals).toEqual([...finals].sort((a, b) => a - b));
    await act(async () => {
      (root.querySelector('[data-testid="sort-final"]') as HTMLElement).click();
      const min = root.querySelector('[data-testid="filter-result-min"]') as HTMLInputElement;
      min.value = '0.5';
      min.dispatchEvent(new Event('input'));
    });
    expect(location.hash).toBe('#/trials?sort=final&dir=desc&state=SUCCEEDED&min=0.5&p.opt=adam');
  });

  it('sorts results best first on the first click under minimize (the server\'s optimize mode)', async () => {
    const store = makeStore(200);
    store.apply(changes('c2', { experiment: { id: 'exp1', execDuration: 1, params: {}, status: 'RUNNING', optimizeMode: 'minimize' } }));
    mount(store);
    await act(async () => {
      (root.querySelector('[data-testid="sort-final"]') as HTMLElement).click();
    });
    const finals = rows().slice(0, 5).map((r) => Number(r.querySelector('[data-testid^="trial-final-"]')!.textContent));
    expect(finals).toEqual([...finals].sort((a, b) => a - b));
    expect(location.hash).toBe('#/trials?sort=final&dir=asc');
  });
});
