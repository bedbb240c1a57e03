// The experiment's own logs, tailed live and filtered by level.
import { useState } from 'preact/hooks';
import { LEVELS, type Level } from '../data/logs';
import type { LogFile } from '../data/types';
import { tid } from '../testids';
import { LogDownload } from './Downloads';
import { LogView } from './LogView';

const FILES: LogFile[] = ['experiment.log', 'dispatcher.log'];

export function LogsPage() {
  const [file, setFile] = useState<LogFile>('experiment.log');
  const [level, setLevel] = useState(0);
  const [search, setSearch] = useState('');
  return (
    <section class="page logs-page">
      <div class="filterbar">
        <div class="tabs">
          {FILES.map((f) => (
            <button type="button" class={`tab ${f === file ? 'active' : ''}`} data-testid={tid.logTab(f)}
                    onClick={() => setFile(f)}>{f}</button>
          ))}
        </div>
        <label>Level{' '}
          <select data-testid="log-level" value={level === 0 ? 'ALL' : LEVELS[level]}
                  onChange={(e) => setLevel(Math.max(0, LEVELS.indexOf(e.currentTarget.value as Level)))}>
            <option value="ALL">all</option>
            {LEVELS.slice(1, 4).map((name) => <option value={name}>{name} and above</option>)}
          </select>
        </label>
        <input placeholder="search" value={search} data-testid="log-search" onInput={(e) => setSearch(e.currentTarget.value)} />
        <LogDownload file={file} trial={null} />
      </div>
      <LogView key={file} file={file} trial={null} minLevel={level} search={search} />
    </section>
  );
}
