// Answers the analysis views fetch from the server (the best trials under a key, importance),
// fetched again when the trials change (at most once a second) or the question does.
import { useEffect, useState } from 'preact/hooks';
import { DEFAULT_KEY } from '../data/analysis';
import type { ImportanceAnswer, TopTrialsAnswer } from '../data/types';
import { useApp } from './app-context';
import { useSubscribed, useThrottled } from './hooks';

export interface Fetched<T> {
  answer: T | null;
  error: string | null;
  loading: boolean;
}

function useFetched<T>(fetcher: () => Promise<T>, deps: unknown[], enabled = true, everyMs = 1000): Fetched<T> {
  const { store } = useApp();
  const trialsVersion = useThrottled(useSubscribed(store, () => store.trialsVersion), everyMs);
  const loaded = useSubscribed(store, () => store.loaded);
  const [state, setState] = useState<Fetched<T>>({ answer: null, error: null, loading: enabled });
  useEffect(() => {
    if (!enabled || !loaded) return undefined;
    let current = true;
    setState((s) => ({ ...s, loading: true }));
    fetcher().then(
      (answer) => { if (current) setState({ answer, error: null, loading: false }); },
      (error: unknown) => { if (current) setState({ answer: null, error: String((error as Error).message ?? error), loading: false }); },
    );
    return () => { current = false; };
  }, [trialsVersion, loaded, enabled, ...deps]);
  return state;
}

/** The `count` best trials under `key` (the server's rule); off when `enabled` is false. */
export function useTopTrials(key: string, count: number, enabled = true): Fetched<TopTrialsAnswer> {
  const { api } = useApp();
  return useFetched(() => api.topTrials(key, count), [key, count], enabled);
}

/** The id of the best trial under `key`: the experiment's `bestTrialId` for `default`, else the server's top 1. */
export function useBestTrialId(key: string): string | undefined {
  const { store } = useApp();
  useSubscribed(store, () => store.experimentVersion);
  const top = useTopTrials(key, 1, key !== DEFAULT_KEY);
  if (key === DEFAULT_KEY) return store.experiment?.bestTrialId ?? undefined;
  return top.answer?.key === key ? top.answer.trials[0]?.trialJobId : undefined;
}

export function useImportance(key: string): Fetched<ImportanceAnswer> {
  const { api } = useApp();
  // computed afresh each time (a tenth of a second at 10,000 trials): not more than every 5 s
  return useFetched(() => api.importance(key), [key], true, 5000);
}
