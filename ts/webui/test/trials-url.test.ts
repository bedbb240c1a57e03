import { describe, expect, it } from 'vitest';
import { EMPTY_QUERY } from '../src/data/query';
import { parseTrialsView, trialsHref, trialsInStateHref } from '../src/data/trials-url';
import { parseRoute } from '../src/ui/hooks';

describe('the trials view in the address', () => {
  it('reads the sort, states, result bounds and parameter filters', () => {
    const view = parseTrialsView('sort=final&dir=asc&state=FAILED,SUCCEEDED&min=0.5&p.lr=0.1..0.5&p.opt=adam|sgd&id=ab');
    expect(view.sort).toEqual({ key: 'final', dir: 'asc' });
    expect(view.query).toEqual({
      ...EMPTY_QUERY, states: ['FAILED', 'SUCCEEDED'], resultMin: 0.5, resultMax: null,
      params: { lr: '0.1..0.5', opt: 'adam|sgd' }, id: 'ab',
    });
    expect(view.resultMinText).toBe('0.5');
  });

  it('writes only what differs from the default, readable, and reads back the same', () => {
    const href = trialsHref(parseTrialsView('sort=param:lr&dir=desc&p.opt=adam|sgd&p.lr=>0.1&state=FAILED'));
    expect(href).toBe('#/trials?sort=param:lr&dir=desc&state=FAILED&p.opt=adam|sgd&p.lr=%3E0.1');
    const route = parseRoute(href);
    expect(route).toEqual({ page: 'trials', search: href.slice('#/trials?'.length) });
    expect(trialsHref(parseTrialsView(href.slice('#/trials?'.length)))).toBe(href);
    expect(trialsHref(parseTrialsView(''))).toBe('#/trials');
  });

  it('ignores what it cannot read', () => {
    const view = parseTrialsView('sort=nonsense&dir=sideways&min=abc&p.=x');
    expect(view.sort).toEqual({ key: 'seq', dir: 'asc' });
    expect(view.query.resultMin).toBeNull();
    expect(view.query.params).toEqual({});
  });

  it('links a state count to the table of that state', () => {
    expect(trialsInStateHref('FAILED')).toBe('#/trials?state=FAILED');
    expect(parseRoute('#/trials/abc')).toEqual({ page: 'trial', trialId: 'abc' });
  });
});
