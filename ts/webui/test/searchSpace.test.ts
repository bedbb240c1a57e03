import { describe, expect, it } from 'vitest';
import { compactJson, searchSpaceRows } from '../src/data/searchSpace';

describe('searchSpaceRows', () => {
  it('lists each parameter with its type and values, nested ones under their option', () => {
    const rows = searchSpaceRows({
      lr: { _type: 'loguniform', _value: [0.001, 0.1] },
      depth: { _type: 'randint', _value: [1, 10] },
      act: { _type: 'choice', _value: ['relu', 'tanh'] },
      noise: { _type: 'qnormal', _value: [0, 1, 0.5] },
      model: { _type: 'choice', _value: [{ _name: 'mlp', width: { _type: 'choice', _value: [8, 16] } }, 'linear'] },
    });
    expect(rows.map((r) => [r.name, r.type, r.values])).toEqual([
      ['lr', 'loguniform', '0.001 to 0.1'],
      ['depth', 'randint', '1 to 9 (integers)'],
      ['act', 'choice', 'relu, tanh'],
      ['noise', 'qnormal', 'mu 0, sigma 1, q 0.5'],
      ['model', 'choice', 'mlp, linear'],
      ['model.mlp.width', 'choice', '8, 16'],
    ]);
    expect(rows[2].options).toEqual(['relu', 'tanh']);
  });
});

describe('compactJson', () => {
  it('keeps short arrays and objects on one line', () => {
    const text = compactJson({ searchSpace: { x: { _type: 'choice', _value: [8, 16, 32, 64] } }, trialCommand: 'python3 trial.py' }, 60);
    expect(text).toBe('{\n  "searchSpace": {\n    "x": {"_type": "choice", "_value": [8, 16, 32, 64]}\n  },\n  "trialCommand": "python3 trial.py"\n}');
    expect(JSON.parse(text)).toEqual({ searchSpace: { x: { _type: 'choice', _value: [8, 16, 32, 64] } }, trialCommand: 'python3 trial.py' });
  });
});
