import { test, expect, type Page } from "@playwright/test";
import { connected, mockSession, send, signIn } from "./helpers";

// Ivan moves between sessions: the sidebar, back and forward swap the page's main region
// and the feed in place (no page load), the address bar and the history follow, and no
// event of the session left reaches the one opened. Without the wasm, the links still work.
test.describe.configure({ mode: "serial" });

/** Marks the page: a full page load clears the mark. */
async function mark(page: Page) {
  await page.evaluate(() => ((window as any).__heroMark = 1));
}
async function stillMarked(page: Page) {
  expect(await page.evaluate(() => (window as any).__heroMark)).toBe(1);
}

function sidebarLink(page: Page, id: number) {
  return page.locator(`.session-list li[data-session-id="${id}"] a`);
}

async function showing(page: Page, id: number, name: string) {
  await expect(page).toHaveURL(new RegExp(`/s/${id}$`));
  await expect(page.getByTestId("session-title")).toHaveText(name);
  await expect(page.locator(".session-list a[aria-current=page]")).toHaveText(name);
  await connected(page);
}

test("a session switch swaps the page in place, with history, and keeps each feed to its session", async ({ page }) => {
  test.setTimeout(60_000);
  await signIn(page, "ivan", "ivan-password");
  const a = await mockSession(page, "Nav A");
  const b = await mockSession(page, "Nav B");
  await page.goto(`/s/${a}`);
  await connected(page);
  await mark(page);

  // A reply streams slowly in A; the reader moves to B meanwhile.
  const words = "streaming in A only ".repeat(12);
  await send(page, `[[mock text="${words}the end of A." tokens_per_sec=30]]`);
  await expect(page.locator(".live-slot .msg-agent.live")).toContainText("streaming in A", { timeout: 10_000 });
  await sidebarLink(page, b).click();
  await showing(page, b, "Nav B");
  await stillMarked(page);
  // Nothing of A's reply reaches B, though it goes on streaming.
  await page.waitForTimeout(1500);
  await expect(page.locator(".messages")).not.toContainText("streaming in A");
  await expect(page.locator(".live-slot")).toBeEmpty();
  // B's chat works: a message there is answered there.
  await send(page, '[[mock text="hello from B"]]');
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("hello from B", { timeout: 10_000 });

  // Back: A again, in place, with its reply (finished meanwhile) whole.
  await page.goBack();
  await showing(page, a, "Nav A");
  await stillMarked(page);
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("the end of A.", { timeout: 20_000 });
  await expect(page.locator(".messages")).not.toContainText("hello from B");
  // Forward: B again.
  await page.goForward();
  await showing(page, b, "Nav B");
  await stillMarked(page);
  await expect(page.locator(".messages")).toContainText("hello from B");
});

test("without the wasm, a session's link still opens it", async ({ browser, baseURL }) => {
  const context = await browser.newContext({ javaScriptEnabled: false, baseURL });
  const page = await context.newPage();
  // Signed in through the API (the sign-in form needs no script either, but this is faster).
  const login = await page.request.post("/api/auth/login", { data: { username: "ivan", password: "ivan-password" } });
  expect(login.status()).toBe(200);
  const sessions = await (await page.request.get("/api/sessions")).json();
  const a = sessions.find((s: any) => s.name === "Nav A").id;
  const b = sessions.find((s: any) => s.name === "Nav B").id;
  await page.goto(`/s/${a}`);
  await expect(page.getByTestId("session-title")).toHaveText("Nav A");
  await page.locator(`.session-list li[data-session-id="${b}"] a`).click();
  await expect(page).toHaveURL(new RegExp(`/s/${b}$`));
  await expect(page.getByTestId("session-title")).toHaveText("Nav B");
  await context.close();
});
