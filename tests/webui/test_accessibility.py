"""axe-core (WCAG 2 A/AA) on every page of a real experiment, in light and dark mode:
no serious or critical problem; and the colour theme follows the OS unless chosen in the header."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.helpers.page_tour import mixed_experiment, tour_pages, visit  # noqa: F401 - a fixture

SCHEMES = ["light", "dark"]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_page_passes_axe_in_light_and_dark_mode(ui, mixed_experiment, scheme):  # noqa: F811
    run = mixed_experiment()
    ui.page.emulate_media(color_scheme=scheme)
    problems: dict[str, list[str]] = {}
    for page in tour_pages(run):
        visit(ui, run, page)
        expect(ui.page.locator("html")).to_have_attribute("data-theme", scheme)
        assert ui.page.locator("h1").count() == 1, f"{page.name}: not one h1"
        found = ui.accessibility_problems()
        if found:
            problems[page.name] = found
            ui.screenshot(f"{scheme}-{page.name}")
    assert not problems, "\n".join(f"{name}: {line}" for name, lines in problems.items() for line in lines)
    assert not ui.errors


def test_theme_follows_the_os_until_chosen_in_the_header_and_is_remembered(ui, mixed_experiment):  # noqa: F811
    run = mixed_experiment()
    html = ui.page.locator("html")
    ui.page.emulate_media(color_scheme="dark")
    ui.page.goto(run.url + "#/charts")
    expect(ui.get("themeSelect")).to_have_value("system")
    expect(html).to_have_attribute("data-theme", "dark")
    expect(ui.get("chartFinal")).to_have_attribute("data-theme", "dark")
    dark_background = ui.page.evaluate("getComputedStyle(document.documentElement).backgroundColor")

    ui.page.emulate_media(color_scheme="light")  # the OS changes its mind: the page follows
    expect(html).to_have_attribute("data-theme", "light")
    expect(ui.get("chartFinal")).to_have_attribute("data-theme", "light")
    assert ui.page.evaluate("getComputedStyle(document.documentElement).backgroundColor") != dark_background

    ui.get("themeSelect").select_option("dark")  # chosen: the OS no longer decides
    expect(html).to_have_attribute("data-theme", "dark")
    expect(ui.get("chartFinal")).to_have_attribute("data-theme", "dark")
    expect(ui.get("chartFinal")).to_have_attribute("data-rendered", "true")
    ui.screenshot("dark-charts")
    ui.page.reload()
    expect(ui.get("themeSelect")).to_have_value("dark")
    expect(html).to_have_attribute("data-theme", "dark")

    ui.get("themeSelect").select_option("system")
    expect(html).to_have_attribute("data-theme", "light")
    assert not ui.errors


def test_page_has_an_svg_favicon_and_asks_for_no_missing_file(ui, mixed_experiment):  # noqa: F811
    run = mixed_experiment()
    missing: list[str] = []
    ui.page.on("response", lambda response: missing.append(response.url) if response.status >= 400 else None)
    ui.page.goto(run.url + "#/overview")
    expect(ui.get("app")).to_have_attribute("data-loaded", "true")
    icon = ui.page.locator("link[rel=icon]")
    expect(icon).to_have_attribute("type", "image/svg+xml")
    href = icon.get_attribute("href")
    assert href and href.startswith("data:image/svg+xml,") and "<svg" in ui.page.evaluate("h => decodeURIComponent(h)", href)
    assert ui.page.evaluate("""h => new Promise(ok => { const img = new Image(); img.onload = () => ok(img.width > 0);
                               img.onerror = () => ok(false); img.src = h; })""", href), "the favicon does not load"
    assert not missing and not ui.errors


def test_filters_have_names_and_scrolling_boxes_take_the_keyboard(ui, mixed_experiment):  # noqa: F811
    """What axe passes only when the box happens to overflow: each is named and takes the focus."""
    run = mixed_experiment()
    ui.page.goto(run.url + "#/trials")
    expect(ui.page.get_by_role("textbox", name="Filter by x")).to_have_attribute("data-testid", "filter-param-x")
    expect(ui.page.get_by_role("textbox", name="Filter by trial id")).to_be_visible()
    # (the search space is a table on the page, not a box of its own)
    boxes = [("#/overview", "The experiment's config"), ("#/logs", "experiment.log"),
             (f"#/trials/{run.running}", f"stdout of trial {run.running}"), (f"#/trials/{run.running}", "Attempts")]
    for route, name in boxes:
        ui.page.goto(run.url + route)
        box = ui.page.get_by_role("region", name=name, exact=True)
        box.focus()
        expect(box).to_be_focused()
    assert not ui.errors
