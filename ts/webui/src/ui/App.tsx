// The page: a header with the experiment's name, state and connection, tabs, and the routed view.
import { useEffect } from 'preact/hooks';
import { EXPERIMENT_FINISHED } from '../data/parse';
import { useApp } from './app-context';
import { ChartsPage } from './ChartsPage';
import { ComparePage } from './ComparePage';
import { ExperimentsPage } from './ExperimentsPage';
import { loadCharts } from './LazyChart';
import { useRoute, useSubscribed } from './hooks';
import { LogsPage } from './LogsPage';
import { Overview } from './Overview';
import { formatTime } from './format';
import { StateBadge } from './StateBadge';
import { ThemeSelect } from './ThemeSelect';
import { TrialDetail } from './TrialDetail';
import { TrialsPage } from './TrialsPage';
import { UnreachableNotice, useUnreachableSince } from './Unreachable';

const TABS = [
  ['overview', 'Overview'],
  ['trials', 'Trials'],
  ['charts', 'Charts'],
  ['logs', 'Logs'],
  ['experiments', 'All experiments'],
] as const;

/** Each page's one h1 (read by screen readers; the tabs show it to the eye). The trial page has its own. */
const PAGE_TITLES: Record<string, string> = { overview: 'Overview', trials: 'Trials', charts: 'Charts', logs: 'Logs' };

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
  const unreachableSince = useUnreachableSince();

  const active = route.page === 'trial' || route.page === 'compare' ? 'trials' : route.page;
  let page;
  switch (route.page) {
    case 'trials': page = <TrialsPage search={route.search} />; break;
    case 'trial': page = <TrialDetail key={route.trialId} trialId={route.trialId} />; break;
    case 'charts': page = <ChartsPage />; break;
    case 'logs': page = <LogsPage />; break;
    case 'compare': page = <ComparePage ids={route.ids} />; break;
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
          {exp && (unreachableSince === null ? <StateBadge state={exp.status} testid="status" />
            : <span class="badge state-UNKNOWN" data-testid="status" title={`last known: ${exp.status}`}>UNKNOWN</span>)}
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
          {connection === 'offline' && unreachableSince !== null && (
            <span class="badge offline" data-testid="offline-badge" title="The experiment's server does not answer">
              unreachable since {formatTime(unreachableSince)}</span>
          )}
          {connection === 'offline' && unreachableSince === null && (
            <span class="badge offline" data-testid="offline-badge"
              title={ended ? `The experiment ended and its server stopped; \`expctl view ${exp?.id ?? '<id>'}\` serves it again`
                : 'The live connection dropped; reconnecting'}>{ended ? 'ended · offline' : 'offline'}</span>
          )}
          {connection === 'online' && <span class="badge live" data-testid="live-badge" title="Updates arrive live">live</span>}
          <ThemeSelect />
        </div>
      </header>
      <main>
        {PAGE_TITLES[route.page] && <h1 class="visually-hidden">{PAGE_TITLES[route.page]} · {name ?? exp?.id ?? 'experiment'}</h1>}
        <UnreachableNotice />
        {page}
      </main>
    </div>
  );
}
