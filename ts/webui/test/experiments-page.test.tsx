// @vitest-environment happy-dom
// The experiments page shows what the server says (state, the crashed note, the actions that
// apply) and asks before a stop or a delete: nothing is sent until the user confirms.
import { render } from 'preact';
import { act } from 'preact/test-utils';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Api } from '../src/data/api';
import type { ExperimentRecord } from '../src/data/experiments';
import { isHomeMode } from '../src/data/experiments';
import { ExperimentsPage } from '../src/ui/ExperimentsPage';

function record(id: string, state: string, extra: Partial<ExperimentRecord> = {}): ExperimentRecord {
  const ended = state !== 'RUNNING';
  return {
    id, name: `exp ${id}`, state, platform: 'local', best: null, trials: { SUCCEEDED: 2 }, trialCount: 2,
    startTime: 0, endTime: ended ? 1000 : null, duration: 1, open: `/experiments/${id}/`,
    openKind: ended ? 'read-only' : 'live', actions: { stop: !ended, resume: ended, delete: ended },
    resumeCommand: ended ? `expctl resume ${id}` : null, problem: null, ...extra,
  };
}

async function settle() {
  for (let i = 0; i < 5; i++) await act(() => new Promise((resolve) => setTimeout(resolve, 0)));
}

describe('ExperimentsPage', () => {
  let root: HTMLElement;
  let sent: string[];
  beforeEach(() => {
    root = document.createElement('div');
    document.body.appendChild(root);
    sent = [];
  });
  afterEach(() => {
    render(null, root);
    root.remove();
  });

  function mount(records: ExperimentRecord[]) {
    const api = new Api('', async (input, init) => {
      const method = init?.method ?? 'GET';
      if (method !== 'GET') sent.push(`${method} ${input}`);
      const body = method === 'GET' ? { experiments: records, registry: '/r' } : { message: 'done' };
      return new Response(JSON.stringify(body));
    });
    act(() => render(<ExperimentsPage api={api} />, root));
  }

  const byTestId = (id: string) => root.querySelector(`[data-testid="${id}"]`);

  it('shows each row as the server says, a crashed one with the command that resumes it', async () => {
    mount([record('run1', 'RUNNING'), record('crash1', 'CRASHED', { endTime: null })]);
    await settle();
    expect(byTestId('experiments-count')?.textContent).toBe('2');
    expect(byTestId('experiment-state-crash1')?.textContent).toBe('CRASHED');
    expect(byTestId('experiment-crashed-crash1')?.textContent).toContain('expctl resume crash1');
    expect(byTestId('experiment-crashed-run1')).toBeNull();
    expect(byTestId('experiment-delete-run1')).toBeNull();
    expect(byTestId('experiment-stop-run1')).not.toBeNull();
    expect(byTestId('experiment-open-run1')?.getAttribute('data-kind')).toBe('live');
    expect(root.querySelector('h1')?.textContent).toContain('All experiments');
  });

  it('deletes only after the confirmation', async () => {
    mount([record('done1', 'DONE')]);
    await settle();
    act(() => (byTestId('experiment-delete-done1') as HTMLButtonElement).click());
    expect(byTestId('confirm-dialog')).not.toBeNull();
    expect(sent).toEqual([]);
    act(() => (byTestId('confirm') as HTMLButtonElement).click());
    await settle();
    expect(sent).toEqual(['DELETE api/v1/expmgr/experiments/done1']);
  });

  it('knows expctl ui\'s page from the meta tag the server adds', () => {
    expect(isHomeMode(document)).toBe(false);
    const meta = document.createElement('meta');
    meta.name = 'expmgr-mode';
    meta.content = 'home';
    document.head.appendChild(meta);
    expect(isHomeMode(document)).toBe(true);
    meta.remove();
  });
});
