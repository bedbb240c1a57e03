// A search space read for people: one row per parameter (nested choices' parameters under their
// option), the values of a choice or the range of the others; and JSON laid out compactly
// (short arrays and objects on one line) for the config and the search space editor.
import type { Json } from './types';

export interface SpaceRow {
  /** Its path: `lr`, or `model.mlp.width` for a parameter of option `mlp` of choice `model`. */
  name: string;
  type: string;
  /** The choice's options, or the range: `[0.001, 0.1]`, `1 to 9 (integers)`, `mu 0, sigma 1`. */
  values: string;
  /** A choice's options (their `_name` for nested ones), as given; undefined for the other types. */
  options?: Json[];
}

const RANGE_NAMES: Record<string, string[]> = {
  quniform: ['low', 'high', 'q'], qloguniform: ['low', 'high', 'q'],
  normal: ['mu', 'sigma'], lognormal: ['mu', 'sigma'], qnormal: ['mu', 'sigma', 'q'], qlognormal: ['mu', 'sigma', 'q'],
};

function isNestedOption(option: Json): option is { [key: string]: Json } {
  return typeof option === 'object' && option !== null && !Array.isArray(option) && typeof option._name === 'string';
}

function shown(value: Json): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function describeValues(type: string, value: Json): string {
  if (!Array.isArray(value)) return shown(value);
  if (type === 'choice') return value.map((o) => (isNestedOption(o) ? String(o._name) : shown(o))).join(', ');
  if (type === 'randint' && value.length === 2 && typeof value[1] === 'number') {
    return `${shown(value[0])} to ${value[1] - 1} (integers)`;
  }
  const names = RANGE_NAMES[type];
  if (names && names.length === value.length) return names.map((n, i) => `${n} ${shown(value[i])}`).join(', ');
  return `${shown(value[0])} to ${shown(value[1])}`;
}

/** The rows of a search space in NNI's format, in its order; entries that are not parameters are skipped. */
export function searchSpaceRows(space: Json | undefined, prefix = ''): SpaceRow[] {
  if (!space || typeof space !== 'object' || Array.isArray(space)) return [];
  const rows: SpaceRow[] = [];
  for (const [name, entry] of Object.entries(space)) {
    if (!entry || typeof entry !== 'object' || Array.isArray(entry) || typeof entry._type !== 'string') continue;
    const type = entry._type;
    const value = entry._value ?? null;
    const path = prefix + name;
    rows.push({ name: path, type, values: describeValues(type, value),
                options: type === 'choice' && Array.isArray(value) ? value : undefined });
    if (type === 'choice' && Array.isArray(value)) {
      for (const option of value) {
        if (!isNestedOption(option)) continue;
        const { _name, ...nested } = option;
        rows.push(...searchSpaceRows(nested, `${path}.${String(_name)}.`));
      }
    }
  }
  return rows;
}

/** `value` as JSON on one line, with a space after each `,` and `:`. */
function oneLine(value: Json): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(oneLine).join(', ')}]`;
  return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${oneLine(v)}`).join(', ')}}`;
}

/** `value` as indented JSON in which an array or object that fits on its line (`width` characters, its
 *  indent and key included) stays on one line. */
export function compactJson(value: Json | undefined, width = 80): string {
  return value === undefined ? '' : layout(value, width, '', 0);
}

/** `value` laid out at `indent`, its first line starting `used` characters into the line. */
function layout(value: Json, width: number, indent: string, used: number): string {
  const flat = oneLine(value);
  if (used + flat.length <= width || value === null || typeof value !== 'object') return flat;
  const inner = indent + '  ';
  if (Array.isArray(value)) {
    if (!value.length) return '[]';
    return `[\n${value.map((item) => inner + layout(item, width, inner, inner.length)).join(',\n')}\n${indent}]`;
  }
  const entries = Object.entries(value);
  if (!entries.length) return '{}';
  return `{\n${entries.map(([k, v]) => {
    const head = `${inner}${JSON.stringify(k)}: `;
    return head + layout(v, width, inner, head.length);
  }).join(',\n')}\n${indent}}`;
}
