import { describe, expect, it } from 'vitest';
import { testids } from '../src/testids';

const sources = import.meta.glob('../src/**/*.tsx', { query: '?raw', import: 'default', eager: true }) as Record<string, string>;

describe('testids.ts', () => {
  const values = new Set<string>(Object.values(testids));

  it('lists every data-testid the components set', () => {
    const used = new Set<string>();
    for (const text of Object.values(sources)) {
      for (const m of text.matchAll(/\b(?:data-testid|testid)=["']([^"']+)["']/g)) used.add(m[1]);
    }
    expect(used.size).toBeGreaterThan(40);
    const missing = [...used].filter((v) => !values.has(v));
    expect(missing).toEqual([]);
  });

  it('has one name: value entry per line, as the browser tests read it', () => {
    const text = Object.values(import.meta.glob('../src/testids.ts', { query: '?raw', import: 'default', eager: true }))[0] as string;
    const entries = [...text.matchAll(/^\s*(\w+)\s*:\s*['"`]([^'"`$]+)['"`]/gm)].map((m) => [m[1], m[2]]);
    expect(Object.fromEntries(entries)).toEqual(testids);
  });
});
