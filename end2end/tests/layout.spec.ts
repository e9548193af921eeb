import { test, expect, type Page } from "@playwright/test";
import { connected, ready, signIn } from "./helpers";

// The page on a phone (375 px wide) and at night: the chat fits the screen with its message
// box in view and nothing scrolling sideways, the sidebar a drawer; the theme follows the
// system until the toggle picks one, which is remembered.

/** The page's background, as a luminance from 0 (black) to 1 (white). */
async function luminance(page: Page, selector = "html"): Promise<number> {
  return page.locator(selector).first().evaluate((el) => {
    const m = getComputedStyle(el).backgroundColor.match(/\d+(\.\d+)?/g)!.map(Number);
    return (0.2126 * m[0] + 0.7152 * m[1] + 0.0722 * m[2]) / 255;
  });
}

async function noSidewaysScroll(page: Page) {
  const widths = await page.evaluate(() => ({
    scroll: document.scrollingElement!.scrollWidth,
    view: window.innerWidth,
  }));
  expect(widths.scroll, "the page scrolls sideways").toBeLessThanOrEqual(widths.view);
}

test("at 375 px the chat fits, its message box in view, and the sidebar is a drawer", async ({ browser }) => {
  const context = await browser.newContext({ viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true });
  const page = await context.newPage();
  await signIn(page, "mia", "mia-password");
  const name = `On the phone ${Date.now()}`;
  const made = await page.request.post("/api/sessions", { data: { name } });
  expect(made.status()).toBe(201);
  const id = (await made.json()).id;
  await page.goto(`/s/${id}`);
  await connected(page);
  await noSidewaysScroll(page);
  const box = page.getByLabel("Message", { exact: true });
  await expect(box).toBeInViewport();
  const width = (await box.boundingBox())!.width;
  await page.screenshot({ path: test.info().outputPath("phone-375.png") });
  expect(width, "the message box is too narrow").toBeGreaterThan(200);
  // The header's links stay on the screen.
  for (const link of await page.locator(".chat-agent a:visible, .chat-agent button:visible").all()) {
    const b = (await link.boundingBox())!;
    expect(b.x + b.width, `${await link.textContent()} runs off the edge`).toBeLessThanOrEqual(375);
  }
  await page.screenshot({ path: test.info().outputPath("phone-375.png") });

  // The sessions are behind the menu button, and come back over the page.
  const list = page.getByRole("navigation", { name: "Sessions" });
  await expect(list).not.toBeInViewport();
  await page.locator("label.drawer-button").click();
  await expect(list).toBeInViewport();
  await noSidewaysScroll(page);
  await page.locator("label.drawer-close").click();
  await expect(list).not.toBeInViewport();
  // A session chosen in the drawer opens, and the drawer closes.
  await page.locator("label.drawer-button").click();
  await list.getByRole("link", { name }).click();
  await expect(list).not.toBeInViewport();
  await expect(box).toBeInViewport();
  await context.close();
});

test("the theme follows the system, and a toggle picks one that is remembered", async ({ browser }) => {
  const context = await browser.newContext({ colorScheme: "dark" });
  const page = await context.newPage();
  await signIn(page, "mia", "mia-password");
  await page.goto("/");
  await ready(page);
  expect(await luminance(page)).toBeLessThan(0.2);
  // The toggle loads the page again, drawn in the theme picked.
  await Promise.all([page.waitForEvent("load"), page.getByRole("button", { name: "Light theme" }).click()]);
  await ready(page);
  await expect(page.locator("html")).toHaveAttribute("data-theme", "light");
  expect(await luminance(page)).toBeGreaterThan(0.8);
  // Remembered: the page comes back light, drawn so by the server.
  await page.reload();
  await ready(page);
  await expect(page.locator("html")).toHaveAttribute("data-theme", "light");
  expect(await luminance(page)).toBeGreaterThan(0.8);
  await Promise.all([page.waitForEvent("load"), page.getByRole("button", { name: "Dark theme" }).click()]);
  await ready(page);
  await expect(page.locator("html")).toHaveAttribute("data-theme", "dark");
  expect(await luminance(page)).toBeLessThan(0.2);
  // Other pages too.
  await page.goto("/permissions");
  await ready(page);
  expect(await luminance(page)).toBeLessThan(0.2);
  await context.close();
});
