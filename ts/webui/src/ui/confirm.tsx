// Confirmation before any control acts, and the message that says how it went.
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';

interface Pending {
  message: ComponentChildren;
  action: () => Promise<unknown>;
  done: string;
}

export interface ConfirmState {
  /** Asks; `action` runs after the user confirms; `done` is shown when it succeeded. */
  ask(message: ComponentChildren, action: () => Promise<unknown>, done: string): void;
  /** The dialog and the result message, to render. */
  view: ComponentChildren;
}

export function useConfirm(): ConfirmState {
  const [pending, setPending] = useState<Pending | null>(null);
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<{ kind: 'ok' | 'error'; text: string } | null>(null);

  const confirm = async () => {
    if (!pending || busy) return;
    setBusy(true);
    try {
      await pending.action();
      setResult({ kind: 'ok', text: pending.done });
    } catch (err) {
      setResult({ kind: 'error', text: (err as Error).message || String(err) });
    } finally {
      setBusy(false);
      setPending(null);
    }
  };

  const view = (
    <>
      {result && (
        <p class={`control-message ${result.kind}`} role="status">
          <span data-testid="control-message" data-kind={result.kind}>{result.text}</span>
          <button type="button" class="link" onClick={() => setResult(null)} aria-label="dismiss">×</button>
        </p>
      )}
      {pending && (
        <div class="modal-backdrop" onClick={() => !busy && setPending(null)}>
          <div class="modal" role="dialog" aria-modal="true" data-testid="confirm-dialog"
               onClick={(e) => e.stopPropagation()}>
            <div class="modal-body">{pending.message}</div>
            <div class="modal-actions">
              <button type="button" data-testid="cancel" disabled={busy} onClick={() => setPending(null)}>Cancel</button>
              <button type="button" class="primary" data-testid="confirm" disabled={busy} onClick={confirm}
                      ref={(el) => el?.focus()}>
                {busy ? 'Working…' : 'Confirm'}
              </button>
            </div>
          </div>
        </div>
      )}
    </>
  );

  return {
    ask: (message, action, done) => {
      setResult(null);
      setPending({ message, action, done });
    },
    view,
  };
}
