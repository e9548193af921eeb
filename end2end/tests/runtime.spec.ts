import { test, expect } from "@playwright/test";
import { connected, mockSays, mockSession, ready, send, signIn } from "./helpers";

// Reference 000's runtime as a user meets it: the spend lines in the header, replies in
// batch mode, legacy assertions, notifications and messages agents queue.

test("the spend lines move after a reply, with the tokens on hover", async ({ page }) => {
  await signIn(page, "frank", "frank-password");
  const id = await mockSession(page, "Spend");
  const session = await (await page.request.get(`/api/sessions/${id}`)).json();
  const priced = await page.request.patch(`/api/agents/${session.agent_id}`, {
    data: { price: { input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 } },
  });
  expect(priced.status()).toBe(200);
  const spend = page.getByTestId("spend");
  await expect(spend).toContainText("Session $0.00");
  await send(page, "[[mock text=\"Priced.\" usage_input=100000 usage_output=100000]]");
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("Priced.", { timeout: 15_000 });
  // 100,000 × $3 + 100,000 × $15 per million.
  await expect(spend).toContainText("Session $1.80", { timeout: 15_000 });
  await expect(spend).toContainText("Service $1.80");
  await expect(spend).toHaveAttribute("title", /Session: 100000 input, 100000 output/);
});

test("the offline demo costs nothing", async ({ page }) => {
  await signIn(page, "frank", "frank-password");
  await page.getByLabel("New session name").fill("Demo spend");
  await page.getByRole("button", { name: "New session" }).click();
  await connected(page);
  await send(page, "Hello");
  await expect(page.locator(".msg-agent:not(.live)").first()).toBeVisible({ timeout: 20_000 });
  await expect(page.getByTestId("spend")).toHaveAttribute("title", /Session: [^\n]*; [1-9]\d* calls/, { timeout: 15_000 });
  await expect(page.getByTestId("spend")).toContainText("Session $0.00");
});

test("in batch mode replies arrive whole and in order in every tab", async ({ page, context }) => {
  await signIn(page, "frank", "frank-password");
  const id = await mockSession(page, "Batch");
  await send(page, "/stream off");
  await expect(page.locator(".badge.batch")).toBeVisible({ timeout: 15_000 });
  const other = await context.newPage();
  await other.goto(`/s/${id}`);
  await connected(other);
  // Two messages at once: each answered after the one before, whole.
  const post = (n: number) =>
    page.request.post(`/api/sessions/${id}/messages`, {
      data: { content: `m${n} [[mock text="Reply number ${n}, all of it." delay_ms=300]]` },
    });
  const [a, b] = await Promise.all([post(1), post(2)]);
  expect(a.ok() && b.ok()).toBe(true);
  for (const p of [page, other]) {
    const replies = p.locator(".msg-agent:not(.live)");
    await expect(replies).toHaveCount(2, { timeout: 15_000 });
    const texts = await replies.allTextContents();
    const order = texts.map((t) => /Reply number (\d)/.exec(t)?.[1]);
    const mine = await p.locator(".msg-user").allTextContents();
    const asked = mine.map((t) => /m(\d)/.exec(t)?.[1]).filter(Boolean);
    expect(order).toEqual(asked);
    for (const t of texts) expect(t).toContain("all of it.");
  }
});

test("a legacy todo assertion is drawn as a todo", async ({ page }) => {
  await signIn(page, "frank", "frank-password");
  await mockSession(page, "Legacy");
  const todo = JSON.stringify({ assertion: "todo", title: "Plan", items: [{ text: "write the tests", status: "done" }, "ship"] });
  await send(page, mockSays(`Here is the plan:\n${todo}\n`));
  const drawn = page.locator('.msg-agent:not(.live) [data-hml="todo"]');
  await expect(drawn).toBeVisible({ timeout: 15_000 });
  await expect(drawn).toContainText("write the tests");
  await expect(drawn).toContainText("ship");
  await expect(page.locator(".msg-agent:not(.live)").last()).not.toContainText('"assertion"');
});

test("an agent's notification shows as a toast on another page of the user, and as a notice in the chat", async ({ page, context }) => {
  await signIn(page, "frank", "frank-password");
  await mockSession(page, "Notify");
  const other = await context.newPage();
  const socket = other.waitForEvent("websocket");
  await other.goto("/permissions");
  await ready(other);
  await socket;
  await other.waitForTimeout(300);
  // `\u0040` is `@`: the user's own message holds no call.
  await send(page, mockSays('Working on it. @user(notify, {message: "Your report is ready", level: "success"})', "Told you.").replace(/@/g, "\\u0040"));
  await expect(other.getByTestId("toast")).toHaveText("Your report is ready", { timeout: 15_000 });
  await expect(other.getByTestId("toast")).toHaveClass(/toast-success/);
  await expect(page.locator(".msg-system").last()).toContainText("Notification: Your report is ready", { timeout: 15_000 });
});

test("a message an agent queues is approved, then answered in a second session", async ({ page }) => {
  await signIn(page, "frank", "frank-password");
  const second = await mockSession(page, "Queue target");
  const first = await mockSession(page, "Queue source");
  const message = `Please check the figures. ${mockSays("Checked: all in order.")}`;
  const call = `On it. @agent(queue, {message: ${JSON.stringify(message)}, session: ${second}})`;
  // `\u0040` is `@`: the user's own message holds no call.
  await send(page, mockSays(call, "Queued it.").replace(/@/g, "\\u0040"));
  const queueCard = page.locator('.call[data-function="agent_queue"]').last();
  await expect(queueCard).toContainText("moderate", { timeout: 15_000 });
  await queueCard.getByRole("button", { name: "Approve" }).click();
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("Queued it.", { timeout: 15_000 });
  await page.goto(`/s/${second}`);
  await connected(page);
  const queued = page.locator(".msg-user").last();
  await expect(queued).toContainText(`Queued by Mock Queue source from session ${first}`, { timeout: 15_000 });
  await expect(queued).toContainText("Please check the figures.");
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("Checked: all in order.", { timeout: 15_000 });
});
