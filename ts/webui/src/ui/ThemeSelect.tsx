// The header's choice of colour theme: system (follow the OS), light or dark.
import { testids } from '../testids';
import { THEME_CHOICES, theme, useTheme, type ThemeChoice } from './theme';

const LABELS: Record<ThemeChoice, string> = { system: 'Theme: system', light: 'Theme: light', dark: 'Theme: dark' };

export function ThemeSelect() {
  const { choice } = useTheme();
  return (
    <select class="theme-select" aria-label="Colour theme" data-testid={testids.themeSelect} value={choice}
            onChange={(e) => theme.choose(e.currentTarget.value as ThemeChoice)}>
      {THEME_CHOICES.map((c) => <option value={c}>{LABELS[c]}</option>)}
    </select>
  );
}
