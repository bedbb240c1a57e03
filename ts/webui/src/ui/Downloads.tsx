// Download links: the results (as `expctl experiment export` writes them), the config, and a log
// file. The server makes each file and names it (Content-Disposition); these are plain links, so a
// large log is streamed to disk by the browser rather than held by the page.
import type { LogFile } from '../data/types';
import { useApp } from './app-context';

const DOWNLOAD = 'api/v1/expmgr/download';

export function ResultsDownloads() {
  const { api } = useApp();
  return (
    <span class="downloads" role="group" aria-label="Download results">
      <span class="muted">Results</span>
      <a href={api.url(`${DOWNLOAD}/results.csv`)} download data-testid="download-results-csv">CSV</a>
      <a href={api.url(`${DOWNLOAD}/results.json`)} download data-testid="download-results-json">JSON</a>
    </span>
  );
}

export function ConfigDownloads() {
  const { api } = useApp();
  return (
    <span class="downloads" role="group" aria-label="Download the config">
      <span class="muted">Download</span>
      <a href={api.url(`${DOWNLOAD}/config.yml`)} download data-testid="download-config-yml">YAML</a>
      <a href={api.url(`${DOWNLOAD}/config.json`)} download data-testid="download-config-json">JSON</a>
    </span>
  );
}

/** The whole file (its rotated parts first), as the server has it now. */
export function LogDownload({ file, trial }: { file: LogFile; trial: string | null }) {
  const { api } = useApp();
  const query = trial === null ? '' : `?trial=${encodeURIComponent(trial)}`;
  return (
    <a class="download-link" href={api.url(`${DOWNLOAD}/logs/${encodeURIComponent(file)}${query}`)} download
       data-testid="download-log">Download {file}</a>
  );
}
