import { test, expect, type Page } from "@playwright/test";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { connected, createSession, mock, mockSession, ready, send, signIn } from "./helpers";

// Heidi's chat header: it follows the session's state without a reload, and every action's
// error is shown where it was taken.
test.describe.configure({ mode: "serial" });

/** Marks the page: a full page load clears the mark. */
async function mark(page: Page) {
  await page.evaluate(() => ((window as any).__heroMark = 1));
}
async function stillMarked(page: Page) {
  expect(await page.evaluate(() => (window as any).__heroMark)).toBe(1);
}

async function newAgent(page: Page, name: string): Promise<number> {
  const r = await page.request.post("/api/agents", {
    data: { name, provider: "anthropic", model: "mock-model", base_url: mock, api_key: "e2e-key-123456" },
  });
  expect(r.status()).toBe(201);
  return (await r.json()).id;
}

test("changing the session's agent moves the Files link to the new agent at once", async ({ page }) => {
  await signIn(page, "heidi", "heidi-password");
  const other = await newAgent(page, "Second agent");
  await page.reload();
  await createSession(page, "Switching agents");
  await connected(page);
  await mark(page);
  await page.getByLabel("Agent", { exact: true }).selectOption(String(other));
  await expect(page.locator(".chat-agent .agent-files")).toHaveAttribute("href", `/agents/${other}/files`);
  // The session says so too, after a reload.
  await page.reload();
  await expect(page.getByLabel("Agent", { exact: true })).toHaveValue(String(other));
  await expect(page.locator(".chat-agent .agent-files")).toHaveAttribute("href", `/agents/${other}/files`);
});

test("an agent that cannot be chosen says why, and the picker keeps the agent in force", async ({ page }) => {
  await signIn(page, "heidi", "heidi-password");
  const gone = await newAgent(page, "Soon deleted");
  await page.reload();
  await createSession(page, "A deleted agent");
  await connected(page);
  const picker = page.getByLabel("Agent", { exact: true });
  const before = await picker.inputValue();
  // Deleted after the page was drawn: the picker still offers it.
  expect((await page.request.delete(`/api/agents/${gone}`)).status()).toBe(204);
  await picker.selectOption(String(gone));
  await expect(page.locator(".chat-agent [role=alert]")).toContainText(/agent/i);
  await expect(picker).toHaveValue(before);
  await expect(page.locator(".chat-agent .agent-files")).toHaveAttribute("href", `/agents/${before}/files`);
});

test("a Stop that fails says so under the message box", async ({ page }) => {
  await signIn(page, "heidi", "heidi-password");
  await mockSession(page, "A failing stop");
  const long = Array.from({ length: 200 }, (_, i) => `part${i}`).join(" ");
  await send(page, `[[mock chunk=6 delay_ms=40 text=${JSON.stringify(long)}]]`);
  await expect(page.locator(".msg-agent.live")).toContainText("part3", { timeout: 10_000 });
  await page.route("**/_fn/abort_turn*", (route) =>
    route.fulfill({ status: 503, contentType: "text/plain", body: "the server is shutting down" }),
  );
  await page.getByRole("button", { name: "Stop" }).click();
  await expect(page.locator(".chat > .form-error[role=alert]")).toContainText(/stop/i);
});

test("/stream off and on change the header's badge at once, in every tab", async ({ page, context }) => {
  await signIn(page, "heidi", "heidi-password");
  const id = await createSession(page, "Modes");
  await connected(page);
  const other = await context.newPage();
  await other.goto(`/s/${id}`);
  await connected(other);
  await mark(page);
  const badge = (p: Page) => p.locator(".chat-agent .badge", { hasText: "batch mode" });
  await expect(badge(page)).toBeHidden();
  await send(page, "/stream off");
  await expect(badge(page)).toBeVisible();
  await expect(badge(other)).toBeVisible();
  await send(page, "/stream on");
  await expect(badge(page)).toBeHidden();
  await expect(badge(other)).toBeHidden();
  await stillMarked(page);
});

test("a conversation that cannot be read says so instead of loading forever", async ({ page }) => {
  await signIn(page, "heidi", "heidi-password");
  const id = await createSession(page, "Damaged");
  await connected(page);
  const box = page.getByLabel("Private");
  await box.check();
  await send(page, "a note to damage");
  await expect(page.locator(".msg").last()).toContainText("a note to damage");
  // The stored note's sealed payload is overwritten in the database itself.
  const data = readFileSync("../target/e2e-data-dir", "utf8").trim();
  execFileSync("python3", [
    "-c",
    "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); " +
      "c.execute(\"UPDATE frames SET payload = x'00' WHERE session_id = ?\", (int(sys.argv[2]),)); c.commit()",
    `${data}/hero.db`,
    String(id),
  ]);
  await page.goto(`/s/${id}`);
  const failed = page.locator("main [role=alert]");
  await expect(failed).toContainText(/could not be (read|loaded)/i);
  await expect(page.locator("main .loading")).toHaveCount(0);
});

test("a page whose chat cannot start says so", async ({ page }) => {
  await signIn(page, "heidi", "heidi-password");
  const id = await createSession(page, "Broken start");
  const errors: string[] = [];
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  // The page's starting view, made unreadable before the page's script reads it.
  await page.route(`**/s/${id}`, async (route) => {
    const r = await route.fetch();
    const body = (await r.text()).replace(/(<script type="application\/json" id="chat-data"[^>]*>)/, "$1{broken");
    await route.fulfill({ response: r, body });
  });
  await page.goto(`/s/${id}`);
  await ready(page);
  await expect(page.locator(".chat [role=alert]")).toContainText(/chat could not start/i);
  expect(errors.join("\n")).toMatch(/chat could not start/i);
});
