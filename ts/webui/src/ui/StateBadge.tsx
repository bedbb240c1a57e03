// A trial's or experiment's state, coloured.
export function StateBadge({ state, testid }: { state: string; testid?: string }) {
  return <span class={`badge state-${state}`} data-testid={testid}>{state}</span>;
}
