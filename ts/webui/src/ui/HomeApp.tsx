// `expctl ui`'s page: the experiments of the whole registry, no single experiment to follow.
import { useEffect } from 'preact/hooks';
import type { Api } from '../data/api';
import { ExperimentsPage } from './ExperimentsPage';
import { ThemeSelect } from './ThemeSelect';

export function HomeApp({ api }: { api: Api }) {
  useEffect(() => {
    document.title = 'All experiments · expmgr';
  }, []);
  return (
    <div class="app" data-testid="app" data-loaded="true">
      <header class="topbar">
        <div class="brand">expmgr</div>
        <div class="conn"><ThemeSelect /></div>
      </header>
      <main><ExperimentsPage api={api} /></main>
    </div>
  );
}
