import { test, expect, type Page } from "@playwright/test";
import { connected, createSession, ready, mockSession, send, signIn } from "./helpers";

// Carol's conversations: the offline demo, and agents pointed at the repository's mock LLM.
test.describe.configure({ mode: "serial" });

/** A directive asking the mock for `text`, slowly. */
function slowly(text: string, delayMs = 40, chunk = 6) {
  return `[[mock chunk=${chunk} delay_ms=${delayMs} text=${JSON.stringify(text)}]]`;
}

test("the offline demo shows every element while it streams", async ({ page }) => {
  await signIn(page, "carol", "carol-password");
  await createSession(page, "Demo");
  await connected(page);
  await send(page, "Hello demo");
  // While it streams: the composer is locked and offers Stop.
  await expect(page.getByRole("button", { name: "Stop" })).toBeVisible();
  await expect(page.getByLabel("Message", { exact: true })).toBeDisabled();
  const reply = page.locator(".msg-agent:not(.live)").last();
  await expect(reply).toBeVisible({ timeout: 15_000 });
  await expect(page.locator(".msg-user").last()).toHaveText(/Hello demo/);
  await expect(reply.getByTestId("agent-name")).toHaveText("Hero demo (offline)");
  for (const kind of ["thinking", "todo", "progress", "link", "copy", "result", "hml-prompt", "bash", "ask"]) {
    await expect(reply.locator(`[data-hml="${kind}"]`).first(), kind).toBeVisible();
  }
  await expect(reply.locator(".hml-item")).toHaveCount(4);
  await expect(reply.locator('[data-hml="bash"]')).toContainText("waiting for your approval");
  await expect(reply.locator(".code-block")).toContainText("<bash>rm -rf /</bash>");
  await expect(reply.locator('[data-hml="progress"] progress')).toHaveAttribute("value", "3");
  await expect(page.getByRole("button", { name: "Send" })).toBeVisible();
});

test("model text never becomes live HTML", async ({ page }) => {
  await signIn(page, "carol", "carol-password");
  await mockSession(page, "Untrusted");
  await send(page, slowly('Look: <img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> and [x](javascript:alert(1)) **bold**', 1, 50));
  const reply = page.locator(".msg-agent:not(.live)").last();
  await expect(reply).toContainText("bold");
  await expect(reply.locator("img, script")).toHaveCount(0);
  await expect(reply.locator("a[href^='javascript']")).toHaveCount(0);
  expect(await page.evaluate(() => (window as any).__pwned)).toBeUndefined();
});

test("a second tab watches the reply live, and a reload shows the same conversation", async ({ page, context }) => {
  await signIn(page, "carol", "carol-password");
  const id = await mockSession(page, "Shared");
  const other = await context.newPage();
  // New messages join the view one by one: the watching tab never asks for the whole view.
  const wholeViews: string[] = [];
  other.on("request", (r) => {
    if (r.url().includes("session_view") || r.url().includes("/view")) wholeViews.push(r.url());
  });
  await other.goto(`/s/${id}`);
  await connected(other);
  const words = Array.from({ length: 40 }, (_, i) => `word${i}`).join(" ");
  await send(page, slowly(`Streaming to everyone: ${words} THE-END`, 30, 8));
  // The other tab sees the reply while it is still being written...
  await expect(other.locator(".msg-agent.live")).toContainText("Streaming to everyone", { timeout: 10_000 });
  await expect(other.locator(".msg-agent.live")).not.toContainText("THE-END");
  // ...and then the finished message.
  await expect(other.locator(".msg-agent:not(.live)").last()).toContainText("THE-END", { timeout: 15_000 });
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("THE-END");
  await expect(other.locator(".msg-user").last()).toContainText("Streaming to everyone");
  expect(wholeViews).toEqual([]);
  const before = await page.getByTestId("messages").innerText();
  await page.reload();
  await connected(page);
  expect(await page.getByTestId("messages").innerText()).toBe(before);
});

test("a tab opened mid-reply shows the reply so far at once, then the rest", async ({ page, context }) => {
  await signIn(page, "carol", "carol-password");
  const id = await mockSession(page, "Joined late");
  const words = Array.from({ length: 60 }, (_, i) => `w${i}`).join(" ");
  // Slow enough (about 3.5 s in all) that a tab opened after w20 joins while it streams: a
  // new tab's load and socket take 0.6-0.8 s on two busy cores, which at 40 ms a chunk left
  // no reply to join in some runs.
  await send(page, slowly(`EARLY-PART ${words} LATE-PART`, 80, 6));
  // Well into the reply, a new tab opens the session.
  await expect(page.locator(".msg-agent.live")).toContainText("w20", { timeout: 10_000 });
  const other = await context.newPage();
  await other.goto(`/s/${id}`);
  await connected(other);
  // What was written before it came is there while the reply is still streaming.
  const live = other.locator(".msg-agent.live");
  await expect(live).toContainText("EARLY-PART", { timeout: 5_000 });
  await expect(live).toContainText("w20");
  await expect(live).not.toContainText("LATE-PART");
  // Then the rest, and the stored message replaces the live one, once.
  const done = other.locator(".msg-agent:not(.live)").last();
  await expect(done).toContainText("LATE-PART", { timeout: 15_000 });
  await expect(done).toContainText("EARLY-PART");
  await expect(other.locator(".msg-agent.live")).toHaveCount(0);
  await expect(other.locator(".msg-agent", { hasText: "EARLY-PART" })).toHaveCount(1);
});

test("stop ends the reply and keeps what arrived", async ({ page }) => {
  await signIn(page, "carol", "carol-password");
  await mockSession(page, "Stoppable");
  const long = Array.from({ length: 300 }, (_, i) => `part${i}`).join(" ");
  await send(page, slowly(long + " NEVER-SHOWN", 40, 6));
  await expect(page.locator(".msg-agent.live")).toContainText("part3", { timeout: 10_000 });
  await page.getByRole("button", { name: "Stop" }).click();
  const reply = page.locator(".msg-agent:not(.live)").last();
  await expect(reply).toContainText("Stopped", { timeout: 10_000 });
  await expect(reply).toContainText("part3");
  await expect(reply).not.toContainText("NEVER-SHOWN");
  await expect(page.getByRole("button", { name: "Send" })).toBeVisible();
});

test("the view follows new text only while the reader is near the bottom", async ({ page }) => {
  await signIn(page, "carol", "carol-password");
  await mockSession(page, "Scrolling");
  const lines = Array.from({ length: 150 }, (_, i) => `Line ${i}`).join("\n\n");
  await send(page, slowly(lines + "\n\nLAST-LINE", 25, 12));
  const box = page.getByTestId("messages");
  await expect(page.locator(".msg-agent.live")).toContainText("Line 40", { timeout: 10_000 });
  // Following: the newest text is in view.
  const atBottom = () => box.evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight < 100);
  await expect.poll(atBottom).toBe(true);
  // The reader scrolls up: the view stays where they are, and offers a way down.
  await box.evaluate((el) => { el.scrollTop = 0; el.dispatchEvent(new Event("scroll")); });
  await expect(page.getByRole("button", { name: "Jump to the newest message" })).toBeVisible();
  await page.waitForTimeout(600);
  expect(await box.evaluate((el) => el.scrollTop)).toBeLessThan(50);
  await page.getByRole("button", { name: "Jump to the newest message" }).click();
  await expect(page.getByRole("button", { name: "Jump to the newest message" })).toBeHidden();
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("LAST-LINE", { timeout: 20_000 });
  await expect.poll(atBottom).toBe(true);
});

test("agents are managed on their page and their keys never come back", async ({ page }) => {
  await signIn(page, "carol", "carol-password");
  await page.goto("/agents");
  await ready(page);
  const form = page.locator("form.new-agent");
  await form.getByLabel("Name").fill("My Claude");
  await form.getByLabel("Provider").selectOption("anthropic");
  await form.getByLabel("Model").fill("claude-test");
  await form.getByLabel("API key").fill("sk-ui-secret-987654321");
  await form.getByLabel("Config").fill('{"max_tokens": 2000}');
  await form.getByRole("button", { name: "Add agent" }).click();
  const card = page.locator(".agent-card", { hasText: "My Claude" });
  await expect(card).toContainText("key set");
  expect(await page.content()).not.toContain("sk-ui-secret-987654321");
  // A config that would break the call is refused with a reason.
  await card.getByLabel("Config").fill('{"stream": false}');
  await card.getByRole("button", { name: "Save" }).click();
  await expect(page.getByRole("alert")).toContainText('may not set "stream"');
  await card.getByRole("button", { name: "Delete" }).click();
  await expect(page.locator(".agent-card", { hasText: "My Claude" })).toHaveCount(0);
});

test("the markdown parser is fetched when a text first needs it, not with the page", async ({ page }) => {
  await signIn(page, "carol", "carol-password");
  const id = await mockSession(page, "Parsed on demand");
  await send(page, slowly("First **bold** and `code`", 1, 50));
  const first = page.locator(".msg-agent:not(.live)").last();
  await expect(first.locator("strong")).toHaveText("bold");
  // A fresh load of the conversation: the server drew it, the parser's part of the wasm
  // stays on the server until a new text must be drawn.
  const parts: string[] = [];
  page.on("request", (r) => {
    if (/\/pkg\/split_[^/]+\.wasm$/.test(r.url())) parts.push(r.url());
  });
  await page.goto(`/s/${id}`);
  await connected(page);
  await expect(page.locator(".msg-agent").last().locator("strong")).toHaveText("bold");
  await page.waitForTimeout(300);
  expect(parts).toEqual([]);
  // A reply streams: the parser comes (once) and the text is drawn parsed, live and stored.
  await send(page, slowly("Then *more* and\n\n```\nfn main() {}\n```\n", 40, 4));
  await expect(page.locator(".msg-agent.live em")).toHaveText("more");
  const reply = page.locator(".msg-agent:not(.live)").last();
  await expect(reply.locator("em")).toHaveText("more");
  await expect(reply.locator(".code-block")).toContainText("fn main() {}");
  expect(parts.length).toBe(1);
});

test("a parser that cannot be fetched leaves texts unparsed and the chat working, and comes later", async ({ page }) => {
  await signIn(page, "carol", "carol-password");
  await mockSession(page, "Parser offline");
  // The parser's part of the wasm cannot be had, for now.
  let refused = 0;
  await page.route(/\/pkg\/split_[^/]+\.wasm$/, (route) => {
    refused += 1;
    return route.abort();
  });
  await page.reload();
  await connected(page);
  await send(page, slowly("Still **here**", 1, 50));
  const first = page.locator(".msg-agent:not(.live)", { hasText: "Still" });
  await expect(first).toContainText("Still **here**");
  expect(refused).toBeGreaterThan(0);
  // The chat still works, and once the parser can be had (and the wait after a failed
  // fetch, 5 s, is over) the next text is parsed, and the earlier one with it.
  await page.unroute(/\/pkg\/split_[^/]+\.wasm$/);
  await page.waitForTimeout(5_500);
  await send(page, slowly("Now **parsed**", 1, 50));
  await expect(page.locator(".msg-agent:not(.live)").last().locator("strong")).toHaveText("parsed");
  await expect(first.locator("strong")).toHaveText("here");
});
