import { test, expect } from "@playwright/test";
import { connected, mockSays, mockSession, ready, send, signIn } from "./helpers";

// Long sessions (Grace's): private messages, hiding, the summary divider with "show
// earlier", and a long session paged in as the reader scrolls up.
test.describe.configure({ mode: "serial" });

const agentMessages = (page: import("@playwright/test").Page) => page.locator(".msg-agent:not(.live)");

test("a private message is shown, marked, and never reaches the agent", async ({ page }) => {
  await signIn(page, "grace", "grace-password");
  await mockSession(page, "Private");
  await page.getByLabel("Private").check();
  await send(page, "my secret plan");
  const mine = page.locator(".msg-user").last();
  await expect(mine).toContainText("my secret plan");
  await expect(mine.locator(".mark-private")).toHaveText("private");
  await page.getByLabel("Private").uncheck();
  // The mock echoes what it was sent: the private message is not in it.
  await send(page, "what do you know? [[mock echo]]");
  await expect(agentMessages(page).last()).toContainText("what do you know?", { timeout: 15_000 });
  await expect(agentMessages(page).last()).not.toContainText("my secret plan");
  await expect(agentMessages(page)).toHaveCount(1);
});

test("a hidden message leaves the view, and comes back on request", async ({ page }) => {
  await signIn(page, "grace", "grace-password");
  await mockSession(page, "Hiding");
  await send(page, mockSays("noted"));
  await expect(agentMessages(page).last()).toHaveText(/noted/, { timeout: 15_000 });
  await send(page, mockSays("second"));
  await expect(agentMessages(page)).toHaveCount(2, { timeout: 15_000 });
  const first = agentMessages(page).first();
  await first.getByRole("button", { name: "Hide" }).click();
  await expect(agentMessages(page)).toHaveCount(1);
  await page.getByLabel("Show hidden messages").check();
  await expect(agentMessages(page)).toHaveCount(2);
  const hidden = page.locator(".msg-agent.msg-hidden");
  await expect(hidden.locator(".mark-hidden")).toHaveText("hidden");
  await hidden.getByRole("button", { name: "Show again" }).click();
  await expect(page.locator(".msg-agent.msg-hidden")).toHaveCount(0);
  await page.getByLabel("Show hidden messages").uncheck();
  await expect(agentMessages(page)).toHaveCount(2);
});

test("/compact leaves a summary divider, and show earlier brings back what it covers", async ({ page }) => {
  await signIn(page, "grace", "grace-password");
  const id = await mockSession(page, "Compact");
  await send(page, mockSays("apples are red"));
  await expect(agentMessages(page).last()).toHaveText(/apples are red/, { timeout: 15_000 });
  // The summary call comes one reply after this directive: its `then` is the summary.
  await send(page, mockSays("pears are green", "SUMMARY: apples are red, pears are green. TODO: plums."));
  await expect(agentMessages(page).last()).toHaveText(/pears are green/, { timeout: 15_000 });
  await send(page, "/compact");
  const divider = page.getByTestId("summarised");
  await expect(divider).toBeVisible({ timeout: 15_000 });
  await expect(divider).toContainText("Summarised: 4 earlier messages");
  // After a reload the page starts at the summary.
  await page.reload();
  await connected(page);
  await expect(page.getByTestId("summarised")).toBeVisible();
  await expect(page.locator(".msg-user")).toHaveCount(0);
  await page.getByTestId("summarised").locator("summary").click();
  await expect(page.getByTestId("summarised")).toContainText("SUMMARY: apples are red");
  await page.getByTestId("summarised").getByRole("button", { name: "Show earlier" }).click();
  await expect(page.locator(".earlier .msg-agent")).toHaveCount(2);
  await expect(page.locator(".earlier .msg-agent").first()).toContainText("apples are red");
  // What the summary covers can be read and branched from, no longer edited or regenerated.
  await expect(page.locator(".earlier .msg").first().getByRole("button", { name: "Branch" })).toBeVisible();
  await expect(page.locator(".earlier").getByRole("button", { name: /^(Edit|Regenerate)$/ })).toHaveCount(0);

  // A link to a message the summary covers (a search result's), on a fresh page whose
  // markdown parser is not in yet: the part is paged in, drawn, and the message marked.
  const apples = await page.locator(".earlier .msg-agent").first().getAttribute("data-message-id");
  await page.goto("/");
  await ready(page);
  const parts: string[] = [];
  page.on("request", (r) => {
    if (/\/pkg\/split_[^/]+\.wasm$/.test(r.url())) parts.push(r.url());
  });
  await page.goto(`/s/${id}#m-${apples}`);
  await connected(page);
  const found = page.locator(".msg.found");
  await expect(found).toHaveCount(1);
  await expect(found).toContainText("apples are red");
  await expect(found).toBeInViewport();
  expect(parts.length).toBe(1);
});

test("a long session renders its latest 50 messages, and scrolling up pages in the rest", async ({ page }) => {
  await signIn(page, "grace", "grace-password");
  const id = await mockSession(page, "Long");
  for (let i = 1; i <= 120; i++) {
    const r = await page.request.post(`/api/sessions/${id}/messages`, { data: { content: `note ${i}`, private: true } });
    expect(r.status()).toBe(200);
  }
  await page.reload();
  await connected(page);
  const notes = page.locator(".msg-user");
  await expect(notes).toHaveCount(50);
  await expect(notes.first()).toContainText("note 71");
  await expect(notes.last()).toContainText("note 120");
  await expect(page.getByTestId("show-earlier")).toBeVisible();
  // Scrolling to the top pages in the page before, and again.
  const list = page.getByTestId("messages");
  for (const want of [100, 120]) {
    await list.evaluate((el) => { el.scrollTop = 0; el.dispatchEvent(new Event("scroll")); });
    await expect(notes).toHaveCount(want);
  }
  await expect(notes.first().locator(".msg-body")).toHaveText("note 1");
  await expect(page.getByTestId("show-earlier")).toHaveCount(0);
});
