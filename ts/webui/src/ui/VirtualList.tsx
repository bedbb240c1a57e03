// A scrolling list that renders only the rows in view (plus a few): every row has the same
// height, so the row at a scroll position is a division away and 10,000 rows cost what 40 do.
// The rendered range changes only when a row enters or leaves the view, not on every pixel.
import type { ComponentChildren, VNode } from 'preact';
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';

export interface VirtualListProps {
  count: number;
  rowHeight: number;
  /** Renders row `index` at `top` px, keyed by `slotKey(index)`. */
  renderRow: (index: number, top: number) => VNode;
  /** Sticky content above the rows (e.g. a table header), `headerHeight` px tall. */
  header?: ComponentChildren;
  headerHeight?: number;
  /** Width of the content, for horizontal scrolling (default: the container's). */
  width?: number;
  overscan?: number;
  /** Keeps the view at the end while rows are appended, unless the user scrolled up. */
  stickToBottom?: boolean;
  class?: string;
  style?: Record<string, string>;
  testid?: string;
  attrs?: Record<string, string | number>;
  /** Names the list for screen readers and makes it reachable by the keyboard (Tab, then the
   * arrow keys scroll it): for a list with nothing focusable in it, such as a log. */
  label?: string;
}

/**
 * A key for row `index` that reuses DOM nodes while scrolling: the rows in view take the keys
 * of the rows that left it, so Preact patches text instead of building new elements. Unique
 * among rendered rows while fewer than `pool` are rendered (a window 7,000 px tall of 28 px rows).
 */
export function slotKey(index: number, pool = 256): number {
  return index % pool;
}

export function visibleRange(scrollTop: number, viewport: number, rowHeight: number, count: number,
                             overscan: number): [number, number] {
  const first = Math.max(0, Math.floor(scrollTop / rowHeight) - overscan);
  const last = Math.min(count, Math.ceil((scrollTop + viewport) / rowHeight) + overscan);
  return [first, Math.max(first, last)];
}

export function VirtualList(props: VirtualListProps) {
  const { count, rowHeight, renderRow, header, headerHeight = 0, width, overscan = 10, stickToBottom } = props;
  const ref = useRef<HTMLDivElement>(null);
  const [range, setRange] = useState<[number, number]>([0, Math.min(count, 60)]);
  const atBottom = useRef(true);
  const frame = useRef(0);

  const measure = useCallback(() => {
    frame.current = 0;
    const el = ref.current;
    if (!el) return;
    const body = Math.max(0, el.scrollTop - headerHeight);
    const viewport = el.clientHeight || 600;
    const next = visibleRange(body, viewport, rowHeight, count, overscan);
    atBottom.current = el.scrollTop + el.clientHeight >= el.scrollHeight - rowHeight;
    setRange((prev) => (prev[0] === next[0] && prev[1] === next[1] ? prev : next));
  }, [count, rowHeight, headerHeight, overscan]);

  const onScroll = useCallback(() => {
    if (!frame.current) frame.current = requestAnimationFrame(measure);
  }, [measure]);

  useLayoutEffect(() => {
    const el = ref.current;
    if (el && stickToBottom && atBottom.current) el.scrollTop = el.scrollHeight;
    measure();
  }, [count, measure, stickToBottom]);

  useEffect(() => {
    const el = ref.current;
    if (!el || typeof ResizeObserver === 'undefined') return undefined;
    const observer = new ResizeObserver(() => onScroll());
    observer.observe(el);
    return () => {
      observer.disconnect();
      if (frame.current) cancelAnimationFrame(frame.current);
      frame.current = 0;
    };
  }, [onScroll]);

  const rows: VNode[] = [];
  const last = Math.min(range[1], count);
  for (let i = Math.min(range[0], last); i < last; i++) rows.push(renderRow(i, i * rowHeight));

  const dataAttrs: Record<string, string | number> = {};
  if (props.attrs) for (const [k, v] of Object.entries(props.attrs)) dataAttrs[`data-${k}`] = v;

  return (
    <div ref={ref} class={`vlist ${props.class ?? ''}`} style={props.style} onScroll={onScroll} data-testid={props.testid}
         {...(props.label ? { tabIndex: 0, role: 'region', 'aria-label': props.label } : {})} {...dataAttrs}>
      {header}
      <div class="vlist-body" style={{ height: `${count * rowHeight}px`, width: width ? `${width}px` : undefined }}>
        {rows}
      </div>
    </div>
  );
}
