// Confirmation before any control acts, and the message that says how it went. The dialog is the
// browser's own modal <dialog> (showModal): the page behind it is inert, Escape cancels; focus starts
// on Cancel (the safe choice), stays inside while it is open and returns to the control that opened it.
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

interface Pending {
  title: string;
  message: ComponentChildren;
  action: () => Promise<unknown>;
  done: string;
}

export interface ConfirmState {
  /** Asks; `action` runs after the user confirms; `done` is shown when it succeeded. `title` names the dialog. */
  ask(message: ComponentChildren, action: () => Promise<unknown>, done: string, title?: string): void;
  /** The dialog and the result message, to render. */
  view: ComponentChildren;
}

interface DialogProps {
  pending: Pending;
  busy: boolean;
  onCancel: () => void;
  onConfirm: () => void;
}

let dialogCount = 0;

function ConfirmDialog({ pending, busy, onCancel, onConfirm }: DialogProps) {
  const ref = useRef<HTMLDialogElement>(null);
  const cancelRef = useRef<HTMLButtonElement>(null);
  const [ids] = useState(() => {
    dialogCount += 1;
    return { title: `confirm-title-${dialogCount}`, body: `confirm-body-${dialogCount}` };
  });
  const busyRef = useRef(busy);
  busyRef.current = busy;

  useEffect(() => {
    const dialog = ref.current!;
    const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    if (!dialog.open) {
      if (typeof dialog.showModal === 'function') dialog.showModal();
      else dialog.setAttribute('open', '');
    }
    cancelRef.current?.focus();
    return () => {
      if (dialog.open && typeof dialog.close === 'function') dialog.close();
      if (opener?.isConnected) opener.focus();
    };
  }, []);

  const cancel = () => {
    if (!busyRef.current) onCancel();
  };

  // Tab and Shift+Tab go round the dialog's buttons (the browser would go on to its own address bar)
  const onKeyDown = (e: KeyboardEvent) => {
    if (e.key !== 'Tab') return;
    const focusable = [...ref.current!.querySelectorAll<HTMLElement>('button:not([disabled]), [href], input, select, textarea')];
    if (!focusable.length) {
      e.preventDefault();
      return;
    }
    const first = focusable[0];
    const last = focusable[focusable.length - 1];
    const inside = focusable.includes(document.activeElement as HTMLElement);
    if (e.shiftKey && (document.activeElement === first || !inside)) {
      e.preventDefault();
      last.focus();
    } else if (!e.shiftKey && (document.activeElement === last || !inside)) {
      e.preventDefault();
      first.focus();
    }
  };

  return (
    <dialog ref={ref} class="modal" role="alertdialog" aria-modal="true" aria-labelledby={ids.title}
            aria-describedby={ids.body} data-testid="confirm-dialog"
            onCancel={(e) => { e.preventDefault(); cancel(); }}
            onKeyDown={onKeyDown}
            onClick={(e) => {
              // a click on the backdrop (outside the dialog's box) cancels; a click on a
              // button inside that closed the dialog arrives here after it is gone
              const dialog = ref.current;
              if (dialog === null || e.target !== dialog) return;
              const box = dialog.getBoundingClientRect();
              if ((e.clientX < box.left || e.clientX > box.right
                  || e.clientY < box.top || e.clientY > box.bottom)) cancel();
            }}>
      <h2 class="modal-title" id={ids.title}>{pending.title}</h2>
      <div class="modal-body" id={ids.body}>{pending.message}</div>
      <div class="modal-actions">
        <button type="button" data-testid="cancel" ref={cancelRef} disabled={busy} onClick={cancel}>Cancel</button>
        <button type="button" class="primary" data-testid="confirm" disabled={busy} onClick={onConfirm}>
          {busy ? 'Working…' : 'Confirm'}
        </button>
      </div>
    </dialog>
  );
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
      {pending && <ConfirmDialog pending={pending} busy={busy} onCancel={() => setPending(null)} onConfirm={confirm} />}
    </>
  );

  return {
    ask: (message, action, done, title = 'Please confirm') => {
      setResult(null);
      setPending({ title, message, action, done });
    },
    view,
  };
}
