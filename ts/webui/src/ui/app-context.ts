// What every view reaches: the store, the live connection and the REST client.
import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { Api } from '../data/api';
import type { Live } from '../data/live';
import type { ExperimentData } from '../data/store';

export interface AppContext {
  store: ExperimentData;
  live: Live;
  api: Api;
}

export const AppCtx = createContext<AppContext | null>(null);

export function useApp(): AppContext {
  const ctx = useContext(AppCtx);
  if (!ctx) throw new Error('useApp outside <AppCtx.Provider>');
  return ctx;
}
