import { describe, expect, it } from 'vitest';
import { firstSortDirection, isTextParam } from '../src/data/columns';
import { parseTrial } from '../src/data/parse';
import { trialView } from './helpers';

describe('columns', () => {
  it('sorts results best first on the first click, in the optimize mode', () => {
    expect(firstSortDirection('final', 'minimize')).toBe('asc');
    expect(firstSortDirection('final', 'maximize')).toBe('desc');
    expect(firstSortDirection('duration', 'minimize')).toBe('asc');
    expect(firstSortDirection('param:lr', 'maximize')).toBe('asc');
  });

  it('tells a parameter holding text from a numeric one', () => {
    const trials = [
      parseTrial(trialView('a', 0, 'SUCCEEDED', {}, { lr: 0.1, opt: 'adam', layers: 2 })),
      parseTrial(trialView('b', 1, 'SUCCEEDED', {}, { lr: 0.2, opt: 'sgd' })),
    ];
    expect(isTextParam(trials, 'lr')).toBe(false);
    expect(isTextParam(trials, 'layers')).toBe(false); // missing in one trial: still numbers
    expect(isTextParam(trials, 'opt')).toBe(true);
  });
});
