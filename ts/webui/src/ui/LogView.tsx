// A tailed file: its last bytes, then whatever the server pushes, one virtual row per line.
import { useEffect, useMemo, useReducer, useState } from 'preact/hooks';
import { LEVELS, NOTE_LEVEL } from '../data/logs';
import type { Follower } from '../data/live';
import type { LogFile } from '../data/types';
import { testids, tid } from '../testids';
import { useApp } from './app-context';
import { formatBytes } from './format';
import { VirtualList, slotKey } from './VirtualList';

const LINE_HEIGHT = 18;

export interface LogViewProps {
  file: LogFile;
  trial: string | null;
  /** Lines below this level (an index in LEVELS) are hidden; 0 shows all. */
  minLevel?: number;
  search?: string;
  /** Shrinks to the lines when there are few (else the view's CSS height). */
  fitContent?: boolean;
}

export function LogView({ file, trial, minLevel = 0, search = '', fitContent = false }: LogViewProps) {
  const { live } = useApp();
  const [follower, setFollower] = useState<Follower | null>(null);
  const [, force] = useReducer((n: number) => n + 1, 0);

  useEffect(() => {
    const { follower: f, release } = live.follow(file, trial);
    setFollower(f);
    let frame = 0;
    const listener = () => {
      if (!frame) frame = requestAnimationFrame(() => { frame = 0; force(0); });
    };
    f.listeners.add(listener);
    return () => {
      f.listeners.delete(listener);
      if (frame) cancelAnimationFrame(frame);
      release();
    };
  }, [live, file, trial]);

  const lines = follower?.lines;
  const version = lines?.version ?? -1;
  const selected = useMemo(() => (lines ? lines.select(minLevel, search) : null), [lines, version, minLevel, search]);
  const count = selected ? selected.length : lines?.count() ?? 0;

  return (
    <div class="logview">
      {follower?.truncatedHead && <p class="muted small">Showing the last part of the file.</p>}
      {follower && <RotationNotice follower={follower} file={file} />}
      {follower && (follower.skippedBytes > 0 || follower.skippedUnknown) && (
        <p class="log-notice small" data-testid={testids.logSkipped}>
          {follower.skippedBytes > 0 && `… ${formatBytes(follower.skippedBytes)} skipped to keep up: the file grows faster than it can be shown, so the view jumps to its end (marked in the text). `}
          {follower.skippedUnknown && 'Some output was rotated away before it could be shown.'}
        </p>
      )}
      {follower?.error && <p class="field-error">{follower.error}</p>}
      <VirtualList
        class="log"
        style={fitContent ? { height: `${Math.min(420, Math.max(72, count * LINE_HEIGHT + 24))}px` } : undefined}
        testid={tid.logFile(file)}
        label={trial ? `${file} of trial ${trial}` : file}
        attrs={{ lines: lines?.count() ?? 0, next: follower?.tail.next ?? -1 }}
        count={count}
        rowHeight={LINE_HEIGHT}
        overscan={20}
        stickToBottom
        renderRow={(i, top) => {
          const index = selected ? selected[i] : i;
          const level = lines!.levelOf(index);
          const kind = level === NOTE_LEVEL ? 'NOTE' : LEVELS[level] ?? 'INFO';
          return (
            <div key={slotKey(i)} class={`logline lvl-${kind}`} style={{ top: `${top}px` }}>
              {lines!.line(index) || ' '}
            </div>
          );
        }}
      />
      {count === 0 && (
        // one empty state, inside the (empty) box rather than a second line under it
        <p class="log-empty-state" data-testid={testids.logEmpty}>
          {!follower || follower.isSyncing() ? 'Loading…' : (lines?.count() ?? 0) > 0 ? 'No line matches.'
            : `Nothing written to ${file} yet.`}
        </p>
      )}
    </div>
  );
}

/** What rotation did to the log before the part shown: the server's facts, as it counted them. */
function RotationNotice({ follower, file }: { follower: Follower; file: LogFile }) {
  const { rotated, droppedBytes } = follower;
  if (!rotated && !droppedBytes) return null;
  const kept = rotated === 1 ? `${file}.1` : `${file}.1 … ${file}.${rotated}`;
  return (
    <p class="log-notice small" data-testid={testids.logRotated} data-rotated={rotated} data-dropped={droppedBytes}>
      Earlier output was rotated
      {rotated > 0 && `: ${rotated} older ${rotated === 1 ? 'file is' : 'files are'} kept (${kept}; expctl log prints them)`}
      {rotated > 0 && droppedBytes > 0 && ', and'}
      {droppedBytes > 0 && ` ${formatBytes(droppedBytes)} of the earliest output was deleted`}
      {' '}(the config's logMaxSize and logFilesKept).
    </p>
  );
}
