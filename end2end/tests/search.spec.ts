import { test, expect, type Page } from "@playwright/test";
import { connected, ready, signIn } from "./helpers";

// Search across Mia's sessions: Ctrl+K finds the sidebar's box, the results page shows the
// session found by its name and the message found by its words, marked; the message opens
// its session at that message, though it is far above the latest 50 (pages are brought in
// until it is drawn). The `?` list of shortcuts opens and closes. Without the wasm the
// results page still answers.
test.describe.configure({ mode: "serial" });

async function session(page: Page, name: string): Promise<number> {
  const r = await page.request.post("/api/sessions", { data: { name } });
  expect(r.status()).toBe(201);
  return (await r.json()).id;
}

async function note(page: Page, id: number, content: string) {
  const r = await page.request.post(`/api/sessions/${id}/messages`, { data: { content, private: true } });
  expect(r.status()).toBe(200);
}

test("Ctrl+K searches every session, and a result opens its session at that message", async ({ page }) => {
  await signIn(page, "mia", "mia-password");
  const far = await session(page, "A long diary");
  for (let i = 1; i <= 130; i++) {
    await note(page, far, i === 7 ? "Saw a quokka smiling at the ferry." : `diary entry ${i}`);
  }
  const named = await session(page, "Quokka facts");
  await page.goto("/");
  await ready(page);

  // Ctrl+K finds the sidebar's box (the page is not scrolled to it: it is focused).
  await page.locator("body").click({ position: { x: 5, y: 5 } });
  await page.keyboard.press("Control+k");
  const box = page.getByRole("searchbox", { name: "Search your sessions" });
  await expect(box).toBeFocused();
  await box.fill("quokka");
  await box.press("Enter");
  await expect(page).toHaveURL(/\/search\?q=quokka/);
  await ready(page);
  const results = page.getByTestId("search-results").locator("li");
  await expect(results).toHaveCount(2);
  // The session named so leads; the message follows with its word marked.
  await expect(results.nth(0)).toContainText("Quokka facts");
  await expect(results.nth(0).locator("a")).toHaveAttribute("href", `/s/${named}`);
  await expect(results.nth(1)).toContainText("A long diary");
  await expect(results.nth(1).locator("mark")).toHaveText("quokka");
  await expect(results.nth(1)).toContainText("Saw a quokka smiling at the ferry.");

  // Newest first: the same two, the note (made before the session) last.
  await page.getByRole("link", { name: "newest" }).click();
  await expect(page).toHaveURL(/sort=recent/);
  await expect(page.getByTestId("search-results").locator("li").nth(0)).toContainText("Quokka facts");

  // The message opens its session there, marked, though 123 messages come after it.
  await page.getByRole("link", { name: /Saw a quokka/ }).click();
  await expect(page).toHaveURL(new RegExp(`/s/${far}#m-`));
  await connected(page);
  const found = page.locator(".msg.found");
  await expect(found).toHaveCount(1);
  await expect(found).toContainText("Saw a quokka smiling at the ferry.");
  await expect(found).toBeInViewport();
});

test("? lists the shortcuts and Esc closes the list; / finds the search box", async ({ page }) => {
  await signIn(page, "mia", "mia-password");
  await page.goto("/");
  await ready(page);
  const list = page.getByRole("dialog", { name: "Keyboard shortcuts" });
  await expect(list).toBeHidden();
  await page.locator("body").click({ position: { x: 5, y: 5 } });
  await page.keyboard.press("?");
  await expect(list).toBeVisible();
  await expect(list).toContainText("Search your sessions");
  await expect(list).toContainText("Ctrl+K");
  await page.keyboard.press("Escape");
  await expect(list).toBeHidden();
  await page.keyboard.press("/");
  await expect(page.getByRole("searchbox", { name: "Search your sessions" })).toBeFocused();
  // Typed in a field, ? is a character.
  await page.keyboard.type("what?");
  await expect(list).toBeHidden();
  await expect(page.getByRole("searchbox", { name: "Search your sessions" })).toHaveValue("what?");
});

test("without the wasm, the search page still answers", async ({ browser }) => {
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  await page.goto("/login");
  await page.getByLabel("Username").fill("mia");
  await page.getByLabel("Password").fill("mia-password");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("whoami")).toHaveText("mia");
  await page.getByRole("searchbox", { name: "Search your sessions" }).fill("ferry");
  await page.getByRole("searchbox", { name: "Search your sessions" }).press("Enter");
  await expect(page.getByTestId("search-results").locator("li")).toHaveCount(1);
  await expect(page.getByTestId("search-results").locator("mark")).toHaveText("ferry");
  await context.close();
});
