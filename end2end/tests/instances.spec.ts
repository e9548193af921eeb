import { test, expect, type Page } from "@playwright/test";
import { connected, createSession, send, signIn, mock, mockSays } from "./helpers";

// Two Heros on one PostgreSQL behind one nginx (serve-two-instances.sh): a tab on each
// instance, the same user and session. What one does, the other sees live; Stop and an
// approval given in one reach the reply and the call running on the other; a third tab
// through the balancer (no sticky sessions) sees the same.
const lb = process.env.HERO_E2E_BALANCED ?? "http://127.0.0.1:3215";
const first = process.env.HERO_E2E_FIRST ?? "http://127.0.0.1:3216";
const second = process.env.HERO_E2E_SECOND ?? "http://127.0.0.1:3217";

function slowly(text: string, delayMs = 40, chunk = 6) {
  return `[[mock chunk=${chunk} delay_ms=${delayMs} text=${JSON.stringify(text)}]]`;
}

function card(page: Page, fn: string) {
  return page.locator(`.call[data-function="${fn}"]`).last();
}

test("two instances behind one proxy: a tab on each sees and steers the other's work", async ({ browser }) => {
  test.setTimeout(90_000);
  // Cookies ignore the port: one sign-in holds for the three addresses of the proxy.
  const context = await browser.newContext();
  const one = await context.newPage();
  await signIn(one, "alice", "alice-password", { at: first });
  const agent = await one.request.post(`${first}/api/agents`, {
    data: { name: "Mock Ada", provider: "anthropic", model: "mock-model", base_url: mock, api_key: "e2e-key-123456" },
  });
  expect(agent.status()).toBe(201);
  const id = await createSession(one, "Across");
  const patch = await one.request.patch(`${first}/api/sessions/${id}`, { data: { agent_id: (await agent.json()).id } });
  expect(patch.status()).toBe(200);
  await one.reload();
  await connected(one);

  const two = await context.newPage();
  await two.goto(`${second}/s/${id}`);
  await connected(two);
  const balanced = await context.newPage();
  await balanced.goto(`${lb}/s/${id}`);
  await connected(balanced);

  // Sent on the first instance: streams live in the tab on the second, and through the
  // balancer, before it is done.
  const words = Array.from({ length: 120 }, (_, i) => `w${i}`).join(" ");
  await send(one, slowly(`Streaming across ${words} THE-END`, 30, 6));
  for (const p of [two, balanced]) {
    await expect(p.locator(".msg-agent.live")).toContainText("Streaming across", { timeout: 15_000 });
  }
  await expect(two.locator(".msg-agent.live")).not.toContainText("THE-END");
  // A tab opened on the second instance mid-reply gets the reply so far at once.
  const late = await context.newPage();
  await late.goto(`${second}/s/${id}`);
  await connected(late);
  await expect(late.locator(".msg-agent.live")).toContainText("Streaming across", { timeout: 10_000 });
  for (const p of [one, two, balanced, late]) {
    await expect(p.locator(".msg-agent:not(.live)").last()).toContainText("THE-END", { timeout: 30_000 });
  }
  await late.close();

  // Stop pressed on the second stops the reply the first is writing.
  const long = Array.from({ length: 300 }, (_, i) => `part${i}`).join(" ");
  await send(one, slowly(long + " NEVER-SHOWN", 40, 6));
  await expect(two.locator(".msg-agent.live")).toContainText("part3", { timeout: 15_000 });
  await two.getByRole("button", { name: "Stop" }).click();
  for (const p of [one, two]) {
    const reply = p.locator(".msg-agent:not(.live)").last();
    await expect(reply).toContainText("Stopped", { timeout: 15_000 });
    await expect(reply).not.toContainText("NEVER-SHOWN");
  }

  // A call the first instance's reply asks for, approved in the tab on the second: it runs
  // once and the agent goes on once, seen in both.
  await send(one, mockSays("<websearch>rust</websearch>", "AFTER-THE-SEARCH"));
  await expect(card(two, "websearch").getByTestId("call-state")).toHaveText("waiting for your approval", { timeout: 20_000 });
  await card(two, "websearch").getByRole("button", { name: "Approve" }).click();
  for (const p of [one, two]) {
    await expect(card(p, "websearch").getByTestId("call-state")).toHaveText("done", { timeout: 20_000 });
    await expect(p.locator(".msg-agent", { hasText: "AFTER-THE-SEARCH" })).toHaveCount(1, { timeout: 20_000 });
  }
  await context.close();
});
