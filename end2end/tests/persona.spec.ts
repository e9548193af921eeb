import { test, expect } from "@playwright/test";
import { connected, createSession, hydrated, send, signIn } from "./helpers";

// Agents with a persona: the offline demo's first-run ritual (Frank's first conversation),
// and a context file edited on the Files page, then seen in "View system prompt".
test.describe.configure({ mode: "serial" });

async function demoId(page: import("@playwright/test").Page): Promise<number> {
  const agents = await (await page.request.get("/api/agents")).json();
  return agents.find((a: any) => a.provider === "scripted").id;
}

test("the demo agent's first-run ritual asks, writes USER.md, and never repeats", async ({ page }) => {
  await signIn(page, "frank", "frank-password", { ritual: true });
  await createSession(page, "First run");
  await connected(page);
  // The prompt it is given says so.
  await page.getByRole("button", { name: "View system prompt" }).click();
  await expect(page.getByTestId("system-prompt")).toContainText("## First run");
  await page.getByRole("button", { name: "Hide system prompt" }).click();
  await send(page, "Hello there");
  await expect(page.locator('.msg-agent:not(.live) [data-hml="ask"]').last()).toHaveClass(/asking/, { timeout: 15_000 });
  await expect(page.getByTestId("answering")).toContainText("What should I call you");
  await send(page, "Frank, UTC please");
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("the ritual is over for good", { timeout: 20_000 });
  await page.getByRole("button", { name: "View system prompt" }).click();
  const prompt = page.getByTestId("system-prompt");
  await expect(prompt).toContainText("In their words: Frank, UTC please");
  await expect(prompt).not.toContainText("## First run");
  // The Files page shows USER.md, and BOOTSTRAP.md is gone.
  await page.goto(`/agents/${await demoId(page)}/files`);
  await hydrated(page);
  await expect(page.locator('li[data-file="BOOTSTRAP.md"]')).toContainText("empty");
  await page.locator('li[data-file="USER.md"] button').click();
  await expect(page.getByLabel("Content of USER.md")).toHaveValue(/Frank, UTC please/);
  // A new message gets the showcase, not the ritual.
  await page.goto("/");
  await hydrated(page);
  await createSession(page, "After");
  await connected(page);
  await send(page, "Hello again");
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("offline demo", { timeout: 15_000 });
  await expect(page.locator('.msg-agent:not(.live) [data-hml="todo"]').last()).toBeVisible();
});

test("a context file edited on the Files page is what the agent is told", async ({ page }) => {
  await signIn(page, "carol", "carol-password");
  const demo = await demoId(page);
  await page.goto(`/agents/${demo}/files`);
  await hydrated(page);
  await page.locator('li[data-file="SOUL.md"] button').click();
  await expect(page.getByTestId("level-note")).toContainText("Your own copy");
  const box = page.getByLabel("Content of SOUL.md");
  await expect(box).toHaveValue(/curious, careful and kind/);
  await box.fill("You are **Captain Test**, who answers in rhyme.");
  await expect(page.locator(".file-preview strong")).toHaveText("Captain Test");
  await page.getByRole("button", { name: "Save" }).click();
  await expect(page.getByRole("status")).toHaveText("Saved SOUL.md");
  // The virtual file is shown but cannot be edited.
  await page.locator('li[data-file="AVAILABILITY.md"] button').click();
  await expect(page.getByTestId("level-note")).toContainText("cannot be edited");
  await expect(page.getByRole("button", { name: "Save" })).toBeDisabled();
  // In a chat with the agent, "View system prompt" shows it.
  await page.goto("/");
  await hydrated(page);
  await createSession(page, "Persona");
  await connected(page);
  await page.getByRole("button", { name: "View system prompt" }).click();
  await expect(page.getByTestId("system-prompt")).toContainText('<context_file name="SOUL.md">\nYou are **Captain Test**, who answers in rhyme.');
  await expect(page.getByTestId("system-prompt")).toContainText("## Tooling");
});
