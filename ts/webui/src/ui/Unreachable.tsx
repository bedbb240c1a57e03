// What the page says when the experiment's server stops answering while the experiment was not
// ended: its state is unknown from then on (its process may have crashed), its duration stops,
// its controls are off, and the notice says how to run it again or look at it.
import { EXPERIMENT_FINISHED } from '../data/parse';
import { useApp } from './app-context';
import { formatTime } from './format';
import { useSubscribed } from './hooks';

/** When the server of an experiment that had not ended stopped answering (ms), or null while it answers. */
export function useUnreachableSince(): number | null {
  const { store, live } = useApp();
  const since = useSubscribed(live, () => live.unreachableSince);
  const status = useSubscribed(store, () => store.experiment?.status);
  return since !== null && status !== undefined && !EXPERIMENT_FINISHED.has(status) ? since : null;
}

/** Why the controls are off while the server does not answer. */
export const UNREACHABLE_REASON = 'The experiment\'s server does not answer, so nothing can be changed; '
  + 'the controls come back when it answers again.';

export function UnreachableNotice() {
  const { store } = useApp();
  const since = useUnreachableSince();
  if (since === null) return null;
  const id = store.experiment?.id ?? '<id>';
  const lastState = store.experiment?.status ?? 'unknown';
  return (
    <div class="unreachable-notice" role="alert" data-testid="unreachable-notice">
      <b>The experiment's server has not answered since {formatTime(since)}</b>, so its state is unknown
      (last known: {lastState}); the page shows what it knew then and reconnects when the server answers.
      If the experiment's process crashed, <code>expctl resume {id}</code> runs it again, and{' '}
      <code>expctl view {id}</code> shows it as it was.
    </div>
  );
}
