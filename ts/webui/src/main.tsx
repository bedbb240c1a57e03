// Entry point: builds the store, the REST client and the live connection, and renders the app;
// under `expctl ui` (the server says so in the page), the experiments page alone.
import { render } from 'preact';
import { Api } from './data/api';
import { isHomeMode } from './data/experiments';
import { Live } from './data/live';
import { ExperimentData } from './data/store';
import { App } from './ui/App';
import { AppCtx } from './ui/app-context';
import { theme } from './ui/theme';
import { HomeApp } from './ui/HomeApp';
import './style.css';
import './dark.css';
import './narrow.css';

theme.start(); // before the first paint: no light flash in dark mode
const api = new Api();
const root = document.getElementById('root')!;

if (isHomeMode()) {
  render(<HomeApp api={api} />, root);
} else {
  const store = new ExperimentData();
  const wsUrl = new URL('api/v1/expmgr/ws', location.href);
  wsUrl.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  wsUrl.hash = '';
  const live = new Live({ api, store, wsUrl: wsUrl.href });
  live.start();

  render(
    <AppCtx.Provider value={{ api, store, live }}>
      <App />
    </AppCtx.Provider>,
    root,
  );
}
