import { test, expect, type Page } from "@playwright/test";
import { connected, createSession, ready, mockSays, mockSession, send, signIn } from "./helpers";

// Erin's agent acts: the offline demo calls `help` (runs at once), `websearch` (asks;
// answered by the mock search service) and `bash` (asks; runs in the sandbox), and asks a
// question (`ask`). The cards come from the log, in every tab; the agent's follow-up comes
// once every call is settled and the question answered.
test.describe.configure({ mode: "serial" });


function card(page: Page, fn: string) {
  return page.locator(`.call[data-function="${fn}"]`).last();
}

function ask(page: Page) {
  return page.locator('.msg-agent:not(.live) [data-hml="ask"]').last();
}

async function demoReplyWaiting(page: Page, name: string): Promise<number> {
  const id = await createSession(page, name);
  await connected(page);
  await send(page, `Hello ${name}`);
  await expect(card(page, "websearch").getByTestId("call-state")).toHaveText("waiting for your approval", { timeout: 20_000 });
  await expect(card(page, "help").getByTestId("call-state")).toHaveText("done");
  return id;
}

test("the approval card shows in two tabs; approving in one updates both", async ({ page, context }) => {
  await signIn(page, "erin", "erin-password");
  const id = await demoReplyWaiting(page, "Two tabs");
  const other = await context.newPage();
  await other.goto(`/s/${id}`);
  await connected(other);
  await expect(card(other, "websearch").getByTestId("call-state")).toHaveText("waiting for your approval");
  // The element in the message says so too.
  await expect(page.locator('[data-hml="websearch"]').last()).toContainText("waiting for your approval");
  await card(other, "websearch").getByRole("button", { name: "Approve" }).click();
  await expect(card(page, "websearch").getByTestId("call-state")).toHaveText("done", { timeout: 20_000 });
  // The bash command waits too; approved, it runs in the sandbox and its output shows.
  await expect(card(page, "bash").getByTestId("call-state")).toHaveText("waiting for your approval");
  await card(page, "bash").getByRole("button", { name: "Approve" }).click();
  await expect(card(other, "bash").getByTestId("call-state")).toHaveText("done", { timeout: 20_000 });
  await card(other, "bash").locator("summary").click();
  await expect(card(other, "bash").locator(".call-result pre")).toContainText("hello from Hero");
  await expect(card(other, "bash").locator(".call-result pre")).toContainText("exit status 0");
  // The question waits for an answer: the message box of either tab answers it.
  for (const p of [page, other]) {
    await expect(p.getByTestId("answering")).toContainText("answers the agent's question");
    await expect(ask(p)).toHaveClass(/asking/);
  }
  await send(other, "yes please");
  for (const p of [page, other]) {
    await expect(ask(p).getByTestId("ask-answer")).toHaveText("yes please", { timeout: 20_000 });
    await expect(p.getByTestId("answering")).toHaveCount(0);
  }
  for (const p of [page, other]) {
    await expect(card(p, "websearch").getByTestId("call-state")).toHaveText("done", { timeout: 20_000 });
    await expect(card(p, "websearch").getByRole("button", { name: "Approve" })).toHaveCount(0);
    await expect(p.locator(".msg-agent:not(.live)").last()).toContainText("came back to me", { timeout: 20_000 });
    await expect(p.locator(".msg-agent:not(.live)").last()).toContainText("Result 1 for rust leptos hydration");
  }
  await card(page, "websearch").locator("summary").click();
  await expect(card(page, "websearch").locator(".call-result pre")).toContainText("Result 2 for rust leptos hydration");
});

test("deny tells the agent, which answers accordingly", async ({ page }) => {
  await signIn(page, "erin", "erin-password");
  await demoReplyWaiting(page, "Deny");
  await card(page, "websearch").getByRole("button", { name: "Deny" }).click();
  await expect(card(page, "websearch").getByTestId("call-state")).toHaveText("denied", { timeout: 20_000 });
  await card(page, "bash").getByRole("button", { name: "Deny" }).click();
  await expect(card(page, "bash").getByTestId("call-state")).toHaveText("denied", { timeout: 20_000 });
  // The question's options are buttons.
  await ask(page).getByRole("button", { name: "no", exact: true }).click();
  await expect(ask(page).getByTestId("ask-answer")).toHaveText("no", { timeout: 20_000 });
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("was denied", { timeout: 20_000 });
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("question");
});

test("a reload while waiting keeps the card, which still decides", async ({ page }) => {
  await signIn(page, "erin", "erin-password");
  await demoReplyWaiting(page, "Reload");
  await page.reload();
  await connected(page);
  await expect(card(page, "websearch").getByTestId("call-state")).toHaveText("waiting for your approval");
  await card(page, "websearch").getByRole("button", { name: "Approve" }).click();
  await expect(card(page, "websearch").getByTestId("call-state")).toHaveText("done", { timeout: 20_000 });
});

test("always allow: no card waits the next time, and the Permissions page says so", async ({ page }) => {
  await signIn(page, "erin", "erin-password");
  await demoReplyWaiting(page, "Always");
  // Each card waiting says how dangerous its function is.
  await expect(card(page, "websearch").locator(".call-danger")).toHaveText("moderate");
  await card(page, "websearch").getByRole("button", { name: "Always allow websearch" }).click();
  await expect(card(page, "websearch").getByTestId("call-state")).toHaveText("done", { timeout: 20_000 });
  await expect(card(page, "bash").locator(".call-danger")).toHaveText("dangerous");
  // Always allowing a dangerous function is confirmed first; declined, nothing changes.
  let asked = "";
  page.once("dialog", async (d) => { asked = d.message(); await d.dismiss(); });
  await card(page, "bash").getByRole("button", { name: "Always allow bash" }).click();
  await expect.poll(() => asked).toContain("bash is dangerous");
  await expect(card(page, "bash").getByTestId("call-state")).toHaveText("waiting for your approval");
  await card(page, "bash").getByRole("button", { name: "Deny" }).click();
  await expect(card(page, "bash").getByTestId("call-state")).toHaveText("denied", { timeout: 20_000 });
  // The question's own field answers it too.
  await ask(page).getByLabel("Your answer").fill("later");
  await ask(page).getByLabel("Your answer").press("Enter");
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("came back to me", { timeout: 20_000 });
  await send(page, "And again");
  await expect(page.locator(".msg-user").last()).toContainText("And again");
  // The new reply's search ran at once; only its bash command waits.
  await expect(card(page, "bash").getByTestId("call-state")).toHaveText("waiting for your approval", { timeout: 30_000 });
  await expect(card(page, "websearch").getByTestId("call-state")).toHaveText("done");
  await expect(page.locator('.call-waiting[data-function="websearch"]')).toHaveCount(0);
  await page.goto("/permissions");
  await ready(page);
  const row = page.locator('tr[data-function="websearch"]');
  await expect(row.locator(".level-default")).toHaveText("ask");
  await expect(row.getByLabel("Level of websearch")).toHaveValue("always");
  await expect(page.locator('tr[data-function="help"] .level-default')).toHaveText("always");
  await expect(page.locator('tr[data-function="bash"] .danger')).toHaveText("dangerous");
  // Back to asking, through the page.
  await row.getByLabel("Level of websearch").selectOption("ask");
  await row.getByRole("button", { name: "Save" }).click();
  await expect.poll(async () => (await (await page.request.get("/api/permissions")).json()).find((p: any) => p.function === "websearch").level).toBe("ask");
});

test("each of the eight prompt types is answered, in every tab, and stays answered after a reload", async ({ page, context }) => {
  await signIn(page, "erin", "erin-password");
  const id = await mockSession(page, "Prompts");
  const prompts = [
    '<hml-prompt id="p-text" type="text">Your name?</hml-prompt>',
    '<hml-prompt id="p-num" type="number" min="1" max="10">How many?</hml-prompt>',
    '<hml-prompt id="p-color" type="color" default="#ff0000">Colour?</hml-prompt>',
    '<hml-prompt id="p-check" type="checkbox">I agree</hml-prompt>',
    '<hml-prompt id="p-many" type="checkboxes">Which?<data>["a", "b", "c"]</data></hml-prompt>',
    '<hml-prompt id="p-radio" type="radio">One?<data>["x", "y"]</data></hml-prompt>',
    '<hml-prompt id="p-select" type="select">Pick<data>["red", "green"]</data></hml-prompt>',
    '<hml-prompt id="p-range" type="range" min="0" max="100" step="5" default="50">Level?</hml-prompt>',
  ].join("\n\n");
  // The directive's text escapes `<` so that the user's own message holds no prompt.
  await send(page, mockSays(prompts, "All eight answered, thank you."));
  const p = (pg: Page, id: string) => pg.locator(`.msg-agent:not(.live) [data-hml-id="${id}"]`);
  await expect(p(page, "p-text")).toBeVisible({ timeout: 15_000 });
  const other = await context.newPage();
  await other.goto(`/s/${id}`);
  await connected(other);

  // Each answer shows before the next is given: an answer re-renders its message.
  const answered = async (pid: string, text: string) => {
    await expect(p(page, pid), pid).toHaveClass(/answered/, { timeout: 15_000 });
    await expect(p(page, pid).locator(".hml-prompt-response"), pid).toHaveText(text);
  };
  await p(page, "p-text").locator("input").fill("Ada");
  await p(page, "p-text").locator("input").press("Enter");
  await answered("p-text", "Ada");
  // Out of bounds: refused under the prompt, which keeps what was typed.
  await p(page, "p-num").locator("input").fill("11");
  await p(page, "p-num").locator("input").press("Enter");
  await expect(p(page, "p-num").locator(".action-error")).toHaveText("p-num must be at most 10");
  await expect(p(page, "p-num").locator("input")).toHaveValue("11");
  await p(page, "p-num").locator("input").fill("7");
  await p(page, "p-num").locator("input").press("Enter");
  await answered("p-num", "7");
  await p(page, "p-color").getByRole("button", { name: "OK" }).click();
  await answered("p-color", "#ff0000");
  await p(page, "p-check").locator("input").check();
  await p(page, "p-check").getByRole("button", { name: "OK" }).click();
  await answered("p-check", "true");
  await p(page, "p-many").getByLabel("a").check();
  await p(page, "p-many").getByLabel("c").check();
  await p(page, "p-many").getByRole("button", { name: "OK" }).click();
  await answered("p-many", "a, c");
  await p(page, "p-radio").getByLabel("y").check();
  await p(page, "p-radio").getByRole("button", { name: "OK" }).click();
  await answered("p-radio", "y");
  await p(page, "p-select").locator("select").selectOption("green");
  await p(page, "p-select").getByRole("button", { name: "OK" }).click();
  await answered("p-select", "green");
  await p(page, "p-range").getByRole("button", { name: "OK" }).click();
  await answered("p-range", "50");
  // The last answer hands them all to the agent, whose reply starts without typing.
  await expect(page.locator(".msg-user").last()).toContainText("My answers to your prompts:");
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("All eight answered, thank you.", { timeout: 15_000 });

  const want: [string, string][] = [
    ["p-text", "Ada"], ["p-num", "7"], ["p-color", "#ff0000"], ["p-check", "true"],
    ["p-many", "a, c"], ["p-radio", "y"], ["p-select", "green"], ["p-range", "50"],
  ];
  // The other tab follows.
  for (const [pid, text] of want) {
    await expect(p(other, pid).locator(".hml-prompt-response"), pid).toHaveText(text, { timeout: 15_000 });
  }
  await page.reload();
  await connected(page);
  for (const [pid, text] of want) {
    await expect(p(page, pid).locator(".hml-prompt-response"), pid).toHaveText(text);
  }
  // A second answer is refused.
  const msg = await page.locator(".msg-agent:not(.live)").first().getAttribute("data-message-id");
  const again = await page.request.post(`/api/sessions/${id}/answers`, { data: { message_id: msg, element_id: "p-text", answer: "Bob" } });
  expect(again.status()).toBe(409);
});

test("what is typed in a prompt stays, with its focus, while other messages arrive and a sibling prompt is answered", async ({ page }) => {
  await signIn(page, "erin", "erin-password");
  const id = await mockSession(page, "Typing");
  await send(page, mockSays('<hml-prompt id="q-a" type="text">First?</hml-prompt>\n\n<hml-prompt id="q-b" type="text">Second?</hml-prompt>'));
  const p = (pid: string) => page.locator(`.msg-agent:not(.live) [data-hml-id="${pid}"]`);
  await expect(p("q-a")).toBeVisible({ timeout: 15_000 });
  const input = p("q-a").locator("input");
  await input.fill("half-typed");
  // Another message and its reply arrive (from another tab) while the reader types here.
  const posted = await page.request.post(`/api/sessions/${id}/messages`, { data: { content: mockSays("Meanwhile.") } });
  expect(posted.ok()).toBe(true);
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("Meanwhile.", { timeout: 15_000 });
  await expect(input).toHaveValue("half-typed");
  await expect(input).toBeFocused();
  // Answering the other prompt redraws their message: the typed text stays.
  await p("q-b").locator("input").fill("done");
  await p("q-b").locator("input").press("Enter");
  await expect(p("q-b")).toHaveClass(/answered/, { timeout: 15_000 });
  await expect(p("q-a").locator("input")).toHaveValue("half-typed");
});

test("a demand question waits across a reload, in the message box too, and is answered once", async ({ page }) => {
  await signIn(page, "erin", "erin-password");
  const id = await mockSession(page, "Demand");
  await send(page, mockSays("Before I migrate: <ask>Shall I migrate the database?</ask>", "Migrating."));
  await expect(ask(page)).toHaveClass(/asking/, { timeout: 15_000 });
  await expect(page.getByTestId("answering")).toContainText("answers the agent's question");
  await expect(page.getByLabel("Message", { exact: true })).toHaveAttribute("placeholder", /answer/);
  // The question is asked once: in the reply, not again in the banner.
  await expect(page.locator(".msg-agent").getByText("Shall I migrate the database?")).toHaveCount(1);
  await expect(page.getByTestId("answering")).not.toContainText("Shall I migrate");
  await page.reload();
  await connected(page);
  await expect(page.getByTestId("answering")).toBeVisible();
  await expect(page.locator(".msg-agent").getByText("Shall I migrate the database?")).toHaveCount(1);
  await send(page, "Yes, after the backup");
  await expect(ask(page).getByTestId("ask-answer")).toHaveText("Yes, after the backup", { timeout: 15_000 });
  await expect(page.locator(".msg-agent:not(.live)").last()).toHaveText(/Migrating\./, { timeout: 15_000 });
  // The box writes messages again, and the question takes no second answer.
  await expect(page.getByTestId("answering")).toHaveCount(0);
  await expect(page.locator(".msg-user")).toHaveCount(1);
  const msg = await page.locator(".msg-agent:not(.live)").first().getAttribute("data-message-id");
  const again = await page.request.post(`/api/sessions/${id}/answers`, { data: { message_id: msg, element_id: "e1", answer: "no" } });
  expect(again.status()).toBe(409);
});

test("a timed question counts down and takes its default", async ({ page }) => {
  await signIn(page, "erin", "erin-password");
  await mockSession(page, "Timed");
  await send(page, mockSays('<ask timeout="4000" default="no" options="yes,no">Deploy now?</ask>', "Not deploying."));
  await expect(ask(page)).toHaveClass(/asking/, { timeout: 15_000 });
  await expect(ask(page).getByRole("button", { name: "yes", exact: true })).toBeVisible();
  // It counts down ("“no” is the answer in 3 s"), the message box stays free for messages.
  const countdown = ask(page).getByTestId("ask-countdown");
  await expect(countdown).toHaveText(/“no” is the answer in [1-4] s/);
  const first = Number(await countdown.getAttribute("data-left"));
  await expect.poll(async () => Number(await countdown.getAttribute("data-left")), { timeout: 5_000 }).toBeLessThan(first);
  await expect(page.getByTestId("answering")).toHaveCount(0);
  await expect(ask(page).getByTestId("ask-answer")).toHaveText("no (the default: no answer came within 4 s)", { timeout: 15_000 });
  await expect(page.locator(".msg-agent:not(.live)").last()).toHaveText(/Not deploying\./, { timeout: 15_000 });
});

test("a question asked through a native tool call is answered in its card", async ({ page }) => {
  await signIn(page, "erin", "erin-password");
  await mockSession(page, "Native ask");
  await send(page, '[[mock tool=ask input={"question": "Which colour?", "options": ["red", "blue"], "timeout": 60000, "default": "red"} then="Blue it is."]]');
  const c = card(page, "ask");
  await expect(c.getByTestId("call-state")).toHaveText("waiting for your answer", { timeout: 15_000 });
  // No element in the text stands for it: the card asks.
  const q = c.locator('[data-hml="ask"]');
  await expect(q).toHaveClass(/asking/);
  await expect(q.locator(".hml-ask-question")).toHaveText("Which colour?");
  await expect(q.getByTestId("ask-countdown")).toHaveText(/“red” is the answer in \d+ s/);
  await q.getByRole("button", { name: "blue", exact: true }).click();
  await expect(c.getByTestId("call-state")).toHaveText("done", { timeout: 15_000 });
  await expect(c.locator('[data-hml="ask"]')).toHaveCount(0);
  await c.locator("summary").click();
  await expect(c.locator(".call-result pre")).toHaveText("blue");
  await expect(page.locator(".msg-agent:not(.live)").last()).toHaveText(/Blue it is\./, { timeout: 15_000 });
});

test("a command past its timeout is killed, and its card says so", async ({ page }) => {
  await signIn(page, "erin", "erin-password");
  await mockSession(page, "Timeout");
  await send(page, mockSays('<bash timeout="1000">echo started; sleep 30; echo never</bash>', "It was killed."));
  await expect(card(page, "bash").getByTestId("call-state")).toHaveText("waiting for your approval", { timeout: 15_000 });
  await card(page, "bash").getByRole("button", { name: "Approve" }).click();
  await expect(card(page, "bash").getByTestId("call-state")).toHaveText("failed", { timeout: 15_000 });
  await card(page, "bash").locator("summary").click();
  const out = card(page, "bash").locator(".call-result pre");
  await expect(out).toContainText("killed at its timeout");
  await expect(out).toContainText("started");
  await expect(out).not.toContainText("never");
  await expect(page.locator(".msg-agent:not(.live)").last()).toHaveText(/It was killed\./, { timeout: 15_000 });
});

test("a code block's copy button copies its text, and a demand question can be dismissed from the message box", async ({ page, context }) => {
  await context.grantPermissions(["clipboard-read", "clipboard-write"]);
  await signIn(page, "erin", "erin-password");
  await mockSession(page, "Dismissed");
  await send(page, mockSays("Run this:\n\n```sh\necho copied-text\n```\n\n<ask>Shall I go on?</ask>", "Going on."));
  await expect(ask(page)).toHaveClass(/asking/, { timeout: 15_000 });
  // The copy button says so for a moment, and the clipboard holds the block's text.
  const copy = page.locator(".msg-agent:not(.live) .code-block .copy-button").last();
  await copy.click();
  await expect(copy).toHaveText("Copied");
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe("echo copied-text\n");
  await expect(copy).toHaveText("Copy", { timeout: 5_000 });
  // Dismiss: the question closes, and the box writes messages again.
  await page.getByTestId("answering").getByRole("button", { name: "Dismiss" }).click();
  await expect(page.getByTestId("answering")).toHaveCount(0, { timeout: 15_000 });
  await expect(ask(page)).toHaveClass(/closed/, { timeout: 15_000 });
  await expect(page.getByLabel("Message", { exact: true })).toHaveAttribute("placeholder", /Write a message/);
});

test("a call's card shows while its reply still streams, and approving it there runs it at once", async ({ page }) => {
  test.setTimeout(60_000);
  await signIn(page, "erin", "erin-password");
  await mockSession(page, "Live card");
  await connected(page);
  // About six seconds of text after the element, at 40 tokens of 4 bytes a second.
  const tail = "and the reply goes on streaming ".repeat(30);
  const text = JSON.stringify(`<websearch>cards while streaming</websearch> ${tail}`).replace(/</g, "\\u003c");
  await send(page, `[[mock text=${text} then="Thanks for the results." tokens_per_sec=40]]`);
  const live = page.locator(".live-slot");
  const liveCard = live.locator('.call[data-function="websearch"]');
  await expect(liveCard.getByTestId("call-state")).toHaveText("waiting for your approval", { timeout: 20_000 });
  await expect(live.locator('[data-hml="websearch"]')).toContainText("waiting for your approval");
  await liveCard.getByRole("button", { name: "Approve" }).click();
  // It ran while the reply was still being written.
  await expect(liveCard.getByTestId("call-state")).toHaveText("done", { timeout: 20_000 });
  await expect(live.locator(".msg-agent.live")).toHaveCount(1);
  await expect(live.locator('[data-hml="websearch"]')).toContainText("done");
  // The reply ends with its card under it, and the agent goes on with the results.
  const stored = page.locator(".msg-agent:not(.live)");
  await expect(stored.last()).toContainText("Thanks for the results.", { timeout: 30_000 });
  await expect(page.locator('.stored .call[data-function="websearch"]').getByTestId("call-state")).toHaveText("done");
});
