// The colour theme: light or dark, following the OS (`prefers-color-scheme`) unless the user
// chose one in the header (remembered in localStorage). Applied as <html data-theme="...">,
// which style.css's variables and the charts (charts/EChart.tsx) read.
//   import { theme } from './theme';  theme.start();  theme.choose('dark');  theme.resolved
import { useEffect, useState } from 'preact/hooks';

export type ThemeChoice = 'system' | 'light' | 'dark';
export type Theme = 'light' | 'dark';

export const THEME_CHOICES: ThemeChoice[] = ['system', 'light', 'dark'];
const STORAGE_KEY = 'expmgr.theme';
const DARK_QUERY = '(prefers-color-scheme: dark)';

function readChoice(): ThemeChoice {
  try {
    const saved = localStorage.getItem(STORAGE_KEY);
    return THEME_CHOICES.includes(saved as ThemeChoice) ? (saved as ThemeChoice) : 'system';
  } catch {
    return 'system'; // storage disabled: follow the OS
  }
}

class ThemeState {
  choice: ThemeChoice = 'system';
  resolved: Theme = 'light';
  private listeners = new Set<() => void>();
  private media: MediaQueryList | null = null;

  /** Reads the saved choice, applies it, and follows the OS from now on. Call once, before rendering. */
  start(): void {
    this.choice = readChoice();
    this.media = typeof matchMedia === 'function' ? matchMedia(DARK_QUERY) : null;
    this.media?.addEventListener('change', () => this.apply());
    this.apply();
  }

  choose(choice: ThemeChoice): void {
    this.choice = choice;
    try {
      if (choice === 'system') localStorage.removeItem(STORAGE_KEY);
      else localStorage.setItem(STORAGE_KEY, choice);
    } catch {
      // not remembered, still applied
    }
    this.apply();
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private apply(): void {
    this.resolved = this.choice === 'system' ? (this.media?.matches ? 'dark' : 'light') : this.choice;
    document.documentElement.dataset.theme = this.resolved;
    for (const listener of this.listeners) listener();
  }
}

export const theme = new ThemeState();

/** The theme in force, re-rendering when it changes. */
export function useTheme(): { choice: ThemeChoice; resolved: Theme } {
  const [, setState] = useState(0);
  useEffect(() => theme.subscribe(() => setState((n) => n + 1)), []);
  return { choice: theme.choice, resolved: theme.resolved };
}
