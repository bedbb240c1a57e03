// How times, durations and numbers are shown.

/**
 * A duration for a person, with the precision that matters at its size: `4ms` below 10 ms,
 * two significant digits below 10 s (`0.65s`, `2.0s`), whole seconds below a minute (`42s`),
 * then two or three units with the zero ones dropped (`1m 05s`, `2h 03m`, `1h 05s`, `2d 3h`, `4000d`).
 */
export function formatDuration(seconds: number | undefined): string {
  if (seconds === undefined || !Number.isFinite(seconds)) return '';
  const exact = Math.max(0, seconds);
  if (exact === 0) return '0s';
  if (exact < 0.01) return `${Math.round(exact * 1000)}ms`;
  if (exact < 9.95) return `${exact.toPrecision(2)}s`;
  const s = Math.round(exact);
  if (s < 60) return `${s}s`;
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  // the largest unit, then the smaller ones that are not zero (seconds not counted in days)
  const parts: [number, string][] = d ? [[d, 'd'], [h, 'h'], [m, 'm']] : h ? [[h, 'h'], [m, 'm'], [sec, 's']]
    : [[m, 'm'], [sec, 's']];
  return parts.filter(([n], i) => i === 0 || n > 0)
    .map(([n, unit], i) => `${i === 0 || unit === 'd' || unit === 'h' ? n : pad(n)}${unit}`).join(' ');
}

/** The time a manager was away, as the overview's line says it: `3m 12s (2 times)`, `45s (once)`. */
export function formatAway(seconds: number, times: number): string {
  return `${formatDuration(seconds)} (${times === 1 ? 'once' : `${times} times`})`;
}

function pad(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

export function formatTime(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '';
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** From one time to another (ms), the end's date left out when it is the start's:
 *  `2025-03-01 10:00:00 to 10:03:12`, `2025-03-01 23:50:00 to 2025-03-02 00:10:00`. */
export function formatTimeSpan(fromMs: number, toMs: number): string {
  const from = formatTime(fromMs);
  const to = formatTime(toMs);
  return `${from} to ${to.slice(0, 10) === from.slice(0, 10) ? to.slice(11) : to}`;
}

/** A number of bytes for a person: 512 bytes, 3.4 KiB, 812 MiB, 1.2 GiB. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = '';
  for (const u of units) {
    value /= 1024;
    unit = u;
    if (value < 1024) break;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${unit}`;
}
