// The page: a header with the experiment's name, state and connection, tabs, and the routed view.
import { useEffect } from 'preact/hooks';
import { EXPERIMENT_FINISHED } from '../data/parse';
import { useApp } from './app-context';
import { ChartsPage } from './ChartsPage';
import { ExperimentsPage } from './ExperimentsPage';
import { loadCharts } from './LazyChart';
import { useRoute, useSubscribed } from './hooks';
import { LogsPage } from './LogsPage';
import { Overview } from './Overview';
import { StateBadge } from './StateBadge';
import { TrialDetail } from './TrialDetail';
import { TrialsPage } from './TrialsPage';

const TABS = [
  ['overview', 'Overview'],
  ['trials', 'Trials'],
  ['charts', 'Charts'],
  ['logs', 'Logs'],
  ['experiments', 'All experiments'],
] as const;

export function App() {
  const { store, live, api } = useApp();
  const route = useRoute();
  const connection = useSubscribed(live, () => live.state);
  const experimentVersion = useSubscribed(store, () => store.experimentVersion);
  const loaded = useSubscribed(store, () => store.loaded);
  const exp = store.experiment;
  const name = exp?.params?.experimentName;

  useEffect(() => {
    document.title = exp ? `${name ?? exp.id} · ${exp.status} · expmgr` : 'expmgr';
  }, [experimentVersion]);

  // A running experiment's server stops when the experiment ends: fetch the chart code
  // once the page is idle, so that charts still draw after that.
  const readOnly = useSubscribed(store, () => store.readOnly);
  useEffect(() => {
    if (!loaded || readOnly !== false) return;
    const prefetch = () => void loadCharts().catch(() => undefined);
    const idle = window.requestIdleCallback?.(prefetch, { timeout: 5000 });
    const timer = idle === undefined ? window.setTimeout(prefetch, 2000) : undefined;
    return () => {
      if (idle !== undefined) window.cancelIdleCallback(idle);
      if (timer !== undefined) window.clearTimeout(timer);
    };
  }, [loaded, readOnly]);
  const ended = exp !== null && exp !== undefined && EXPERIMENT_FINISHED.has(exp.status);

  const active = route.page === 'trial' ? 'trials' : route.page;
  let page;
  switch (route.page) {
    case 'trials': page = <TrialsPage />; break;
    case 'trial': page = <TrialDetail key={route.trialId} trialId={route.trialId} />; break;
    case 'charts': page = <ChartsPage />; break;
    case 'logs': page = <LogsPage />; break;
    case 'experiments': page = <ExperimentsPage api={api} />; break;
    default: page = <Overview />;
  }

  return (
    <div class="app" data-testid="app" data-loaded={loaded ? 'true' : 'false'}>
      <header class="topbar">
        <div class="brand">expmgr</div>
        <div class="exp-title">
          <span class="exp-name" data-testid="experiment-name">{name ?? ''}</span>
          <span class="muted" data-testid="experiment-id">{exp?.id ?? ''}</span>
          {exp && <StateBadge state={exp.status} testid="status" />}
        </div>
        <nav class="nav">
          {TABS.map(([key, label]) => (
            <a href={`#/${key}`} class={active === key ? 'active' : ''} data-testid={`nav-${key}`}>{label}</a>
          ))}
        </nav>
        <div class="conn">
          {store.storeUnwritable && (
            <span class="badge paused" data-testid="store-badge" title={store.storeUnwritable}>launching paused</span>
          )}
          {store.readOnly && <span class="badge readonly" data-testid="readonly-badge" title="expctl view: read-only">view only</span>}
          {connection === 'offline' && (
            <span class="badge offline" data-testid="offline-badge"
              title={ended ? `The experiment ended and its server stopped; \`expctl view ${exp?.id ?? '<id>'}\` serves it again`
                : 'The live connection dropped; reconnecting'}>{ended ? 'ended · offline' : 'offline'}</span>
          )}
          {connection === 'online' && <span class="badge live" data-testid="live-badge" title="Updates arrive live">live</span>}
        </div>
      </header>
      <main>{page}</main>
    </div>
  );
}
