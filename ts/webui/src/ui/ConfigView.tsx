// The config on the overview: compact JSON (short arrays and objects on one line), folded away
// until opened, with its downloads.
import { useMemo } from 'preact/hooks';
import { compactJson } from '../data/searchSpace';
import type { Json } from '../data/types';
import { useApp } from './app-context';
import { ConfigDownloads } from './Downloads';
import { useSubscribed } from './hooks';

const OPEN_UP_TO_LINES = 30;

export function ConfigView() {
  const { store } = useApp();
  const experimentVersion = useSubscribed(store, () => store.experimentVersion);
  const text = useMemo(() => compactJson((store.experiment?.params ?? null) as Json), [experimentVersion]);
  const lines = text.split('\n').length;
  return (
    <div class="card wide">
      <div class="card-head">
        <h2>Config</h2>
        <ConfigDownloads />
      </div>
      {/* a short config open, a long one folded */}
      <details class="config-details" open={lines <= OPEN_UP_TO_LINES}>
        <summary>{lines} lines</summary>
        <pre class="json" data-testid="config" tabIndex={0} role="region" aria-label="The experiment's config">{text}</pre>
      </details>
    </div>
  );
}
