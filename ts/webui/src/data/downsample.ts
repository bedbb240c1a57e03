// Downsampling of line data for charts: Largest-Triangle-Three-Buckets (keeps the shape of a
// curve) and min/max buckets (keeps every extreme; for dense series such as durations).

/**
 * LTTB (Steinarsson 2013): `threshold` points chosen among (xs, ys), first and last kept.
 * Returns the input arrays themselves when they are short enough. NaN points are dropped first.
 */
export function lttb(xs: readonly number[], ys: readonly number[], threshold: number): [number[], number[]] {
  let px = xs as number[];
  let py = ys as number[];
  if (ys.some((y) => Number.isNaN(y))) {
    px = [];
    py = [];
    for (let i = 0; i < ys.length; i++) {
      if (!Number.isNaN(ys[i])) {
        px.push(xs[i]);
        py.push(ys[i]);
      }
    }
  }
  const n = px.length;
  if (threshold >= n || threshold <= 2) {
    if (threshold <= 2 && n > 2 && threshold > 0) {
      return threshold === 1 ? [[px[0]], [py[0]]] : [[px[0], px[n - 1]], [py[0], py[n - 1]]];
    }
    return [px.slice(), py.slice()];
  }
  const outX: number[] = [px[0]];
  const outY: number[] = [py[0]];
  const every = (n - 2) / (threshold - 2);
  let a = 0;
  for (let i = 0; i < threshold - 2; i++) {
    // the average of the next bucket is the third corner of the triangle
    const nextStart = Math.floor((i + 1) * every) + 1;
    const nextEnd = Math.min(Math.floor((i + 2) * every) + 1, n);
    let avgX = 0;
    let avgY = 0;
    for (let j = nextStart; j < nextEnd; j++) {
      avgX += px[j];
      avgY += py[j];
    }
    const count = nextEnd - nextStart;
    avgX /= count;
    avgY /= count;
    const start = Math.floor(i * every) + 1;
    const end = Math.floor((i + 1) * every) + 1;
    const ax = px[a];
    const ay = py[a];
    let maxArea = -1;
    let chosen = start;
    for (let j = start; j < end; j++) {
      const area = Math.abs((ax - avgX) * (py[j] - ay) - (ax - px[j]) * (avgY - ay));
      if (area > maxArea) {
        maxArea = area;
        chosen = j;
      }
    }
    outX.push(px[chosen]);
    outY.push(py[chosen]);
    a = chosen;
  }
  outX.push(px[n - 1]);
  outY.push(py[n - 1]);
  return [outX, outY];
}

/**
 * Min/max buckets: (xs, ys) split into `buckets` runs of equal length; each run gives its
 * minimum and maximum point, in x order. At most 2 * buckets points.
 */
export function minMaxBuckets(xs: readonly number[], ys: readonly number[], buckets: number): [number[], number[]] {
  const n = xs.length;
  if (n <= 2 * buckets || buckets < 1) return [xs.slice(), ys.slice()];
  const outX: number[] = [];
  const outY: number[] = [];
  const size = n / buckets;
  for (let b = 0; b < buckets; b++) {
    const start = Math.floor(b * size);
    const end = Math.min(Math.floor((b + 1) * size), n);
    let lo = -1;
    let hi = -1;
    for (let i = start; i < end; i++) {
      if (Number.isNaN(ys[i])) continue;
      if (lo < 0 || ys[i] < ys[lo]) lo = i;
      if (hi < 0 || ys[i] > ys[hi]) hi = i;
    }
    if (lo < 0) continue;
    const first = Math.min(lo, hi);
    const second = Math.max(lo, hi);
    outX.push(xs[first]);
    outY.push(ys[first]);
    if (second !== first) {
      outX.push(xs[second]);
      outY.push(ys[second]);
    }
  }
  return [outX, outY];
}

/**
 * Points for each of `count` curves so that all of them together stay within `budget`
 * points (each at least `floor`).
 */
export function perCurveBudget(count: number, budget: number, floor = 8): number {
  if (count <= 0) return budget;
  return Math.max(floor, Math.floor(budget / count));
}
