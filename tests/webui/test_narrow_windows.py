"""Narrow windows (480 px, a phone; 800 px, half a laptop screen): on every page the header
wraps instead of overlapping itself, the page does not scroll sideways, and nothing sticks out
of its card (a wide table scrolls inside its own box)."""
from __future__ import annotations

import pytest

from tests.helpers.page_tour import mixed_experiment, tour_pages, visit  # noqa: F401 - a fixture

LAYOUT_PROBLEMS = """() => {
  const problems = [];
  const root = document.documentElement;
  if (root.scrollWidth > window.innerWidth) {
    problems.push(`the page scrolls sideways: ${root.scrollWidth} px wide in a ${window.innerWidth} px window`);
  }
  const header = document.querySelector('header');
  const items = [...header.children, ...header.querySelectorAll('nav a, .conn > *, .exp-title > *')];
  const boxes = items.map((el) => [el, el.getBoundingClientRect()]).filter(([, r]) => r.width && r.height);
  const name = (el) => el.dataset.testid || el.className || el.tagName;
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, ra] = boxes[i], [b, rb] = boxes[j];
      if (a.contains(b) || b.contains(a)) continue;
      const overlap = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left) > 0.5
        && Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top) > 0.5;
      if (overlap) problems.push(`header items overlap: ${name(a)} and ${name(b)}`);
    }
  }
  for (const card of document.querySelectorAll('.card')) {
    if (card.scrollWidth > card.clientWidth + 1) {
      problems.push(`content sticks out of a card (${card.querySelector('h2')?.textContent ?? '?'}): `
                    + `${card.scrollWidth} px in ${card.clientWidth} px`);
    }
  }
  return problems;
}"""


@pytest.mark.parametrize("width", [480, 800])
def test_pages_fit_a_narrow_window(ui, mixed_experiment, width):  # noqa: F811
    run = mixed_experiment()
    ui.page.set_viewport_size({"width": width, "height": 800})
    problems: dict[str, list[str]] = {}
    for page in tour_pages(run):
        visit(ui, run, page)
        found = ui.page.evaluate(LAYOUT_PROBLEMS)
        ui.screenshot(f"{width}-{page.name}")
        if found:
            problems[page.name] = found
    assert not problems, "\n".join(f"{name}: {line}" for name, lines in problems.items() for line in lines)
    assert not ui.errors
