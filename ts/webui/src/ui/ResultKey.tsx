// The chosen key of dict results ({"default": 0.9, "loss": 0.3}), kept in the page's address
// (`?key=loss` after the route) so that a link shows the same; the keys are the server's.
import { useEffect, useState } from 'preact/hooks';
import { DEFAULT_KEY, hashWithKey, keyFromHash } from '../data/analysis';
import { useApp } from './app-context';
import { useSubscribed } from './hooks';

/** The result key of the address, and a setter that writes it there. */
export function useResultKey(): [string, (key: string) => void] {
  const [key, setKey] = useState(() => keyFromHash(location.hash));
  useEffect(() => {
    const onChange = () => setKey(keyFromHash(location.hash));
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  const choose = (next: string) => {
    // replace, not push: choosing a key is not a page to go back to
    history.replaceState(null, '', hashWithKey(location.hash, next));
    dispatchEvent(new HashChangeEvent('hashchange')); // every view of the key follows
    setKey(next);
  };
  return [key, choose];
}

/** The server's result keys (`default` first). */
export function useResultKeys(): string[] {
  const { store } = useApp();
  useSubscribed(store, () => store.experimentVersion);
  const keys = store.experiment?.resultKeys;
  return Array.isArray(keys) && keys.length ? keys : [DEFAULT_KEY];
}

/** A select of the result keys; shown only when there is more than one to choose from. */
export function KeyChooser({ value, onChange, testid = 'key-chooser' }: {
  value: string; onChange: (key: string) => void; testid?: string;
}) {
  const keys = useResultKeys();
  if (keys.length < 2 && value === DEFAULT_KEY) return null;
  const options = keys.includes(value) ? keys : [...keys, value];
  return (
    <label class="key-chooser">Result key{' '}
      <select value={value} data-testid={testid} onChange={(e) => onChange(e.currentTarget.value)}>
        {options.map((key) => <option value={key}>{key}</option>)}
      </select>
    </label>
  );
}
